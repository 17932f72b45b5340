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

#: The tier of judgment ``j`` (module docstring); needs the ``a`` join of :data:`FROM_SQL`.
TIER_SQL = """CASE WHEN j.source = 'llm' THEN 'llm'
                   WHEN j.source = 'imported' THEN 'imported'
                   WHEN a.judgment_id IS NOT NULL THEN 'adjudicated'
                   ELSE 'sme' END"""
#: The judgments with their job (``jj``) and adjudication (``a``): what :data:`TIER_SQL` reads.
FROM_SQL = f"""FROM judgments j
           {JOIN_SQL}
           LEFT JOIN (SELECT DISTINCT judgment_id FROM label_events
                      WHERE annotator = 'adjudication' AND judgment_id IS NOT NULL) a
             ON a.judgment_id = j.judgment_id"""


def _where(query_ids, tiers, llm_configs) -> tuple[str, list]:
    where, params = ["j.status = 'ok'", "j.grade IS NOT NULL"], []
    if query_ids is not None:
        where.append("j.query_id IN (SELECT unnest(?::VARCHAR[]))")
        params.append([str(q) for q in query_ids])
    if tiers is not None:
        where.append(f"({TIER_SQL}) IN (SELECT unnest(?::VARCHAR[]))")
        params.append([str(t) for t in tiers])
    if llm_configs is not None:
        where.append(f"(j.source <> 'llm' OR {KEY_SQL} IN (SELECT unnest(?::VARCHAR[])))")
        params.append([str(c) for c in llm_configs])
    return "WHERE " + " AND ".join(where), params


def labelled_spans(db: Database, query_ids: list[str] | None = None, *, tiers=None,
                   llm_configs=None) -> pd.DataFrame:
    """``query_id, doc_id, start, end, grade, tier, assessor, model, prompt_hash, config`` (the
    judge configuration of LLM labels, :mod:`workbench.store.judge_configs`; None for people's),
    in judgment order. Filters, applied in the read (None: none): ``query_ids`` (those queries'
    labels only, so a page showing one query does not read the whole project's), ``tiers`` (only
    these tiers), ``llm_configs`` (LLM labels only of these configurations; people's all kept)."""
    where, params = _where(query_ids, tiers, llm_configs)
    return db.query_df(
        f"""SELECT j.query_id, j.doc_id, j.start::BIGINT AS start, j."end"::BIGINT AS "end",
                  j.grade::BIGINT AS grade,
                  {TIER_SQL} AS tier,
                  CASE WHEN j.source = 'llm'
                       THEN coalesce(j.model, '') || '|' || coalesce(j.prompt_hash, '')
                       ELSE coalesce(j.assessor, '') END AS assessor,
                  coalesce(j.model, '') AS model, coalesce(j.prompt_hash, '') AS prompt_hash,
                  CASE WHEN j.source = 'llm' THEN {KEY_SQL} END AS config
           {FROM_SQL}
           {where}
           ORDER BY j.judgment_id""",
        params,
    )


def count_labelled_spans(db: Database, query_ids: list[str] | None = None, *, tiers=None,
                         llm_configs=None) -> int:
    """How many rows :func:`labelled_spans` returns with the same filters (counted in SQL)."""
    where, params = _where(query_ids, tiers, llm_configs)
    return int(db.query_value(f"SELECT count(*) {FROM_SQL} {where}", params))
