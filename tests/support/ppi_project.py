"""A judged document-level project (tests.support.calibration_project) with two stored runs,
for the project mode of PPI++ (``--labels corrected``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.support.calibration_project import DOCS_PER_QUERY, QUERIES, build_project
from workbench.services.calibration import workflow as cal
from workbench.store import calibration as store
from workbench.store.runs import set_run_scope, write_run

RUNS = ("ra", "rb")


def build_ppi_project(path, *, seed: int = 0):
    """The calibration project plus runs ``ra`` and ``rb`` (document level): each ranks its
    query's 12 pooled documents in a seeded random order, ``rb`` with the truly relevant ones
    pushed up, plus 2 documents of other queries (unjudged there). Returns ``(db, truth)``."""
    db, truth = build_project(path, seed=seed, judge_noise=0.4)
    rng = np.random.default_rng(seed + 1)
    for run, boost in zip(RUNS, (0.0, 0.6)):
        rows = []
        for qi in range(QUERIES):
            q = f"q{qi:02d}"
            docs = [f"d{qi * DOCS_PER_QUERY + j}" for j in range(DOCS_PER_QUERY)]
            others = [f"d{((qi + 1) % QUERIES) * DOCS_PER_QUERY + j}" for j in range(2)]
            scores = rng.random(len(docs)) + boost * np.array([truth[(q, d)] >= 2 for d in docs])
            ranked = list(zip(docs + others, list(scores) + list(rng.random(2) * 0.5)))
            ranked.sort(key=lambda t: -t[1])
            rows += [{"query_id": q, "doc_id": d, "chunk_id": None, "rank": r + 1, "score": float(s)}
                     for r, (d, s) in enumerate(ranked)]
        with db.transaction() as tx:
            write_run(tx, run, "test", pd.DataFrame(rows))
            set_run_scope(tx, run, "doc", None)
    return db, truth


def label_queries(db, sample: str, truth: dict, queries: int, *, annotator: str = "sme-a",
                  partial: int = 0) -> list[str]:
    """Grade every pair of the sample's first ``queries`` queries (labelling order) with the
    true grade, and all but one pair of the next ``partial`` queries; returns the fully labelled
    query ids."""
    items = store.read_sample_items(db, sample)
    order = list(dict.fromkeys(items["query_id"].astype(str)))
    full, part = order[:queries], order[queries:queries + partial]
    for q in full + part:
        rows = items[items["query_id"] == q]
        if q in part:
            rows = rows.iloc[1:]
        for row in rows.itertuples(index=False):
            cal.save_label(db, sample, annotator, int(row.position), truth[(row.query_id, row.doc_id)])
    return full
