"""Judgment pools: the pool record, its pairs (with judging priority) and their provenance."""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.database import Database, insert_frame

PAIR_COLUMNS = ["query_id", "doc_id", "chunk_id", "priority", "rrf_score"]
PROVENANCE_COLUMNS = ["query_id", "doc_id", "chunk_id", "run", "rank"]


def create_pool(cur, name: str, *, level: str, chunking: str | None, depth: int, runs: list[str]) -> None:
    cur.execute(
        "INSERT INTO pools (name, level, chunking, depth, runs) VALUES (?, ?, ?, ?, ?)",
        [name, level, chunking, int(depth), json.dumps(list(runs))],
    )


def update_pool_runs(cur, name: str, runs: list[str]) -> None:
    cur.execute(
        "UPDATE pools SET runs = ?, updated_at = current_timestamp WHERE name = ?",
        [json.dumps(list(runs)), name],
    )


def write_pool_pairs(cur, pool: str, pairs: pd.DataFrame) -> int:
    """Append pairs (query_id, doc_id, chunk_id or missing, priority, rrf_score) to ``pool``."""
    out = pairs.reindex(columns=PAIR_COLUMNS)
    out.insert(0, "pool", pool)
    return insert_frame(cur, "pool_pairs", out)


def write_pool_provenance(cur, pool: str, provenance: pd.DataFrame) -> int:
    """Append provenance rows (query_id, doc_id, chunk_id or missing, run, rank) to ``pool``."""
    out = provenance.reindex(columns=PROVENANCE_COLUMNS)
    out.insert(0, "pool", pool)
    return insert_frame(cur, "pool_provenance", out)


def read_pool(db: Database, name: str) -> dict | None:
    """The pool record as a dict (``runs`` parsed), or None when there is no such pool."""
    rows = db.query_all(
        "SELECT name, level, chunking, depth, runs::VARCHAR, created_at, updated_at FROM pools WHERE name = ?",
        [name],
    )
    if not rows:
        return None
    name, level, chunking, depth, runs, created, updated = rows[0]
    return {"name": name, "level": level, "chunking": chunking, "depth": int(depth),
            "runs": json.loads(runs), "created_at": created, "updated_at": updated}


def read_pools(db: Database) -> pd.DataFrame:
    """Every pool with its pair and query counts."""
    return db.query_df(
        """SELECT p.name, p.level, p.chunking, p.depth, p.runs::VARCHAR AS runs,
                  count(x.query_id) AS pairs, count(DISTINCT x.query_id) AS queries,
                  p.created_at, p.updated_at
           FROM pools p LEFT JOIN pool_pairs x ON x.pool = p.name
           GROUP BY ALL ORDER BY p.created_at, p.name"""
    )


def read_pool_pairs(db: Database, name: str) -> pd.DataFrame:
    return db.query_df(
        """SELECT query_id, doc_id, chunk_id, priority, rrf_score FROM pool_pairs
           WHERE pool = ? ORDER BY query_id, priority""",
        [name],
    )


def read_pool_provenance(db: Database, name: str) -> pd.DataFrame:
    return db.query_df(
        """SELECT query_id, doc_id, chunk_id, run, rank FROM pool_provenance
           WHERE pool = ? ORDER BY run, query_id, rank""",
        [name],
    )


def write_pool_provenance_from_runs(cur, pool: str, runs: list[str], depth: int) -> int:
    """Provenance of ``runs`` in ``pool``: their run rows with ``rank <= depth``, copied in SQL.

    The provenance of a depth-k pool is by definition each pooled run's top-k rows, so it is
    copied inside DuckDB instead of round-tripping millions of rows through pandas.
    """
    cur.execute(
        """INSERT INTO pool_provenance (pool, query_id, doc_id, chunk_id, run, rank)
           SELECT ?, query_id, doc_id, chunk_id, run, rank FROM run_rows
           WHERE run IN (SELECT unnest(?::VARCHAR[])) AND rank <= ?""",
        [pool, list(runs), int(depth)],
    )
    return int(cur.fetchone()[0])


def write_chunk_pool_pairs(cur, pool: str, pairs: pd.DataFrame, runs: list[str]) -> int:
    """Append chunk-level pairs (query_id, chunk_id, priority, rrf_score) to ``pool``, taking
    each chunk's ``doc_id`` from the rows of ``runs`` (a join inside DuckDB)."""
    if pairs.empty:
        return 0
    frame = pairs[["query_id", "chunk_id", "priority", "rrf_score"]]
    cur.register("_incoming_pool_pairs", frame)
    cur.execute(
        """INSERT INTO pool_pairs (pool, query_id, doc_id, chunk_id, priority, rrf_score)
           SELECT ?, p.query_id, d.doc_id, p.chunk_id, p.priority, p.rrf_score
           FROM _incoming_pool_pairs p
           JOIN (SELECT chunk_id, any_value(doc_id) AS doc_id FROM run_rows
                 WHERE run IN (SELECT unnest(?::VARCHAR[])) GROUP BY chunk_id) d USING (chunk_id)""",
        [pool, list(runs)],
    )
    n = int(cur.fetchone()[0])
    cur.unregister("_incoming_pool_pairs")
    return n
