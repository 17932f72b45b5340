"""Start, follow, stop and resume background jobs (the API is described in
:mod:`workbench.services.jobs`)."""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workbench.config import load_settings
from workbench.errors import InputError, WorkbenchError, error_from_data
from workbench.services import access, processes
from workbench.services.jobs.requests import KINDS, request_data, request_from_data
from workbench.store import background_jobs as store
from workbench.store.database import Database

#: States of a job whose process should be alive.
ACTIVE = ("queued", "running", "stopping")
#: Seconds between two progress writes of a job.
PROGRESS_SECONDS = 1.0
#: Seconds a launcher's or reader's short unit of work waits for another process's lock.
WAIT = 30.0


#: Kinds that always run in the background: they load a model and encode (minutes, not seconds).
ALWAYS = ("dense",)


def in_background(kind: str, size: int | None) -> bool:
    """Whether a page runs work of ``kind`` and ``size`` as a background job: ``dense`` always;
    the others when ``size`` (documents to chunk, run rows to pool or fuse, documents x cells of a
    sweep, kilobytes of a file or folder to import) is at least ``[jobs] background_from`` (0: always). Below it the work takes about a
    second, less than starting a process, so the page does it while the user waits."""

    if kind in ALWAYS:
        return True
    threshold = int(load_settings().get("jobs", "background_from"))
    return threshold <= 0 or (size is not None and int(size) >= threshold)


def kilobytes(path) -> int:
    """Kilobytes of a file, or of the files of a folder (links not followed): the size of an import job."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size // 1000
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += (Path(root) / name).lstat().st_size
            except OSError:
                pass
    return total // 1000


def documents(db) -> int:
    """Documents in the project: the size of a chunking job (:func:`in_background`)."""
    with _Use(db) as opened:
        return store.count_documents(opened)


def _open(db_path, *, migrate: bool = False) -> Database:
    if isinstance(db_path, Database):
        return db_path
    path = Path(db_path)
    if not path.exists():
        raise InputError(f"no project database at {path}; create one with {{command}}", command=f"--db {path} init")
    if migrate:  # the table of jobs may be newer than the project
        return Database(path, wait=WAIT, create=False)
    return Database(path, visit=True, migrate=False, wait=WAIT)


class _Use:
    """``with _Use(target) as db``: an open Database as is, or a path visited briefly
    (``migrate``: opened ordinarily, so the project gets the migrations it lacks)."""

    def __init__(self, target, *, migrate: bool = False):
        self.target, self.migrate, self.db = target, migrate, None

    def __enter__(self) -> Database:
        self.db = _open(self.target, migrate=self.migrate)
        return self.db

    def __exit__(self, *exc) -> None:
        if self.db is not self.target:
            self.db.close()


@dataclass(frozen=True)
class Launch:
    """A job process this process started: its job id, pid, log file and when."""

    job_id: int
    pid: int
    log: str
    started: float = field(default_factory=time.time)

    def as_dict(self) -> dict:
        return asdict(self)


def command(db_path, job_id: int) -> list[str]:
    """``python -m workbench.services.jobs --db DB --job ID``."""
    return [sys.executable, "-m", "workbench.services.jobs", "--db", str(db_path), "--job", str(int(job_id))]


def _spawn(db_path, job_id: int) -> Launch:
    log = processes.new_log(f"workbench-job-{job_id}")
    return Launch(int(job_id), processes.spawn(command(db_path, job_id), log=log), str(log))


def _actor_name() -> str | None:
    return access.current_actor().name or None


def start(db_path, request) -> Launch:
    """Store the job and launch its process (module doc of :mod:`workbench.services.jobs`);
    raises ``PermissionDenied`` when the caller may not do ``request.action``."""
    access.require(request.action)
    actor = _actor_name()
    with _Use(db_path, migrate=True) as db:
        with db.transaction() as tx:
            job_id = store.create_job(tx, request.kind, request_data(request), started_by=actor)
    path = db_path.path if isinstance(db_path, Database) else db_path
    launch = _spawn(path, job_id)
    _record_pid(db_path, job_id, launch.pid)
    return launch


def _record_pid(db_path, job_id: int, pid: int) -> None:
    """The launcher's pid for a queued job (the process writes its own when it starts)."""
    with _Use(db_path) as db, db.transaction() as tx:
        row = store.read_job(tx, job_id)
        if row is not None and row["state"] == "queued":
            store.update_job(tx, job_id, pid=pid, heartbeat=True)


