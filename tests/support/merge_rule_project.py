"""A hand-worked project where the old qrels rules and the one rule disagree.

On top of :func:`tests.support.calibration_project.build_project` (a pool ``p`` of 360 pairs,
each graded by judge configuration ``m1`` with the true grade):

* a second judge configuration ``m2`` grades every pair at random; calibration sample ``s1``
  gates ``m1`` (it passes), sample ``s2`` gates ``m2`` (it fails);
* on one item of ``s1`` a second SME disagrees and a lead resolves it (an adjudicated label);
* queries ``h1``/``h2`` over documents ``hd1``–``hd6``, judged by hand (:data:`HAND`), ranked by
  the stored run ``hr`` and pooled in ``hp``.

:func:`expected_qrels` is the merged grade of every judged pair under the default policy
(adjudicated > SME (majority, ties to the higher grade) > imported > LLM from a configuration
that passed the gate), worked out by hand; :func:`old_max_rule` is the rule pool statistics
used before (the maximum grade over every source), for showing the two disagree.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.support.calibration_project import build_project, label_all
from workbench.services.calibration import workflow as cal
from workbench.services.pooling.pools import build_pool
from workbench.store.corpus import write_documents, write_queries
from workbench.store.judgments import write_judgments
from workbench.store.runs import set_run_scope, write_run

HAND_DOCS = [f"hd{i}" for i in range(1, 7)]
TEXT = {d: f"Hand-worked document {d} about the merge rule. " * 2 for d in HAND_DOCS}

# (query, doc, source, assessor or judge model, grade, start, end); None span = whole document
HAND = [
    ("h1", "hd1", "human", "ann", 1, None), ("h1", "hd1", "llm", "m1", 3, None),          # SME 1 vs LLM 3 -> 1
    ("h1", "hd2", "human", "ann", 1, None), ("h1", "hd2", "human", "bob", 2, None),       # two SMEs tie -> 2
    ("h1", "hd3", "human", "ann", 2, None), ("h1", "hd3", "human", "bob", 1, None),
    ("h1", "hd3", "human", "cat", 1, None),                                                # majority -> 1
    ("h1", "hd4", "imported", "nist", 0, None), ("h1", "hd4", "llm", "m1", 2, None),     # imported 0 vs LLM 2 -> 0
    ("h1", "hd5", "human", "ann", 0, (0, 10)), ("h1", "hd5", "human", "ann", 2, (20, 30)),  # one SME's spans: max -> 2
    ("h1", "hd5", "llm", "m2", 3, None),
    ("h2", "hd1", "llm", "m2", 3, None),                                                   # failed judge only -> unjudged
    ("h2", "hd2", "llm", "m2", 3, None), ("h2", "hd2", "llm", "m1", 1, None),             # passed judge's 1 -> 1
    ("h2", "hd3", "llm", "m1", 2, None),                                                   # -> 2
    ("h2", "hd4", "imported", "nist", 1, None), ("h2", "hd4", "imported", "trec", 3, None),
    ("h2", "hd4", "llm", "m1", 0, None),                                                   # imported tie -> 3
    ("h2", "hd5", "human", "ann", 0, None), ("h2", "hd5", "llm", "m1", 3, None),          # SME 0 vs LLM 3 -> 0
]
HAND_EXPECTED = {("h1", "hd1"): 1, ("h1", "hd2"): 2, ("h1", "hd3"): 1, ("h1", "hd4"): 0, ("h1", "hd5"): 2,
                 ("h2", "hd2"): 1, ("h2", "hd3"): 2, ("h2", "hd4"): 3, ("h2", "hd5"): 0}
# ties to the lower grade (a configured policy): only the tied pairs change
HAND_EXPECTED_TIES_LOWER = {**HAND_EXPECTED, ("h1", "hd2"): 1, ("h2", "hd4"): 1}


def _hand_judgments() -> pd.DataFrame:
    rows = []
    for q, d, source, who, grade, span in HAND:
        start, end = span if span else (0, len(TEXT[d]))
        llm = source == "llm"
        rows.append({"query_id": q, "doc_id": d, "start": start, "end": end, "grade": grade, "source": source,
                     "assessor": "judge" if llm else who, "model": who if llm else None, "status": "ok"})
    # a failed judge call is never a grade
    rows.append({"query_id": "h2", "doc_id": "hd6", "start": 0, "end": len(TEXT["hd6"]), "grade": None,
                 "source": "llm", "assessor": "judge", "model": "m1", "status": "failed"})
    return pd.DataFrame(rows)


def build_merge_project(path) -> tuple[object, dict]:
    """The project described in the module docstring and its expected qrels (open database)."""
    db, truth = build_project(path, judge_noise=0.0)
    rng = np.random.default_rng(11)
    pairs = db.query_df("SELECT query_id, doc_id, start, \"end\" FROM judgments WHERE model = 'm1' AND status = 'ok'")
    m2 = pairs.assign(grade=rng.integers(0, 4, len(pairs)), source="llm", assessor="judge", model="m2", status="ok")
    with db.transaction() as tx:
        write_judgments(tx, m2)
        write_documents(tx, pd.DataFrame({"doc_id": HAND_DOCS, "title": [f"Hand {d}" for d in HAND_DOCS],
                                          "text": [TEXT[d] for d in HAND_DOCS]}))
        write_queries(tx, pd.DataFrame({"query_id": ["h1", "h2"], "text": ["merge rule one", "merge rule two"],
                                        "description": [None, None], "tags": [None, None]}))
        write_judgments(tx, _hand_judgments())
        # run hr ranks the hand-worked documents: h1 from hd6 down to hd1, h2 from hd1 up to hd6
        rows = [{"query_id": "h1", "doc_id": d, "chunk_id": None, "rank": r, "score": float(10 - r)}
                for r, d in enumerate(reversed(HAND_DOCS), 1)]
        rows += [{"query_id": "h2", "doc_id": d, "chunk_id": None, "rank": r, "score": float(10 - r)}
                 for r, d in enumerate(HAND_DOCS, 1)]
        write_run(tx, "hr", "hand", pd.DataFrame(rows))
        set_run_scope(tx, "hr", "doc", None)
    build_pool(db, "hp", ["hr"], depth=10)

    cal.create_sample(db, "s1", "p", size=200, seed=1, model="m1")
    label_all(db, "s1", truth)
    cal.create_sample(db, "s2", "p", size=200, seed=2, model="m2")
    label_all(db, "s2", truth)
    # a second SME disagrees on one held-out item of s1, and a lead resolves it
    item = db.query_df("SELECT position, query_id, doc_id FROM calibration_items WHERE sample = 's1' "
                       "AND part = 'holdout' ORDER BY position LIMIT 1").iloc[0]
    true = truth[(item["query_id"], item["doc_id"])]
    cal.save_label(db, "s1", "bob", int(item["position"]), (true + 1) % 4)
    resolved = (true + 2) % 4
    cal.adjudicate(db, "s1", int(item["position"]), resolved, lead="lee")

    expected = dict(truth)
    expected[(item["query_id"], item["doc_id"])] = resolved
    expected.update(HAND_EXPECTED)
    return db, {"expected": expected, "adjudicated": (item["query_id"], item["doc_id"]), "truth": truth}


def old_max_rule(db) -> dict:
    """The rule pool statistics used before the one rule: the maximum grade over every ``ok``
    judgment of a (query, document), whatever its source or judge."""
    rows = db.query_df("SELECT query_id, doc_id, max(grade) AS grade FROM judgments "
                       "WHERE status = 'ok' AND grade IS NOT NULL GROUP BY ALL")
    return {(q, d): int(g) for q, d, g in rows.itertuples(index=False)}

