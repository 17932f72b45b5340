"""Depth-k pooling: hand-worked pools, incremental pooling property, diagnostics, LOO."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.reference_pooling import (
    Pool,
    add_runs_to_pool,
    build_pool,
    judged_at_k,
    judging_order,
    leave_one_run_out,
    pool_sizes,
    precision_at_k,
    run_overlap,
    unique_contributions,
)
from workbench.core.pooling.fusion import rrf
from workbench.core.pooling.diagnostics import PoolingError


def run(rows):
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "rank"])


A = run([("q1", "a", 1), ("q1", "b", 2), ("q1", "c", 3), ("q2", "x", 1), ("q2", "y", 2)])
B = run([("q1", "c", 1), ("q1", "a", 2), ("q1", "d", 3)])
C = run([("q1", "e", 1), ("q1", "a", 2), ("q2", "z", 1)])


def pairs_of(df):
    return set(zip(df["query_id"], df["doc_id"]))


@pytest.fixture
def pool() -> Pool:
    return build_pool({"A": A, "B": B}, depth=2)


def test_hand_worked_pool(pool):
    assert pairs_of(pool.pairs) == {("q1", "a"), ("q1", "b"), ("q1", "c"), ("q2", "x"), ("q2", "y")}
    # priority: a = 1/61 + 1/62 > c = 1/61 > b = 1/62
    q1 = pool.pairs.loc[pool.pairs["query_id"] == "q1"]
    assert q1["doc_id"].tolist() == ["a", "c", "b"] and q1["priority"].tolist() == [1, 2, 3]
    assert dict(zip(q1["doc_id"], q1["n_runs"])) == {"a": 2, "c": 1, "b": 1}
    assert dict(zip(q1["doc_id"], q1["best_rank"])) == {"a": 1, "c": 1, "b": 2}
    prov = set(pool.provenance.itertuples(index=False, name=None))
    assert prov == {
        ("A", "q1", "a", 1), ("A", "q1", "b", 2), ("A", "q2", "x", 1), ("A", "q2", "y", 2),
        ("B", "q1", "c", 1), ("B", "q1", "a", 2),
    }
    assert pool.depths == {"A": 2, "B": 2}


def test_pool_statistics(pool):
    assert pool_sizes(pool).to_dict("records") == [
        {"query_id": "q1", "pool_size": 3}, {"query_id": "q2", "pool_size": 2},
    ]
    assert unique_contributions(pool).to_dict("records") == [
        {"run_id": "A", "pooled": 4, "unique": 3}, {"run_id": "B", "pooled": 2, "unique": 1},
    ]
    ov = run_overlap(pool).to_dict("records")
    assert ov == [{"run_a": "A", "run_b": "B", "shared": 1, "union": 5, "jaccard": pytest.approx(0.2)}]


def test_add_runs_returns_only_new_pairs(pool):
    upd = add_runs_to_pool(pool, {"C": C}, depth=5)
    assert pairs_of(upd.new_pairs) == {("q1", "e"), ("q2", "z")}
    assert upd.new_pairs["priority"].tolist() == [1, 1]
    assert ("C", "q1", "a", 2) in set(upd.provenance.itertuples(index=False, name=None))
    assert upd.pool.depths == {"A": 2, "B": 2, "C": 5}
    with pytest.raises(PoolingError, match="already in the pool"):
        add_runs_to_pool(pool, {"A": C}, depth=2)


def test_judged_at_k_and_precision(pool):
    labels = pd.DataFrame(
        {"query_id": ["q1", "q1", "q2"], "doc_id": ["a", "d", "x"], "grade": [2, 1, None]}
    )
    # A@2: q1 {a, b} -> 1/2 judged; q2 {x, y} -> x has a NULL grade = unjudged -> 0. Mean 0.25.
    # B@2: q1 {c, a} -> 1/2.
    got = judged_at_k({"A": A, "B": B}, labels, 2)
    assert got.to_dict("records") == [{"run_id": "A", "judged_at_k": 0.25}, {"run_id": "B", "judged_at_k": 0.5}]
    per_q = judged_at_k(pool, labels, 2, per_query=True)
    assert set(per_q.itertuples(index=False, name=None)) == {("A", "q1", 0.5), ("A", "q2", 0.0), ("B", "q1", 0.5)}
    # B@3 returns 3 docs: a and d judged -> 2/3; divided by k even when fewer are returned
    assert judged_at_k({"B": B}, labels, 5)["judged_at_k"].tolist() == [pytest.approx(2 / 5)]
    p = precision_at_k({"A": A, "B": B}, labels, 2, rel_threshold=2)
    assert p["precision_at_k"].tolist() == [0.25, 0.5]


LOO_LABELS = pd.DataFrame(
    {
        "query_id": ["q1", "q1", "q1", "q2", "q2"],
        "doc_id": ["b", "c", "a", "x", "y"],
        "grade": [1, 3, 0, 2, 0],
    }
)


def test_leave_one_run_out_by_hand(pool):
    got = leave_one_run_out(pool, LOO_LABELS, k=2).set_index("run_id")
    # A: P@2 q1 {a:0, b:1} = 1/2, q2 {x:2, y:0} = 1/2 -> 0.5. Without A's unique b, x, y: 0.
    assert got.loc["A", "unique_pairs"] == 3 and got.loc["A", "unique_judged"] == 3
    assert got.loc["A", "metric_with"] == 0.5 and got.loc["A", "metric_without"] == 0.0
    # B: P@2 q1 {c:3, a:0} = 1/2. Without its unique c: 0.
    assert got.loc["B", "unique_pairs"] == 1
    assert got.loc["B", "metric_with"] == 0.5 and got.loc["B", "delta"] == 0.5


def test_leave_one_run_out_with_a_metric_callable(pool):
    seen = []

    def relevant_retrieved(qrels, run):
        seen.append((qrels, run))
        return {q: sum(1 for d in docs if qrels.get(q, {}).get(d, 0) >= 1) for q, docs in run.items()}

    got = leave_one_run_out(pool, LOO_LABELS, k=2, metric=relevant_retrieved).set_index("run_id")
    assert got.loc["A", "metric_with"] == 1.0 and got.loc["A", "metric_without"] == 0.0
    qrels, run_a = seen[0]
    assert qrels["q1"] == {"b": 1, "c": 3, "a": 0}
    assert run_a["q1"] == {"a": 1.0, "b": 0.5}  # score = 1/rank


def test_judging_order_budget_and_exclusion(pool):
    order = judging_order(pool)
    # round robin: every query's priority-1 pair first
    assert list(zip(order["query_id"], order["doc_id"])) == [
        ("q1", "a"), ("q2", "x"), ("q1", "c"), ("q2", "y"), ("q1", "b"),
    ]
    assert len(judging_order(pool, 3)) == 3
    assert pairs_of(judging_order(pool, 1, per_query=True)) == {("q1", "a"), ("q2", "x")}
    done = pd.DataFrame({"query_id": ["q1"], "doc_id": ["a"], "grade": [1]})
    rest = judging_order(pool, 1, per_query=True, exclude=done)
    assert pairs_of(rest) == {("q1", "c"), ("q2", "x")}


def test_errors(pool):
    with pytest.raises(PoolingError, match="depth"):
        build_pool({"A": A}, depth=0)
    with pytest.raises(PoolingError, match="lack columns"):
        judged_at_k(pool, pd.DataFrame({"query_id": ["q1"], "doc_id": ["a"]}), 2)
    with pytest.raises(PoolingError, match="cutoff"):
        judged_at_k(pool, LOO_LABELS, 0)
    with pytest.raises(PoolingError, match="budget"):
        judging_order(pool, -1)


# ----------------------------------------------------------------- properties vs naive oracle

runs_st = st.dictionaries(
    st.sampled_from(["r1", "r2", "r3", "r4"]),
    st.dictionaries(
        st.sampled_from(["q1", "q2", "q3"]),
        st.lists(st.sampled_from("abcdefghij"), min_size=1, max_size=8, unique=True),
        min_size=1,
    ),
    min_size=2,
)


def to_frames(spec):
    return {
        name: run([(q, d, i + 1) for q, docs in qs.items() for i, d in enumerate(docs)])
        for name, qs in spec.items()
    }


def naive_pool(spec, depth):
    return {(q, d) for qs in spec.values() for q, docs in qs.items() for d in docs[:depth]}


@given(runs_st, st.integers(1, 5), st.data())
@settings(max_examples=100, deadline=None)
def test_adding_runs_adds_exactly_the_new_pairs(spec, depth, data):
    frames = to_frames(spec)
    names = sorted(frames)
    n_first = data.draw(st.integers(1, len(names) - 1))
    first = {n: frames[n] for n in names[:n_first]}
    later = {n: frames[n] for n in names[n_first:]}
    old = build_pool(first, depth)
    assert pairs_of(old.pairs) == naive_pool({n: spec[n] for n in first}, depth)
    upd = add_runs_to_pool(old, later, depth)
    full = build_pool({**first, **later}, depth)
    new = pairs_of(upd.new_pairs)
    assert not new & pairs_of(old.pairs)
    assert new | pairs_of(old.pairs) == naive_pool(spec, depth) == pairs_of(full.pairs)
    assert len(upd.new_pairs) == len(new)
    pd.testing.assert_frame_equal(upd.pool.pairs, full.pairs)
    assert set(upd.provenance.itertuples(index=False, name=None)) == set(
        full.provenance.itertuples(index=False, name=None)
    )
    # New pairs keep the full pool's fused order within each query.
    merged = upd.new_pairs.merge(full.pairs, on=["query_id", "doc_id"], suffixes=("_new", "_full"))
    for _, g in merged.groupby("query_id"):
        assert g.sort_values("priority_new")["priority_full"].is_monotonic_increasing
        assert sorted(g["priority_new"]) == list(range(1, len(g) + 1))


@given(runs_st, st.integers(1, 5))
@settings(max_examples=60, deadline=None)
def test_priority_is_rrf_among_pooled_runs_and_stats_match_oracle(spec, depth):
    frames = to_frames(spec)
    pool = build_pool(frames, depth)
    fused = rrf(frames, depth=depth)
    assert list(zip(pool.pairs["query_id"], pool.pairs["doc_id"], pool.pairs["priority"])) == list(
        zip(fused["query_id"], fused["doc_id"], fused["rank"])
    )
    per_run = {n: {(q, d) for q, docs in qs.items() for d in docs[:depth]} for n, qs in spec.items()}
    uc = unique_contributions(pool).set_index("run_id")
    for n, mine in per_run.items():
        others = set().union(*(p for m, p in per_run.items() if m != n))
        assert uc.loc[n, "pooled"] == len(mine)
        assert uc.loc[n, "unique"] == len(mine - others)
    for row in run_overlap(pool).itertuples():
        a, b = per_run[row.run_a], per_run[row.run_b]
        assert row.shared == len(a & b) and row.union == len(a | b)
        assert math.isclose(row.jaccard, len(a & b) / len(a | b))


def test_cutoff_uses_positions_ties_by_item_id_and_rank_gaps():
    tied = run([("q", "c", 1), ("q", "a", 1), ("q", "b", 1)])
    gaps = run([("q", "x", 9), ("q", "y", 5), ("q", "z", 20)])
    labels = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["c", "z"], "grade": [1, 1]})
    # tied ranks: top-2 by item id is {a, b}, so the labelled c is outside the cutoff
    assert judged_at_k({"t": tied}, labels, 2)["judged_at_k"].tolist() == [0.0]
    assert judged_at_k({"t": tied}, labels, 3)["judged_at_k"].tolist() == [pytest.approx(1 / 3)]
    # rank gaps: positions 1, 2, 3 are y (5), x (9), z (20)
    assert judged_at_k({"g": gaps}, labels, 2)["judged_at_k"].tolist() == [0.0]
    assert judged_at_k({"g": gaps}, labels, 3)["judged_at_k"].tolist() == [pytest.approx(1 / 3)]
