"""The process of one background job: ``python -m workbench.services.jobs --db DB --job ID``.

It reads the job's typed request from its row (:mod:`workbench.services.jobs.requests`), marks it
``running`` with its pid and attempt, runs it on a :class:`~workbench.store.brief.BriefDatabase`
(the file is held only inside each unit of work), writes progress to the row at most every
:data:`~workbench.services.jobs.launch.PROGRESS_SECONDS`, and ends the row ``finished`` (with the
result as data), ``failed`` (with the error as data, or for an unexpected exception its type and
text; the traceback goes to the log) or ``stopped``.

Stopping: SIGTERM (what :func:`workbench.services.jobs.stop` sends) and SIGINT become Ctrl-C in
the work: the unit of work in progress is rolled back, a COMMIT in progress is finished first
(:meth:`workbench.store.database.Database.transaction`). The handler is installed before the row
says ``running``, and ``stop`` signals only a ``running`` job: a job still ``queued`` (its process
may not have installed the handler yet, and SIGTERM's default would kill it, leaving the row
``stopping`` with no process: "interrupted") is only marked ``stopping``, which this process reads
when it marks the row and ends it ``stopped`` without running. A SIGTERM that comes after the row
says ``running`` but before the work is under way is held (:data:`_STOP`) and acted on then.
Exit codes: 0 finished, 1 failed, 2 bad arguments, 130 stopped.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

from workbench.errors import WorkbenchError, error_data, render_text
from workbench.services.jobs.launch import PROGRESS_SECONDS, pid_alive
from workbench.services.jobs.requests import KINDS, request_from_data
from workbench.store import background_jobs as store
from workbench.store.brief import BriefDatabase
from workbench.store.database import Database, StoreInterrupted

#: Seconds the job's own units of work wait for another process's lock before failing.
JOB_WAIT = 120.0
#: Seconds a progress write waits; a busy file skips that write (progress is advisory).
PROGRESS_WAIT = 2.0


class Reporter:
    """Writes the job's progress (:mod:`workbench.services.progress` factory) and notes to its row."""

    def __init__(self, path: Path, job_id: int, *, every: float = PROGRESS_SECONDS):
        self.path, self.job_id, self.every = path, job_id, every
        self.last = 0.0

    def write(self, *, force: bool = False, **fields) -> None:
        """Write ``fields``: at most every ``every`` seconds, waiting :data:`PROGRESS_WAIT` for a busy
        file; with ``force`` (a phase's start and end, a note) always, waiting :data:`JOB_WAIT`."""
        now = time.monotonic()
        if not force and now - self.last < self.every:
            return
        try:
            with Database(self.path, visit=True, migrate=False, wait=JOB_WAIT if force else PROGRESS_WAIT) as db, \
                    db.transaction() as tx:
                store.update_job(tx, self.job_id, heartbeat=True, **fields)
            self.last = now
        except StoreInterrupted:
            raise KeyboardInterrupt from None  # a stop that arrived during the write
        except WorkbenchError:
            pass  # the file stayed busy: the next write says it

    @contextmanager
    def progress(self, description: str, total: int | None = None, unit: str = "it"):
        done = 0
        self.write(force=True, phase=description, total=total, unit=unit, done=0)

        def advance(n: int = 1) -> None:
            nonlocal done
            done += int(n)
            self.write(done=done)

        try:
            yield advance
        finally:
            self.write(force=True, done=done)

    def notify(self, line: str) -> None:
        self.write(force=True, message=str(line)[:500])


_STOP: list[int] = []  # the SIGTERMs received
_ARMED: list[bool] = []  # non-empty once the work is under way (inside run()'s try)


def _on_term(signum, frame) -> None:
    """SIGTERM: stop as Ctrl-C does (raised here, or held by a COMMIT in progress); before the
    work is under way only noted, for :func:`run` to act on once it is."""
    _STOP.append(signum)
    if _ARMED:
        signal.raise_signal(signal.SIGINT)


