"""Budgeted judging (issue 14): orderings, budget cut and interval effect worked by hand, and the
simulation on a small collection (its Kendall's tau is tested in tests/core/calibration)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from workbench.core.judging import budget as bj
from workbench.errors import InputError


def _pool():
    # three runs; ranks 0 = not retrieved within the depth
    return pd.DataFrame({
        "query_id": ["q1", "q1", "q1", "q2", "q2"],
        "item_id": ["a", "b", "c", "a", "d"],
        "priority": [1, 2, 3, 1, 2],
        "rank:r1": [1, 2, 0, 1, 2],
        "rank:r2": [1, 0, 1, 1, 2],
        "rank:r3": [1, 3, 2, 1, 2],
    })


def test_comparison_weight_by_hand():
    w = bj.comparison_weight(_pool(), k=10)
    # a in q1: all rank 1 -> 0. b: d = (1/log2 3, 0, 1/log2 4 = 0.5)
    d2 = 1 / math.log2(3)
    b = abs(d2 - 0) + abs(d2 - 0.5) + abs(0 - 0.5)
    # c: d = (0, 1, 1/log2 3)
    c = 1 + d2 + abs(1 - d2)
    assert w == pytest.approx([0, b, c, 0, 0])
    # a cutoff k=1 keeps only rank 1: b -> (0,0,0), c -> (0,1,0)
    assert bj.comparison_weight(_pool(), k=1) == pytest.approx([0, 0, 2, 0, 0])


def test_orderings():
    pool = _pool()
    assert list(zip(*[bj.order_pairs(pool, "priority")[c] for c in ("query_id", "item_id")])) == [
        ("q1", "a"), ("q2", "a"), ("q1", "b"), ("q2", "d"), ("q1", "c")]
    cmp = bj.order_pairs(pool, "comparison")
    assert list(cmp["item_id"][:2]) == ["c", "b"]  # then the zero-weight pairs in priority order
    assert list(zip(cmp["query_id"][2:], cmp["item_id"][2:])) == [("q1", "a"), ("q2", "a"), ("q2", "d")]
    with_spread = pool.assign(spread=[np.nan, 0, 1, 3, np.nan])
    dis = bj.order_pairs(with_spread, "disagreement")
    assert list(zip(dis["query_id"], dis["item_id"]))[:3] == [("q2", "a"), ("q1", "c"), ("q1", "b")]
    r1 = bj.order_pairs(pool, "random", seed=3)
    r2 = bj.order_pairs(pool, "random", seed=3)
    assert r1["item_id"].tolist() == r2["item_id"].tolist()
    assert sorted(map(tuple, r1[["query_id", "item_id"]].to_numpy())) == sorted(
        map(tuple, pool[["query_id", "item_id"]].to_numpy()))
    with pytest.raises(InputError, match="strategy"):
        bj.order_pairs(pool, "best")


def test_combined_score_by_hand():
    pool = _pool().assign(spread=[3, np.nan, np.nan, 0, np.nan])
    got = bj.order_pairs(pool, "combined", k=10)
    d2 = 1 / math.log2(3)
    # q1/a: mean discount 1, no comparison weight, spread 3/3 -> 2.0
    score = dict(zip(zip(got["query_id"], got["item_id"]), got["score"]))
    assert score[("q1", "a")] == pytest.approx(2.0)
    b_weight = abs(d2 - 0) + abs(d2 - 0.5) + abs(0 - 0.5)  # as in test_comparison_weight_by_hand
    assert score[("q1", "b")] == pytest.approx((d2 + 0 + 0.5) / 3 + b_weight / 3)
    assert score[("q2", "d")] == pytest.approx(d2)


def test_budget_cut_skips_what_does_not_fit():
    ordered = pd.DataFrame({"item_id": list("abcd")})
    got = bj.select_within_budget(ordered, 5.0, [2.0, 4.0, 3.0, 1.0])
    assert got["item_id"].tolist() == ["a", "c"]  # 2 + 3 = 5; b (4) does not fit after a; d would be 6
    assert bj.select_within_budget(ordered, 0, 1.0).empty
    assert len(bj.select_within_budget(ordered, 2.5, 1.0)) == 2
    with pytest.raises(InputError):
        bj.select_within_budget(ordered, -1)


def test_interval_effect_by_hand():
    pool = _pool()
    judged = {("q1", "a"): 3, ("q2", "a"): 0}  # p = 1/2 relevant at grade >= 2
    got = bj.interval_effect(pool, judged, {("q1", "b")}, k=2).set_index("run")
    # r1 top-2: q1 {a, b} -> 1 unjudged; q2 {a, d} -> 1 unjudged. After judging b: 0 and 1.
    assert got.loc["r1", "width_before"] == pytest.approx((1 + 1) / 2 / 2)
    assert got.loc["r1", "width_after"] == pytest.approx((0 + 1) / 2 / 2)
    assert got.loc["r1", "half_width_before"] == pytest.approx(1.96 * math.sqrt(2 * 0.25) / (2 * 2))
    assert got.loc["r1", "half_width_after"] == pytest.approx(1.96 * math.sqrt(1 * 0.25) / (2 * 2))
    # r2 top-2: q1 {a, c} -> c unjudged (not selected); q2 {a, d} -> d
    assert got.loc["r2", "width_after"] == got.loc["r2", "width_before"] == pytest.approx(0.5)


def test_pool_from_runs_ranks_and_rrf_priority():
    runs = {"x": {"q": {"a": 3.0, "b": 2.0, "c": 1.0}}, "y": {"q": {"c": 5.0, "d": 4.0, "a": 4.0}}}
    pool = bj.pool_from_runs(runs, depth=2)
    rows = {i: (p, rx, ry) for i, p, rx, ry in pool[["item_id", "priority", "rank:x", "rank:y"]].itertuples(
        index=False)}
    # y ranks the tie a/d by doc id descending: d before a
    assert rows["a"][1:] == (1, 0) and rows["b"][1:] == (2, 0) and rows["c"][1:] == (0, 1)
    assert rows["d"][1:] == (0, 2)
    # RRF: a 1/61, c 1/61, b 1/62, d 1/62; ties by item id
    assert [i for i, _ in sorted(rows.items(), key=lambda kv: kv[1][0])] == ["a", "c", "b", "d"]


def test_simulation_recovers_the_ranking_with_the_whole_pool():
    qrels = {"q1": {"a": 3, "b": 0, "c": 2, "d": 1}, "q2": {"e": 2, "f": 0}}
    runs = {
        "good": {"q1": {"a": 3, "c": 2, "b": 1}, "q2": {"e": 2, "f": 1}},
        "mid": {"q1": {"c": 3, "a": 2, "d": 1}, "q2": {"f": 2, "e": 1}},
        "bad": {"q1": {"b": 3, "d": 2, "a": 1}, "q2": {"f": 2, "g": 1}},
    }
    table = bj.simulate(qrels, runs, depth=3, budgets=[1, 100], strategies=["priority", "random"],
                        measure="ndcg@3", seeds=[0, 1])
    full = table[table["budget"] == table["budget"].max()]
    assert (full["tau"] == 1.0).all() and (full["share"] == 1.0).all()
    assert set(table["strategy"]) == {"priority", "random"}
    truth = bj.system_scores(qrels, runs, "ndcg@3")
    assert truth["good"] > truth["mid"] > truth["bad"]
