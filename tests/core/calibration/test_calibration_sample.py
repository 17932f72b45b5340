"""core.calibration_sample: quotas, strata, weights, split, refusal, seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workbench.core.calibration.sample import (
    HOLDOUT,
    TUNING,
    CalibrationSampleError,
    SampleSpec,
    draw_sample,
    water_fill,
)


def _pool(n: int, p_grades, queries: int = 40, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "query_id": [f"q{i:02d}" for i in rng.integers(0, queries, n)],
        "doc_id": [f"d{i}" for i in range(n)],
        "judge_grade": rng.choice(4, size=n, p=p_grades),
    })


def test_water_fill_hand_cases():
    assert water_fill(10, np.array([2, 10, 10])).tolist() == [2, 4, 4]
    assert water_fill(100, np.array([2, 3])).tolist() == [2, 3]
    got = water_fill(7, np.array([5, 5, 5]), np.random.default_rng(0))
    assert got.sum() == 7 and sorted(got.tolist()) == [2, 2, 3]
    assert water_fill(0, np.array([3])).tolist() == [0]


def test_lenient_judge_pool_still_gives_enough_non_relevant():
    # The judge calls 85% of the pool relevant: a random sample of 200 would hold ~30 non-relevant.
    pool = _pool(5000, [0.05, 0.10, 0.45, 0.40])
    sample = draw_sample(pool, seed=1)
    pairs = sample.pairs
    assert len(pairs) == 200
    assert (pairs["judge_grade"] < 2).sum() == 100 and (pairs["judge_grade"] >= 2).sum() == 100
    assert pairs.groupby("stratum").size().to_dict() == {0: 50, 1: 50, 2: 50, 3: 50}
    # weights re-weight to the pool: their sum is the pool size, per grade too
    assert pairs["weight"].sum() == pytest.approx(len(pool))
    for g, size in pool.groupby("judge_grade").size().items():
        assert pairs.loc[pairs["stratum"] == g, "weight"].sum() == pytest.approx(size)
    # spread over queries: 50 per grade over 40 queries -> 1 or 2 per (grade, query)
    per_cell = pairs.groupby(["stratum", "query_id"]).size()
    assert per_cell.max() <= 2
    assert sample.notes == ()


def test_rare_grade_gives_its_share_to_the_others():
    pool = _pool(2000, [0.01, 0.29, 0.4, 0.3], seed=2)
    n0 = int((pool["judge_grade"] == 0).sum())
    pairs = draw_sample(pool, seed=3).pairs
    by = pairs.groupby("stratum").size().to_dict()
    assert by[0] == n0 and by[0] + by[1] == 100 and by[2] == by[3] == 50


def test_split_is_stratified_and_seeded():
    pool = _pool(3000, [0.25, 0.25, 0.25, 0.25])
    a = draw_sample(pool, SampleSpec(holdout_share=0.75), seed=5).pairs
    b = draw_sample(pool, SampleSpec(holdout_share=0.75), seed=5).pairs
    c = draw_sample(pool, SampleSpec(holdout_share=0.75), seed=6).pairs
    pd.testing.assert_frame_equal(a, b)
    assert not a["doc_id"].equals(c["doc_id"])
    assert (a["part"] == HOLDOUT).sum() == 150 and (a["part"] == TUNING).sum() == 50
    held = a[a["part"] == HOLDOUT].groupby("stratum").size()
    assert held.min() >= 37 and held.max() <= 38
    assert sorted(a["position"].tolist()) == list(range(200))
    # labelling order is shuffled, not grouped by the judge's grade
    assert a["stratum"].head(20).nunique() > 1


def test_refuses_a_pool_that_cannot_calibrate():
    pool = _pool(90, [0.25, 0.25, 0.25, 0.25])
    with pytest.raises(CalibrationSampleError, match="90 judged pairs.*at least 100 pairs with 30"):
        draw_sample(pool, seed=0)
    pool = _pool(500, [0.02, 0.02, 0.48, 0.48], seed=1)
    assert (pool["judge_grade"] < 2).sum() < 30
    with pytest.raises(CalibrationSampleError, match="judged not relevant"):
        draw_sample(pool, seed=0)
    with pytest.raises(CalibrationSampleError, match="too small"):
        draw_sample(_pool(500, [0.25] * 4), SampleSpec(size=50), seed=0)


def test_between_floor_and_size_the_sample_says_what_fell_short():
    pool = _pool(150, [0.2, 0.2, 0.3, 0.3], seed=4)
    sample = draw_sample(pool, seed=0)
    assert len(sample.pairs) == 150
    assert any("only 150 judged pairs" in n for n in sample.notes)


def test_weighted_figures_estimate_the_pool():
    """Horvitz–Thompson check: the weighted share of judge-relevant pairs in the sample equals
    the pool's share exactly (weights are per grade and query cell)."""
    pool = _pool(4000, [0.1, 0.2, 0.3, 0.4], seed=8)
    pairs = draw_sample(pool, seed=2).pairs
    weighted = (pairs["weight"] * (pairs["judge_grade"] >= 2)).sum() / pairs["weight"].sum()
    assert weighted == pytest.approx((pool["judge_grade"] >= 2).mean())
    assert (pairs["judge_grade"] >= 2).mean() == pytest.approx(0.5)
