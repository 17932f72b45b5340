"""The Label and Calibration pages in Streamlit's AppTest: empty states name the next step, a
label given with the grade buttons is stored at once, the judge stays off the page until then,
and the Calibration page puts the verdict first and draws samples."""

from __future__ import annotations

import html
import json

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.calibration_project import EVIL, build_project, label_all, two_smes_disagree
from workbench.services.calibration import workflow as cal
from workbench.services.project.lifecycle import init_project
from workbench.store.database import Database

MARKER = "JUDGE-SAYS-"


def _label_page():
    from workbench.ui.views import label

    label.render()


def _calibration_page():
    from workbench.ui.views import calibration

    calibration.render()


def _run(page, annotator: str | None = None) -> AppTest:
    at = AppTest.from_function(page, default_timeout=60)
    if annotator is not None:
        at.session_state["annotator"] = annotator
    at.run()
    assert not at.exception, at.exception
    return at


def _cards(node) -> list[str]:
    """The data sent to components (the Label card), as JSON text."""
    found = []
    for child in getattr(node, "children", {}).values():
        proto = getattr(child, "proto", None)
        if getattr(proto, "component_name", None):
            found.append(proto.json)
        found += _cards(child)
    return found


def _texts(at: AppTest) -> str:
    parts = [h.proto.body for h in at.get("html")] + _cards(at.main)
    for kind in ("info", "success", "warning", "error", "caption", "markdown"):
        parts += [m.value for m in getattr(at, kind)]
    return "\n".join(parts)


@pytest.fixture
def judged(tmp_path, monkeypatch):
    path = tmp_path / "p.duckdb"
    db, truth = build_project(path)
    with db.transaction() as tx:
        tx.execute("UPDATE judgments SET reason = ? || grade WHERE source = 'llm'", [MARKER])
    db.close()
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path, truth


def test_empty_project_pages_name_the_next_step(tmp_path, monkeypatch):
    path = tmp_path / "empty.duckdb"
    init_project(path)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    text = _texts(_run(_label_page, "sme"))
    assert "no calibration sample to label yet" in text and "Calibration page" in text
    text = _texts(_run(_calibration_page))
    assert "No calibration sample yet" in text
    assert "There is no pool yet" in text


def test_label_page_asks_for_the_annotator_then_stores_a_grade(judged):
    path, _ = judged
    with Database(path) as db:
        cal.create_sample(db, "s", "p", seed=1)
    at = _run(_label_page)
    assert "Enter your annotator id" in _texts(at)
    at = _run(_label_page, "sme")
    text = _texts(at)
    assert "Pair 1 of 200" in text and MARKER not in text
    at.button(key="label_grade_s_0").click().run()
    assert not at.exception
    text = _texts(at)
    assert "Saved grade 0 for pair 1" in text and MARKER not in text
    with Database(path) as db:
        assert db.query_all("SELECT position, grade FROM label_events") == [(0, 0)]
        assert db.query_all("SELECT assessor, grade FROM judgments WHERE source = 'human'") == [("sme", 0)]
    # grade 3 without evidence is refused and nothing is stored
    at.button(key="label_grade_s_3").click().run()
    assert "need evidence" in _texts(at)
    with Database(path) as db:
        assert db.query_value("SELECT count(*) FROM label_events") == 1
    # with evidence and the reveal option the judge's reason appears after submitting
    at.checkbox(key="label_reveal").check().run()
    at.session_state["label_evidence_s_sme_1"] = [0]  # the card's first sentence, as a click on it chooses it
    at.run()
    assert MARKER not in _texts(at)
    at.button(key="label_grade_s_3").click().run()
    text = _texts(at)
    assert "Saved grade 3 for pair 2" in text and MARKER in text
    with Database(path) as db:
        row = db.query_all("SELECT grade, revealed, evidence::VARCHAR FROM label_events WHERE position = 1")
    assert row[0][0] == 3 and row[0][1] is True and row[0][2].startswith("[[")


