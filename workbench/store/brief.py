"""A project held only while each unit of work runs: :class:`BriefDatabase`.

DuckDB lets one process hold a project file at a time. A background job (a dense run encoding
for minutes, a sweep) that kept the file open for its whole run would shut out the app's pages
and the Label page's writes for as long. A service handed a :class:`BriefDatabase` instead of a
:class:`~workbench.store.database.Database` runs unchanged, but every read (``query_df``,
``query_all``, ``query_value``, a ``cursor()`` until it is closed) and every ``transaction()``
opens the file as a *visit* (:mod:`workbench.store.database`), waiting with backoff up to
``wait`` seconds while another process holds it, and lets it go as soon as that unit ends.
Between units (while the job computes) the file is free.

What this costs: reads between two writes may see other processes' commits (a name checked free
may be taken before the write; the write then fails on the key, with nothing half-written, since
each write is one transaction), and each unit pays a visit (a few ms).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from workbench.store.database import Cursor, Database


class _VisitCursor:
    """A cursor of one visit: closing it ends the visit (the file is free again)."""

    def __init__(self, visit: Database, cursor: Cursor):
        self._visit, self._cursor = visit, cursor

    def __getattr__(self, name):
        return getattr(self._cursor, name)

    def close(self) -> None:
        try:
            self._cursor.close()
        finally:
            self._visit.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class BriefDatabase(Database):
    """A :class:`Database` that holds the file only inside each unit of work (module docstring).
    The project must exist and be migrated (open it once ordinarily first)."""

    def __init__(self, path: str | Path, *, wait: float = 60.0):  # noqa: D107 - no connection is opened here
        self.path = Path(path)
        self.read_only = False
        self.wait = float(wait)
        self._alias = None
        self._cursors = []

    def _open(self) -> Database:
        return Database(self.path, visit=True, migrate=False, wait=self.wait)

    def close(self) -> None:
        return None  # nothing is held between units

    def cursor(self) -> Cursor:
        visit = self._open()
        try:
            return _VisitCursor(visit, visit.cursor())
        except BaseException:
            visit.close()
            raise

    _new_cursor = cursor

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
        visit = self._open()
        try:
            with visit.transaction() as tx:
                yield tx
        finally:
            visit.close()

    def query_df(self, sql: str, params: list | tuple | None = None):
        with self._open() as visit:
            return visit.query_df(sql, params)

    def query_all(self, sql: str, params: list | tuple | None = None) -> list[tuple]:
        with self._open() as visit:
            return visit.query_all(sql, params)
