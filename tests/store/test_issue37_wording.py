"""Issue 37's wording defects: a failed COMMIT on a full disk said "nothing more was stored;
nothing was stored", and a refusal to a viewer said "ask a annotator or lead"."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from tests.support.templates import empty_project
from workbench.errors import StoreError
from workbench.services import access
from workbench.services.access import Actor, PermissionDenied
from workbench.store.corpus import read_queries, write_queries
from workbench.store.database import Database

# DuckDB's own words when the disk fills during COMMIT (seen on a 2 MB tmpfs with a real import)
DISK_FULL = ('TransactionContext Error: Failed to commit: Could not write file "p.duckdb.wal": '
             "No space left on device")


class _CommitFails:
    """A DuckDB cursor whose COMMIT fails as DuckDB's does on a full disk; the rest is real."""

    def __init__(self, cursor):
        self._cursor = cursor

    def execute(self, sql, *args, **kwargs):
        if sql.strip().upper() == "COMMIT":
            raise duckdb.TransactionException(DISK_FULL)
        return self._cursor.execute(sql, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._cursor, name)


def test_a_commit_on_a_full_disk_says_once_that_nothing_was_stored(tmp_path, monkeypatch):
    path = empty_project(tmp_path / "p.duckdb")
    real = Database._new_cursor
    monkeypatch.setattr(Database, "_new_cursor", lambda self: _CommitFails(real(self)))
    with Database(path) as db:
        with pytest.raises(StoreError) as info, db.transaction() as tx:
            write_queries(tx, pd.DataFrame({"query_id": ["q1"], "text": ["a"]}))
    message = str(info.value)
    assert message.endswith("No space left on device'); nothing was stored"), message
    assert message.count("stored") == 1 and "is full" in message
    monkeypatch.undo()
    with Database(path) as db:
        assert read_queries(db).empty  # and it was true: the unit of work was rolled back


def test_a_refusal_names_an_annotator_with_its_article():
    with pytest.raises(PermissionDenied) as info:
        access.require("label", Actor("vic", "viewer"))
    assert "ask an annotator or lead to do it" in str(info.value)
    with pytest.raises(PermissionDenied, match="ask a lead to do it"):
        access.require("delete", Actor("vic", "viewer"))
