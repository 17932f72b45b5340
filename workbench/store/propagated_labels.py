"""Tables ``propagations``, ``near_duplicate_pairs`` and ``propagated_labels`` (migration 8).

Propagated labels live apart from ``judgments``: a direct label is never mixed up with a copied
one, reverting a propagation deletes exactly its rows, and qrels include them only when asked
(:mod:`workbench.services.qrels.propagation`). A reverted propagation keeps its record (and pairs)
with ``reverted_at`` set, as the history of what was done.
"""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.database import Cursor, Database, insert_frame, one_row


def create_propagation(cur: Cursor, *, chunking: str, source: str, threshold: float, shingle: int,
                       num_perm: int, seed: int, pairs: int, clusters: int, labels: int, report: dict) -> int:
    cur.execute(
        """INSERT INTO propagations (chunking, source, threshold, shingle, num_perm, seed, pairs, clusters,
                                     labels, report)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING propagation_id""",
        [chunking, source, float(threshold), int(shingle), int(num_perm), int(seed), int(pairs), int(clusters),
         int(labels), json.dumps(report)],
    )
    return int(one_row(cur.fetchone())[0])


def write_pairs(cur: Cursor, propagation_id: int, pairs: pd.DataFrame) -> int:
    frame = pd.DataFrame({"propagation_id": propagation_id, "chunk_a": pairs["item_a"].astype(str),
                          "chunk_b": pairs["item_b"].astype(str), "similarity": pairs["similarity"].astype(float)})
    return insert_frame(cur, "near_duplicate_pairs", frame)


def write_propagated(cur: Cursor, propagation_id: int, labels: pd.DataFrame) -> int:
    """``labels``: query_id, doc_id, chunk_id, start, end, grade, similarity, source_chunk_id,
    source_grade."""
    frame = labels[["query_id", "doc_id", "chunk_id", "start", "end", "grade", "similarity", "source_chunk_id",
                    "source_grade"]].copy()
    frame.insert(0, "propagation_id", propagation_id)
    frame["grade"] = frame["grade"].astype("int8")
    frame["source_grade"] = frame["source_grade"].astype("int8")
    return insert_frame(cur, "propagated_labels", frame)


def active_propagations(db_or_cur, chunking: str | None = None) -> list[dict]:
    """Propagations not reverted (of one chunking when given), newest first."""
    sql = """SELECT propagation_id, chunking, source, threshold, shingle, num_perm, seed, pairs, clusters, labels,
                    report::VARCHAR, created_at
             FROM propagations WHERE reverted_at IS NULL AND (? IS NULL OR chunking = ?)
             ORDER BY propagation_id DESC"""
    rows = _rows(db_or_cur, sql, [chunking, chunking])
    keys = ["propagation_id", "chunking", "source", "threshold", "shingle", "num_perm", "seed", "pairs",
            "clusters", "labels", "report", "created_at"]
    out = [dict(zip(keys, r)) for r in rows]
    for r in out:
        r["report"] = json.loads(r["report"]) if r["report"] else {}
    return out


def revert(cur: Cursor, propagation_id: int) -> int:
    """Delete the propagation's labels and mark it reverted; returns the labels removed."""
    cur.execute("SELECT count(*) FROM propagated_labels WHERE propagation_id = ?", [int(propagation_id)])
    n = int(one_row(cur.fetchone())[0])
    cur.execute("DELETE FROM propagated_labels WHERE propagation_id = ?", [int(propagation_id)])
    cur.execute("UPDATE propagations SET reverted_at = current_timestamp WHERE propagation_id = ?",
                [int(propagation_id)])
    return n


def read_propagated(db: Database, chunking: str | None = None) -> pd.DataFrame:
    """Labels of the active propagations (of one chunking when given)."""
    return db.query_df(
        """SELECT l.propagation_id, p.chunking, l.query_id, l.doc_id, l.chunk_id, l.start::BIGINT AS start,
                  l."end"::BIGINT AS "end", l.grade::BIGINT AS grade, l.similarity, l.source_chunk_id,
                  l.source_grade::BIGINT AS source_grade
           FROM propagated_labels l JOIN propagations p USING (propagation_id)
           WHERE p.reverted_at IS NULL AND (? IS NULL OR p.chunking = ?)
           ORDER BY l.query_id, l.chunk_id""",
        [chunking, chunking],
    )


def _rows(db_or_cur, sql: str, params: list) -> list[tuple]:
    if isinstance(db_or_cur, Database):
        return db_or_cur.query_all(sql, params)
    return db_or_cur.execute(sql, params).fetchall()