def test_calibration_page_verdict_first_and_draws_a_sample(judged):
    path, truth = judged
    at = _run(_calibration_page)
    at.number_input[1].set_value(5)  # the seed
    form_button = [b for b in at.button if b.label == "Draw sample"][0]
    form_button.click().run()
    assert not at.exception
    assert "Drew sample p-seed5" in _texts(at)
    with Database(path) as db:
        label_all(db, "p-seed5", truth)
    at = _run(_calibration_page)
    text = _texts(at)
    found = [text.find(w) for w in ("PASS", "FAIL", "INCONCLUSIVE") if w in text]
    assert found, text  # a verdict is shown...
    headings = [h.value for h in at.subheader]
    assert headings.index("Verdict") < headings.index("Figures with 95% intervals")  # ...before the figures
    assert len(at.get("vega_lite_chart")) == 1  # the confusion heatmap (Altair)
    assert 'data-table="calibration-configurations"' in text and "m1" in text


def test_the_page_draws_with_the_configured_relevant_grade_as_the_cli_does(judged, monkeypatch):
    """The draw form builds the same SampleRequest as ``calibrate sample``: its defaults (here the
    relevant grade that splits the strata) come from the settings, not from the page."""
    from workbench.store.calibration import read_sample

    path, _ = judged
    monkeypatch.setenv("WORKBENCH_CALIBRATION_RELEVANT_MIN_GRADE", "3")
    at = _run(_calibration_page)
    at.number_input[1].set_value(6)  # the seed
    [b for b in at.button if b.label == "Draw sample"][0].click().run()
    assert not at.exception
    assert "Drew sample p-seed6" in _texts(at)
    with Database(path) as db:
        assert read_sample(db, "p-seed6")["threshold"] == 3


def test_a_sample_with_no_labels_yet_says_label_first_not_never(judged):
    """Nothing labelled: the verdict says so, never that more labels will not decide it (that is
    only for a figure sitting on its threshold; core/test_gate checks the one-class case)."""
    path, _ = judged
    with Database(path) as db:
        cal.create_sample(db, "s", "p", seed=1)
    at = _run(_calibration_page)
    verdict = " ".join(w.value for w in at.warning)
    assert "INCONCLUSIVE" in verdict
    assert "no SME labels on the holdout part yet" in verdict
    assert "not expected to decide" not in _texts(at)


def test_one_annotator_never_sees_another_annotators_label(judged):
    path, _ = judged
    with Database(path) as db:
        cal.create_sample(db, "s", "p", seed=1)
        cal.save_label(db, "s", "first", 0, 3, comment="FIRST-SME-COMMENT", evidence=[[0, 5]])
    at = _run(_label_page, "second")
    assert "FIRST-SME-COMMENT" not in _texts(at)
    at.button(key="label_confirm_new_id").click().run()  # a new id while "first" is known: confirmed
    text = _texts(at)
    assert "Pair 1 of 200" in text
    assert "already answered" not in text and "FIRST-SME-COMMENT" not in text and MARKER not in text
    assert all(b.proto.type != "primary" for b in at.button)  # no grade button marked as chosen
    at = _run(_label_page, "first")
    assert "Pair 2 of 200" in _texts(at)  # the first SME moves on to their next open pair


def test_calibration_page_resolves_sme_disagreements(judged):
    path, _ = judged
    with Database(path) as db:
        cal.create_sample(db, "s", "p", seed=1)
        cal.save_label(db, "s", "ann", 0, 0)
        cal.save_label(db, "s", "bob", 0, 3)
    at = _run(_calibration_page, "lead")
    text = _texts(at)
    assert 'data-table="calibration-sme-disagreements"' in text
    form_button = [b for b in at.button if b.label == "Record resolved label"][0]
    at.radio[0].set_value(3)
    form_button.click().run()
    assert not at.exception
    assert "Recorded grade 3 for pair 1, resolved by lead" in _texts(at)
    with Database(path) as db:
        assert cal.sme_disagreements(db, "s")[0]["resolved_by"] == "lead"


