from __future__ import annotations

import subprocess
import sys
import textwrap

import duckdb
import pandas as pd
import pytest

from tests.support.prerequisites import REPO
from workbench.errors import StoreError, StoreLockedError
from workbench.store.corpus import read_documents, write_documents
from workbench.store.database import Database
from workbench.store.judgments import read_judgments, write_judgments
from workbench.store.migrations import MIGRATIONS, applied

FIXTURES = REPO / "tests" / "fixtures"


def test_new_database_records_every_migration_in_order(db_path):
    with Database(db_path) as db:
        assert applied(db) == [(m.seq, m.name) for m in MIGRATIONS]
    assert db_path.is_file()


def test_reopening_applies_nothing_twice(db_path):
    Database(db_path).close()
    with Database(db_path) as db:
        assert len(applied(db)) == len(MIGRATIONS)


def test_old_database_upgrades_in_place_keeping_its_rows(db_path):
    con = duckdb.connect(str(db_path))
    con.execute((FIXTURES / "db_v1.sql").read_text())
    con.close()
    with Database(db_path) as db:
        assert [name for _, name in applied(db)] == [m.name for m in MIGRATIONS]
        labels = read_judgments(db)
        assert labels[["query_id", "doc_id", "grade", "assessor"]].values.tolist() == [["q1", "d1", 3, "sme-1"]]
        assert labels["error"].isna().all()  # column added by migration 2
        assert read_documents(db)["doc_id"].tolist() == ["d1"]


def test_database_from_a_newer_version_is_refused(db_path):
    with Database(db_path) as db, db.transaction() as tx:
        tx.execute("INSERT INTO schema_migrations (seq, name) VALUES (999, 'from_the_future')")
    with pytest.raises(StoreError, match="newer or different workbench"):
        Database(db_path)


def test_transaction_is_all_or_nothing(db_path):
    docs = pd.DataFrame({"doc_id": ["a", "b"], "text": ["alpha", "beta"]})
    with Database(db_path) as db:
        with db.transaction() as tx:
            write_documents(tx, docs)
        clash = pd.DataFrame({"doc_id": ["c", "a"], "text": ["gamma", "again"]})
        with pytest.raises(duckdb.ConstraintException):
            with db.transaction() as tx:
                write_documents(tx, clash)
        assert read_documents(db)["doc_id"].tolist() == ["a", "b"]  # "c" was not half-written


def test_failed_judgment_cannot_carry_a_grade(db_path):
    row = dict(query_id="q", doc_id="d", start=0, end=5, source="llm", assessor="m", status="failed")
    with Database(db_path) as db:
        with pytest.raises(duckdb.ConstraintException):
            with db.transaction() as tx:
                write_judgments(tx, pd.DataFrame([{**row, "grade": 2}]))
        with db.transaction() as tx:
            write_judgments(tx, pd.DataFrame([{**row, "grade": None, "error": "HTTP 500"}]))
        got = read_judgments(db)
        assert got["grade"].isna().all() and got["error"].tolist() == ["HTTP 500"]


def test_chunk_text_is_a_slice_of_the_document(db_path):
    from workbench.store.chunks import read_chunks, write_chunking

    text = "héllo wörld — naïve café"
    with Database(db_path) as db:
        with db.transaction() as tx:
            write_documents(tx, pd.DataFrame({"doc_id": ["d"], "text": [text]}))
            chunks = pd.DataFrame({"chunk_id": ["c0", "c1"], "doc_id": ["d", "d"], "seq": [0, 1],
                                   "start": [0, 12], "end": [12, len(text)]})
            write_chunking(tx, "two", "fixed", {"size": 12}, chunks)
        got = read_chunks(db, "two", with_text=True)
    assert got["text"].tolist() == [text[0:12], text[12:]]


def test_locked_database_gives_a_clear_error(db_path):
    Database(db_path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import duckdb, sys, time
            con = duckdb.connect({str(db_path)!r})
            print("locked", flush=True)
            sys.stdin.readline()
        """)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreLockedError) as err:
            Database(db_path)
        message = str(err.value)
        assert str(db_path) in message and f"process {holder.pid}" in message
        assert "stop that process" in message
    finally:
        holder.communicate("\n", timeout=30)


def test_missing_read_only_database_says_how_to_create_it(tmp_path):
    with pytest.raises(StoreError, match="workbench --db .* init"):
        Database(tmp_path / "nope.duckdb", read_only=True)


def test_non_database_file_is_reported(tmp_path):
    bogus = tmp_path / "notes.duckdb"
    bogus.write_text("this is not a database\n" * 100)
    with pytest.raises(StoreError, match="not a usable DuckDB project database|cannot open"):
        Database(bogus)
