"""Opening the project database.

DuckDB lets one process hold a database file for writing. When another process (say, a running
``workbench app``) holds it, opening fails with an IO error; we turn that into
:class:`~workbench.errors.StoreLockedError` naming the file and what to do.

Units of work: :meth:`Database.cursor` gives a fresh cursor for one unit of work (duckdb 2.0
refuses a new query on a connection whose last result was not read), and
:meth:`Database.transaction` wraps a unit of work in BEGIN/COMMIT, rolling back on any error so
that an import is all or nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeAlias

import duckdb
import pandas as pd

from workbench.errors import StoreError, StoreLockedError

#: A cursor: one unit of work on the project database. Store functions that take ``cur`` run
#: inside the caller's transaction (:meth:`Database.transaction`); those taking ``db`` open
#: their own cursor for one read.
Cursor: TypeAlias = duckdb.DuckDBPyConnection

_LOCK_PID = re.compile(r"\(PID (\d+)\)")


class Database:
    """A project database file, opened once per process and closed with :meth:`close`."""

    def __init__(self, path: str | Path, *, read_only: bool = False, migrate: bool = True):
        self.path = Path(path)
        self.read_only = read_only
        if read_only and not self.path.exists():
            raise StoreError(
                f"project database {self.path} does not exist; create it with "
                f"`workbench --db {self.path} init`"
            )
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as exc:
            message = str(exc)
            if "lock" in message.lower():
                pid = _LOCK_PID.search(message)
                holder = f"process {pid.group(1)}" if pid else "another process"
                raise StoreLockedError(
                    f"project database {self.path} is in use by {holder} (probably a running "
                    f"`workbench app` or another command); stop that process or wait for it "
                    f"to finish, then try again"
                ) from None
            raise StoreError(f"cannot open project database {self.path}: {message}") from None
        except duckdb.Error as exc:
            raise StoreError(
                f"{self.path} is not a usable DuckDB project database ({exc}); "
                f"point --db at a workbench project or create one with `workbench init`"
            ) from None
        if migrate and not read_only:
            from workbench.store.migrations import migrate as run_migrations

            run_migrations(self)

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- units of work ---------------------------------------------------------------------
    def cursor(self) -> Cursor:
        return self._con.cursor()

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
        """One all-or-nothing unit of work on a fresh cursor."""
        if self.read_only:
            raise StoreError(f"project database {self.path} is open read-only; cannot write")
        cur = self._con.cursor()
        cur.execute("BEGIN TRANSACTION")
        try:
            yield cur
        except BaseException:
            cur.execute("ROLLBACK")
            cur.close()
            raise
        cur.execute("COMMIT")
        cur.close()

    def query_df(self, sql: str, params: list | tuple | None = None) -> pd.DataFrame:
        """Run one read query and return its whole result as a DataFrame."""
        cur = self._con.cursor()
        try:
            return cur.execute(sql, params or []).df()
        finally:
            cur.close()

    def query_all(self, sql: str, params: list | tuple | None = None) -> list[tuple]:
        cur = self._con.cursor()
        try:
            return cur.execute(sql, params or []).fetchall()
        finally:
            cur.close()

    def query_value(self, sql: str, params: list | tuple | None = None):
        rows = self.query_all(sql, params)
        return rows[0][0] if rows else None


def insert_frame(cur: Cursor, table: str, frame: pd.DataFrame) -> int:
    """Append a DataFrame to ``table`` by column name in one statement (no row loop).

    The frame's columns must be a subset of the table's; the rest take their defaults.
    """
    if frame.empty:
        return 0
    name = f"_incoming_{table}"
    cur.register(name, frame)
    columns = ", ".join(f'"{c}"' for c in frame.columns)
    cur.execute(f'INSERT INTO "{table}" ({columns}) SELECT {columns} FROM "{name}"')
    # Not in a `finally`: after a failed insert the transaction is aborted, unregistering would
    # fail and hide the real error, and the rollback drops the registration anyway.
    cur.unregister(name)
    return len(frame)


def where_equal(**conditions) -> tuple[str, list]:
    """``("WHERE a = ? AND b = ?", [va, vb])`` for the conditions whose value is not None
    (``("", [])`` when none is); column names come from our code, values are parameters."""
    given = {column: value for column, value in conditions.items() if value is not None}
    if not given:
        return "", []
    return "WHERE " + " AND ".join(f'"{column}" = ?' for column in given), list(given.values())


def join_frame(cur: Cursor, frame: pd.DataFrame, name: str, sql: str,
               params: list | None = None) -> pd.DataFrame:
    """Run ``sql`` with ``frame`` registered as the view ``name``; read the whole result.

    Look-ups of incoming ids against stored rows use it: one statement joins the ids inside
    DuckDB (no row loop), on the caller's cursor so it sees the transaction's snapshot.
    """
    cur.register(name, frame)
    try:
        return cur.execute(sql, params or []).df()
    finally:
        cur.unregister(name)


def id_frame(values) -> pd.DataFrame:
    """The distinct ``values`` as a one-column (``id``) string frame, for :func:`join_frame`."""
    return pd.DataFrame({"id": pd.Series(pd.unique(pd.Series(values, dtype=str)), dtype=str)})


def arrow_query_df(db: Database, sql: str, params: list | None = None) -> pd.DataFrame:
    """``db.query_df`` through Arrow: the same frame, several times faster for string columns.

    DuckDB's own DataFrame conversion builds Python strings for every VARCHAR cell; the Arrow
    result converts to pandas' Arrow-backed ``str`` columns without that. Use it only for
    queries whose integer columns cannot be NULL (Arrow would read those as float64 where
    ``query_df`` gives a nullable Int64). An empty result is read with ``query_df`` so its
    dtypes stay exactly those of ``query_df``, and so does a VARCHAR column holding only NULLs.
    """
    cur = db.cursor()
    try:
        table = cur.sql(sql, params=params or []).to_arrow_table()
    finally:
        cur.close()
    if table.num_rows == 0:
        return db.query_df(sql, params)
    frame = table.to_pandas()
    # query_df gives a VARCHAR column without any value as object dtype holding None.
    for name in frame.columns:
        column = frame[name]
        if isinstance(column.dtype, pd.StringDtype) and column.isna().all():
            frame[name] = pd.Series([None] * len(frame), index=frame.index, dtype=object)
    return frame