def _sme_views(at: AppTest) -> dict[str, str]:
    """The side-by-side view of each SME on the chosen disagreement: ``{sme: its HTML}``."""
    import re

    views = {}
    for h in at.get("html"):
        found = re.search(r'data-testid="calibration-sme-view" data-sme="([^"]*)"', h.proto.body)
        if found:
            views[html.unescape(found.group(1))] = h.proto.body
    return views


def test_the_lead_sees_each_smes_evidence_and_comment_side_by_side(judged):
    """Two SMEs grade a pair 3 and 2, each marking a different sentence and commenting: under the
    chosen pair, one view per SME holds their grade, their own evidence in <mark> (not the other's,
    not the whole passage) and their comment; markup and markdown in the corpus and the comments
    stay text."""
    path, _ = judged
    with Database(path) as db:
        cal.create_sample(db, "s", "p", seed=1)
        cal.save_label(db, "s", "ann", 1, 0)
        cal.save_label(db, "s", "bob", 1, 1)  # a second disagreement (pair 2), no evidence or comment
        pair = two_smes_disagree(db, "s", 0)
    at = _run(_calibration_page, "lead")
    assert at.selectbox(key="calibration_adjudicate_pair").options == ["pair 1", "pair 2"]
    views = _sme_views(at)
    assert set(views) == {"ann", "bob"}
    ann_span, ann_note = pair["ann"]
    bob_span, bob_note = pair["bob"]
    assert "ann · grade 3" in views["ann"] and "bob · grade 2" in views["bob"]
    assert f">{html.escape(ann_span)}</mark>" in views["ann"] and views["ann"].count("<mark") == 1
    assert f">{html.escape(bob_span)}</mark>" in views["bob"] and views["bob"].count("<mark") == 1
    assert f">{html.escape(bob_span)}</mark>" not in views["ann"]
    assert f">{html.escape(pair['text'])}</mark>" not in views["ann"]  # the evidence, not the passage
    assert html.escape(ann_note) in views["ann"] and "BOB-NOTE" not in views["ann"]
    assert html.escape(bob_note) in views["bob"] and "ANN-NOTE" not in views["bob"]
    # corpus text and comments stay text: escaped once, markdown characters kept as typed
    shown = " ".join(h.proto.body for h in at.get("html"))
    assert "<script" not in shown and "<b>only" not in shown
    assert html.escape(EVIL) in views["ann"] and "*x* partly" in views["bob"]
    assert all("BOB-NOTE" not in m.value and "<script" not in m.value for m in at.markdown)
    # choosing the other pair shows its SMEs, who marked nothing and said nothing
    at.selectbox(key="calibration_adjudicate_pair").set_value(1).run()
    assert not at.exception
    views = _sme_views(at)
    assert set(views) == {"ann", "bob"} and "ann · grade 0" in views["ann"]
    assert "<mark" not in views["ann"] and "no evidence marked" in views["ann"] and "no comment" in views["bob"]


def test_sme_agreement_table_names_both_kappas(judged):
    """Two SMEs on the same pairs: the table says which κ each column is, the grades' unweighted
    κ and the relevant / not relevant κ at the sample's threshold, each equal to scikit-learn's."""
    from sklearn.metrics import cohen_kappa_score

    from tests.ui.html_tables import html_tables

    path, truth = judged
    with Database(path) as db:
        cal.create_sample(db, "s", "p", seed=1)
        label_all(db, "s", truth, "ann")
        label_all(db, "s", truth, "bob", flip=0.4, seed=3)
        wide = db.query_df("SELECT position, annotator, grade FROM label_events").pivot(
            index="position", columns="annotator", values="grade")
    at = _run(_calibration_page, "lead")
    rows = html_tables(at)["calibration-sme"]
    assert len(rows) == 1 and rows[0]["SMEs"] == "ann / bob"
    graded = cohen_kappa_score(wide["ann"], wide["bob"], labels=[0, 1, 2, 3])
    binary = cohen_kappa_score(wide["ann"] >= 2, wide["bob"] >= 2)
    assert rows[0]["Cohen's κ (grades 0–3, unweighted)"] == f"{graded:.3f}"
    assert rows[0]["Cohen's κ (relevant / not relevant, grade ≥ 2)"] == f"{binary:.3f}"
    assert f"{graded:.3f}" != f"{binary:.3f}"


