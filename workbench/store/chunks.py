"""Chunkings and their chunks. A chunk is a span: its text is always ``documents.text[start:end]``."""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.database import Database, insert_frame


def write_chunking(cur, name: str, strategy: str, params: dict, chunks: pd.DataFrame) -> int:
    """Record a chunking and its chunks (chunk_id, doc_id, seq, start, end) in ``cur``'s transaction."""
    cur.execute(
        "INSERT INTO chunkings (name, strategy, params) VALUES (?, ?, ?)",
        [name, strategy, json.dumps(params, sort_keys=True)],
    )
    out = chunks[["chunk_id", "doc_id", "seq", "start", "end"]].copy()
    out.insert(1, "chunking", name)
    return insert_frame(cur, "chunks", out)


def read_chunkings(db: Database) -> pd.DataFrame:
    return db.query_df(
        """SELECT c.name, c.strategy, c.params, c.created_at, count(k.chunk_id) AS chunks
           FROM chunkings c LEFT JOIN chunks k ON k.chunking = c.name
           GROUP BY ALL ORDER BY c.created_at, c.name"""
    )


def read_chunks(db: Database, chunking: str, *, with_text: bool = False,
                chunk_ids: list[str] | None = None) -> pd.DataFrame:
    """Chunks of ``chunking`` (only ``chunk_ids`` when given), ordered by doc_id and seq."""
    text = ', substr(d.text, k.start + 1, k."end" - k.start) AS text' if with_text else ""
    only = "AND k.chunk_id IN (SELECT unnest(?::VARCHAR[]))" if chunk_ids is not None else ""
    params = [chunking] + ([[str(c) for c in chunk_ids]] if chunk_ids is not None else [])
    return db.query_df(
        f"""SELECT k.chunk_id, k.doc_id, k.seq, k.start, k."end"{text}
            FROM chunks k {"JOIN documents d USING (doc_id)" if with_text else ""}
            WHERE k.chunking = ? {only} ORDER BY k.doc_id, k.seq""",
        params,
    )
