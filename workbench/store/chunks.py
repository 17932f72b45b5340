"""Tables ``chunkings`` and ``chunks``. A chunking is a definition (strategy and parameters); a
chunk is a span of one document: its text is always ``documents.text[start:end]``, never stored
twice."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from workbench.store.database import (
    Cursor,
    Database,
    id_frame,
    insert_frame,
    join_frame,
    one_row,
)

if TYPE_CHECKING:  # not imported at run time: pandas is most of the CLI's start-up time
    import pandas as pd

CHUNK_COLUMNS = ["chunk_id", "doc_id", "seq", "start", "end"]


# --- writes (inside the caller's transaction) --------------------------------------------------
def write_chunking(cur: Cursor, name: str, strategy: str, params: dict, chunks: pd.DataFrame) -> int:
    """Record a chunking and its chunks (chunk_id, doc_id, seq, start, end)."""
    cur.execute(
        "INSERT INTO chunkings (name, strategy, params) VALUES (?, ?, ?)",
        [name, strategy, json.dumps(params, sort_keys=True)],
    )
    return write_chunks(cur, name, chunks)


def write_chunks(cur: Cursor, chunking: str, chunks: pd.DataFrame) -> int:
    """Append chunks (chunk_id, doc_id, seq, start, end) to an existing chunking."""
    out = chunks[CHUNK_COLUMNS].copy()
    out.insert(1, "chunking", chunking)
    return insert_frame(cur, "chunks", out)


# --- look-ups on the caller's cursor -------------------------------------------------------------
def stored_chunks(cur: Cursor, chunk_ids) -> pd.DataFrame:
    """``chunk_id, chunking, doc_id`` of the stored chunks among ``chunk_ids``."""
    return join_frame(cur, id_frame(chunk_ids), "_wanted_chunks",
                      "SELECT k.chunk_id, k.chunking, k.doc_id FROM chunks k "
                      "JOIN _wanted_chunks w ON k.chunk_id = w.id")


# --- reads ---------------------------------------------------------------------------------------
def chunking_exists(db: Database, name: str) -> bool:
    return bool(db.query_value("SELECT count(*) FROM chunkings WHERE name = ?", [name]))


def read_chunkings(db: Database) -> pd.DataFrame:
    """``name, strategy, params, created_at, chunks, documents, documents_now, documents_empty`` of
    every chunking, oldest first: ``documents`` is how many documents have chunks in it,
    ``documents_now`` how many the project holds, ``documents_empty`` how many of those have an
    empty text (which yields no chunk)."""
    return db.query_df(
        """SELECT c.name, c.strategy, c.params, c.created_at, count(k.chunk_id) AS chunks,
                  count(DISTINCT k.doc_id) AS documents, (SELECT count(*) FROM documents) AS documents_now,
                  (SELECT count(*) FROM documents WHERE text = '') AS documents_empty
           FROM chunkings c LEFT JOIN chunks k ON k.chunking = c.name
           GROUP BY ALL ORDER BY c.created_at, c.name"""
    )


def chunking_definitions(cur: Cursor) -> list[tuple[str, str, str]]:
    """``(name, strategy, params as JSON text)`` of every chunking, on the caller's cursor."""
    return [tuple(r) for r in cur.execute(
        "SELECT name, strategy, params::VARCHAR FROM chunkings ORDER BY created_at, name").fetchall()]


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


def delete_chunking(cur: Cursor, name: str) -> int:
    """Delete a chunking, its chunks and its cached embeddings; returns the chunks deleted.
    Judgments keep their spans (their ``chunk_id`` only says what the assessor was shown)."""
    cur.execute("DELETE FROM embeddings WHERE chunking = ?", [name])
    cur.execute("DELETE FROM chunks WHERE chunking = ?", [name])
    chunks = int(one_row(cur.fetchone())[0])
    cur.execute("DELETE FROM chunkings WHERE name = ?", [name])
    return chunks
