"""Judge jobs, their per-sample answers (the response cache) and their judgments.

Tables (migration 4 in :mod:`workbench.store.migrations`):

``judge_jobs``     one row per (pool, judge configuration): state, counts, tokens, cost, budget,
                   batch id, the process running it (``pid``, ``heartbeat_at``) and its times.
``judge_samples``  one row per (job, pair, sample): what one call (or the cache) answered, with
                   ``cache_key``; ``ok`` rows are the response cache of every later job.
``judgments``      gains ``job_id`` (the job that made an LLM judgment), ``samples`` (the
                   sample grades, JSON), ``grade_spread`` (max - min of the ok sample grades),
                   ``probabilities`` / ``expected_grade`` (single-token prompts) and ``cached``
                   (how many of its samples came from the cache).

Cache key (computed here, in SQL, so that estimates and look-ups never load texts):
``sha256(prefix || sha256(query_text || 0x1f || description) || 0x1f || sha256(passage_text))``
where ``prefix`` is ``model 0x1f prompt_hash 0x1f params_json 0x1f`` (see
:func:`workbench.services.judge.jobs.cache_prefix`). The pool, chunking and job are not part of it,
so the same texts judged the same way are never sent twice.
"""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.database import Cursor, Database, insert_frame

JOB_COUNTERS = ("judged", "ok", "invalid", "failed", "cached", "sent", "http_calls", "prompt_tokens",
                "completion_tokens", "cost_usd")
JOB_FIELDS = ("state", "total", "budget_usd", "batch_id", "message", "pid", "base_url")
SAMPLE_COLUMNS = ["job_id", "query_id", "doc_id", "chunk_id", "start", "end", "sample", "cache_key", "status",
                  "grade", "reason", "raw_response", "error", "probabilities", "expected_grade", "prompt_tokens",
                  "completion_tokens", "latency_ms", "cost_usd", "http_calls", "from_cache", "cached_from"]
PAIR = ["query_id", "doc_id", "chunk_id"]


# -- jobs -----------------------------------------------------------------------------------

def create_job(cur: Cursor, *, pool: str, judge: str, model: str, base_url: str | None, prompt_id: str,
               prompt_hash: str, params: dict, samples: int, aggregate: str, config_key: str,
               budget_usd: float | None) -> int:
    cur.execute(
        """INSERT INTO judge_jobs (pool, judge, model, base_url, prompt_id, prompt_hash, params, samples,
                                   aggregate, config_key, budget_usd)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING job_id""",
        [pool, judge, model, base_url, prompt_id, prompt_hash, json.dumps(params, sort_keys=True), samples,
         aggregate, config_key, budget_usd],
    )
    return int(cur.fetchall()[0][0])


_JOB_SELECT = """SELECT job_id, pool, judge, model, base_url, prompt_id, prompt_hash, params::VARCHAR AS params,
                        samples, aggregate, config_key, state, total, judged, ok, invalid, failed, cached, sent,
                        http_calls, prompt_tokens, completion_tokens, cost_usd, budget_usd, batch_id, message,
                        pid, heartbeat_at, created_at, started_at, finished_at
                 FROM judge_jobs"""


def _job_dicts(frame: pd.DataFrame) -> list[dict]:
    out = []
    for row in frame.to_dict("records"):
        clean = {k: (None if (not isinstance(v, (list, dict, str)) and pd.isna(v)) else v) for k, v in row.items()}
        params = clean.get("params")
        clean["params"] = json.loads(params) if params else {}
        out.append(clean)
    return out


def find_job(db: Database, pool: str, config_key: str) -> dict | None:
    """The latest job of ``pool`` with this judge configuration, or None."""
    jobs = _job_dicts(db.query_df(f"{_JOB_SELECT} WHERE pool = ? AND config_key = ? ORDER BY job_id DESC LIMIT 1",
                                  [pool, config_key]))
    return jobs[0] if jobs else None


def read_job(db: Database, job_id: int) -> dict | None:
    jobs = _job_dicts(db.query_df(f"{_JOB_SELECT} WHERE job_id = ?", [int(job_id)]))
    return jobs[0] if jobs else None


