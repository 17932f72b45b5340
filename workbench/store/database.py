"""Opening the project database, units of work, and what the user is told when either fails.

Locks: DuckDB lets one process hold a database file for writing. When another process (say, a
running ``workbench app``) holds it, opening fails; :class:`Database` retries with backoff for up
to ``wait`` seconds, then raises :class:`~workbench.errors.StoreLockedError` naming the holder
(its PID and command line when the system tells them). The CLI opens with ``wait=0`` (a command
should say at once that the project is busy); long-running writers such as the judge job and
the app pass a few seconds (:data:`WRITER_WAIT`) so that a short command in between does not
fail them.

Units of work: :meth:`Database.cursor` gives a fresh cursor for one unit of work (duckdb 2.0
refuses a new query on a connection whose last result was not read), and
:meth:`Database.transaction` wraps a unit of work in BEGIN/COMMIT, rolling back on any error so
that an import is all or nothing.

Visits (``Database(path, visit=True)``): a unit of work that must let other processes have the
file right after it (the Label page's key presses) attaches the file to one in-memory DuckDB
instance the process keeps (``ATTACH``, then ``DETACH`` at :meth:`Database.close`) instead of
starting a DuckDB instance per open: the lock is held exactly as long, but a visit costs a
fraction of a new instance's start (``benchmarks/label_bench.py`` times both; docs/performance.md,
"Labelling"). DuckDB refuses to open one file in two instances of a process
("unique file handle conflict"); a visit that meets the file open here already shares that
open instead, and an ordinary open that meets a visit waits for it like for a lock
(:data:`IN_PROCESS_WAIT` at least: visits are short).

Only init creates: a file that exists must already be a project (a ``schema_migrations`` table
with rows, :func:`workbench.store.migrations.project_state`) before any migration runs. A DuckDB
file of another program is refused in one line and left byte-identical, by every command,
``init`` included; an empty DuckDB file becomes a project only through ``init``
(``create=True``); a missing file is refused with ``create=False`` (every command but ``init``).
Visits skip the check: they visit a project an ordinary open has checked and migrated.

Failures become one line (:class:`~workbench.errors.StoreError`), never a traceback: a damaged
or truncated file, a folder that cannot be written, and Ctrl-C. Ctrl-C inside a unit of work
rolls it back and says nothing was stored; Ctrl-C while COMMIT runs is held until the commit
has finished, and the message then says everything was stored (:class:`StoreInterrupted`).
Errors raised inside ``with Database(...) as db:`` are translated when the block exits.
"""

from __future__ import annotations

import errno
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import duckdb

from workbench import lazylibs
from workbench.errors import StoreError, StoreLockedError, WorkbenchError, clip, is_interrupt
from workbench.store.migrations import EMPTY, FOREIGN, project_state
from workbench.store.migrations import migrate as run_migrations

if TYPE_CHECKING:  # pandas is imported where a frame is built: it is most of the CLI's start-up time
    import pandas as pd

#: A cursor: one unit of work on the project database. Store functions that take ``cur`` run
#: inside the caller's transaction (:meth:`Database.transaction`); those taking ``db`` open
#: their own cursor for one read.
Cursor: TypeAlias = duckdb.DuckDBPyConnection

#: Seconds a long-running writer (judge job, app) waits for another process's lock.
WRITER_WAIT = 5.0
#: Seconds an open waits, whatever its ``wait``, while a visit of this process holds the file
#: (a visit is one short unit of work: a key press on the Label page).
IN_PROCESS_WAIT = 5.0

_LOCK_PID = re.compile(r"\(PID (\d+)\)")
_DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


def one_row(row: tuple | None) -> tuple:
    """The row of a statement that always returns one (an aggregate, ``INSERT ... RETURNING``,
    a DELETE's count): ``cur.execute(...).fetchone()`` without its ``None`` for no row."""
    if row is None:
        raise RuntimeError("the statement returned no row where one was expected")
    return row


class StoreInterrupted(StoreError):
    """Ctrl-C stopped work on the project database; ``stored`` says whether it was committed."""

    exit_code = 130

    def __init__(self, message: str, *, stored: bool):
        super().__init__(message)
        self.stored = stored


def is_duckdb_file(path: str | Path) -> bool:
    """Whether ``path`` is a regular file that starts like a DuckDB database (its magic bytes)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(12)
    except OSError:
        return False
    return head[8:12] == _DUCKDB_MAGIC


def _holder(message: str) -> str:
    """``process 1234 (workbench app ...)`` from DuckDB's lock message, as far as it says."""
    found = _LOCK_PID.search(message)
    if not found:
        return "another process"
    pid = found.group(1)
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        command = ""
    return f"process {pid}" + (f" ({clip(command, 120)[1:-1]})" if command else "")


