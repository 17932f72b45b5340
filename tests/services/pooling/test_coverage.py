"""Chunkings cover every document; runs say which documents they did not see (issue 8, item 1)."""

from __future__ import annotations

import json

import pytest

from tests.support.retrieval_fixtures import DOCS, write_corpus
from workbench.services.chunking import create_chunking, list_chunkings
from workbench.services.coverage import (
    chunking_coverage,
    coverage_notes,
    run_coverage,
    runs_coverage_table,
)
from workbench.services.ingest import import_file
from workbench.services.pooling.pools import build_pool, pool_stats
from workbench.services.retrieval.runs import run_bm25
from workbench.store.chunks import read_chunks
from workbench.store.database import Database

MORE = {"birds": "Birds migrate south in winter. Geese fly in a V.", "cats2": "A second text about a cat on a mat."}


def _jsonl(tmp_path, docs: dict[str, str], name: str = "more.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in docs.items()))
    return path


@pytest.fixture
def project(db_path):
    db = Database(db_path)
    write_corpus(db)
    create_chunking(db, "fixed", "fixed", size=20, overlap=5)
    create_chunking(db, "whole", "document")
    yield db
    db.close()


def test_imported_documents_are_chunked_into_every_chunking(project, tmp_path):
    result = import_file(project, "corpus", _jsonl(tmp_path, MORE))
    assert result.chunked and set(result.chunked) == {"fixed", "whole"}
    assert "chunked the new documents into" in result.summary()
    for name in ("fixed", "whole"):
        chunks = read_chunks(project, name)
        assert set(chunks["doc_id"]) == set(DOCS) | set(MORE), name
    # The new chunks are exactly what chunking the whole corpus from scratch gives.
    create_chunking(project, "fixed_again", "fixed", size=20, overlap=5)
    old = read_chunks(project, "fixed")[["doc_id", "seq", "start", "end"]].reset_index(drop=True)
    fresh = read_chunks(project, "fixed_again")[["doc_id", "seq", "start", "end"]].reset_index(drop=True)
    assert old.equals(fresh)
    table = chunking_coverage(project).set_index("name")
    assert table.loc["fixed", "documents"] == table.loc["fixed", "documents_now"] == len(DOCS) + len(MORE)
    assert bool(table["complete"].all())
    assert list_chunkings(project).set_index("name").loc["whole", "documents"] == len(DOCS) + len(MORE)


def test_a_failed_import_stores_neither_documents_nor_chunks(project, tmp_path):
    before = len(read_chunks(project, "fixed"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"_id": "new", "text": "fine"}) + "\n" + json.dumps({"_id": "new", "text": "dup"}) + "\n")
    with pytest.raises(Exception, match="duplicate"):
        import_file(project, "corpus", bad)
    assert len(read_chunks(project, "fixed")) == before


def test_runs_made_before_an_import_say_they_miss_the_new_documents(project, tmp_path):
    run_bm25(project, "fixed", "before", k=10)
    import_file(project, "corpus", _jsonl(tmp_path, MORE))
    run_bm25(project, "fixed", "after", k=10)

    coverage = {c.name: c for c in run_coverage(project)}
    assert (coverage["before"].documents, coverage["before"].documents_now) == (4, 6)
    assert coverage["before"].complete is False and coverage["before"].missing == 2
    assert coverage["after"].complete is True and coverage["after"].note() is None
    notes = coverage_notes(project, ["before", "after"])
    assert len(notes) == 1 and "'before' covers 4 of 6 documents" in notes[0]
    table = runs_coverage_table(project).set_index("name")
    assert table.loc["before", "documents"] == 4 and not table.loc["before", "complete"]
    assert table.loc["after", "documents"] == 6 and table.loc["after", "complete"]

    # The new documents are reachable only by the run made after the import.
    after_docs = set(project.query_df("SELECT doc_id FROM run_rows WHERE run = 'after'")["doc_id"])
    assert "cats2" in after_docs

    summary = build_pool(project, "p", ["before", "after"], 5)
    assert len(summary.notes) == 1 and "before" in summary.notes[0]
    assert pool_stats(project, "p").summary["coverage_notes"] == list(summary.notes)


def test_the_pool_command_prints_the_note(db_path, tmp_path, cli):
    with Database(db_path) as db:
        write_corpus(db)
        create_chunking(db, "fixed", "fixed", size=20, overlap=5)
        run_bm25(db, "fixed", "before", k=10)
    more = _jsonl(tmp_path, MORE)
    assert cli("--db", str(db_path), "import", "corpus", str(more)).returncode == 0
    done = cli("--db", str(db_path), "pool", "--name", "p", "--runs", "before", "--depth", "5")
    assert done.returncode == 0, done.stderr
    assert "note: run 'before' covers 4 of 6 documents" in done.stdout