def read_jobs(db: Database, pool: str | None = None) -> list[dict]:
    if pool is None:
        return _job_dicts(db.query_df(f"{_JOB_SELECT} ORDER BY job_id"))
    return _job_dicts(db.query_df(f"{_JOB_SELECT} WHERE pool = ? ORDER BY job_id", [pool]))


def job_state(cur: Cursor, job_id: int) -> str | None:
    rows = cur.execute("SELECT state FROM judge_jobs WHERE job_id = ?", [int(job_id)]).fetchall()
    return rows[0][0] if rows else None


def update_job(cur: Cursor, job_id: int, *, started: bool = False, finished: bool = False,
               heartbeat: bool = False, **fields) -> None:
    """Set ``fields`` (names in :data:`JOB_FIELDS`) and optionally stamp started/finished/heartbeat."""
    sets, params = [], []
    for name, value in fields.items():
        if name not in JOB_FIELDS:
            raise ValueError(f"unknown job field {name}")
        sets.append(f'"{name}" = ?')
        params.append(value)
    if started:
        sets.append("started_at = coalesce(started_at, current_timestamp)")
    if finished:
        sets.append("finished_at = current_timestamp")
    if heartbeat:
        sets.append("heartbeat_at = current_timestamp")
    if not started and not finished and fields.get("state") in ("running", "batch"):
        sets.append("finished_at = NULL")
    if sets:
        cur.execute(f"UPDATE judge_jobs SET {', '.join(sets)} WHERE job_id = ?", [*params, int(job_id)])


def add_job_counts(cur: Cursor, job_id: int, **deltas) -> None:
    """Add ``deltas`` (names in :data:`JOB_COUNTERS`) to the job's counters."""
    sets, params = [], []
    for name, value in deltas.items():
        if name not in JOB_COUNTERS:
            raise ValueError(f"unknown job counter {name}")
        if value:
            sets.append(f'"{name}" = "{name}" + ?')
            params.append(value)
    sets.append("heartbeat_at = current_timestamp")
    cur.execute(f"UPDATE judge_jobs SET {', '.join(sets)} WHERE job_id = ?", [*params, int(job_id)])


def recount_job(cur: Cursor, job_id: int) -> None:
    """Set the judgment counters (judged/ok/invalid/failed) from the job's stored judgments."""
    cur.execute(
        """UPDATE judge_jobs SET
               judged = (SELECT count(*) FROM judgments WHERE job_id = ?),
               ok = (SELECT count(*) FROM judgments WHERE job_id = ? AND status = 'ok'),
               invalid = (SELECT count(*) FROM judgments WHERE job_id = ? AND status = 'invalid'),
               failed = (SELECT count(*) FROM judgments WHERE job_id = ? AND status = 'failed')
           WHERE job_id = ?""",
        [int(job_id)] * 5,
    )


# -- work: pending units, texts, cache ------------------------------------------------------

def _pairs_sql(level: str, limit: int | None) -> str:
    """The job's pool pairs (ids and priority only: no spans, no texts, so that paging through a
    large pool never reads its documents), best priority first. A pair whose query, chunk or
    document is gone is left out."""
    chunk = "AND p.chunk_id IN (SELECT chunk_id FROM chunks)" if level == "chunk" else ""
    lim = f"LIMIT {int(limit)}" if limit is not None else ""
    return f"""
        SELECT p.query_id, p.doc_id, p.chunk_id, p.priority
        FROM pool_pairs p
        WHERE p.pool = ? AND p.query_id IN (SELECT query_id FROM queries)
          AND p.doc_id IN (SELECT doc_id FROM documents) {chunk}
        ORDER BY p.priority, p.query_id, p.doc_id, p.chunk_id
        {lim}"""


_DONE = """ANTI JOIN (SELECT query_id, doc_id, chunk_id, sample FROM judge_samples WHERE job_id = ?) done
            ON done.query_id = u.query_id AND done.doc_id = u.doc_id
           AND done.chunk_id IS NOT DISTINCT FROM u.chunk_id AND done.sample = s.sample"""


#: The order units are judged in; also the key that pages through them (``after``). A missing
#: chunk id (document-level pools) orders as '' so that the key compares without NULLs.
UNIT_ORDER = ("priority", "query_id", "doc_id", "chunk_id", "sample")


