"""The ``background_jobs`` table: one row per long job a page started in its own process
(:mod:`workbench.services.jobs`). Typed reads and writes; every write runs in the caller's
transaction (``cur``), every read opens its own cursor (``db``)."""

from __future__ import annotations

import json

from workbench.store.database import Cursor, Database, one_row

#: Columns a job's writer may set with :func:`update_job`.
JOB_FIELDS = ("state", "phase", "done", "total", "unit", "message", "error", "result", "pid", "attempt")
_COLUMNS = ("job_id", "kind", "request", "state", "phase", "done", "total", "unit", "message", "error", "result",
            "pid", "attempt", "started_by", "created_at", "started_at", "heartbeat_at", "finished_at")
_JSON = ("request", "error", "result")


def create_job(cur: Cursor, kind: str, request: dict, *, started_by: str | None = None) -> int:
    """A new ``queued`` job of ``kind`` for ``request`` (a JSON-able dict); its id (max + 1)."""
    job_id = int(one_row(cur.execute("SELECT coalesce(max(job_id), 0) + 1 FROM background_jobs").fetchone())[0])
    cur.execute("INSERT INTO background_jobs (job_id, kind, request, state, started_by) VALUES (?, ?, ?, 'queued', ?)",
                [job_id, kind, json.dumps(request, sort_keys=True), started_by])
    return job_id


def update_job(cur: Cursor, job_id: int, *, started: bool = False, finished: bool = False,
               heartbeat: bool = False, **fields) -> None:
    """Set ``fields`` (names in :data:`JOB_FIELDS`; ``error`` and ``result`` as dicts, stored as
    JSON) and optionally stamp started (each attempt), finished or heartbeat."""
    sets, params = [], []
    for name, value in fields.items():
        if name not in JOB_FIELDS:
            raise ValueError(f"unknown background job field {name}")
        sets.append(f'"{name}" = ?')
        params.append(json.dumps(value, sort_keys=True) if name in _JSON and value is not None else value)
    if started:  # (started and finished: an attempt that ended as it began)
        sets += ["started_at = current_timestamp"] + ([] if finished else ["finished_at = NULL"])
    if finished:
        sets.append("finished_at = current_timestamp")
    if heartbeat or started:
        sets.append("heartbeat_at = current_timestamp")
    if sets:
        cur.execute(f"UPDATE background_jobs SET {', '.join(sets)} WHERE job_id = ?", [*params, int(job_id)])


def _row(values) -> dict:
    job = dict(zip(_COLUMNS, values))
    for name in _JSON:
        job[name] = json.loads(job[name]) if job[name] is not None else None
    return job


def read_job(db: Database | Cursor, job_id: int) -> dict | None:
    """The job's row as a dict (``request``, ``error``, ``result`` decoded), or None."""
    sql = f"SELECT {', '.join(_COLUMNS)} FROM background_jobs WHERE job_id = ?"
    if isinstance(db, Database):
        rows = db.query_all(sql, [int(job_id)])
    else:
        rows = db.execute(sql, [int(job_id)]).fetchall()
    return _row(rows[0]) if rows else None


def read_jobs(db: Database, kinds: tuple[str, ...] | None = None, limit: int | None = None) -> list[dict]:
    """Jobs (of ``kinds``; None: all), newest first, at most ``limit``."""
    where, params = "", []
    if kinds:
        where = f"WHERE kind IN ({', '.join('?' for _ in kinds)})"
        params = list(kinds)
    tail = f" LIMIT {int(limit)}" if limit else ""
    rows = db.query_all(f"SELECT {', '.join(_COLUMNS)} FROM background_jobs {where} ORDER BY job_id DESC{tail}",
                        params)
    return [_row(r) for r in rows]


def count_documents(db: Database) -> int:
    """Documents in the project (the size of a chunking job, :func:`workbench.services.jobs.in_background`)."""
    return int(db.query_value("SELECT count(*) FROM documents") or 0)
