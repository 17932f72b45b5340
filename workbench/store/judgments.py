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


def _label_filter(scope: str | None, query_ids, grades, sources, assessors) -> tuple[str, list]:
    """``WHERE`` of :func:`read_labels` and friends: ok judgments, the reader's scope (None: all;
    else that name's own non-LLM, non-imported labels and the imported ones), then each filter."""
    where = ["j.status = 'ok'"]
    params: list[str | list[str] | list[int]] = []
    if scope is not None:
        where.append("(j.source = 'imported' OR (j.source NOT IN ('llm', 'imported') AND j.assessor = ?))")
        params.append(str(scope))
    for column, values in (("assessor", assessors), ("query_id", query_ids), ("source", sources)):
        if values is not None:
            where.append(f"j.{column} IN (SELECT unnest(?::VARCHAR[]))")
            params.append([str(v) for v in values])
    if grades is not None:
        where.append("j.grade IN (SELECT unnest(?::INTEGER[]))")
        params.append([int(g) for g in grades])
    return "WHERE " + " AND ".join(where), params


def read_labels(db: Database, *, scope: str | None = None, query_ids=None, grades=None, sources=None,
                assessors=None, limit: int | None = None, offset: int = 0) -> pd.DataFrame:
    """Ok judgments in the reader's ``scope`` (see :func:`_label_filter`) matching every filter
    (None: no filter), oldest first, with their document's title (None when the document is
    missing): ``judgment_id, query_id, doc_id, title, start, end, grade, source, assessor,
    created_at``; rows ``offset`` to ``offset + limit`` (None: all)."""
    where, params = _label_filter(scope, query_ids, grades, sources, assessors)
    page = "" if limit is None else f"LIMIT {int(limit)} OFFSET {int(offset)}"
    return db.query_df(
        f"""SELECT j.judgment_id, j.query_id, j.doc_id, d.title, j.start, j."end", j.grade, j.source,
                   j.assessor, j.created_at
            FROM (SELECT * FROM judgments j {where} ORDER BY j.judgment_id {page}) j
            LEFT JOIN documents d ON d.doc_id = j.doc_id
            ORDER BY j.judgment_id""",
        params,
    )


def count_labels(db: Database, *, scope: str | None = None, query_ids=None, grades=None, sources=None,
                 assessors=None) -> int:
    """How many rows :func:`read_labels` returns with the same arguments and no limit."""
    where, params = _label_filter(scope, query_ids, grades, sources, assessors)
    return int(db.query_value(f"SELECT count(*) FROM judgments j {where}", params))


def label_counts_by_query(db: Database, *, scope: str | None = None) -> pd.DataFrame:
    """``query_id, labels``: ok judgments per query in the reader's ``scope`` (queries with none absent)."""
    where, params = _label_filter(scope, None, None, None, None)
    return db.query_df(f"SELECT j.query_id, count(*) AS labels FROM judgments j {where} GROUP BY j.query_id",
                       params)


def label_values(db: Database, column: str, *, scope: str | None = None) -> list[str]:
    """The distinct ``source`` or ``assessor`` values of the ok judgments in ``scope``, sorted."""
    if column not in ("source", "assessor"):
        raise ValueError(f"no label facet {column!r}")
    where, params = _label_filter(scope, None, None, None, None)
    return sorted(str(v) for (v,) in db.query_all(f"SELECT DISTINCT j.{column} FROM judgments j {where}", params))
