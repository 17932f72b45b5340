"""Read-only views of what the project holds, for the app's Queries & Labels page and pool peeks.

* :func:`queries_table`: every query with its text, description, tags and how many labels it has
  (an annotator counts and sees only their own, see :func:`labels_table`).
* :func:`labels_table`: labels (span judgments with status ``ok``) with the document title and
  an SME's comment and evidence spans, filtered by query, grade, source and assessor, one page at a
  time (:func:`count_labels`: how many); :func:`label_facets`: the sources and assessors to filter
  by. Everything is filtered, counted and paged in SQL, so a page costs the same on a project of a
  million labels.
* :func:`label_document`: the text of a label's document, for showing the span in place.
* :func:`peek_pool`: the first pairs of one query of a pool in judging order, with the query
  text, the document title, the whole item text and the grade the current labels give it.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from workbench.config import DEFAULTS
from workbench.errors import StoreError
from workbench.services import visibility
from workbench.services.pooling.pools import pool_labels, pool_preview
from workbench.store.calibration import judgment_notes
from workbench.store.corpus import read_documents, read_queries
from workbench.store.database import Database
from workbench.store.judgments import count_labels as store_count_labels
from workbench.store.judgments import label_counts_by_query, label_values, read_labels
from workbench.store.pools import read_pool

LABEL_COLUMNS = ["judgment_id", "query_id", "doc_id", "title", "start", "end", "grade", "source",
                 "assessor", "created_at", "comment", "evidence"]


def queries_table(db: Database) -> pd.DataFrame:
    """``query_id, text, description, tags (dict or None), labels`` ordered by query_id; the
    labels counted per query in SQL, among those the caller may see
    (:func:`workbench.services.visibility.label_scope`)."""
    queries = read_queries(db)
    counts = label_counts_by_query(db, scope=visibility.label_scope())
    labels = pd.Series(counts["labels"].to_numpy(), index=counts["query_id"].astype(str))
    out = queries.assign(labels=queries["query_id"].map(labels).fillna(0).astype("int64"))
    return out.reset_index(drop=True)


def labels_table(db: Database, *, query_ids: Iterable[str] | None = None, grades: Iterable[int] | None = None,
                 sources: Iterable[str] | None = None, assessors: Iterable[str] | None = None,
                 limit: int | None = None, offset: int = 0) -> pd.DataFrame:
    """Labels (status ``ok``) with their document's title, oldest first; each filter keeps rows
    whose value is among the given ones (None: no filter). Columns: :data:`LABEL_COLUMNS`.
    An annotator (:mod:`workbench.services.access`) gets only their own human labels: others'
    labels and the judge's stay unseen, so nobody is swayed before labelling
    (:func:`workbench.services.visibility.label_scope`, applied in the read itself). The filters
    apply after that, so naming another assessor finds none of their labels. ``limit`` /
    ``offset``: one page of that list (None: all of it; :func:`count_labels` gives its length).

    ``comment`` and ``evidence`` (document spans ``[[start, end], ...]``) are what an SME gave
    with the label on the Label page (None for other labels, or when they gave none); they are
    looked up for the visible labels of the page only, so an annotator never receives another's."""
    labels = read_labels(db, scope=visibility.label_scope(), query_ids=_listed(query_ids), grades=_listed(grades),
                         sources=_listed(sources), assessors=_listed(assessors), limit=limit, offset=offset)
    notes = judgment_notes(db, labels["judgment_id"].tolist())
    labels["comment"] = [notes.get(int(i), {}).get("comment") for i in labels["judgment_id"]]
    labels["evidence"] = [notes.get(int(i), {}).get("evidence") for i in labels["judgment_id"]]
    return labels.reindex(columns=LABEL_COLUMNS).reset_index(drop=True)


def count_labels(db: Database, *, query_ids: Iterable[str] | None = None, grades: Iterable[int] | None = None,
                 sources: Iterable[str] | None = None, assessors: Iterable[str] | None = None) -> int:
    """How many labels :func:`labels_table` lists with the same filters (counted in SQL)."""
    return store_count_labels(db, scope=visibility.label_scope(), query_ids=_listed(query_ids),
                              grades=_listed(grades), sources=_listed(sources), assessors=_listed(assessors))


def label_facets(db: Database) -> dict:
    """What the caller may filter the labels by: ``{"labels": n, "sources": [...], "assessors":
    [...]}`` over the labels they may see, sorted (read in SQL, never the labels themselves)."""
    scope = visibility.label_scope()
    return {"labels": store_count_labels(db, scope=scope), "sources": label_values(db, "source", scope=scope),
            "assessors": label_values(db, "assessor", scope=scope)}


def document_titles(db: Database, doc_ids: Iterable[str]) -> dict[str, str | None]:
    """``doc_id -> title`` of the given documents (those missing are absent)."""
    found = read_documents(db, [str(d) for d in doc_ids], with_text=False)
    return dict(zip(found["doc_id"].astype(str), found["title"]))


def _listed(values):
    return None if values is None else list(values)


def label_document(db: Database, doc_id: str) -> str:
    """The full text of ``doc_id`` (a label's span indexes into it)."""
    docs = read_documents(db, [doc_id])
    if docs.empty:
        raise StoreError(f"no document {doc_id!r} in this project")
    return str(docs.iloc[0]["text"])


def peek_pool(db: Database, pool: str, query_id: str, *, limit: int = 5,
              min_overlap: float = DEFAULTS["evaluation"]["min_overlap"]) -> dict:
    """The first ``limit`` pairs of ``query_id`` in ``pool`` by priority, with what a judge sees.

    Returns ``{"query_id", "query", "description", "pairs", "policy"}``; ``pairs`` has ``priority,
    doc_id, chunk_id, title, rrf_score, text, grade`` where ``text`` is the whole chunk (or
    document) and ``grade`` the grade the project's one qrels rule gives the pair
    (:func:`workbench.services.pooling.pools.pool_labels`), or NA when it has none; ``policy`` states
    that rule (with what it left out).
    """

    record = read_pool(db, pool)
    if record is None:
        raise StoreError(f"no pool {pool!r} in this project")
    pairs = pool_preview(db, pool, query_id, limit=limit)
    queries = read_queries(db)
    query = queries.loc[queries["query_id"] == query_id]
    titles = read_documents(db, pairs["doc_id"].unique().tolist(), with_text=False)[["doc_id", "title"]]
    pairs = pairs.merge(titles, on="doc_id", how="left")
    item = "chunk_id" if record["level"] == "chunk" else "doc_id"
    labels = pool_labels(db, record["level"], record["chunking"], min_overlap)
    policy = labels.attrs.get("qrels_policy", "")
    labels = labels.loc[labels["query_id"] == query_id, [item, "grade"]]
    pairs = pairs.merge(labels, on=item, how="left").sort_values("priority")
    pairs["grade"] = pairs["grade"].astype("Int64")
    return {
        "query_id": query_id,
        "query": str(query.iloc[0]["text"]) if len(query) else "",
        "description": query.iloc[0]["description"] if len(query) else None,
        "pairs": pairs.reindex(columns=["priority", "doc_id", "chunk_id", "title", "rrf_score", "text", "grade"])
                      .reset_index(drop=True),
        "policy": policy,
    }
