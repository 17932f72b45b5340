"""Tables ``runs`` and ``run_rows``: ranked results of a retriever (ours or imported).

A run ranks either whole documents (``level='doc'``, ``chunk_id`` NULL) or the chunks of one
chunking (``level='chunk'``). :func:`write_run` records a run and its rows; its scope (level and
chunking, migration 3) is set with :func:`set_run_scope` in the same transaction.
"""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.database import Cursor, Database, arrow_query_df, insert_frame, one_row

RUN_ROW_COLUMNS = ["query_id", "doc_id", "chunk_id", "rank", "score"]


# --- writes (inside the caller's transaction) --------------------------------------------------
def write_run(cur: Cursor, name: str, retriever: str, rows: pd.DataFrame, *, stage: str | None = None,
              params: dict | None = None) -> int:
    """Record a run and its rows (query_id, doc_id, chunk_id or missing, rank, score).

    The run also records how many documents the project holds now (``corpus_documents``), so
    that documents imported later can be reported as not covered by it.
    """
    cur.execute(
        "INSERT INTO runs (name, retriever, stage, params, corpus_documents) "
        "VALUES (?, ?, ?, ?, (SELECT count(*) FROM documents))",
        [name, retriever, stage, json.dumps(params or {}, sort_keys=True)],
    )
    out = rows.reindex(columns=RUN_ROW_COLUMNS)
    out.insert(0, "run", name)
    return insert_frame(cur, "run_rows", out)


def set_run_scope(cur: Cursor, name: str, level: str, chunking: str | None) -> None:
    """Record that run ``name`` ranks ``level`` items ('chunk' or 'doc') of ``chunking``."""
    cur.execute("UPDATE runs SET level = ?, chunking = ? WHERE name = ?", [level, chunking, name])


# --- reads on the caller's cursor ----------------------------------------------------------------
def stored_run(cur: Cursor, name: str) -> dict | None:
    """``name, retriever, level, chunking`` of run ``name``, or None."""
    rows = cur.execute("SELECT name, retriever, level, chunking FROM runs WHERE name = ?", [name]).fetchall()
    return dict(zip(("name", "retriever", "level", "chunking"), rows[0])) if rows else None


def stored_run_scores(cur: Cursor, name: str) -> pd.DataFrame:
    """``query_id, item_id, score`` of run ``name`` (item = chunk_id, else doc_id)."""
    return cur.execute(
        "SELECT query_id, coalesce(chunk_id, doc_id) AS item_id, score FROM run_rows WHERE run = ?", [name]
    ).df()


# --- reads ---------------------------------------------------------------------------------------
def run_exists(db: Database, name: str) -> bool:
    return bool(db.query_value("SELECT count(*) FROM runs WHERE name = ?", [name]))


def read_run_info(db: Database, names: list[str] | None = None) -> pd.DataFrame:
    """``name, retriever, stage, level, chunking, params (dict), created_at, rows, queries,
    corpus_documents, documents_now``.

    ``level`` NULL (a run written before migration 3 set a default) reads as 'chunk' when the
    run has chunk ids, else 'doc'. ``corpus_documents``: documents in the project when the run
    was made (NA for runs made before migration 6); ``documents_now``: documents today.
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
                   coalesce(c.rows, 0) AS rows, coalesce(c.queries, 0) AS queries,
                   r.corpus_documents, (SELECT count(*) FROM documents) AS documents_now
            FROM runs r LEFT JOIN counts c ON c.run = r.name
            {where}
            ORDER BY r.created_at, r.name""",
        [list(names)] if names is not None else None,
    )
    frame["params"] = frame["params"].map(lambda v: json.loads(v) if isinstance(v, str) else {})
    return frame


def read_run_rows(db: Database, run: str, *, query_id: str | None = None, depth: int | None = None) -> pd.DataFrame:
    """Rows of one run, ``query_id, doc_id, chunk_id, rank, score``, by query then rank;
    ``query_id`` keeps that query's rows only, ``depth`` ranks ``<= depth``."""
    where = "run = ?"
    params: list[str | int] = [run]
    if query_id is not None:
        where, params = where + " AND query_id = ?", params + [str(query_id)]
    if depth is not None:
        where, params = where + " AND rank <= ?", params + [int(depth)]
    return db.query_df(
        f"SELECT query_id, doc_id, chunk_id, rank, score FROM run_rows WHERE {where} ORDER BY query_id, rank",
        params,
    )


def read_run_rows_many(db: Database, names: list[str], *, depth: int | None = None,
                       columns: list[str] | None = None) -> pd.DataFrame:
    """Rows of several runs as ``run_id, query_id, doc_id, chunk_id, rank, score``.

    ``depth`` keeps ranks ``<= depth`` (pooling reads only what it pools); ``columns`` picks a
    subset of those columns (fewer strings to move for millions of rows).
    """
    allowed = ["run_id", *RUN_ROW_COLUMNS]
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


def runs_on_chunking(db: Database, chunking: str) -> list[str]:
    """Names of the runs that rank chunks of ``chunking``."""
    return [r[0] for r in db.query_all("SELECT name FROM runs WHERE chunking = ? ORDER BY name", [chunking])]


def count_run_rows(db: Database, names: list[str]) -> int:
    return int(db.query_value("SELECT count(*) FROM run_rows WHERE run IN (SELECT unnest(?::VARCHAR[]))",
                              [list(names)]))


def delete_runs(cur: Cursor, names: list[str]) -> int:
    """Delete runs and their rows; returns the rows deleted."""
    cur.execute("DELETE FROM run_rows WHERE run IN (SELECT unnest(?::VARCHAR[]))", [list(names)])
    rows = int(one_row(cur.fetchone())[0])
    cur.execute("DELETE FROM runs WHERE name IN (SELECT unnest(?::VARCHAR[]))", [list(names)])
    return rows
