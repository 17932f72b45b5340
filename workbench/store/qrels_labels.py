"""Labels as the qrels policy reads them (:mod:`workbench.services.qrels.rule`).

One row per graded ``ok`` judgment with its **tier**: ``adjudicated`` (a human judgment written
by a lead's resolution of an SME disagreement: its label event's annotator is ``adjudication``),
``sme`` (other human judgments), ``imported`` and ``llm``; and its **assessor**: the person or
file for people's labels, ``model|prompt_hash`` (the judge configuration) for LLM labels.
"""

from __future__ import annotations

import pandas as pd

from workbench.store.database import Database
from workbench.store.judge_configs import JOIN_SQL, KEY_SQL


def labelled_spans(db: Database, query_ids: list[str] | None = None) -> pd.DataFrame:
    """``query_id, doc_id, start, end, grade, tier, assessor, model, prompt_hash, config`` (the
    judge configuration of LLM labels, :mod:`workbench.store.judge_configs`; None for people's).
    ``query_ids``: only those queries' labels (None: every query's; an empty list reads none), so a
    page showing one query does not read the whole project's labels."""
    only = "" if query_ids is None else "AND j.query_id IN (SELECT unnest(?::VARCHAR[]))"
    return db.query_df(
        f"""SELECT j.query_id, j.doc_id, j.start::BIGINT AS start, j."end"::BIGINT AS "end",
                  j.grade::BIGINT AS grade,
                  CASE WHEN j.source = 'llm' THEN 'llm'
                       WHEN j.source = 'imported' THEN 'imported'
                       WHEN a.judgment_id IS NOT NULL THEN 'adjudicated'
                       ELSE 'sme' END AS tier,
                  CASE WHEN j.source = 'llm'
                       THEN coalesce(j.model, '') || '|' || coalesce(j.prompt_hash, '')
                       ELSE coalesce(j.assessor, '') END AS assessor,
                  coalesce(j.model, '') AS model, coalesce(j.prompt_hash, '') AS prompt_hash,
                  CASE WHEN j.source = 'llm' THEN {KEY_SQL} END AS config
           FROM judgments j
           {JOIN_SQL}
           LEFT JOIN (SELECT DISTINCT judgment_id FROM label_events
                      WHERE annotator = 'adjudication' AND judgment_id IS NOT NULL) a
             ON a.judgment_id = j.judgment_id
           WHERE j.status = 'ok' AND j.grade IS NOT NULL {only}
           ORDER BY j.judgment_id""",
        None if query_ids is None else [[str(q) for q in query_ids]],
    )