def test_the_page_reports_on_a_chosen_judge_configuration_and_gates_it_on_request(judged):
    """A second judge (model m2, grades unrelated to the SMEs') graded the pool after the sample
    was drawn on m1: the page reports on m1 first, names m2 as not gated, shows m2's own figures
    when chosen, stores no verdict for viewing, and gates m2 when the lead asks."""
    import numpy as np
    import pandas as pd

    from workbench.services.calibration import verdicts
    from workbench.store.judgments import write_judgments

    path, truth = judged
    with Database(path) as db:
        cal.create_sample(db, "s", "p", seed=1)
        label_all(db, "s", truth)
        pairs = db.query_df("SELECT query_id, doc_id, start, \"end\" FROM judgments WHERE model = 'm1'")
        rng = np.random.default_rng(7)
        write_judgments(db.cursor(), pd.DataFrame({**{c: pairs[c] for c in pairs.columns},
                                                   "grade": rng.integers(0, 4, len(pairs)), "source": "llm",
                                                   "assessor": "judge", "model": "m2", "status": "ok"}))
    at = _run(_calibration_page)
    box = next(s for s in at.selectbox if s.label == "Judge configuration")
    assert box.options[0].startswith("m1/") and "the sample's own" in box.options[0]
    assert box.options[1].startswith("m2/") and "(not gated here)" in box.options[1]
    assert "Judge configuration m1/" in _texts(at)
    box.set_value(1).run()
    assert not at.exception
    assert "Judge configuration m2/" in _texts(at) and "is not gated on this sample" in _texts(at)
    with Database(path) as db:  # viewing gates nothing
        first = {s.config.model: s.state for s in verdicts.states(db)}
    assert first["m2"] == "not gated" and first["m1"] != "not gated"
    next(b for b in at.button if b.label == "Gate this judge configuration").click().run()
    assert not at.exception
    with Database(path) as db:
        assert {s.config.model: s.state for s in verdicts.states(db)} == {"m1": first["m1"], "m2": "failed"}


def test_the_lead_learns_a_judge_from_the_tuning_labels_on_the_page(judged):
    """The 'Learn a judge' box fits on the tuning labels, shows the cross-validated figures and the
    operating point's rule, and the learned configuration joins the page's judge list (not gated)."""
    from workbench.services.calibration import verdicts

    path, truth = judged
    with Database(path) as db:
        cal.create_sample(db, "s", "p", seed=1)
        label_all(db, "s", truth)
    at = _run(_calibration_page)
    assert "Learn a judge from the SME labels" in [e.label for e in at.expander]
    next(c for c in at.checkbox if c.label == "Dense cosine feature").uncheck()
    next(b for b in at.button if b.label == "Learn the judge").click().run()
    assert not at.exception, at.exception
    text = _texts(at)
    assert "tuning labels" in text and "**Operating point**: p(relevant) ≥ " in text
    assert "rule **targets**" in text or "rule **kappa**" in text
    figures = at.dataframe[-1].value
    assert list(figures["figure"]) == ["TPR", "TNR", "Cohen's κ"]
    with Database(path) as db:
        learned = [c for c in verdicts.configurations(db) if c.model == "learned"]
        job = db.query_value("SELECT params::VARCHAR FROM judge_jobs WHERE judge = 'learned'")
    assert len(learned) == 1 and '"rule"' in job
    stored = json.loads(job)["learned"]["cv"]["kappa"]
    assert figures["cross-validated on the tuning part"].iloc[2] == pytest.approx(stored, abs=1e-9)
    box = next(s for s in at.selectbox if s.label == "Judge configuration")
    assert any(o.startswith("learned/") and "(not gated here)" in o for o in box.options)
