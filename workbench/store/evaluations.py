"""Tables ``evaluations``, ``evaluation_means``, ``evaluation_values`` (migration 9): stored
evaluations of runs against the project's qrels (:mod:`workbench.services.evaluation.evaluate`)."""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.database import Cursor, Database, insert_frame, one_row


def write_evaluation(cur: Cursor, *, runs: list[str], measures: list[str], labels: str, level: str,
                     chunking: str | None, policy: dict, fingerprint: str, qrels_rows: int, settings: dict,
                     notes: list[str], means: pd.DataFrame, values: pd.DataFrame) -> int:
    """Store one evaluation inside ``cur``'s transaction; returns its id.

    ``means``: ``run, measure, value, queries``; ``values``: ``run, measure, query_id, value``.
    """
    evaluation_id = int(one_row(cur.execute(
        """INSERT INTO evaluations (runs, measures, labels, level, chunking, qrels_policy, qrels_fingerprint,
                                    qrels_rows, settings, notes)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING evaluation_id""",
        [json.dumps(runs), json.dumps(measures), labels, level, chunking, json.dumps(policy), fingerprint,
         int(qrels_rows), json.dumps(settings), json.dumps(notes)],
    ).fetchone())[0])
    insert_frame(cur, "evaluation_means", means.assign(evaluation_id=evaluation_id))
    insert_frame(cur, "evaluation_values", values.assign(evaluation_id=evaluation_id))
    return evaluation_id


def read_evaluations(db: Database) -> pd.DataFrame:
    """Every stored evaluation, newest first: ``evaluation_id, created_at, runs, measures, labels,
    level, chunking, qrels_fingerprint, qrels_rows, qrels_policy, notes`` (JSON columns parsed)."""
    frame = db.query_df(
        """SELECT evaluation_id, created_at, runs::VARCHAR AS runs, measures::VARCHAR AS measures, labels, level,
                  chunking, qrels_fingerprint, qrels_rows, qrels_policy::VARCHAR AS qrels_policy,
                  notes::VARCHAR AS notes
           FROM evaluations ORDER BY evaluation_id DESC"""
    )
    for col in ("runs", "measures", "qrels_policy", "notes"):
        frame[col] = [json.loads(v) if isinstance(v, str) else None for v in frame[col]]
    return frame


def read_means(db: Database, evaluation_ids: list[int] | None = None) -> pd.DataFrame:
    """``evaluation_id, run, measure, value, queries`` (of the given evaluations, or all)."""
    where = "WHERE evaluation_id IN (SELECT unnest(?::BIGINT[]))" if evaluation_ids is not None else ""
    return db.query_df(
        f"SELECT evaluation_id, run, measure, value, queries FROM evaluation_means {where} "
        "ORDER BY evaluation_id, run, measure",
        [list(map(int, evaluation_ids))] if evaluation_ids is not None else None,
    )


def read_values(db: Database, evaluation_id: int) -> pd.DataFrame:
    """``run, measure, query_id, value`` of one evaluation."""
    return db.query_df(
        "SELECT run, measure, query_id, value FROM evaluation_values WHERE evaluation_id = ? "
        "ORDER BY run, measure, query_id",
        [int(evaluation_id)],
    )