def _stopped_message(request_cls, stored: bool = False, before: bool = False) -> str:
    how = "resume it to continue" if getattr(request_cls, "resumable", False) else "restart it to run it again"
    when = " before it began" if before else (" (its last write was stored)" if stored else "")
    return f"stopped{when}; {how}"


def _finish(path: Path, job_id: int, **fields) -> None:
    """The closing write: not cut by a second stop, retried while the file is busy."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with Database(path, visit=True, migrate=False, wait=JOB_WAIT) as db, db.transaction() as tx:
        store.update_job(tx, job_id, finished=True, **fields)


def run(path: Path, job_id: int) -> int:
    """Run job ``job_id`` of the project at ``path``; the exit code (module docstring)."""
    with Database(path, wait=JOB_WAIT, create=False) as db:  # migrations once, then only brief visits
        with db.transaction() as tx:
            row = store.read_job(tx, job_id)
            if row is None:
                raise WorkbenchError(f"no background job {job_id} in {path}")
            if row["state"] in ("running", "stopping") and row["pid"] not in (None, os.getpid()) \
                    and pid_alive(row["pid"]):
                # two Resumes at once: the job runs once, in the process that marked it first
                print(f"background job {job_id} already runs in process {row['pid']}", file=sys.stderr)
                return 0
            if row["state"] == "finished":
                # a Resume that comes late (the other process finished meanwhile): nothing to run,
                # and a finished job's row is never turned into a second attempt
                print(f"background job {job_id} has finished already", file=sys.stderr)
                return 0
            attempt = int(row["attempt"]) + 1
            if row["state"] == "stopping":
                # Stop came while the job was queued (stop() does not signal a queued job): this
                # attempt ends here, stopped, and a Resume runs the next one
                store.update_job(tx, job_id, state="stopped", pid=os.getpid(), attempt=attempt, phase=None,
                                 done=0, total=None, unit=None, error=None, started=True, finished=True,
                                 message=_stopped_message(KINDS.get(row["kind"]), before=True))
                print(f"background job {job_id} was stopped before it began", file=sys.stderr)
                return 130
            store.update_job(tx, job_id, state="running", pid=os.getpid(), attempt=attempt,
                             phase=None, done=0, total=None, unit=None, message=None, error=None, started=True)
    reporter = Reporter(path, job_id)
    request = None
    try:
        _ARMED.append(True)
        if _STOP:  # a SIGTERM that came once the row said running, before the work was under way
            raise KeyboardInterrupt
        request = request_from_data({"kind": row["kind"], **row["request"]})
        result = request.run(BriefDatabase(path, wait=JOB_WAIT), reporter.progress, reporter.notify)
    except (KeyboardInterrupt, StoreInterrupted) as exc:
        stored = isinstance(exc, StoreInterrupted) and exc.stored
        _finish(path, job_id, state="stopped", message=_stopped_message(KINDS.get(row["kind"]), stored))
        return 130
    except WorkbenchError as exc:
        _finish(path, job_id, state="failed", error=error_data(exc))
        return 1
    except Exception as exc:  # noqa: BLE001 - any failure ends the job in its row, never 'running'
        traceback.print_exc()
        _finish(path, job_id, state="failed",
                error={"kind": "WorkbenchError", "what": f"the job stopped on an unexpected error: "
                       f"{type(exc).__name__}: {str(exc)[:300]}", "fields": [], "hint": None, "command": None})
        return 1
    _finish(path, job_id, state="finished", result=result, message=None)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.services.jobs",
                                     description="Run one background job of a workbench project.")
    parser.add_argument("--db", required=True, help="the project database")
    parser.add_argument("--job", required=True, type=int, help="the job's id (table background_jobs)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _on_term)
    try:
        return run(Path(args.db), args.job)
    except WorkbenchError as exc:
        print(f"error: {render_text(str(exc))}", file=sys.stderr)
        return 1
