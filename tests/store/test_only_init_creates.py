"""Only ``init`` creates a project (issue 37, defect 1).

A DuckDB file of another program is refused in one line by every command, ``init`` included, by
the app and by the store itself, and stays byte-identical (sha256): before the fix ``status``
added the 33 workbench tables beside the program's own and exited 0, and a clashing table name
left a ``schema_migrations`` table behind. An empty DuckDB file becomes a project only through
``init``; a missing file is created by ``init`` only. Old projects (``tests/fixtures/db_v1.sql``)
still open and migrate.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest

from tests.conftest import run_cli
from tests.support.prerequisites import REPO
from workbench.errors import StoreError
from workbench.store.database import Database
from workbench.store.migrations import EMPTY, FOREIGN, MIGRATIONS, PROJECT, applied, project_state


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def foreign(tmp_path) -> Path:
    """A DuckDB file of another program: a table of its own, a view and a sequence."""
    path = tmp_path / "sales.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE sales (id INTEGER, amount DOUBLE)")
    con.execute("INSERT INTO sales SELECT range, range * 1.5 FROM range(1000)")
    con.execute("CREATE VIEW big_sales AS SELECT * FROM sales WHERE amount > 100")
    con.execute("CREATE SEQUENCE order_ids")
    con.close()
    return path


@pytest.fixture
def clashing(tmp_path) -> Path:
    """A DuckDB file of another program whose table name is also a workbench table's."""
    path = tmp_path / "clash.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE documents (x INTEGER)")
    con.close()
    return path


@pytest.fixture
def empty(tmp_path) -> Path:
    path = tmp_path / "empty.duckdb"
    duckdb.connect(str(path)).close()
    return path


