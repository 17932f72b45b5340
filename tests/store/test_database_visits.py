"""Visits (``Database(path, visit=True)``): the Label page's per-key-press opens, attached to the
process's one in-memory DuckDB instance and detached at close. The file's lock must behave
exactly as with an ordinary open (held during the visit, free right after it for another
process), and opens of the same file in this process must wait for or share a visit, never
fail, never make a second instance of the file."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from tests.support.prerequisites import REPO
from workbench.errors import StoreError
from workbench.store.database import Database

# Opens the file for writing at once (wait=0) in another process: exit 0 if it could.
_OPEN_ELSEWHERE = """
import sys
from workbench.store.database import Database
try:
    Database(sys.argv[1], migrate=False).close()
except Exception as exc:
    print(exc)
    sys.exit(3)
"""


def _opens_elsewhere(path) -> bool:
    done = subprocess.run([sys.executable, "-c", _OPEN_ELSEWHERE, str(path)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode in (0, 3), done.stderr
    return done.returncode == 0


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "p.duckdb"
    db = Database(path)
    with db.transaction() as tx:
        tx.execute("CREATE TABLE t (a INTEGER)")
    db.close()
    return path


def test_a_visit_holds_the_lock_only_while_it_lasts(project):
    visit = Database(project, visit=True, migrate=False)
    try:
        with visit.transaction() as tx:
            tx.execute("INSERT INTO t VALUES (1)")
        assert visit.query_value("SELECT count(*) FROM t") == 1
        assert not _opens_elsewhere(project)  # held, as by an ordinary open
    finally:
        visit.close()
    assert _opens_elsewhere(project)  # free the moment the visit ends
    check = Database(project, read_only=True)
    try:
        assert check.query_all("SELECT a FROM t") == [(1,)]  # the write is in the file
    finally:
        check.close()


def test_an_open_in_this_process_waits_for_a_visit(project):
    visit = Database(project, visit=True, migrate=False)
    with visit.transaction() as tx:
        tx.execute("INSERT INTO t VALUES (2)")
    closer = threading.Timer(0.5, visit.close)
    started = time.monotonic()
    closer.start()
    db = Database(project, migrate=False)  # wait=0: yet a visit of this process is waited for
    try:
        assert time.monotonic() - started > 0.3
        assert db.query_all("SELECT a FROM t") == [(2,)]
    finally:
        db.close()
        closer.join()


def test_a_visit_shares_an_open_of_this_process_and_visits_share_one_attachment(project):
    db = Database(project, migrate=False)
    try:
        visit = Database(project, visit=True, migrate=False)  # joins the open instance
        try:
            with visit.transaction() as tx:
                tx.execute("INSERT INTO t VALUES (3)")
            assert db.query_value("SELECT count(*) FROM t") == 1
        finally:
            visit.close()
    finally:
        db.close()
    first = Database(project, visit=True, migrate=False)
    second = Database(project, visit=True, migrate=False)
    with second.transaction() as tx:
        tx.execute("INSERT INTO t VALUES (4)")
    assert first.query_value("SELECT count(*) FROM t") == 2
    first.close()
    assert not _opens_elsewhere(project)  # the second visit still holds it
    assert second.query_value("SELECT max(a) FROM t") == 4
    second.close()
    assert _opens_elsewhere(project)


def test_a_visit_needs_an_existing_file_and_no_migrations(tmp_path, project):
    with pytest.raises(StoreError, match="no project database"):
        Database(tmp_path / "none.duckdb", visit=True, migrate=False)
    assert not (tmp_path / "none.duckdb").exists()
    with pytest.raises(ValueError, match="no migrations"):
        Database(project, visit=True)
