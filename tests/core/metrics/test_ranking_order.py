"""Ranking order: (query, score descending, doc_id descending) on every sorting path.

The reference is Python's own sort of (query, -score, doc) with the doc compared as UTF-8
bytes (trec_eval's strcmp); the engine's three paths (rows already grouped by query, a radix
grouping for up to 65,536 queries, a packed 64-bit key beyond) must all give it.
"""

from __future__ import annotations

import numpy as np
import pytest
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.core.metrics import ranking
from workbench.core.metrics.qrels_and_runs import Qrels, Run

SCORES = st.sampled_from([0.0, -0.0, 1.0, 1.0000000000000002, 2.5, -3.0, 1e300, -1e-300, 7.0])
DOCS = st.sampled_from(["a", "b", "B", "é", "d1", "d10", "d2", "zz", "ä"])


@st.composite
def runs(draw):
    n_queries = draw(st.integers(1, 6))
    rows = []
    for q in range(n_queries):
        docs = draw(st.lists(DOCS, min_size=0, max_size=8, unique=True))
        rows += [(f"q{q}", d, draw(SCORES)) for d in docs]
    return draw(st.permutations(rows)) if rows else rows


def reference(rows):
    # two stable passes: doc ids descending as UTF-8 bytes, then query and score descending
    # (-0.0 == 0.0, so those tie and keep the doc order)
    by_doc = sorted(rows, key=lambda r: r[1].encode(), reverse=True)
    order = sorted(by_doc, key=lambda r: (r[0], -r[2]))
    return [(q, d) for q, d, _ in order]


def engine(rows):
    qrels = Qrels(pa.array(["q0"], pa.string()), pa.array(["a"], pa.string()), np.array([1]))
    run = Run(pa.array([r[0] for r in rows], pa.string()), pa.array([r[1] for r in rows], pa.string()),
              np.array([r[2] for r in rows], dtype=np.float64))
    universe, _, _, rq, score, _, doc_rank = ranking._join_columns(qrels, run, "error")
    order = ranking._order(rq, score, len(universe), doc_rank)
    # the row numbers in ranked order, whatever form the order takes
    idx = ranking._reorder(np.arange(len(rows)), order)
    got = [(rows[i][0], rows[i][1]) for i in idx.tolist()]
    # groups may come in any query order: compare per query, in the order within each
    by_query = {}
    for q, d in got:
        by_query.setdefault(q, []).append(d)
    return by_query


def as_groups(pairs):
    out = {}
    for q, d in pairs:
        out.setdefault(q, []).append(d)
    return out


@settings(max_examples=300, deadline=None)
@given(runs(), st.sampled_from(["default", "packed"]))
def test_every_path_ranks_like_the_reference(rows, path):
    original = ranking._sort_rows
    if path == "packed":
        ranking._sort_rows = lambda qidx, score, n, grouped: ranking._sort_packed(qidx, score, n)
    try:
        assert engine(rows) == as_groups(reference(rows))
    finally:
        ranking._sort_rows = original
    # contiguity: each query's rows are one block
    grouped = sorted(rows, key=lambda r: r[0])
    assert engine(grouped) == as_groups(reference(rows))


def test_radix_and_padded_paths_on_a_large_unsorted_run():
    rng = np.random.default_rng(3)
    n_q, depth = 300, 40
    q = np.repeat(np.arange(n_q), depth)
    scores = np.round(rng.random(q.size) * 5, 1)  # many ties
    docs = [f"d{i}" for i in rng.permutation(q.size)]
    perm = rng.permutation(q.size)
    rows = [(f"q{q[i]:03d}", docs[i], float(scores[i])) for i in perm.tolist()]
    assert engine(rows) == as_groups(reference(rows))
    checked = sum(len(v) for v in engine(rows).values())
    assert checked == n_q * depth


