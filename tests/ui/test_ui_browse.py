"""The Queries & Labels page in Streamlit's AppTest: queries, labels, filters, the span
highlighted in its document, and untrusted text kept inert."""

from __future__ import annotations

import html
import json
import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.actors import acting_as
from workbench.services.ingest import import_file
from workbench.services.project.lifecycle import init_project, open_project

CANARY = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> *emph* $x$'


def _page():
    from workbench.ui.views import browse

    browse.render()


def _run() -> AppTest:
    at = AppTest.from_function(_page, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


@pytest.fixture
def canary_db(tmp_path, monkeypatch) -> Path:
    """A project whose document, query and assessor carry markup that must stay text."""
    path = tmp_path / "canary.duckdb"
    init_project(path)
    text = "Intro line. " + CANARY + " the answer is here. Trailing words."
    (tmp_path / "c.jsonl").write_text(json.dumps({"_id": "d<1>", "title": "T " + CANARY, "text": text}) + "\n")
    (tmp_path / "q.jsonl").write_text(json.dumps({"_id": "q1", "text": "Q " + CANARY,
                                                  "description": "D " + CANARY,
                                                  "tags": {"type": "<b>x</b>"}}) + "\n")
    start = text.index(CANARY)
    (tmp_path / "s.jsonl").write_text(json.dumps({"query_id": "q1", "doc_id": "d<1>", "start": start,
                                                  "end": start + len(CANARY), "grade": 2,
                                                  "assessor": "<i>sme</i>"}) + "\n")
    with open_project(path) as db:
        import_file(db, "corpus", tmp_path / "c.jsonl")
        import_file(db, "queries", tmp_path / "q.jsonl")
        import_file(db, "qrels", tmp_path / "s.jsonl", format="spans")
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path


def _labels(at: AppTest):
    return next(d.value for d in at.dataframe if "source" in d.value.columns)


def _merged(at: AppTest) -> dict:
    frame = next(d.value for d in at.dataframe if "decided by" in d.value.columns)
    return {(q, d): int(g) for q, d, g in frame[["query", "document", "grade"]].itertuples(index=False)}


def test_all_queries_and_labels_are_listed(demo_db):
    at = _run()
    queries = next(d.value for d in at.dataframe if "description" in d.value.columns)
    demo = [json.loads(l) for l in (Path(__file__).parents[2] / "data" / "demo" / "queries.jsonl")
            .read_text().splitlines() if l.strip()]
    assert len(queries) == len(demo) == 44
    row = queries.set_index("query").loc["q001"]
    assert row["text"] == demo[0]["text"] and row["description"] == demo[0]["description"]
    assert row["tags"] == "source = IT, type = fact"
    assert _labels(at).shape[0] == 209
    # 209 labels are more than the page renders as passages: it says so.
    assert any("first 20 of 209" in c.value for c in at.caption)


def test_filters_by_query_grade_and_source(demo_db):
    at = _run()
    at.selectbox(key="browse_query").select("q001").run()
    labels = _labels(at)
    spec = [json.loads(l) for l in (Path(__file__).parents[2] / "data" / "demo" / "labels.jsonl")
            .read_text().splitlines() if l.strip()]
    expected = [r for r in spec if r["query_id"] == "q001"]
    assert len(labels) == len(expected) == 5
    assert sorted(labels["grade"]) == sorted(r["grade"] for r in expected)
    assert set(labels["source"]) == {"human (SME)"} and set(labels["assessor"]) == {"demo-sme"}

    at.multiselect(key="browse_grades").set_value([3]).run()
    labels = _labels(at)
    assert labels["grade"].tolist() == [r["grade"] for r in expected if r["grade"] == 3]

    at.multiselect(key="browse_sources").set_value([]).run()
    assert any("No label matches these filters" in i.value for i in at.info)


def test_the_span_is_highlighted_inside_its_document(demo_db):
    at = _run()
    at.selectbox(key="browse_query").select("q001").run()
    at.multiselect(key="browse_grades").set_value([3]).run()
    docs = {json.loads(l)["doc_id"]: json.loads(l)["text"]
            for l in (Path(__file__).parents[2] / "data" / "demo" / "documents.jsonl").read_text().splitlines()
            if l.strip()}
    label = next(json.loads(l) for l in (Path(__file__).parents[2] / "data" / "demo" / "labels.jsonl")
                 .read_text().splitlines() if l.strip() and json.loads(l)["query_id"] == "q001"
                 and json.loads(l)["grade"] == 3)
    span = docs[label["doc_id"]][label["start"]:label["end"]]
    shown = " ".join(h.proto.body for h in at.get("html"))
    assert f">{html.escape(span)}</mark>" in shown
    # With the whole document, the text before and after the span is there too.
    at.checkbox(key="browse_whole").check().run()
    shown = " ".join(h.proto.body for h in at.get("html"))
    text = docs[label["doc_id"]]
    assert html.escape(text[:label["start"]]) in shown and html.escape(text[label["end"]:]) in shown


def test_markup_in_corpus_queries_and_assessors_stays_text(canary_db):
    at = _run()
    shown = " ".join(h.proto.body for h in at.get("html"))
    assert "<script" not in shown and "<img" not in shown and "<i>" not in shown
    assert html.escape(CANARY) in shown
    assert "<mark" in shown  # our own markup is the only tag around corpus text
    for frame in (d.value for d in at.dataframe):  # tables hold the raw text, shown as text
        assert not frame.astype(str).isin(["None", "nan"]).any().any()
    assert not at.markdown or all("<script" not in m.value for m in at.markdown)


def test_empty_project_names_the_next_step(tmp_path, monkeypatch):
    path = tmp_path / "empty.duckdb"
    init_project(path)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    at = _run()
    assert any("Import queries on the Data page" in i.value for i in at.info)


# -- the grade per pair under the one merge rule ------------------------------------------------

@pytest.fixture(scope="module")
def merge_project(tmp_path_factory):
    """The hand-worked project of tests.support.merge_rule_project (closed) and its expected qrels."""
    from tests.support.merge_rule_project import build_merge_project

    path = tmp_path_factory.mktemp("merge") / "m.duckdb"
    db, info = build_merge_project(path)
    db.close()
    return path, info


def test_the_merged_grade_per_pair_follows_the_one_rule(merge_project, monkeypatch):
    from tests.support.merge_rule_project import HAND, HAND_EXPECTED

    path, info = merge_project
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    at = _run()
    assert _merged(at) == info["expected"]  # every pair of the project: 369
    shown = " ".join(h.proto.body for h in at.get("html"))
    assert "Qrels policy: adjudicated &gt; sme &gt; imported &gt; llm; several assessors: majority, ties to the " \
           "higher grade; LLM only from a judge configuration that passed the gate" in shown
    checked = 0
    for query in ("h1", "h2"):
        at.selectbox(key="browse_query").select(query).run()
        assert _merged(at) == {k: v for k, v in HAND_EXPECTED.items() if k[0] == query}
        checked += len(_merged(at))
        # the raw labels stay per source: the failed judge's labels are listed, not merged
        labels = _labels(at)
        assert len(labels) == sum(1 for r in HAND if r[0] == query)
    assert checked == len(HAND_EXPECTED) == 9
    frame = next(d.value for d in at.dataframe if "decided by" in d.value.columns)
    assert dict(zip(frame["document"], frame["decided by"])) == {
        "hd2": "LLM judge", "hd3": "LLM judge", "hd4": "imported", "hd5": "SME"}


def test_an_annotator_is_not_shown_merged_grades(merge_project, monkeypatch):
    from workbench.services import access

    path, _ = merge_project
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    with acting_as(access.Actor("ann", "annotator")):
        at = _run()
    assert not [d for d in at.dataframe if "decided by" in d.value.columns]
    assert any("shown to leads and viewers" in c.value for c in at.caption)


# -- every passage of a query, and the assessor filter ----------------------------------------

@pytest.fixture
def second_assessor(demo_db, tmp_path) -> Path:
    """The demo plus 25 imported labels on q001 by assessor ``ext-a``: 30 labels on q001, more
    than the 20 passages shown for all queries."""
    docs = [json.loads(l) for l in (Path(__file__).parents[2] / "data" / "demo" / "documents.jsonl")
            .read_text().splitlines() if l.strip()]
    rows = [{"query_id": "q001", "doc_id": d["doc_id"], "start": 0, "end": min(40, len(d["text"])),
             "grade": i % 4, "assessor": "ext-a"} for i, d in enumerate(docs[:25])]
    (tmp_path / "ext.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with open_project(demo_db) as db:
        import_file(db, "qrels", tmp_path / "ext.jsonl", format="spans")
    return demo_db


def _passage_heads(at: AppTest, query: str) -> list[str]:
    """The head line of each labelled passage shown ("q001 · doc · grade g · source · assessor")."""
    heads = []
    for h in at.get("html"):
        body = h.proto.body
        marker = f'font-weight: 600">{query} · '
        if marker in body:
            heads.append(html.unescape(body.split(marker, 1)[1].split("</div>", 1)[0]))
    return heads


def test_a_chosen_query_shows_every_passage_and_filters_by_assessor(second_assessor):
    at = _run()
    assert set(at.multiselect(key="browse_assessors").options) == {"demo-sme", "ext-a"}
    assert any("first 20 of" in c.value for c in at.caption)  # all queries: 20 passages, said so
    at.selectbox(key="browse_query").select("q001").run()
    assert not at.exception, at.exception
    assert len(_labels(at)) == 30
    heads = _passage_heads(at, "q001")
    assert len(heads) == 30, len(heads)  # every label of the query, none cut at 20
    assert not any("first 20" in c.value for c in at.caption)
    at.multiselect(key="browse_assessors").set_value(["ext-a"]).run()
    labels = _labels(at)
    assert len(labels) == 25 and set(labels["assessor"]) == {"ext-a"}
    heads = _passage_heads(at, "q001")
    assert len(heads) == 25 and all(h.endswith(" · ext-a") for h in heads), heads
    at.multiselect(key="browse_assessors").set_value(["demo-sme"]).run()
    assert set(_labels(at)["assessor"]) == {"demo-sme"} and len(_passage_heads(at, "q001")) == 5


def test_an_annotator_filters_only_among_labels_they_may_see(second_assessor):
    """An annotator who gave no label sees the imported ones only: the SME's name is not offered,
    and asking the service for the SME's labels by name still finds none."""
    from workbench.services import access
    from workbench.services.browse import labels_table

    with acting_as(access.Actor("ann", "annotator")):
        at = _run()
        assert at.multiselect(key="browse_assessors").options == ["ext-a"]
        at.selectbox(key="browse_query").select("q001").run()
        assert not at.exception, at.exception
        heads = _passage_heads(at, "q001")
        assert len(heads) == 25 and all(h.endswith(" · ext-a") for h in heads)
        with open_project(second_assessor) as db:
            assert labels_table(db, assessors=["demo-sme"]).empty


# -- an SME's evidence and comment --------------------------------------------------------------

@pytest.fixture
def two_smes(tmp_path, monkeypatch):
    """A calibration project where SMEs ann and bob graded one pair differently, each with their
    own evidence span and comment (tests.support.calibration_project.two_smes_disagree)."""
    from tests.support.calibration_project import build_project, two_smes_disagree
    from workbench.services.calibration import workflow as cal

    path = tmp_path / "p.duckdb"
    db, _ = build_project(path)
    cal.create_sample(db, "s", "p", seed=1)
    pair = two_smes_disagree(db, "s", 0)
    db.close()
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return pair


def _shown(at: AppTest) -> str:
    return " ".join(h.proto.body for h in at.get("html"))


def test_a_lead_sees_each_smes_evidence_and_comment(two_smes):
    """Each SME label shows the sentence the SME chose in <mark> (not the whole passage) and their
    comment; markup in the document and the comments stays text."""
    at = _run()
    at.selectbox(key="browse_query").select(two_smes["query_id"]).run()
    assert not at.exception, at.exception
    shown = _shown(at)
    for sme in ("ann", "bob"):
        span, note = two_smes[sme]
        assert f">{html.escape(span)}</mark>" in shown and html.escape(note) in shown
    assert "<script" not in shown and "<b>only" not in shown
    labels = _labels(at)
    assert set(labels.loc[labels["assessor"].isin(["ann", "bob"]), "comment"]) == {two_smes["ann"][1],
                                                                                     two_smes["bob"][1]}


def test_an_annotator_sees_only_their_own_evidence_and_comment(two_smes):
    from workbench.services import access
    from workbench.services.browse import labels_table
    from workbench.services.project.lifecycle import open_project as open_db

    ann_span, ann_note = two_smes["ann"]
    bob_span, _ = two_smes["bob"]
    with acting_as(access.Actor("ann", "annotator")):
        at = _run()
        at.selectbox(key="browse_query").select(two_smes["query_id"]).run()
        assert not at.exception, at.exception
        shown = _shown(at)
        assert f">{html.escape(ann_span)}</mark>" in shown and html.escape(ann_note) in shown
        # the own label shows its evidence, not the whole passage marked
        assert f">{html.escape(two_smes['text'])}</mark>" not in shown
        assert f">{html.escape(bob_span)}</mark>" not in shown and "BOB-NOTE" not in shown
        assert all("BOB-NOTE" not in d.value.astype(str).to_string() for d in at.dataframe)
        with open_db(os.environ["WORKBENCH_DB"]) as db:
            seen = labels_table(db)
        assert seen["assessor"].tolist() == ["ann"] and seen["comment"].tolist() == [ann_note]
        assert seen["evidence"].tolist() == [[[two_smes["text"].index(ann_span),
                                               two_smes["text"].index(ann_span) + len(ann_span)]]]