def _units_sql(level: str, limit: int | None, with_text: bool, page: int | None, after: bool = False) -> str:
    """Pending units, at most ``page`` (after the unit key ``after`` when given: keyset paging,
    so that a page never repeats the units of earlier pages even before their answers are
    stored); texts are read and hashed for those rows only."""
    texts = ", query_text, description, passage" if with_text else ""
    cut = f"LIMIT {int(page)}" if page is not None else ""
    # Spans are looked up for the page's units only (a chunk's offsets, or the whole document).
    if level == "chunk":
        span, chunks = 'k.start AS start, k."end" AS "end"', "JOIN chunks k ON k.chunk_id = t.chunk_id"
    else:
        span, chunks = '0 AS start, length(d.text) AS "end"', ""
    keyset = ("WHERE (u.priority, u.query_id, u.doc_id, coalesce(u.chunk_id, ''), s.sample) > (?, ?, ?, ?, ?)"
              if after else "")
    return f"""
        WITH todo AS (
            SELECT u.*, s.sample::INTEGER AS sample
            FROM ({_pairs_sql(level, limit)}) u CROSS JOIN range(?) s(sample)
            {_DONE}
            {keyset}
            ORDER BY u.priority, u.query_id, u.doc_id, coalesce(u.chunk_id, ''), s.sample {cut}),
        spans AS (
            SELECT t.*, {span}, q.text AS query_text, q.description AS description, d.text AS doc_text
            FROM todo t JOIN queries q ON q.query_id = t.query_id JOIN documents d ON d.doc_id = t.doc_id
            {chunks}),
        texts AS (
            SELECT * EXCLUDE (doc_text), substr(doc_text, start + 1, "end" - start) AS passage FROM spans)
        SELECT query_id, doc_id, chunk_id, start, "end", priority, sample,
               sha256(? || sha256(coalesce(query_text, '') || chr(31) || coalesce(description, ''))
                      || chr(31) || sha256(passage)) AS cache_key,
               length(coalesce(query_text, '')) + length(coalesce(description, '')) + length(passage)
                   AS text_chars{texts}
        FROM texts
        ORDER BY priority, query_id, doc_id, coalesce(chunk_id, ''), sample"""


def unit_key(unit) -> tuple:
    """The paging key of a unit (a row with the :data:`UNIT_ORDER` fields), for ``after``."""
    chunk = unit["chunk_id"]
    chunk = "" if chunk is None or (isinstance(chunk, float) and chunk != chunk) else str(chunk)
    return (int(unit["priority"]), str(unit["query_id"]), str(unit["doc_id"]), chunk, int(unit["sample"]))


def pending_units(db: Database, *, job_id: int, pool: str, level: str, prefix: str, samples: int,
                  limit: int | None, with_text: bool = False, page: int | None = None,
                  after: tuple | None = None) -> pd.DataFrame:
    """Units (pair x sample) of the job's first ``limit`` pool pairs that have no stored sample in
    the job, in priority order (at most ``page`` of them, and only those after the key ``after``
    from :func:`unit_key`): ``query_id, doc_id, chunk_id, start, end, priority, sample,
    cache_key, text_chars`` (plus ``query_text, description, passage`` when ``with_text``)."""
    params = [pool, int(samples), int(job_id), *(after or ()), prefix]
    return db.query_df(_units_sql(level, limit, with_text, page, after is not None), params)


def count_pending_units(db: Database, *, job_id: int, pool: str, level: str, samples: int,
                        limit: int | None) -> int:
    """How many units :func:`pending_units` would return (no texts or keys computed)."""
    return int(db.query_value(
        f"""SELECT count(*) FROM ({_pairs_sql(level, limit)}) u CROSS JOIN range(?) s(sample) {_DONE}""",
        [pool, int(samples), int(job_id)]))


def count_pool_pairs_for_job(db: Database, pool: str, level: str, limit: int | None) -> int:
    return int(db.query_value(f"SELECT count(*) FROM ({_pairs_sql(level, limit)})", [pool]))