@pytest.mark.parametrize("block_rows", [1, 7, 64, 1 << 15])
@pytest.mark.parametrize("layout", ["grouped", "scattered"])
def test_the_padded_sort_in_blocks_of_groups_ranks_like_the_reference(monkeypatch, block_rows, layout):
    """Blocks of one group, of a few groups cut anywhere, and of every group; groups of
    uneven length (1 to 40 rows), a grouped file out of score order and a scattered one."""
    monkeypatch.setattr(ranking, "_BLOCK_ROWS", block_rows)
    rng = np.random.default_rng(11)
    lengths = rng.integers(1, 41, size=120)
    q = np.repeat(np.arange(len(lengths)), lengths)
    scores = np.round(rng.random(q.size) * 4, 1)  # many ties
    docs = [f"d{i}" for i in rng.permutation(q.size)]
    order = np.arange(q.size) if layout == "grouped" else rng.permutation(q.size)
    if layout == "grouped":  # each query's rows together, shuffled inside it
        order = np.concatenate([rng.permutation(np.flatnonzero(q == g)) for g in range(len(lengths))])
    rows = [(f"q{q[i]:03d}", docs[i], float(scores[i])) for i in order.tolist()]
    got = engine(rows)
    assert got == as_groups(reference(rows))
    assert sum(len(v) for v in got.values()) == q.size


def test_a_run_in_score_order_moves_only_its_tie_groups(monkeypatch):
    """Rows already in (query, score) order: the order is a _TieOrder touching only rows of
    tie groups; applied, it gives the reference ranking, and rank_run's result equals the one
    of the same rows shuffled (a full permutation)."""
    rng = np.random.default_rng(5)
    q = np.repeat(np.arange(50), 30)
    scores = np.round(rng.random(q.size) * 3, 1)
    docs = [f"d{i}" for i in rng.permutation(q.size)]
    judged = [(f"q{q[i]:02d}", docs[i], int(rng.integers(0, 4))) for i in range(0, q.size, 3)]
    rows = sorted(((f"q{q[i]:02d}", docs[i], float(scores[i])) for i in range(q.size)), key=lambda r: (r[0], -r[2]))
    qrels = Qrels(pa.array([j[0] for j in judged]), pa.array([j[1] for j in judged]), np.array([j[2] for j in judged]))

    def run_of(rs):
        return Run(pa.array([r[0] for r in rs]), pa.array([r[1] for r in rs]), np.array([r[2] for r in rs]))

    universe, _, _, rq, score, _, doc_rank = ranking._join_columns(qrels, run_of(rows), "error")
    order = ranking._order(rq, score, len(universe), doc_rank)
    assert isinstance(order, ranking._TieOrder)
    moved = np.flatnonzero(ranking._reorder(np.arange(len(rows)), order) != np.arange(len(rows)))
    tied = {i for i in range(len(rows)) for j in (i - 1, i + 1)
            if 0 <= j < len(rows) and rows[j][0] == rows[i][0] and rows[j][2] == rows[i][2]}
    assert 0 < len(moved) and set(moved.tolist()) <= tied
    assert ranking._reorder(rq.copy(), order, same_in_ties=True).tolist() == rq.tolist()
    assert engine(rows) == as_groups(reference(rows))
    shuffled = [rows[i] for i in rng.permutation(len(rows)).tolist()]

    def key(r):
        return sorted(zip(r.query_ids[r.qidx].tolist(), r.rank.tolist(), np.nan_to_num(r.grade, nan=-9).tolist()))

    for path in ("hashed", "columns"):
        if path == "columns":  # the exact join, as when two pairs share a hash
            monkeypatch.setattr(ranking, "_join_hashed", lambda qrels, run: None)
        assert key(ranking.rank_run(qrels, run_of(rows))) == key(ranking.rank_run(qrels, run_of(shuffled))), path
        assert key(ranking.rank_run(qrels.to_dict(), run_of(rows).to_dict())) == key(ranking.rank_run(qrels, run_of(rows)))
