"""The Data page in Streamlit's AppTest: upload, server path, errors, counts and the ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from workbench.services.project import init_project
from workbench.store.database import Database
from workbench.store.meta import table_counts

PAGE = "from workbench.ui.views.data import render\nrender()\n"
DOCS = [{"_id": "u1", "title": "Uploaded", "text": "<b>not bold</b> **not strong**"},
        {"_id": "u2", "title": "Second", "text": "plain"}]


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "p.duckdb"
    init_project(path)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path


def _page() -> AppTest:
    at = AppTest.from_string(PAGE, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def _counts(path: Path) -> dict:
    with Database(path) as db:
        return table_counts(db)


def test_upload_imports_and_shows_counts_ledger_and_escaped_text(project):
    at = _page()
    assert at.selectbox(key="data_kind").value == "corpus"
    body = "".join(json.dumps(d) + "\n" for d in DOCS).encode()
    at.file_uploader(key="data_upload").upload("corpus.jsonl", body, "application/json")
    at.button(key="data_import").click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("imported 2 documents from corpus.jsonl" in s.value for s in at.success)
    assert _counts(project)["documents"] == 2
    assert {m.label: m.value for m in at.metric}["Documents"] == "2"
    ledger = at.dataframe[0].value
    assert ledger["path"].tolist() == ["corpus.jsonl"] and ledger["rows"].tolist() == [2]
    # Corpus text goes through context.escaped: the HTML arrives escaped, never as markup.
    shown = " ".join(h.proto.body for h in at.get("html"))
    assert "&lt;b&gt;not bold&lt;/b&gt;" in shown and "<b>" not in shown

    at.file_uploader(key="data_upload").upload("corpus.jsonl", body, "application/json")
    at.button(key="data_import").click().run()
    assert any("already imported" in i.value for i in at.info)


def test_bad_upload_shows_the_one_line_error_and_changes_nothing(project):
    at = _page()
    at.selectbox(key="data_kind").select("queries").run()
    at.file_uploader(key="data_upload").upload("topics.tsv", b"q1\tok\nq2 no tab here\n", "text/plain")
    at.button(key="data_import").click().run()
    assert not at.exception, at.exception
    assert len(at.error) == 1
    message = at.error[0].value
    assert "topics.tsv:2: expected 2 tab-separated columns" in message and "\n" not in message
    assert _counts(project)["queries"] == 0


def test_server_path_with_options(project, tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    queries = tmp_path / "q.tsv"
    queries.write_text("q1\tquery\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 u1 2\nq1 0 gone 1\n")
    at = _page()
    at.radio(key="data_source").set_value("Path on the server").run()
    for kind, path in (("corpus", corpus), ("queries", queries)):
        at.selectbox(key="data_kind").select(kind).run()
        at.text_input(key="data_path").input(str(path)).run()
        at.button(key="data_import").click().run()
        assert not at.error, [e.value for e in at.error]
    at.selectbox(key="data_kind").select("qrels").run()
    at.text_input(key="data_path").input(str(qrels)).run()
    at.button(key="data_import").click().run()
    assert "--skip-unknown" in at.error[0].value and "gone" in at.error[0].value
    at.checkbox(key="data_skip_unknown").check().run()
    at.text_input(key="data_assessor").input("nist").run()
    at.button(key="data_import").click().run()
    assert not at.error, [e.value for e in at.error]
    assert any("skipped 1 rows with unknown doc ids" in s.value for s in at.success)
    assert _counts(project)["judgments.imported.ok"] == 1


def test_page_is_registered_in_the_app(project):
    from workbench.ui.pages import page_specs

    assert "Data" in [spec.title for spec in page_specs()]
