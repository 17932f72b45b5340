"""Runs: ranked results of a retriever (ours or imported), at chunk or document level."""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.database import Database, insert_frame


def write_run(cur, name: str, retriever: str, rows: pd.DataFrame, *, stage: str | None = None,
              params: dict | None = None) -> int:
    """Record a run and its rows (query_id, doc_id, chunk_id or missing, rank, score)."""
    cur.execute(
        "INSERT INTO runs (name, retriever, stage, params) VALUES (?, ?, ?, ?)",
        [name, retriever, stage, json.dumps(params or {}, sort_keys=True)],
    )
    out = rows.reindex(columns=["query_id", "doc_id", "chunk_id", "rank", "score"])
    out.insert(0, "run", name)
    return insert_frame(cur, "run_rows", out)


def read_runs(db: Database) -> pd.DataFrame:
    return db.query_df(
        """SELECT r.name, r.retriever, r.stage, r.params, r.created_at,
                  count(x.query_id) AS rows, count(DISTINCT x.query_id) AS queries
           FROM runs r LEFT JOIN run_rows x ON x.run = r.name
           GROUP BY ALL ORDER BY r.created_at, r.name"""
    )


def read_run_rows(db: Database, run: str) -> pd.DataFrame:
    return db.query_df(
        "SELECT query_id, doc_id, chunk_id, rank, score FROM run_rows WHERE run = ? ORDER BY query_id, rank",
        [run],
    )
