"""Mapping a document-level run onto the chunks of a chunking.

External runs (TREC run files) often rank whole documents. To pool or evaluate them with
chunk-level runs they must rank chunks. :func:`doc_run_to_chunks` applies one explicit rule:

``first``  each document at rank ``r`` becomes its first chunk (``seq`` 0) at rank ``r`` with
           the document's score. One chunk per document: the run keeps its length, and the
           item assessors see is the start of the document (title, lead paragraph).
``all``    every chunk of the document inherits the document's score; chunks are ordered by
           (document rank, ``seq``) and re-ranked ``1..n`` per query. A document with ``m``
           chunks takes ``m`` consecutive ranks, so a depth-k cut sees fewer documents.

Documents that have no chunk in the chunking (not in the corpus, or empty) are dropped and
counted in ``dropped``. The alternative to mapping is to pool at document level: a pool over
'doc' runs stores pairs with no chunk id.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.core.option_names import DOC_MAPPING_RULES
from workbench.errors import InputError

RULES = DOC_MAPPING_RULES


def doc_run_to_chunks(run: pd.DataFrame, chunks: pd.DataFrame, rule: str = "first") -> tuple[pd.DataFrame, int]:
    """Map ``run`` (``query_id, doc_id, rank, score``) to chunks (``chunk_id, doc_id, seq``).

    Returns ``(rows, dropped)`` with rows ``query_id, doc_id, chunk_id, rank, score`` sorted by
    query_id, rank, and ``dropped`` the number of run rows whose document has no chunk.
    """
    if rule not in RULES:
        raise InputError(f"unknown doc-to-chunk rule {rule!r}; choose one of {', '.join(RULES)}")
    ordered = run.sort_values(["query_id", "rank", "doc_id"], kind="stable")[["query_id", "doc_id", "rank", "score"]]
    table = chunks[["chunk_id", "doc_id", "seq"]]
    if rule == "first":
        table = table.loc[table["seq"] == table.groupby("doc_id")["seq"].transform("min")]
    merged = ordered.merge(table, on="doc_id", how="inner")
    docs_with_chunks = set(table["doc_id"].astype(str))
    dropped = int((~ordered["doc_id"].astype(str).isin(docs_with_chunks)).sum())
    merged = merged.sort_values(["query_id", "rank", "doc_id", "seq"], kind="stable").reset_index(drop=True)
    if rule == "all":
        q = merged["query_id"].to_numpy()
        new = np.ones(len(q), dtype=bool)
        new[1:] = q[1:] != q[:-1]
        first = np.flatnonzero(new)
        merged["rank"] = np.arange(len(q)) - np.repeat(first, np.diff(np.r_[first, len(q)])) + 1
    return merged[["query_id", "doc_id", "chunk_id", "rank", "score"]], dropped
