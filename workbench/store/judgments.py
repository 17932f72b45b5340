"""Judgments: one row per label, anchored to a character span of a source document.

A judgment's grade is NULL unless its status is ``ok``: a failed or unparseable LLM call is kept
with its error text and raw response, never turned into a grade.
"""

from __future__ import annotations

import pandas as pd

from workbench.store.database import Database, insert_frame, where_equal

JUDGMENT_COLUMNS = [
    "query_id", "doc_id", "start", "end", "grade", "source", "assessor", "prompt_hash", "model",
    "reason", "raw_response", "status", "error", "prompt_tokens", "completion_tokens",
    "cost_usd", "latency_ms", "chunk_id",
]
SOURCES = ("llm", "human", "imported")


def write_judgments(cur, frame: pd.DataFrame) -> int:
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