def _tables(path: Path) -> list[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return sorted(r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall())
    finally:
        con.close()


# -- the store ------------------------------------------------------------------------------

def test_project_state_tells_projects_empty_files_and_other_programs_apart(foreign, empty, db_path):
    Database(db_path).close()
    old = db_path.with_name("v1.duckdb")
    con = duckdb.connect(str(old))
    con.execute((REPO / "tests" / "fixtures" / "db_v1.sql").read_text())
    con.close()
    answers = {}
    for path in (foreign, empty, db_path, old):
        con = duckdb.connect(str(path), read_only=True)
        answers[path.name] = project_state(con.cursor())
        con.close()
    assert answers == {"sales.duckdb": (FOREIGN, ["big_sales", "order_ids", "sales"]),
                       "empty.duckdb": (EMPTY, []), "project.duckdb": (PROJECT, []), "v1.duckdb": (PROJECT, [])}


def test_another_tools_schema_migrations_is_not_the_workbench_marker(tmp_path):
    """golang-migrate, dbmate and Rails keep a ``schema_migrations`` table too: other columns
    (or other rows) are another program's file."""
    theirs = tmp_path / "migrated-by-another-tool.duckdb"
    con = duckdb.connect(str(theirs))
    con.execute("CREATE TABLE schema_migrations (version BIGINT, dirty BOOLEAN)")
    con.execute("INSERT INTO schema_migrations VALUES (20240101, false)")
    con.close()
    lookalike = tmp_path / "lookalike.duckdb"
    con = duckdb.connect(str(lookalike))
    con.execute("CREATE TABLE schema_migrations (seq INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP)")
    con.execute("INSERT INTO schema_migrations VALUES (1, 'create_users', now())")
    con.close()
    for path in (theirs, lookalike):
        before = _sha(path)
        with pytest.raises(StoreError, match="is not a workbench project: it is a DuckDB database holding schema_migrations"):
            Database(path, create=True)
        assert _sha(path) == before


@pytest.mark.parametrize("how", [dict(), dict(create=True), dict(create=False), dict(read_only=True),
                                 dict(migrate=False)])
def test_every_kind_of_open_refuses_another_programs_file_and_leaves_it_unchanged(foreign, how):
    before, files = _sha(foreign), _files(foreign.parent)
    with pytest.raises(StoreError) as refused:
        Database(foreign, **how)
    message = str(refused.value)
    assert "is not a workbench project" in message and "sales" in message
    assert "`workbench --db NEW.duckdb init`" in message and "\n" not in message
    assert _sha(foreign) == before and _files(foreign.parent) == files


def test_a_clashing_table_name_leaves_no_schema_migrations_behind(clashing):
    before = _sha(clashing)
    with pytest.raises(StoreError, match="not a workbench project"):
        Database(clashing, create=True)
    assert _sha(clashing) == before and _tables(clashing) == ["documents"]


def test_an_empty_duckdb_file_becomes_a_project_only_when_asked_to(empty):
    before = _sha(empty)
    for how in (dict(), dict(create=False), dict(read_only=True), dict(migrate=False)):
        with pytest.raises(StoreError, match=r"empty DuckDB file, not a workbench project.*--db .*empty.duckdb init"):
            Database(empty, **how)
        assert _sha(empty) == before
    with Database(empty, create=True) as db:
        assert applied(db) == [(m.seq, m.name) for m in MIGRATIONS]


def test_a_missing_file_is_created_only_when_creating_is_allowed(tmp_path):
    missing = tmp_path / "nothing-here.duckdb"
    with pytest.raises(StoreError, match="workbench --db .* init"):
        Database(missing, create=False)
    assert not missing.exists()
    Database(missing, create=True).close()  # init
    assert missing.is_file()


def test_an_old_project_still_opens_and_migrates(db_path):
    con = duckdb.connect(str(db_path))
    con.execute((REPO / "tests" / "fixtures" / "db_v1.sql").read_text())
    con.close()
    with Database(db_path, create=False) as db:
        assert [name for _, name in applied(db)] == [m.name for m in MIGRATIONS]


# -- the commands -----------------------------------------------------------------------------

def _commands(tmp_path: Path) -> list[list[str]]:
    """Commands that open the project, each with arguments it accepts (so it reaches the open)."""
    docs = tmp_path / "docs.jsonl"
    docs.write_text('{"doc_id": "d1", "text": "alpha"}\n')
    queries = tmp_path / "queries.jsonl"
    queries.write_text('{"query_id": "q1", "text": "alpha"}\n')
    return [["status"], ["init"], ["init", "--demo"], ["import", "corpus", str(docs)],
            ["import", "queries", str(queries)], ["chunk", "--name", "c", "--strategy", "fixed"],
            ["retrieve", "list"], ["retrieve", "bm25", "--chunking", "c", "--name", "r"],
            ["pool", "--name", "p", "--runs", "r"], ["pool-stats", "--name", "p"], ["judge", "--pool", "p"],
            ["calibrate", "report"], ["export", "judgments", "--out", str(tmp_path / "out.jsonl")],
            ["delete", "run", "r", "--yes"], ["labels", "propagate", "--chunking", "c"]]


def test_every_command_refuses_another_programs_file_in_one_line(tmp_path, foreign, clashing):
    for target in (foreign, clashing):
        before, files = _sha(target), _files(tmp_path)
        for command in _commands(tmp_path):
            files = _files(tmp_path)
            got = run_cli("--db", str(target), *command)
            assert got.returncode == 4, (command, got.returncode, got.stdout, got.stderr)
            # the refusal is the last line (judge says first which judge it would have used)
            last = got.stderr.splitlines()[-1]
            assert "is not a workbench project" in last and "`workbench --db NEW.duckdb init`" in last, command
            assert got.stderr.count("not a workbench project") == 1, (command, got.stderr)
            assert _sha(target) == before, command
            assert _files(tmp_path) == files, command  # no WAL, no output file


def test_commands_other_than_init_refuse_an_empty_file_and_a_missing_one(tmp_path, empty):
    before = _sha(empty)
    missing = tmp_path / "missing.duckdb"
    for command in _commands(tmp_path):
        if command[0] == "init":
            continue
        got = run_cli("--db", str(empty), *command)
        assert got.returncode == 4 and f"`workbench --db {empty} init`" in got.stderr, (command, got.stderr)
        assert _sha(empty) == before
        got = run_cli("--db", str(missing), *command)
        assert got.returncode == 4 and f"`workbench --db {missing} init`" in got.stderr, (command, got.stderr)
        assert not missing.exists(), command
    assert run_cli("--db", str(empty), "init").returncode == 0
    assert run_cli("--db", str(empty), "status").returncode == 0


# -- the app and the Python API ----------------------------------------------------------------

def _overview():
    from workbench.ui.views import overview

    overview.render()


@pytest.mark.parametrize("page", ["overview", "judge"])
def test_the_app_refuses_another_programs_file_and_leaves_it_unchanged(foreign, monkeypatch, page):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("WORKBENCH_DB", str(foreign))
    before, files = _sha(foreign), _files(foreign.parent)

    def _judge():
        from workbench.ui.views import judge

        judge.render()

    at = AppTest.from_function(_overview if page == "overview" else _judge, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert any("is not a workbench project" in e for e in errors), errors
    assert _sha(foreign) == before and _files(foreign.parent) == files


def test_the_python_api_refuses_another_programs_file(foreign):
    from workbench.api import Project

    before = _sha(foreign)
    for call in (Project.open, Project.create):
        with pytest.raises(StoreError, match="not a workbench project"):
            call(foreign)
    assert _sha(foreign) == before
