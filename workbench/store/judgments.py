"""Table ``judgments``: one row per label, anchored to a character span of a source document.

A judgment's grade is NULL unless its status is ``ok``: a failed or unparseable LLM call is kept
with its error text and raw response, never turned into a grade.
"""

from __future__ import annotations

import pandas as pd

from workbench.store.database import (
    Cursor,
    Database,
    insert_frame,
    join_frame,
    where_equal,
)

JUDGMENT_COLUMNS = [
    "query_id", "doc_id", "start", "end", "grade", "source", "assessor", "prompt_hash", "model",
    "reason", "raw_response", "status", "error", "prompt_tokens", "completion_tokens",
    "cost_usd", "latency_ms", "chunk_id",
]
SOURCES = ("llm", "human", "imported")


def write_judgments(cur: Cursor, frame: pd.DataFrame) -> int:
    """Append judgments (any subset of :data:`JUDGMENT_COLUMNS`; query_id, doc_id, start, end,
    source and assessor are required) inside ``cur``'s transaction."""
    columns = [c for c in JUDGMENT_COLUMNS if c in frame.columns]
    out = frame[columns].copy()
    if "grade" in out:
        out["grade"] = out["grade"].astype("Int8")
    return insert_frame(cur, "judgments", out)


def read_judgments(db: Database, *, source: str | None = None, status: str | None = None) -> pd.DataFrame:
    """All judgments (optionally of one source/status), oldest first."""
    clause, params = where_equal(source=source, status=status)
    return db.query_df(
        f"SELECT judgment_id, {', '.join(chr(34) + c + chr(34) for c in JUDGMENT_COLUMNS)}, created_at "
        f"FROM judgments {clause} ORDER BY judgment_id",
        params,
    )


def stored_span_grades(cur: Cursor, keys: pd.DataFrame, source: str) -> pd.DataFrame:
    """Stored ``ok`` judgments of ``source`` on the same (query_id, doc_id, start, end, assessor)
    as ``keys``; returns those five columns and ``grade``. Runs on the caller's cursor."""
    frame = keys[["query_id", "doc_id", "start", "end", "assessor"]].drop_duplicates()
    return join_frame(
        cur, frame, "_wanted_spans",
        """SELECT j.query_id, j.doc_id, j.start::BIGINT AS start, j."end"::BIGINT AS "end",
                  j.assessor, j.grade::BIGINT AS grade
           FROM judgments j JOIN _wanted_spans w
             ON j.query_id = w.query_id AND j.doc_id = w.doc_id AND j.start = w.start
            AND j."end" = w."end" AND j.assessor = w.assessor
           WHERE j.source = ? AND j.status = 'ok'""",
        [source],
    )


def graded_judgments(db: Database, sources: list[str]) -> pd.DataFrame:
    """Status-``ok`` judgments with a grade from ``sources``:
    ``query_id, doc_id, start, end, grade, source, assessor, judgment_id``."""
    return db.query_df(
        """SELECT query_id, doc_id, start::BIGINT AS start, "end"::BIGINT AS "end", grade::BIGINT AS grade,
                  source, assessor, judgment_id
           FROM judgments
           WHERE status = 'ok' AND grade IS NOT NULL AND source IN (SELECT unnest(?::VARCHAR[]))
           ORDER BY judgment_id""",
        [list(sources)],
    )
