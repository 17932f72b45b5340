"""Reads and writes the import and export services need: the import ledger, look-ups of
incoming ids against stored rows, and the stored rows of a run. (A run's level and chunking are
set with :func:`workbench.store.retrieval.set_run_scope`.)

Look-ups take the incoming ids as a DataFrame and join it in DuckDB (one statement, no row
loop); they run on the import's own cursor, so they see the transaction's snapshot.
"""

from __future__ import annotations

import pandas as pd

from workbench.store.database import Database


def _join(cur, frame: pd.DataFrame, name: str, sql: str, params: list | None = None) -> pd.DataFrame:
    """Run ``sql`` with ``frame`` registered as ``name``; read the whole result."""
    cur.register(name, frame)
    try:
        return cur.execute(sql, params or []).df()
    finally:
        cur.unregister(name)


def _ids(values) -> pd.DataFrame:
    return pd.DataFrame({"id": pd.Series(pd.unique(pd.Series(values, dtype=str)), dtype=str)})


# --- ledger ----------------------------------------------------------------------------------
def find_import(cur, kind: str, sha256: str) -> dict | None:
    """The ledger row of an earlier import of the same bytes as ``kind``, if any."""
    rows = cur.execute(
        "SELECT import_id, kind, name, path, format, rows, skipped, imported_at "
        "FROM imports WHERE kind = ? AND sha256 = ?",
        [kind, sha256],
    ).fetchall()
    if not rows:
        return None
    keys = ("import_id", "kind", "name", "path", "format", "rows", "skipped", "imported_at")
    return dict(zip(keys, rows[0]))


def record_import(cur, *, kind: str, name: str | None, path: str, format: str, sha256: str,
                  rows: int, skipped: int) -> None:
    cur.execute(
        "INSERT INTO imports (kind, name, path, format, sha256, rows, skipped) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [kind, name, path, format, sha256, int(rows), int(skipped)],
    )


def read_imports(db: Database, limit: int = 50) -> pd.DataFrame:
    """The most recent imports first."""
    return db.query_df(
        "SELECT import_id, kind, name, path, format, rows, skipped, imported_at, sha256 "
        "FROM imports ORDER BY import_id DESC LIMIT ?",
        [int(limit)],
    )


# --- look-ups ---------------------------------------------------------------------------------
def stored_documents(cur, doc_ids) -> pd.DataFrame:
    """``doc_id, title, text`` of the stored documents among ``doc_ids``."""
    return _join(cur, _ids(doc_ids), "_wanted_docs",
                 "SELECT d.doc_id, d.title, d.text FROM documents d JOIN _wanted_docs w ON d.doc_id = w.id")


def document_lengths(cur, doc_ids) -> pd.DataFrame:
    """``doc_id, length`` (characters, as Python counts them) of the stored documents among ``doc_ids``."""
    return _join(cur, _ids(doc_ids), "_wanted_lengths",
                 "SELECT d.doc_id, length(d.text)::BIGINT AS length "
                 "FROM documents d JOIN _wanted_lengths w ON d.doc_id = w.id")


def stored_queries(cur, query_ids) -> pd.DataFrame:
    """``query_id, text, description`` of the stored queries among ``query_ids``."""
    return _join(cur, _ids(query_ids), "_wanted_queries",
                 "SELECT q.query_id, q.text, q.description FROM queries q "
                 "JOIN _wanted_queries w ON q.query_id = w.id")


def stored_chunks(cur, chunk_ids) -> pd.DataFrame:
    """``chunk_id, chunking, doc_id`` of the stored chunks among ``chunk_ids``."""
    return _join(cur, _ids(chunk_ids), "_wanted_chunks",
                 "SELECT k.chunk_id, k.chunking, k.doc_id FROM chunks k JOIN _wanted_chunks w ON k.chunk_id = w.id")


def stored_span_grades(cur, keys: pd.DataFrame, source: str) -> pd.DataFrame:
    """Stored ``ok`` judgments of ``source`` on the same (query_id, doc_id, start, end, assessor)
    as ``keys``; returns those five columns and ``grade``."""
    frame = keys[["query_id", "doc_id", "start", "end", "assessor"]].drop_duplicates()
    return _join(
        cur, frame, "_wanted_spans",
        """SELECT j.query_id, j.doc_id, j.start::BIGINT AS start, j."end"::BIGINT AS "end",
                  j.assessor, j.grade::BIGINT AS grade
           FROM judgments j JOIN _wanted_spans w
             ON j.query_id = w.query_id AND j.doc_id = w.doc_id AND j.start = w.start
            AND j."end" = w."end" AND j.assessor = w.assessor
           WHERE j.source = ? AND j.status = 'ok'""",
        [source],
    )


def run_info(cur, name: str) -> dict | None:
    rows = cur.execute("SELECT name, retriever, level, chunking FROM runs WHERE name = ?", [name]).fetchall()
    return dict(zip(("name", "retriever", "level", "chunking"), rows[0])) if rows else None


def run_rows_for(cur, name: str) -> pd.DataFrame:
    return cur.execute(
        "SELECT query_id, coalesce(chunk_id, doc_id) AS item_id, score FROM run_rows WHERE run = ?", [name]
    ).df()


# --- export reads -----------------------------------------------------------------------------
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


def query_texts(db: Database) -> pd.DataFrame:
    """``query_id, text, tags`` (tags as JSON text) of every query."""
    return db.query_df("SELECT query_id, text, tags::VARCHAR AS tags FROM queries ORDER BY query_id")


def sample_documents(db: Database, limit: int = 5) -> pd.DataFrame:
    """The first ``limit`` documents by doc_id (``doc_id, title, text``), for previews."""
    return db.query_df("SELECT doc_id, title, text FROM documents ORDER BY doc_id LIMIT ?", [int(limit)])
