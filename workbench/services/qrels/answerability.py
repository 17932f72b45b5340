"""Which queries of a project are unanswerable: the latest SME decision ("no passage in the corpus
answers this", recorded with :func:`mark_answerability`) or, without a decision, the query's tags
(a tag ``unanswerable`` or ``type: unanswerable``). Qrels leave these queries out
(:func:`without_unanswerable`), so exported qrels and project evaluation drop the same rows;
:mod:`workbench.services.evaluation.abstention` scores how systems abstain on them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace

import pandas as pd

from workbench.core.rag import abstention as core
from workbench.errors import ConfigError, InputError, clip
from workbench.services import access
from workbench.store import query_kinds as store
from workbench.store.database import Database


def query_answerability(db: Database) -> pd.DataFrame:
    """``query_id, text, unanswerable, decided_by`` for every query; ``decided_by`` is ``sme``
    (an SME decision, which wins), ``tag`` (the query's tags) or ``none`` (answerable by default)."""
    queries = store.query_tags(db)
    decided = _decisions(db)
    unanswerable, by = [], []
    for qid, tags in zip(queries["query_id"], queries["tags"]):
        marked, who = _decide(qid, tags, decided)
        unanswerable.append(marked)
        by.append(who)
    return pd.DataFrame({"query_id": queries["query_id"].astype(str), "text": queries["text"],
                         "unanswerable": pd.Series(unanswerable, dtype=bool), "decided_by": by})


def unanswerable_ids(db: Database) -> list[str]:
    """Ids of the unanswerable queries (:func:`query_answerability`), in query order, decided
    over the queries with tags or an SME decision only: a query with neither is answerable, so
    a project of untagged queries is not read whole."""
    decided = _decisions(db)
    queries = store.tagged_or_decided_queries(db)
    return [str(qid) for qid, tags in zip(queries["query_id"], queries["tags"]) if _decide(qid, tags, decided)[0]]


def _decisions(db: Database) -> dict:
    """``{query_id: answerable}``: the latest SME decision of each query that has one."""
    latest = store.latest_answerability(db)
    return {qid: bool(ok) for qid, ok in zip(latest["query_id"], latest["answerable"])}


def _decide(qid, tags, decided: dict) -> tuple[bool, str]:
    """``(unanswerable, decided_by)`` of one query: an SME decision wins, else its tags (JSON text)."""
    if qid in decided:
        return not decided[qid], "sme"
    parsed = json.loads(tags) if isinstance(tags, str) and tags else None
    marked = core.tags_say_unanswerable(parsed)
    return marked, "tag" if marked else "none"


def mark_answerability(db: Database, query_id: str, *, answerable: bool, annotator: str,
                       comment: str | None = None) -> None:
    """Record an SME decision: the corpus answers ``query_id`` (``answerable``) or it does not."""
    access.require("label")
    if not annotator or not annotator.strip():
        raise ConfigError("an SME decision needs the annotator's name or id")
    known = set(store.query_tags(db)["query_id"].astype(str))
    if query_id not in known:
        raise InputError(f"no query {clip(query_id)} in the project; check the query id")
    with db.transaction() as tx:
        store.record_answerability(tx, query_id, answerable, annotator.strip(), comment)


def answerable_only(qrels: dict[str, dict[str, int]], unanswerable: Sequence[str]) -> tuple[dict, list[str]]:
    """Qrels without the unanswerable queries (for recall@k, MRR, nDCG) and the ids left out."""
    drop = set(unanswerable)
    kept = {q: docs for q, docs in qrels.items() if q not in drop}
    return kept, sorted(q for q in qrels if q in drop)


def without_unanswerable(db: Database, qrels):
    """``(qrels, left_out)``: project qrels (:class:`~workbench.services.qrels.rule.ProjectQrels`)
    without the rows of unanswerable queries, and the sorted ids of the unanswerable queries the
    qrels held. The one place project evaluation and the qrels export drop them, so a qrels file
    exported by default scores like ``workbench eval --runs`` (same rows, same fingerprint)."""

    table = qrels.table
    dropped = table["query_id"].astype(str).isin(set(map(str, unanswerable_ids(db))))
    if not dropped.any():
        return qrels, []
    left_out = sorted(table.loc[dropped, "query_id"].astype(str).unique())
    return replace(qrels, table=table[~dropped].reset_index(drop=True)), left_out
