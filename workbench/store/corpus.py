"""Documents and queries: typed reads and all-or-nothing bulk writes."""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.database import Database, insert_frame

DOCUMENT_COLUMNS = ["doc_id", "title", "text", "metadata"]
QUERY_COLUMNS = ["query_id", "text", "description", "tags"]


def _json_column(values: pd.Series) -> pd.Series:
    """Dicts (or None) to JSON text; DuckDB casts the text to its JSON type on insert."""
    return values.map(lambda v: None if v is None or (isinstance(v, float) and pd.isna(v)) else json.dumps(v, sort_keys=True, ensure_ascii=False))


def write_documents(cur, frame: pd.DataFrame) -> int:
    """Insert documents (columns: doc_id, text, optional title and metadata dict) in ``cur``'s transaction."""
    out = frame.reindex(columns=DOCUMENT_COLUMNS)
    out["metadata"] = _json_column(out["metadata"])
    return insert_frame(cur, "documents", out)


def write_queries(cur, frame: pd.DataFrame) -> int:
    """Insert queries (columns: query_id, text, optional description and tags dict)."""
    out = frame.reindex(columns=QUERY_COLUMNS)
    out["tags"] = _json_column(out["tags"])
    return insert_frame(cur, "queries", out)


def read_documents(db: Database, doc_ids: list[str] | None = None, *, with_text: bool = True) -> pd.DataFrame:
    cols = "doc_id, title, text, metadata" if with_text else "doc_id, title, length(text) AS length, metadata"
    if doc_ids is None:
        return db.query_df(f"SELECT {cols} FROM documents ORDER BY doc_id")
    return db.query_df(
        f"SELECT {cols} FROM documents WHERE doc_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY doc_id",
        [list(doc_ids)],
    )


def read_queries(db: Database) -> pd.DataFrame:
    return db.query_df("SELECT query_id, text, description, tags FROM queries ORDER BY query_id")


def document_text(db: Database, doc_id: str) -> str | None:
    return db.query_value("SELECT text FROM documents WHERE doc_id = ?", [doc_id])
