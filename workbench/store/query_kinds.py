"""Tables of migration 7 (``answerability``, ``evidence_chains``, ``trajectory_hops``,
``trajectory_results``, ``answers``) and the reads the query-kind reports need from the
pipeline tables (query tags, document metadata, runs' top scores)."""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.database import Cursor, Database, insert_frame, one_row


# --- writes (inside the caller's transaction) --------------------------------------------------
def record_answerability(cur: Cursor, query_id: str, answerable: bool, annotator: str,
                         comment: str | None = None) -> None:
    cur.execute("INSERT INTO answerability (query_id, answerable, annotator, comment) VALUES (?, ?, ?, ?)",
                [query_id, bool(answerable), annotator, comment])


def write_chains(cur: Cursor, frame: pd.DataFrame) -> int:
    """Replace the chains of the queries in ``frame`` (query_id, hop, doc_id, start, end)."""
    cur.execute("DELETE FROM evidence_chains WHERE query_id IN (SELECT unnest(?::VARCHAR[]))",
                [sorted(set(frame["query_id"].astype(str)))])
    return insert_frame(cur, "evidence_chains", frame[["query_id", "hop", "doc_id", "start", "end"]])


def write_trajectories(cur: Cursor, name: str, hops: pd.DataFrame, results: pd.DataFrame) -> int:
    """Replace trajectory set ``name``: ``hops`` (query_id, hop, searched, sub_query) and
    ``results`` (query_id, hop, rank, doc_id, chunk_id, start, end)."""
    cur.execute("DELETE FROM trajectory_hops WHERE trajectory = ?", [name])
    cur.execute("DELETE FROM trajectory_results WHERE trajectory = ?", [name])
    hops = hops.reindex(columns=["query_id", "hop", "searched", "sub_query"])
    hops.insert(0, "trajectory", name)
    results = results.reindex(columns=["query_id", "hop", "rank", "doc_id", "chunk_id", "start", "end"])
    results.insert(0, "trajectory", name)
    insert_frame(cur, "trajectory_results", results)
    return insert_frame(cur, "trajectory_hops", hops)


def write_answers(cur: Cursor, name: str, frame: pd.DataFrame) -> int:
    """Replace answer set ``name`` (query_id, answer, abstained)."""
    cur.execute("DELETE FROM answers WHERE name = ?", [name])
    out = frame.reindex(columns=["query_id", "answer", "abstained"])
    out.insert(0, "name", name)
    return insert_frame(cur, "answers", out)


def set_document_field(cur: Cursor, doc_id: str, field: str, value) -> int:
    """Set one metadata field of a document (other fields kept); returns 1 when it exists."""
    cur.execute(
        "UPDATE documents SET metadata = json_merge_patch(coalesce(metadata, '{}'::JSON), ?::JSON) "
        "WHERE doc_id = ?",
        [json.dumps({field: value}), doc_id],
    )
    return int(one_row(cur.execute("SELECT count(*) FROM documents WHERE doc_id = ?", [doc_id]).fetchone())[0])


# --- reads ---------------------------------------------------------------------------------------
def latest_answerability(db: Database) -> pd.DataFrame:
    """The latest SME decision per query: ``query_id, answerable, annotator, comment, created_at``."""
    return db.query_df(
        """SELECT query_id, answerable, annotator, comment, created_at FROM answerability
           QUALIFY row_number() OVER (PARTITION BY query_id ORDER BY decision_id DESC) = 1
           ORDER BY query_id""")


def query_tags(db: Database) -> pd.DataFrame:
    """``query_id, text, tags`` (JSON text) of every query."""
    return db.query_df("SELECT query_id, text, tags::VARCHAR AS tags FROM queries ORDER BY query_id")


def tagged_or_decided_queries(db: Database) -> pd.DataFrame:
    """``query_id, tags`` (JSON text) of the queries with tags or an SME answerability decision,
    in query order: the only ones that can be unanswerable (a query with neither is answerable)."""
    return db.query_df(
        """SELECT query_id, tags::VARCHAR AS tags FROM queries
           WHERE tags IS NOT NULL OR query_id IN (SELECT query_id FROM answerability)
           ORDER BY query_id""")


def document_metadata(db: Database) -> pd.DataFrame:
    """``doc_id, title, metadata`` (JSON text) of every document."""
    return db.query_df("SELECT doc_id, title, metadata::VARCHAR AS metadata FROM documents ORDER BY doc_id")


def run_top_scores(db: Database, run: str) -> pd.DataFrame:
    """``query_id, top_score, results`` of a stored run (its highest score per query)."""
    return db.query_df(
        "SELECT query_id, max(score) AS top_score, count(*) AS results FROM run_rows WHERE run = ? "
        "GROUP BY query_id ORDER BY query_id", [run])


def run_names_with_params(db: Database) -> pd.DataFrame:
    """``name, retriever, params`` (JSON text) of every run."""
    return db.query_df("SELECT name, retriever, params::VARCHAR AS params FROM runs ORDER BY created_at, name")


def run_rows(db: Database, run: str, k: int | None = None) -> pd.DataFrame:
    """``query_id, doc_id, chunk_id, rank`` of a stored run (ranks ``<= k`` when given)."""
    cut = "AND rank <= ?" if k is not None else ""
    return db.query_df(
        f"SELECT query_id, doc_id, chunk_id, rank FROM run_rows WHERE run = ? {cut} ORDER BY query_id, rank",
        [run] + ([int(k)] if k is not None else []))


def read_chains(db: Database) -> pd.DataFrame:
    return db.query_df('SELECT query_id, hop, doc_id, start, "end" FROM evidence_chains '
                       'ORDER BY query_id, hop, doc_id, start')


def trajectory_names(db: Database) -> list[str]:
    return [r[0] for r in db.query_all("SELECT DISTINCT trajectory FROM trajectory_hops ORDER BY 1")]


def read_trajectory(db: Database, name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    hops = db.query_df("SELECT query_id, hop, searched, sub_query FROM trajectory_hops "
                       "WHERE trajectory = ? ORDER BY query_id, hop", [name])
    results = db.query_df('SELECT query_id, hop, rank, doc_id, chunk_id, start, "end" FROM trajectory_results '
                          "WHERE trajectory = ? ORDER BY query_id, hop, rank", [name])
    return hops, results


def answer_set_names(db: Database) -> list[str]:
    return [r[0] for r in db.query_all("SELECT DISTINCT name FROM answers ORDER BY 1")]


def read_answers(db: Database, name: str) -> pd.DataFrame:
    return db.query_df("SELECT query_id, answer, abstained FROM answers WHERE name = ? ORDER BY query_id", [name])


def chunk_spans(db: Database, chunk_ids: list[str]) -> pd.DataFrame:
    """``chunk_id, doc_id, start, end`` of the stored chunks among ``chunk_ids``."""
    return db.query_df('SELECT chunk_id, doc_id, start, "end" FROM chunks '
                       "WHERE chunk_id IN (SELECT unnest(?::VARCHAR[]))", [list(chunk_ids)])


def set_run_role(cur: Cursor, run: str, role: str) -> int:
    """Record that run ``run`` retrieved as ``role`` (its params' ``role``); 1 when the run exists."""
    cur.execute(
        "UPDATE runs SET params = json_merge_patch(coalesce(params, '{}'::JSON), ?::JSON) WHERE name = ?",
        [json.dumps({"role": role}), run])
    return int(one_row(cur.execute("SELECT count(*) FROM runs WHERE name = ?", [run]).fetchone())[0])
