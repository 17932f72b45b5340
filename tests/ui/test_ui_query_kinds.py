"""The Query kinds page in Streamlit's AppTest: the three reports on the demo, the demo's role
runs added with one click, an SME decision recorded, empty states in page words, and corpus
text kept inert."""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.ui.html_tables import html_tables
from workbench.services.project.lifecycle import init_project, open_project

CANARY = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> *emph* $x$'


def _page():
    from workbench.ui.views import query_kinds

    query_kinds.render()


def _run(annotator: str | None = None) -> AppTest:
    at = AppTest.from_function(_page, default_timeout=90)
    if annotator:
        at.session_state["annotator"] = annotator
    at.run()
    assert not at.exception, at.exception
    return at


def _texts(at: AppTest) -> str:
    return "\n".join(m.value for kind in ("info", "success", "warning", "error") for m in getattr(at, kind))


@pytest.fixture
def demo_db(demo_project, monkeypatch) -> Path:
    """A copy of the worker's demo template (``tests/conftest.py``)."""
    monkeypatch.setenv("WORKBENCH_DB", str(demo_project))
    return demo_project


def test_the_three_reports_on_the_demo(demo_db):
    at = _run()
    tables = html_tables(at)
    assert sorted(r["query"] for r in tables["unanswerable"]) == ["q022", "q027", "q041", "q042"]
    assert {r["document"] for r in tables["restricted"]} == {
        "hr-performance-reviews", "sec-access-reviews", "sec-vendor-review", "eng-production-access"}
    assert len(tables["trajectories"]) == 7
    assert {r["hop"] for r in tables["hop_recall"]} == {"1", "2"}
    assert [r["measure"] for r in tables["answerable_ranking"]] == ["recall@10", "mrr", "ndcg@10"]
    # both abstention rates are shown together with balanced accuracy
    labels = [m.label for m in at.metric]
    assert {"Abstains on unanswerable", "Abstains on answerable", "Balanced accuracy"} <= set(labels)
    assert labels.count("Balanced accuracy") == 2  # the run and the answers
    # no role run yet: the demo offers its two
    at.button(key="qk_demo_roles").click().run()
    assert not at.exception
    tables = html_tables(at)
    roles = {r["role"]: r for r in tables["rbac_roles"]}
    assert roles["security"]["leaks"] == "0" and int(roles["employee"]["leaks"]) > 0
    assert {r["document"] for r in tables["rbac_leaks_employee"]} == {"eng-production-access"}
    assert any("reached a role that may not see them" in e.value for e in at.error)
    assert "--" not in _texts(at)


def test_an_sme_decision_makes_a_query_unanswerable(demo_db):
    at = _run(annotator="sme1")
    at.selectbox(key="qk_decide_query").set_value("q001").run()
    at.button(key="qk_decide").click().run()
    assert not at.exception
    tables = html_tables(at)
    marked = {r["query"]: r["marked by"] for r in tables["unanswerable"]}
    assert marked["q001"] == "SME decision" and marked["q022"] == "query tag"


def test_an_empty_project_names_the_next_step(tmp_path, monkeypatch):
    path = tmp_path / "empty.duckdb"
    init_project(path)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    at = _run()
    assert "Import queries on the Data page" in _texts(at)


def test_a_project_without_query_kind_data_says_what_to_do(tmp_path, monkeypatch):
    path = tmp_path / "plain.duckdb"
    init_project(path)
    (tmp_path / "c.jsonl").write_text(json.dumps({"_id": "d1", "title": "T " + CANARY, "text": "some text"}) + "\n")
    (tmp_path / "q.jsonl").write_text(json.dumps({"_id": "q1", "text": "Q " + CANARY,
                                                  "tags": {"type": "unanswerable"}}) + "\n")
    from workbench.services.ingest import import_file

    with open_project(path) as db:
        import_file(db, "corpus", tmp_path / "c.jsonl")
        import_file(db, "queries", tmp_path / "q.jsonl")
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    at = _run()
    texts = _texts(at)
    assert "Run a retriever on Retrieve & Pool" in texts
    assert "No restricted documents" in texts and "No evidence chains yet" in texts
    # the query text is shown literally inside an escaped table
    [row] = html_tables(at)["unanswerable"]
    assert row["text"] == "Q " + CANARY
    bodies = "".join(e.proto.body for e in at.get("html"))
    assert "<script>" not in bodies and html.escape("<script>") in bodies


def test_a_run_checked_and_recorded_as_a_role(demo_db):
    at = _run()
    at.selectbox(key="qk_rbac_run").set_value("bm25").run()
    at.text_input(key="qk_rbac_role").input("hr").run()
    tables = html_tables(at)
    [row] = tables["rbac_roles"]
    # hr may see hr-performance-reviews but not the three other restricted documents
    assert row["role"] == "hr" and int(row["leaks"]) > 0
    assert "hr-performance-reviews" not in {r["document"] for r in tables["rbac_leaks_hr"]}
    at.button(key="qk_rbac_record").click().run()
    assert not at.exception
    at = _run()  # a fresh visit: the recorded pair is checked without typing it again
    assert [r["role"] for r in html_tables(at)["rbac_roles"]] == ["hr"]


def test_a_role_name_with_markup_stays_text(demo_db):
    at = _run()
    at.selectbox(key="qk_rbac_run").set_value("bm25").run()
    at.text_input(key="qk_rbac_role").input("*x* <b>r</b>").run()
    assert not at.exception
    [row] = html_tables(at)["rbac_roles"]
    assert row["role"] == "*x* <b>r</b>"
    [exp] = [e for e in at.expander if "Leaks of role" in e.label]
    assert exp.label.startswith("Leaks of role \\*x\\* \\<b\\>r\\</b\\>")