def unit_texts(db: Database, *, pool: str, level: str, keys: pd.DataFrame) -> pd.DataFrame:
    """``query_id, doc_id, chunk_id, query_text, description, passage`` for the units in ``keys``
    (which carry ``start`` and ``end``)."""
    cur = db.cursor()
    try:
        cur.register("_unit_keys", keys[PAIR + ["start", "end"]].drop_duplicates())
        return cur.execute(
            """SELECT k.query_id, k.doc_id, k.chunk_id, q.text AS query_text, q.description AS description,
                      substr(d.text, k.start + 1, k."end" - k.start) AS passage
               FROM _unit_keys k JOIN queries q ON q.query_id = k.query_id JOIN documents d ON d.doc_id = k.doc_id"""
        ).df()
    finally:
        cur.close()


def cache_hits(db: Database, keys: pd.DataFrame) -> pd.DataFrame:
    """The earliest ``ok`` stored answer per (cache_key, sample) among ``keys``."""
    if keys.empty:
        return pd.DataFrame(columns=["cache_key", "sample", "sample_id", "grade", "reason", "raw_response",
                                     "probabilities", "expected_grade"])
    cur = db.cursor()
    try:
        cur.register("_cache_keys", keys[["cache_key", "sample"]].drop_duplicates())
        return cur.execute(
            """SELECT s.cache_key, s.sample, arg_min(s.sample_id, s.sample_id) AS sample_id,
                      arg_min(s.grade, s.sample_id) AS grade, arg_min(s.reason, s.sample_id) AS reason,
                      arg_min(s.raw_response, s.sample_id) AS raw_response,
                      arg_min(s.probabilities, s.sample_id) AS probabilities,
                      arg_min(s.expected_grade, s.sample_id) AS expected_grade
               FROM judge_samples s SEMI JOIN _cache_keys k ON k.cache_key = s.cache_key AND k.sample = s.sample
               WHERE s.status = 'ok' AND NOT s.from_cache
               GROUP BY s.cache_key, s.sample""",
        ).df()
    finally:
        cur.close()


def write_samples(cur: Cursor, frame: pd.DataFrame) -> int:
    out = frame.reindex(columns=SAMPLE_COLUMNS).copy()
    out["grade"] = out["grade"].astype("Int8")
    return insert_frame(cur, "judge_samples", out)


JOB_JUDGMENT_COLUMNS = [
    "query_id", "doc_id", "chunk_id", "start", "end", "grade", "source", "assessor", "prompt_hash", "model",
    "reason", "raw_response", "status", "error", "prompt_tokens", "completion_tokens", "cost_usd", "latency_ms",
    "job_id", "samples", "grade_spread", "probabilities", "expected_grade", "cached",
]


def write_job_judgments(cur: Cursor, frame: pd.DataFrame) -> int:
    """Append a job's judgments (columns :data:`JOB_JUDGMENT_COLUMNS`)."""
    if frame.empty:
        return 0
    out = frame.reindex(columns=JOB_JUDGMENT_COLUMNS).copy()
    out["grade"] = out["grade"].astype("Int8")
    return insert_frame(cur, "judgments", out)


def complete_pairs(cur: Cursor, job_id: int, samples: int, keys: pd.DataFrame) -> pd.DataFrame:
    """Every stored sample of the pairs in ``keys`` that have all ``samples`` samples in the job
    and no judgment of the job yet, ordered by pair and sample."""
    if keys.empty:
        return pd.DataFrame()
    cur.register("_done_keys", keys[PAIR].drop_duplicates())
    try:
        return cur.execute(
            """WITH mine AS (
                   SELECT s.* FROM judge_samples s
                   SEMI JOIN _done_keys k ON k.query_id = s.query_id AND k.doc_id = s.doc_id
                        AND k.chunk_id IS NOT DISTINCT FROM s.chunk_id
                   WHERE s.job_id = ?),
               full_pairs AS (
                   SELECT query_id, doc_id, chunk_id FROM mine GROUP BY ALL HAVING count(*) >= ?)
               SELECT m.* FROM mine m
               SEMI JOIN full_pairs f ON f.query_id = m.query_id AND f.doc_id = m.doc_id
                    AND f.chunk_id IS NOT DISTINCT FROM m.chunk_id
               ANTI JOIN (SELECT query_id, doc_id, chunk_id FROM judgments WHERE job_id = ?) j
                    ON j.query_id = m.query_id AND j.doc_id = m.doc_id AND j.chunk_id IS NOT DISTINCT FROM m.chunk_id
               ORDER BY m.query_id, m.doc_id, m.chunk_id, m.sample""",
            [int(job_id), int(samples), int(job_id)],
        ).df()
    finally:
        cur.unregister("_done_keys")