_is_interrupt = is_interrupt  # duckdb stops a running statement on SIGINT: RuntimeError("Query interrupted")


def storage_error(path: Path, exc: BaseException, *, outcome: str | None = None) -> StoreError:
    """One line for a failure of the database file itself (not of our SQL). ``outcome`` says
    what was stored (``"nothing was stored"`` when a COMMIT failed) and ends the line, once; a
    full disk without it says ``nothing more was stored`` (earlier units of work were)."""
    message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    lowered = message.lower()
    tail = f"; {outcome}" if outcome else ""
    if any(word in lowered for word in ("could not read enough bytes", "corrupt", "checksum", "not a valid",
                                        "invalid database", "unable to read")):
        return StoreError(
            f"project database {path} is damaged or truncated ({clip(message, 160)}); restore it "
            f"from a copy, or create a new project with {{command:--db NEW.duckdb init}}{tail}")
    if any(word in lowered for word in ("permission denied", "not permitted", "read-only", "read only")):
        return StoreError(
            f"cannot write to project database {path} ({clip(message, 160)}); make the file and its "
            f"folder writable, or copy the project somewhere writable and {{set_field:db}}{tail}")
    if "no space left" in lowered:
        return StoreError(f"the disk holding {path} is full ({clip(message, 160)}); "
                          f"{outcome or 'nothing more was stored'}")
    return StoreError(f"project database {path}: {clip(message, 200)}{tail}")