collect = processes.collect
pid_alive = processes.pid_alive


def _live(row: dict) -> dict:
    """The row as a page reads it: ``alive``, ``resumable``, ``title``, ``error`` rebuilt, and a
    queued/running/stopping job whose process is gone shown as ``interrupted``."""
    cls = KINDS.get(row["kind"])
    row["resumable"] = bool(getattr(cls, "resumable", False))
    try:
        row["title"] = request_from_data({"kind": row["kind"], **(row["request"] or {})}).title()
    except WorkbenchError:
        row["title"] = f"{row['kind']} job {row['job_id']}"
    row["alive"] = row["state"] in ACTIVE and pid_alive(row.get("pid"))
    if row["state"] in ACTIVE and not row["alive"]:
        row["state"] = "interrupted"
    if isinstance(row.get("error"), dict):
        row["error"] = error_from_data(row["error"])
    return row


def job(db_path, job_id: int) -> dict:
    """The job's row (module doc); an unknown id is an InputError."""
    collect()
    with _Use(db_path) as db:
        row = store.read_job(db, job_id)
    if row is None:
        raise InputError(f"no background job {job_id}")
    return _live(row)


def jobs(db_path, kinds: tuple[str, ...] | None = None, limit: int | None = 20) -> list[dict]:
    """Jobs of ``kinds`` (None: all), newest first."""
    collect()
    with _Use(db_path) as db:
        return [_live(r) for r in store.read_jobs(db, kinds, limit)]


def stop(db_path, job_id: int) -> dict:
    """Ask the job to stop (module doc); returns its row.

    Only a ``running`` job is sent SIGTERM: its process installed its handler before it marked
    the row running. A ``queued`` job's process may still be starting (SIGTERM's default action
    would kill it, leaving the row ``stopping`` with no process), so it is only marked
    ``stopping``; the process reads that when it marks the row and ends the job ``stopped``
    without running (:mod:`workbench.services.jobs.process`). The state is read and written in
    one transaction, so the process cannot mark the row running between the two."""
    row = job(db_path, job_id)
    access.require(KINDS[row["kind"]].action if row["kind"] in KINDS else "build")
    if row["alive"]:
        with _Use(db_path) as db, db.transaction() as tx:
            current = store.read_job(tx, job_id)
            signal_pid = current["pid"] if current["state"] == "running" else None
            if current["state"] in ("queued", "running"):
                store.update_job(tx, job_id, state="stopping")
        if signal_pid:
            try:
                os.kill(int(signal_pid), signal.SIGTERM)
            except ProcessLookupError:
                pass
    elif row["state"] == "interrupted":
        with _Use(db_path) as db, db.transaction() as tx:
            store.update_job(tx, job_id, state="stopped", finished=True,
                             message="stopped (its process had ended)")
    return job(db_path, job_id)


def resume(db_path, job_id: int) -> Launch:
    """Run the job's request again for the same row (module doc). A job still running, or
    finished, is refused."""
    row = job(db_path, job_id)
    access.require(KINDS[row["kind"]].action if row["kind"] in KINDS else "build")
    if row["alive"]:
        raise InputError(f"background job {job_id} is still running; stop it first or wait for it")
    if row["state"] == "finished":
        raise InputError(f"background job {job_id} has finished; start a new one instead")
    with _Use(db_path) as db, db.transaction() as tx:
        store.update_job(tx, job_id, state="queued", message=None, error=None, pid=None)
    path = db_path.path if isinstance(db_path, Database) else db_path
    launch = _spawn(path, job_id)
    _record_pid(db_path, job_id, launch.pid)
    return launch


def problem(launch: Launch | dict | None) -> str | None:
    """The end of the output of a process this process launched that died without writing its
    state (a crash before it could): its last lines; None otherwise."""
    if not launch:
        return None
    launch = Launch(**launch) if isinstance(launch, dict) else launch
    code = processes.returncode(launch.pid)
    if code in (None, 0):
        return None
    return processes.log_tail(launch.log) or f"the job stopped with exit code {code}"