def delete_retryable(cur: Cursor, job_id: int) -> int:
    """Drop the job's failed and invalid samples and the judgments of their pairs (they are
    judged again); returns how many samples were dropped."""
    n = cur.execute("SELECT count(*) FROM judge_samples WHERE job_id = ? AND status <> 'ok'",
                    [int(job_id)]).fetchall()[0][0]
    if not n:
        return 0
    cur.execute(
        """DELETE FROM judgments j WHERE j.job_id = ? AND EXISTS (
               SELECT 1 FROM judge_samples s WHERE s.job_id = j.job_id AND s.status <> 'ok'
               AND s.query_id = j.query_id AND s.doc_id = j.doc_id AND s.chunk_id IS NOT DISTINCT FROM j.chunk_id)""",
        [int(job_id)],
    )
    cur.execute("DELETE FROM judge_samples WHERE job_id = ? AND status <> 'ok'", [int(job_id)])
    return int(n)


def job_failures(db: Database, job_id: int, limit: int | None = None) -> pd.DataFrame:
    """The job's failed and invalid samples with their error and raw reply."""
    lim = f"LIMIT {int(limit)}" if limit else ""
    return db.query_df(
        f"""SELECT query_id, doc_id, chunk_id, sample, status, error, raw_response, http_calls, created_at
            FROM judge_samples WHERE job_id = ? AND status <> 'ok'
            ORDER BY query_id, doc_id, chunk_id, sample {lim}""",
        [int(job_id)],
    )


def job_judgments(db: Database, job_id: int) -> pd.DataFrame:
    return db.query_df(
        """SELECT query_id, doc_id, chunk_id, start, "end", grade, status, reason, error, samples, grade_spread,
                  probabilities, expected_grade, cached, prompt_tokens, completion_tokens, cost_usd
           FROM judgments WHERE job_id = ? ORDER BY query_id, doc_id, chunk_id""",
        [int(job_id)],
    )


# -- export ---------------------------------------------------------------------------------

def export_judgment_rows(db: Database, *, pool: str | None, sources: list[str]) -> pd.DataFrame:
    """Judgments for ``judgments.jsonl`` export (see :mod:`workbench.services.judge.export`).

    With ``pool``: the judgments of the pool's judge jobs, plus other judgments (human, imported)
    of a pooled (query, document) whose chunk is unknown or pooled for that query.
    """
    pool_filter = ""
    params: list = [list(sources)]
    if pool is not None:
        pool_filter = """AND (j.job_id IN (SELECT job_id FROM judge_jobs WHERE pool = ?)
                         OR (j.job_id IS NULL AND EXISTS (
                             SELECT 1 FROM pool_pairs p WHERE p.pool = ? AND p.query_id = j.query_id
                             AND p.doc_id = j.doc_id
                             AND (j.chunk_id IS NULL OR p.chunk_id IS NULL OR p.chunk_id = j.chunk_id))))"""
        params += [pool, pool]
    return db.query_df(
        f"""SELECT j.query_id, j.doc_id, j.chunk_id, j.start, j."end", j.grade, j.status, j.source, j.assessor,
                   j.model, j.prompt_hash AS prompt_version, j.reason, j.error, j.prompt_tokens,
                   j.completion_tokens, j.latency_ms, j.cost_usd,
                   CASE WHEN j.source = 'human' THEN coalesce(ev.evidence::VARCHAR, '[]') END AS evidence,
                   j.raw_response
            FROM judgments j
            LEFT JOIN (SELECT judgment_id, any_value(evidence) AS evidence FROM label_events
                       WHERE judgment_id IS NOT NULL AND evidence IS NOT NULL GROUP BY judgment_id) ev
                ON ev.judgment_id = j.judgment_id
            WHERE j.source IN (SELECT unnest(?::VARCHAR[])) {pool_filter}
            ORDER BY j.query_id, j.doc_id, j.start, j."end", j.judgment_id""",
        params,
    )