@contextmanager
def sigint_held() -> Iterator[list[int]]:
    """Hold Ctrl-C (SIGINT) for the duration of the block; the list tells whether one came.

    Only the main thread may set signal handlers (the app runs pages in other threads, where
    Ctrl-C is not delivered anyway), so elsewhere the block runs unprotected.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        signal.signal(signal.SIGINT, previous)


def _in_use_here(exc: BaseException) -> bool:
    """Whether DuckDB refused a file because an instance of this process has it open."""
    return "unique file handle conflict" in str(exc).lower()


class _Visits:
    """The process's in-memory DuckDB instance that visited files are attached to, and who
    uses each attachment (one lock for all: attaching, detaching and making cursors)."""

    lock = threading.Lock()
    host: duckdb.DuckDBPyConnection | None = None
    users: dict[str, list] = {}  # file (resolved) -> [alias, handles using it]

    @classmethod
    def _host(cls) -> duckdb.DuckDBPyConnection:
        """The in-memory instance, started by the first attach (call with :attr:`lock` held)."""
        if cls.host is None:
            cls.host = duckdb.connect(":memory:")
        return cls.host

    @classmethod
    def attach(cls, path: Path) -> str:
        """Attach ``path`` (or count one more user of its attachment); its alias. Raises what
        DuckDB raises (a lock held elsewhere, a file open in this process already)."""
        key = str(path.resolve())
        with cls.lock:
            if key in cls.users:
                cls.users[key][1] += 1
                return cls.users[key][0]
            alias = f"wb_visit_{len(cls.users)}_{abs(hash(key)) % 10**8}"
            cls._host().execute(f"ATTACH '{key.replace(chr(39), chr(39) * 2)}' AS \"{alias}\"")
            cls.users[key] = [alias, 1]
            return alias

    @classmethod
    def cursor(cls, alias: str) -> Cursor:
        with cls.lock:
            cur = cls._host().cursor()
        cur.execute(f'USE "{alias}"')
        return cur

    @classmethod
    def detach(cls, path: Path) -> None:
        """One user less; the last one detaches the file (a checkpoint, then the lock is free)."""
        key = str(path.resolve())
        with cls.lock:
            entry = cls.users.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] > 0:
                return
            # Forgotten only once detached: after a failed DETACH the next visit uses the
            # attachment and its close tries again, so the lock is never kept unknowingly.
            cls._host().execute(f'DETACH "{entry[0]}"')
            del cls.users[key]


class Database:
    """A project database file, opened once per process and closed with :meth:`close`.

    ``wait``: seconds to keep retrying (with backoff) while another process holds the file's
    lock; 0 (the CLI's choice) fails at once. See :data:`WRITER_WAIT`.
    ``visit``: one short unit of work on an existing, migrated project (the module docstring's
    visits); read-write, no migrations.
    ``create``: what may become a project (see the module docstring's "Only init creates").
    ``True`` (``init``): a missing file, or a DuckDB file holding nothing; ``None`` (the default,
    for scripts and tests that build a project in a new path): a missing file; ``False``
    (every command but ``init``, the app): nothing, the project must exist.
    """

    def __init__(self, path: str | Path, *, read_only: bool = False, migrate: bool = True,
                 wait: float = 0.0, visit: bool = False, create: bool | None = None):
        self.path = Path(path)
        self.read_only = read_only
        self._alias: str | None = None  # a visit's attachment (None: an ordinary open)
        self._cursors: list[Cursor] = []  # a visit's cursors, closed before it detaches
        if visit:
            if read_only or migrate:
                raise ValueError("a visit is read-write and applies no migrations")
            self._visit(float(wait))
            return
        if (read_only or create is False) and not self.path.exists():
            raise StoreError(
                f"project database {self.path} does not exist; create it with {{command}}",
                command=f"--db {self.path} init",
            )
        if self.path.is_symlink() and not self.path.exists():
            try:
                self.path.stat()
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise StoreError(f"{self.path} is a symbolic link loop; point {{field:db}} at the project file itself") from None
        if self.path.exists() and not self.path.is_file():
            raise StoreError(f"{self.path} is not a regular file; point {{field:db}} at a workbench project (.duckdb)")
        if not read_only:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder of project database {self.path}: "
                                 f"{exc.strerror}; {{set_field:db}} with a writable location") from None
        new = not self.path.exists()
        self._con = self._connect(read_only, float(wait))
        self._require_project(may_adopt=not read_only and (create is True or create is None and new))
        if migrate and not read_only:
            try:
                run_migrations(self)
            except WorkbenchError:
                self._con.close()
                raise
            except (duckdb.Error, RuntimeError, KeyboardInterrupt) as exc:
                self._con.close()
                raise self._translate(exc) from None

    def _require_project(self, *, may_adopt: bool) -> None:
        """Close and refuse unless the file is a project (or, ``may_adopt``, holds nothing yet).

        Only reads (:func:`~workbench.store.migrations.project_state`), so a refused file is left
        byte-identical: a DuckDB file of another program gets no table, not even
        ``schema_migrations``.
        """

        cur = self._con.cursor()
        try:
            state, names = project_state(cur)
        except (duckdb.Error, RuntimeError, KeyboardInterrupt) as exc:
            cur.close()
            self._con.close()
            raise self._translate(exc) from None
        cur.close()
        if state == FOREIGN:
            self._con.close()
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            raise StoreError(
                f"{self.path} is not a workbench project: it is a DuckDB database holding "
                f"{clip(shown, 120, quote=False)} and no workbench schema; it was left unchanged. "
                f"Point {{field:db}} at a workbench project, or create one in a new file with {{command}}",
                command="--db NEW.duckdb init")
        if state == EMPTY and not may_adopt:
            self._con.close()
            raise StoreError(
                f"{self.path} is an empty DuckDB file, not a workbench project; it was left unchanged. "
                f"Create the project in it with {{command}}", command=f"--db {self.path} init")

    def _visit(self, wait: float) -> None:
        """Attach the file to the process's instance (:class:`_Visits`), waiting like
        :meth:`_connect`; when an ordinary open of this process has it, share that instead."""
        if not self.path.is_file():
            raise StoreError(f"no project database at {self.path}; create one with {{command}}",
                             command=f"--db {self.path} init")
        deadline = time.monotonic() + max(wait, 0.0)
        delay = 0.05
        while True:
            try:
                self._alias = _Visits.attach(self.path)
                return
            except duckdb.Error as exc:
                if _in_use_here(exc):  # open in this process already: join that instance
                    self._con = self._connect(False, wait)
                    return
                if not isinstance(exc, duckdb.IOException) or "lock" not in str(exc).lower():
                    raise storage_error(self.path, exc) from None
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._locked(str(exc), wait) from None
                time.sleep(min(delay, left))
                delay = min(delay * 2, 1.0)

    def _locked(self, message: str, wait: float) -> StoreLockedError:
        """The error for a file another process holds (``message``: DuckDB's lock error, which
        names the holder), after waiting ``wait`` seconds for it."""
        waited = f" (waited {wait:g} s)" if wait > 0 else ""
        return StoreLockedError(
            f"project database {self.path} is in use by {_holder(message)}{waited}; "
            f"stop that process (a running {{command:app}} or another command) or wait "
            f"for it to finish, then try again")

    def _connect_here(self, read_only: bool) -> duckdb.DuckDBPyConnection:
        """``duckdb.connect``, waiting (up to :data:`IN_PROCESS_WAIT`) while a visit of this
        process has the file attached (DuckDB refuses a second instance of it)."""
        started = time.monotonic()
        delay = 0.02
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.Error as exc:
                if not _in_use_here(exc) or time.monotonic() - started > IN_PROCESS_WAIT:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    def _connect(self, read_only: bool, wait: float) -> duckdb.DuckDBPyConnection:
        deadline = time.monotonic() + max(wait, 0.0)
        delay = 0.05
        while True:
            try:
                return self._connect_here(read_only)
            except duckdb.IOException as exc:
                message = str(exc)
                if "not a valid duckdb database" in message.lower():
                    raise StoreError(
                        f"{self.path} is not a usable DuckDB project database (it is some other kind of "
                        f"file); point {{field:db}} at a workbench project or create one with {{command:init}}"
                    ) from None
                if "lock" not in message.lower():
                    raise storage_error(self.path, exc) from None
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._locked(message, wait) from None
                time.sleep(min(delay, left))
                delay = min(delay * 2, 1.0)
            except duckdb.Error as exc:
                if _in_use_here(exc):
                    raise StoreLockedError(
                        f"project database {self.path} is in use by this app (another page's unit of work, "
                        f"waited {IN_PROCESS_WAIT:g} s); try again in a moment") from None
                raise StoreError(
                    f"{self.path} is not a usable DuckDB project database ({clip(str(exc), 160)}); "
                    f"point {{field:db}} at a workbench project or create one with {{command:init}}"
                ) from None

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        if self._alias is None:
            self._con.close()
            return
        self._alias = None
        for cur in self._cursors:
            try:
                cur.close()
            except duckdb.Error:
                pass
        self._cursors = []
        try:
            _Visits.detach(self.path)
        except (duckdb.Error, RuntimeError) as exc:
            raise storage_error(self.path, exc) from None

    def __enter__(self) -> Database:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()
        if exc is not None and not isinstance(exc, WorkbenchError) and (
                isinstance(exc, duckdb.Error) or _is_interrupt(exc) and not isinstance(exc, KeyboardInterrupt)):
            raise self._translate(exc) from None

    def _translate(self, exc: BaseException) -> StoreError:
        if _is_interrupt(exc):
            return StoreInterrupted("interrupted; nothing was changed", stored=False)
        return storage_error(self.path, exc)

    # -- units of work ---------------------------------------------------------------------
    def cursor(self) -> Cursor:
        return self._new_cursor()

    def _new_cursor(self) -> Cursor:
        if self._alias is None:
            return self._con.cursor()
        cur = _Visits.cursor(self._alias)
        self._cursors.append(cur)  # a visit is short: a few cursors, all closed before it detaches
        return cur

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
        """One all-or-nothing unit of work on a fresh cursor.

        Any error rolls it back. Ctrl-C during the work becomes :class:`StoreInterrupted`
        (``stored=False``); during COMMIT it is held until the commit ends, so the message can
        say truthfully that everything was stored (``stored=True``). Failures of the file
        (damaged, not writable, disk full) become one-line :class:`StoreError`.
        """
        if self.read_only:
            raise StoreError(f"project database {self.path} is open read-only; cannot write")
        cur = self._new_cursor()
        try:
            cur.execute("BEGIN TRANSACTION")
        except duckdb.Error as exc:
            cur.close()
            raise storage_error(self.path, exc) from None
        try:
            yield cur
        except BaseException as exc:
            self._rollback(cur)
            if isinstance(exc, WorkbenchError):
                raise
            if _is_interrupt(exc):
                raise StoreInterrupted("interrupted; nothing was stored (the unit of work was rolled back)",
                                       stored=False) from None
            if isinstance(exc, duckdb.IOException | duckdb.InternalException):
                raise storage_error(self.path, exc) from None
            raise
        with sigint_held() as interrupted:
            try:
                cur.execute("COMMIT")
            except duckdb.Error as exc:
                self._rollback(cur)
                raise storage_error(self.path, exc, outcome="nothing was stored") from None
            finally:
                cur.close()
        if interrupted:
            raise StoreInterrupted("interrupted while storing; the commit had already started and finished, "
                                   "so everything was stored", stored=True)

    @staticmethod
    def _rollback(cur: Cursor) -> None:
        # A failed ROLLBACK (the file went away, the transaction was already aborted) must not
        # hide the error that caused it.
        try:
            cur.execute("ROLLBACK")
        except (duckdb.Error, RuntimeError):
            pass
        finally:
            cur.close()

    def query_df(self, sql: str, params: list | tuple | None = None) -> pd.DataFrame:
        """Run one read query and return its whole result as a DataFrame."""
        cur = self._new_cursor()
        try:
            return cur.execute(sql, params or []).df()
        finally:
            cur.close()

    def query_all(self, sql: str, params: list | tuple | None = None) -> list[tuple]:
        cur = self._new_cursor()
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

    return lazylibs.pandas.DataFrame({"id": lazylibs.pandas.Series(lazylibs.pandas.unique(lazylibs.pandas.Series(values, dtype=str)), dtype=str)})


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
        if isinstance(column.dtype, lazylibs.pandas.StringDtype) and column.isna().all():
            frame[name] = lazylibs.pandas.Series([None] * len(frame), index=frame.index, dtype=object)
    return frame
