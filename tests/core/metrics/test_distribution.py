"""Distribution summaries checked against hand-worked numbers and pandas."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.core.metrics.distribution import summarize, summarize_table


def test_hand_example_mean_hides_zeros():
    # Specification section 1: a mean of 0.80 can hide 20% of queries at 0.0.
    scores = [1.0] * 8 + [0.0] * 2
    s = summarize(scores)
    assert s.mean == pytest.approx(0.8)
    assert s.share_zero == pytest.approx(0.2)
    assert s.median == 1.0
    # 10th percentile, linear: position 0.1 * (10 - 1) = 0.9 between sorted[0] = 0 and
    # sorted[1] = 0 -> 0.
    assert s.p10 == 0.0
    assert (s.count, s.n_nan) == (10, 0)


def test_nan_excluded_and_counted():
    s = summarize([0.5, float("nan"), 0.0, 1.0, float("nan")])
    assert (s.count, s.n_nan) == (3, 2)
    assert s.mean == pytest.approx(0.5)
    assert s.median == 0.5
    # position 0.1 * 2 = 0.2 between 0.0 and 0.5 -> 0.1
    assert s.p10 == pytest.approx(0.1)
    assert s.share_zero == pytest.approx(1 / 3)


def test_empty_and_all_nan():
    for values in ([], [float("nan")] * 3):
        s = summarize(values)
        assert s.count == 0 and s.n_nan == len(values)
        assert all(math.isnan(v) for v in (s.mean, s.median, s.p10, s.share_zero))


def test_errors():
    with pytest.raises(ValueError, match="infinite"):
        summarize([0.1, float("inf")])
    with pytest.raises(ValueError, match="one-dimensional"):
        summarize(np.zeros((2, 2)))


@given(st.lists(st.one_of(st.floats(0, 1), st.just(float("nan"))), min_size=1, max_size=30))
@settings(max_examples=80, deadline=None)
def test_matches_pandas(values):
    series = pd.Series(values, dtype=float)
    s = summarize(values)
    assert s.count == series.count()
    if s.count:
        assert s.mean == pytest.approx(series.mean())
        assert s.median == pytest.approx(series.median())
        assert s.p10 == pytest.approx(series.quantile(0.1))
        assert s.share_zero == pytest.approx((series == 0).sum() / series.count())


def test_summarize_table():
    table = pd.DataFrame(
        {"recall@5": [1.0, 0.0, 0.5], "ndcg@10": [0.2, float("nan"), 0.4]},
        index=pd.Index(["q1", "q2", "q3"], name="query_id"),
    )
    out = summarize_table(table)
    assert list(out.index) == ["recall@5", "ndcg@10"]
    assert out.loc["recall@5", "share_zero"] == pytest.approx(1 / 3)
    assert out.loc["ndcg@10", "n_nan"] == 1
    assert out.loc["ndcg@10", "mean"] == pytest.approx(0.3)
