"""Tables ``documents`` and ``queries``: typed reads, all-or-nothing bulk writes, and look-ups of
incoming ids against stored rows (on the import's cursor, one join per look-up)."""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.database import (
    Cursor,
    Database,
    id_frame,
    insert_frame,
    join_frame,
)

DOCUMENT_COLUMNS = ["doc_id", "title", "text", "metadata"]
QUERY_COLUMNS = ["query_id", "text", "description", "tags"]


def _json_column(values: pd.Series) -> pd.Series:
    """Dicts (or None) to JSON text; DuckDB casts the text to its JSON type on insert."""
    return values.map(lambda v: None if v is None or (isinstance(v, float) and pd.isna(v))
                      else json.dumps(v, sort_keys=True, ensure_ascii=False))


# --- writes (inside the caller's transaction) --------------------------------------------------
def write_documents(cur: Cursor, frame: pd.DataFrame) -> int:
    """Insert documents (columns: doc_id, text, optional title and metadata dict)."""
    out = frame.reindex(columns=DOCUMENT_COLUMNS)
    out["metadata"] = _json_column(out["metadata"])
    return insert_frame(cur, "documents", out)


def write_queries(cur: Cursor, frame: pd.DataFrame) -> int:
    """Insert queries (columns: query_id, text, optional description and tags dict)."""
    out = frame.reindex(columns=QUERY_COLUMNS)
    out["tags"] = _json_column(out["tags"])
    return insert_frame(cur, "queries", out)


# --- look-ups on the caller's cursor -------------------------------------------------------------
def stored_documents(cur: Cursor, doc_ids) -> pd.DataFrame:
    """``doc_id, title, text`` of the stored documents among ``doc_ids``."""
    return join_frame(cur, id_frame(doc_ids), "_wanted_docs",
                      "SELECT d.doc_id, d.title, d.text FROM documents d JOIN _wanted_docs w ON d.doc_id = w.id")


def document_lengths(cur: Cursor, doc_ids) -> pd.DataFrame:
    """``doc_id, length`` (characters, as Python counts them) of the stored documents among ``doc_ids``."""
    return join_frame(cur, id_frame(doc_ids), "_wanted_lengths",
                      "SELECT d.doc_id, length(d.text)::BIGINT AS length "
                      "FROM documents d JOIN _wanted_lengths w ON d.doc_id = w.id")


def stored_queries(cur: Cursor, query_ids) -> pd.DataFrame:
    """``query_id, text, description`` of the stored queries among ``query_ids``."""
    return join_frame(cur, id_frame(query_ids), "_wanted_queries",
                      "SELECT q.query_id, q.text, q.description FROM queries q "
                      "JOIN _wanted_queries w ON q.query_id = w.id")


# --- reads ---------------------------------------------------------------------------------------
def read_documents(db: Database, doc_ids: list[str] | None = None, *, with_text: bool = True) -> pd.DataFrame:
    cols = "doc_id, title, text, metadata" if with_text else "doc_id, title, length(text) AS length, metadata"
    if doc_ids is None:
        return db.query_df(f"SELECT {cols} FROM documents ORDER BY doc_id")
    return db.query_df(
        f"SELECT {cols} FROM documents WHERE doc_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY doc_id",
        [list(doc_ids)],
    )


def sample_documents(db: Database, limit: int = 5) -> pd.DataFrame:
    """The first ``limit`` documents by doc_id (``doc_id, title, text``), for previews."""
    return db.query_df("SELECT doc_id, title, text FROM documents ORDER BY doc_id LIMIT ?", [int(limit)])


def read_queries(db: Database) -> pd.DataFrame:
    return db.query_df("SELECT query_id, text, description, tags FROM queries ORDER BY query_id")


def query_texts(db: Database) -> pd.DataFrame:
    """``query_id, text, tags`` (tags as JSON text) of every query."""
    return db.query_df("SELECT query_id, text, tags::VARCHAR AS tags FROM queries ORDER BY query_id")
