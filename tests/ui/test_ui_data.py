"""The Data page in Streamlit's AppTest: upload, server path, errors in the page's words,
counts, chunking coverage and the ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.ui.html_tables import html_tables
from workbench.services.project.lifecycle import init_project
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
    monkeypatch.setenv("WORKBENCH_APP_DATA_DIRS", str(tmp_path))  # server paths: files under tmp_path
    return path


@pytest.fixture
def demo(demo_project, tmp_path, monkeypatch) -> Path:
    path = demo_project  # tmp_path / "demo.duckdb": a copy of the worker's init --demo template
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    monkeypatch.setenv("WORKBENCH_APP_DATA_DIRS", str(tmp_path))  # server paths: files under tmp_path
    return path


def _page() -> AppTest:
    at = AppTest.from_string(PAGE, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def _counts(path: Path) -> dict:
    with Database(path) as db:
        return table_counts(db)


def _upload(at: AppTest, name: str, body: bytes) -> AppTest:
    at.file_uploader[0].upload(name, body, "application/octet-stream")
    at.button(key="data_import").click().run()
    assert not at.exception, at.exception
    return at


def _messages(at: AppTest) -> list[str]:
    return [m.value for kind in ("error", "warning", "info", "success") for m in getattr(at, kind)]


def test_upload_imports_clears_the_form_and_shows_counts_ledger_and_escaped_text(project):
    at = _page()
    assert at.selectbox(key="data_kind").value == "corpus"
    body = "".join(json.dumps(d) + "\n" for d in DOCS).encode()
    _upload(at, "corpus.jsonl", body)
    assert not at.error, [e.value for e in at.error]
    assert any("Imported 2 documents from corpus.jsonl" in s.value for s in at.success)
    assert _counts(project)["documents"] == 2
    assert {m.label: m.value for m in at.metric}["Documents"] == "2"
    # The form is cleared after success: the uploader no longer holds the file.
    assert not at.file_uploader[0].value
    ledger = at.dataframe[-1].value
    assert ledger["path"].tolist() == ["corpus.jsonl"] and ledger["rows"].tolist() == [2]
    # No None/nan text in the ledger (corpus imports have no name).
    assert not ledger.astype(str).isin(["None", "nan", "NaN", "<NA>"]).any().any()
    # Corpus text goes through context.escaped: the HTML arrives escaped, never as markup.
    shown = " ".join(h.proto.body for h in at.get("html"))
    assert "&lt;b&gt;not bold&lt;/b&gt;" in shown and "<b>" not in shown

    _upload(at, "corpus.jsonl", body)
    infos = [i.value for i in at.info]
    assert any("already imported" in i and "nothing to do" in i for i in infos), infos
    assert not any("None" in i for i in infos)


def test_bad_upload_names_the_uploaded_file_never_a_server_path(project):
    at = _page()
    at.selectbox(key="data_kind").select("queries").run()
    _upload(at, "topics.tsv", b"q1\tok\nq2 no tab here\n")
    assert len(at.error) == 1
    message = at.error[0].value
    assert "topics.tsv:2: expected 2 tab-separated columns" in message and "\n" not in message
    assert "/tmp" not in message and "tmp" not in message.replace("topics.tsv", "")
    assert _counts(project)["queries"] == 0

    # A file whose format cannot be told: the message points at the Format field, not --format.
    _upload(at, "mystery.bin", b"\x00\x01 something\n")
    messages = _messages(at)
    assert messages and all("--" not in m for m in messages), messages
    assert any("mystery.bin" in m for m in messages), messages


def test_server_path_with_options_and_errors_in_the_pages_words(project, tmp_path):
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
        # Cleared after success.
        assert at.text_input(key="data_path").value == ""
    at.selectbox(key="data_kind").select("qrels").run()
    at.text_input(key="data_path").input(str(qrels)).run()
    at.button(key="data_import").click().run()
    message = at.error[0].value
    assert "“Skip rows with unknown ids”" in message and "gone" in message
    assert "--" not in message
    at.checkbox(key="data_skip_unknown").check().run()
    at.text_input(key="data_assessor").input("nist").run()
    at.button(key="data_import").click().run()
    assert not at.error, [e.value for e in at.error]
    success = [s.value for s in at.success]
    assert any("skipped 1 rows with unknown doc ids" in s for s in success), success
    assert not any("--" in s for s in success), success
    assert _counts(project)["judgments.imported.ok"] == 1


def test_run_name_taken_is_refused_in_the_pages_words(demo, tmp_path):
    run = tmp_path / "other.txt"
    run.write_text("q001 Q0 it-laptop-refresh 1 2.0 x\n")
    at = _page()
    at.selectbox(key="data_kind").select("run").run()
    assert at.text_input(key="data_name").placeholder.startswith("optional")
    assert at.text_input(key="data_name").value == ""
    at.radio(key="data_source").set_value("Path on the server").run()
    at.text_input(key="data_path").input(str(run)).run()
    at.text_input(key="data_name").input("bm25").run()  # the demo's run
    at.button(key="data_import").click().run()
    assert len(at.error) == 1
    assert "“Run name”" in at.error[0].value and "--" not in at.error[0].value
    assert _counts(demo)["runs"] == 1


def test_more_documents_show_how_many_each_chunking_covers(demo, tmp_path):
    extra = [{"_id": f"new-{i}", "title": f"New {i}", "text": f"## Section\nNew policy text {i}."} for i in range(4)]
    at = _page()
    body = "".join(json.dumps(d) + "\n" for d in extra).encode()
    _upload(at, "more.jsonl", body)
    assert not at.error, [e.value for e in at.error]
    with Database(demo) as db:
        total = table_counts(db)["documents"]
        covered = db.query_value("SELECT count(DISTINCT doc_id) FROM chunks WHERE chunking = 'sections'")
    assert total == 45
    row = {r["chunking"]: r for r in html_tables(at)["chunkings"]}["sections"]
    assert row["documents"] == f"{covered:,} of {total:,}"
    # The success message says the same.
    assert any(f"covers {covered:,} of {total:,} documents" in s.value for s in at.success)
    if covered < total:  # a chunking that misses documents is flagged on the page
        assert any("sections covers" in w.value for w in at.warning)


def test_page_is_registered_in_the_app(project):
    from workbench.ui.pages import page_specs

    assert "Data" in [spec.title for spec in page_specs()]


def test_export_qrels_download_parses_and_matches_the_labels(demo):
    at = _page()
    at.selectbox(key="export_format").select("trec").run()
    at.selectbox(key="export_source").select("human").run()
    at.button(key="export_prepare").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    name, data, rows, queries = at.session_state["export_file"]
    assert name == "qrels-doc-human.txt"
    lines = [line.split() for line in data.decode().splitlines()]
    assert all(len(parts) == 4 for parts in lines) and len(lines) == rows
    # Oracle: the demo labels, max grade per (query, document), read without the workbench.
    demo_dir = Path(__file__).parents[2] / "data" / "demo"
    expected: dict = {}
    for line in (demo_dir / "labels.jsonl").read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            key = (r["query_id"], r["doc_id"])
            expected[key] = max(expected.get(key, -1), r["grade"])
    # unanswerable queries (tag type: unanswerable) are left out, as evaluation leaves them out
    unanswerable = {json.loads(line)["query_id"] for line in (demo_dir / "queries.jsonl").read_text().splitlines()
                    if line.strip() and (json.loads(line).get("tags") or {}).get("type") == "unanswerable"}
    assert len(unanswerable) == 4
    expected = {k: g for k, g in expected.items() if k[0] not in unanswerable}
    assert {(q, d): int(g) for q, _, d, g in lines} == expected
    assert len(expected) == 96 and queries == 40
    # the merge policy the file was written under is stated next to the download
    assert any("Qrels policy: adjudicated &gt; sme &gt; imported; several assessors: majority" in h.proto.body
               for h in at.get("html"))

    # Chunk level of the demo chunking: one row per labelled chunk.
    at.selectbox(key="export_level").select("chunk").run()
    at.button(key="export_prepare").click().run()
    assert not at.error, [e.value for e in at.error]
    assert at.session_state["export_file"][0] == "qrels-chunk-sections-human.txt"


def test_export_chunk_level_without_a_chunking_is_refused_in_the_pages_words(project):
    at = _page()
    at.selectbox(key="export_level").select("chunk").run()
    at.button(key="export_prepare").click().run()
    assert any("“Chunking”" in e.value for e in at.error), [e.value for e in at.error]
    assert not any("--" in e.value for e in at.error)


def test_an_imported_run_is_chosen_on_the_retrieve_page(demo, tmp_path):
    script = ("import streamlit as st\nfrom workbench.ui.views import data, retrieve\n"
              "(retrieve if st.session_state.get('page') == 'retrieve' else data).render()\n")
    run = tmp_path / "mine.txt"
    run.write_text("q001 Q0 sections:it-laptop-refresh:1 1 2.0 x\nq002 Q0 sections:it-laptop-refresh:0 1 1.0 x\n")
    at = AppTest.from_string(script, default_timeout=60)
    at.run()
    at.selectbox(key="data_kind").select("run").run()
    at.radio(key="data_source").set_value("Path on the server").run()
    at.text_input(key="data_path").input(str(run)).run()
    at.button(key="data_import").click().run()
    assert not at.error, [e.value for e in at.error]
    at.session_state["page"] = "retrieve"
    at.run()
    assert not at.exception, at.exception
    assert at.multiselect(key="pool_runs").value == ["mine"]
    assert at.selectbox(key="export_run_name").value == "mine"
