"""The lead routes the work, in Streamlit's AppTest on a real project (issue 34): the Calibration
page's routing panel stores the active sample and the assignment; the Label page opens on the
active sample, serves an SME only their assigned pairs, asks to confirm an annotator id the
project has never seen, and shows the sample's guidelines rendered from Markdown with raw HTML
escaped; the card starts the evidence cursor on the first sentence holding a query term."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.calibration_project import EVIL, build_project
from workbench.services.calibration import guidelines, routing
from workbench.services.calibration import workflow as cal
from workbench.store.database import Database


def _label_page():
    from workbench.ui.views import label

    label.render()


def _calibration_page():
    from workbench.ui.views import calibration

    calibration.render()


@pytest.fixture
def project(tmp_path, monkeypatch):
    path = tmp_path / "p.duckdb"
    db, _ = build_project(path)
    cal.create_sample(db, "s", "p", seed=1)
    cal.create_sample(db, "t", "p", seed=2)  # the newest: listed first
    db.close()
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path


def _run(page, annotator: str | None = None) -> AppTest:
    at = AppTest.from_function(page, default_timeout=60)
    if annotator is not None:
        at.session_state["annotator"] = annotator
    at.run()
    assert not at.exception, at.exception
    return at


def _card(at: AppTest) -> dict:
    found = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            proto = getattr(child, "proto", None)
            if getattr(proto, "component_name", None) == "workbench_label_card":
                found.append(json.loads(proto.json))
            walk(child)

    walk(at.main)
    return found[0] if found else {"pair": None}


def test_the_lead_sets_the_active_sample_and_the_assignment_on_the_calibration_page(project):
    at = _run(_calibration_page)
    at.selectbox(key="calibration_sample").set_value("s").run()
    at.button(key="routing_activate").click().run()
    assert not at.exception
    at.text_input(key="routing_annotators").set_value("ann, Bob")
    at.number_input(key="routing_overlap").set_value(2)  # SMEs per pair
    at.number_input(key="routing_per").set_value(3)  # pairs per SME
    [b for b in at.button if b.label == "Assign pairs"][0].click().run()
    assert not at.exception
    with Database(project) as db:
        assert routing.active_sample(db) == "s"
        plan = routing.assignment(db, "s")
    assert plan["annotators"] == ["ann", "bob"] and plan["overlap"] == 2 and plan["covered"] == 3
    assert plan["assigned"]["ann"] == plan["assigned"]["bob"]  # two SMEs, two per pair: the same 3 pairs


def test_an_sme_opens_the_active_sample_and_is_served_only_their_pairs(project):
    with Database(project) as db:
        routing.set_active(db, "s")
        plan = routing.assign(db, "s", ["ann", "bob"], overlap=1, per_annotator=4, seed=9)
    at = _run(_label_page, "ann")
    assert at.selectbox(key="label_sample").value == "s"  # not the newest sample, t
    card = _card(at)
    assert card["pair"]["position"] == plan["assigned"]["ann"][0]
    assert [p["position"] for p in card["ahead"]] == plan["assigned"]["ann"][1:4]
    assert "of 4 pairs" in at.get("progress")[0].proto.text  # the progress counts their pairs
    at.button(key="label_next_s").click().run()  # next walks the assigned pairs only
    assert _card(at)["pair"]["position"] == plan["assigned"]["ann"][1]
    cid = _run(_label_page, "cid")  # no label, no assignment: asked to confirm first
    cid.button(key="label_confirm_new_id").click().run()
    assert any("No pair of this sample is assigned to you" in m.value for m in cid.info)
    assert _card(cid)["pair"] is None


def test_a_new_annotator_id_is_confirmed_before_labelling(project):
    with Database(project) as db:
        cal.save_label(db, "t", "ann", 0, 1)
    at = _run(_label_page, "anm")  # a typo of ann
    assert any('annotator id "anm"' in w.value for w in at.warning)
    assert _card(at)["pair"] is None  # nothing to label before confirming
    at.button(key="label_confirm_new_id").click().run()
    assert not at.exception
    assert _card(at)["pair"] is not None and not any('annotator id "anm"' in w.value for w in at.warning)
    known = _run(_label_page, " ANN ")  # labelled before: no question
    assert not any("annotator id" in w.value for w in known.warning) and _card(known)["pair"] is not None


def test_the_guidelines_panel_renders_markdown_and_escapes_html(project):
    with Database(project) as db:
        routing.set_active(db, "s")
        guidelines.set_guidelines(db, "s", f"# Grading\n\nGrade **2**: one sentence answers part.\n\n{EVIL}\n")
    at = _run(_label_page, "ann")
    [panel] = [h.proto.body for h in at.get("html") if "label-guidelines" in h.proto.body]
    assert "<h1>Grading</h1>" in panel and "<strong>2</strong>" in panel
    assert "<script>" not in panel and "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in panel
    assert "$x$" in panel  # not read as LaTeX


def test_the_evidence_cursor_starts_on_the_first_sentence_with_a_query_term(project):
    with Database(project) as db:
        routing.set_active(db, "s")
        first = cal.labelling_view(db, "s", "ann")["items"]
        position = min(first)
        doc = first[position]["doc_id"]
        query = first[position]["query"]  # "topic N"
        text = f"Overview\nNothing here. Still nothing. The {query.split()[0]} is named here.\nMore."
        with db.transaction() as tx:
            tx.execute("UPDATE documents SET text = ? WHERE doc_id = ?", [text, doc])
            tx.execute("UPDATE calibration_items SET start = 0, \"end\" = ? WHERE sample = 's' AND doc_id = ?",
                       [len(text), doc])
    at = _run(_label_page, "ann")
    pair = _card(at)["pair"]
    assert pair["position"] == position
    # units: "Overview" (a heading), "Nothing here.", "Still nothing.", "The topic is named here.", "More."
    assert (pair["units"], pair["cursor"], pair["hits"]) == (5, 3, [3])


def test_switching_annotator_ids_in_one_tab_keeps_each_ids_own_pair_and_comment(project):
    with Database(project) as db:
        routing.set_active(db, "s")
        cal.save_label(db, "t", "ann", 0, 1)  # both ids known: no question when switching
        cal.save_label(db, "t", "bob", 0, 1)
    at = _run(_label_page, "ann")
    assert _card(at)["pair"]["position"] == 0
    at.button(key="label_next_s").click().run()  # ann looks at pair 2 without answering pair 1
    assert _card(at)["pair"]["position"] == 1

    def switch(to: str) -> dict:
        at.session_state["annotator"] = to  # another id in the same tab (no sign-in)
        at.run()
        assert not at.exception, at.exception
        return _card(at)["pair"]

    bob = switch("bob")
    assert bob["position"] == 0 and "|bob|" in bob["token"]  # bob's first open pair, not ann's
    assert switch("ann")["position"] == 1  # ann is back on her own pair
    at.text_input(key="label_comment_s_ann_1").set_value("ann's doubt").run()
    assert switch("bob")["position"] == 0
    at.button(key="label_next_s").click().run()  # bob reaches pair 2 too: ann's comment is not his
    assert _card(at)["pair"]["position"] == 1
    assert at.text_input(key="label_comment_s_bob_1").value == ""
    at.button(key="label_grade_s_0").click().run()
    assert not at.exception, at.exception
    assert switch("ann")["position"] == 1
    with Database(project) as db:
        assert db.query_all("SELECT annotator, position, grade, comment FROM label_events WHERE sample = 's'") == [
            ("bob", 1, 0, None)]


def test_a_label_records_the_guidelines_its_card_showed_and_the_lead_sees_the_version(project):
    import hashlib

    first, second = "Grade 2: part of an answer.\n", "Grade 2: one sentence answers part.\n"
    with Database(project) as db:
        routing.set_active(db, "s")
        guidelines.set_guidelines(db, "s", first)
    at = _run(_label_page, "ann")  # the panel shows v1
    position = _card(at)["pair"]["position"]
    with Database(project) as db:
        guidelines.set_guidelines(db, "s", second)  # the lead changes them while ann's card is open
    at.button(key="label_grade_s_0").click().run()  # given under what the card showed: v1
    assert not at.exception, at.exception
    with Database(project) as db:
        cal.save_label(db, "s", "bob", position, 1)  # under v2, disagreeing with ann
        rows = db.query_all("SELECT annotator, guidelines_sha256 FROM label_events WHERE sample = 's' ORDER BY event_id")
    assert rows == [("ann", hashlib.sha256(first.encode()).hexdigest()),
                    ("bob", hashlib.sha256(second.encode()).hexdigest())]
    lead = _run(_calibration_page)
    lead.selectbox(key="calibration_sample").set_value("s").run()
    assert not lead.exception, lead.exception
    views = [h.proto.body for h in lead.get("html") if "calibration-sme-view" in h.proto.body]
    assert any('data-sme="ann"' in v and "labelled under guidelines v1" in v for v in views)
    assert any('data-sme="bob"' in v and "labelled under guidelines v2" in v for v in views)
