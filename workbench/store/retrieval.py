"""Run scope (level and chunking) and bulk reads of run rows for retrieval and pooling.

``store.runs.write_run`` records a run without its scope; the retrieval and import services
set it with :func:`set_run_scope` (the one place that writes it) in the same transaction
(migration 3 added the columns).
"""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.database import Database


def set_run_scope(cur, name: str, level: str, chunking: str | None) -> None:
    """Record that run ``name`` ranks ``level`` items ('chunk' or 'doc') of ``chunking``."""
    cur.execute("UPDATE runs SET level = ?, chunking = ? WHERE name = ?", [level, chunking, name])


def run_exists(db: Database, name: str) -> bool:
    return bool(db.query_value("SELECT count(*) FROM runs WHERE name = ?", [name]))


def chunking_exists(db: Database, name: str) -> bool:
    return bool(db.query_value("SELECT count(*) FROM chunkings WHERE name = ?", [name]))


def read_run_info(db: Database, names: list[str] | None = None) -> pd.DataFrame:
    """``name, retriever, stage, level, chunking, params (dict), rows, queries`` of runs.

    ``level`` NULL (a run written before migration 3 set a default) reads as 'chunk' when the
    run has chunk ids, else 'doc'.
    """
    where = "WHERE r.name IN (SELECT unnest(?::VARCHAR[]))" if names is not None else ""
    frame = db.query_df(
        f"""WITH counts AS (
                SELECT run, count(*) AS rows, count(DISTINCT query_id) AS queries,
                       count(chunk_id) AS chunk_rows
                FROM run_rows GROUP BY run)
            SELECT r.name, r.retriever, r.stage,
                   coalesce(r.level, CASE WHEN coalesce(c.chunk_rows, 0) > 0 THEN 'chunk' ELSE 'doc' END) AS level,
                   r.chunking, r.params::VARCHAR AS params, r.created_at,
                   coalesce(c.rows, 0) AS rows, coalesce(c.queries, 0) AS queries
            FROM runs r LEFT JOIN counts c ON c.run = r.name
            {where}
            ORDER BY r.created_at, r.name""",
        [list(names)] if names is not None else None,
    )
    frame["params"] = frame["params"].map(lambda v: json.loads(v) if isinstance(v, str) else {})
    return frame


def read_run_rows_many(db: Database, names: list[str], *, depth: int | None = None,
                       columns: list[str] | None = None) -> pd.DataFrame:
    """Rows of several runs as ``run_id, query_id, doc_id, chunk_id, rank, score``.

    ``depth`` keeps ranks ``<= depth`` (pooling reads only what it pools); ``columns`` picks a
    subset of those columns (fewer strings to move for millions of rows).
    """
    allowed = ["run_id", "query_id", "doc_id", "chunk_id", "rank", "score"]
    columns = columns or allowed
    unknown = [c for c in columns if c not in allowed]
    if unknown:
        raise ValueError(f"unknown run row columns {unknown}; choose from {allowed}")
    select = ", ".join("run AS run_id" if c == "run_id" else c for c in columns)
    cut = "AND rank <= ?" if depth is not None else ""
    params: list = [list(names)] + ([int(depth)] if depth is not None else [])
    return arrow_query_df(
        db,
        f"""SELECT {select} FROM run_rows
            WHERE run IN (SELECT unnest(?::VARCHAR[])) {cut}
            ORDER BY run, query_id, rank""",
        params,
    )


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
