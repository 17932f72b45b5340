"""Run comparison: alignment, deltas, BH adjustment, wins/ties/losses, metadata."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from workbench.core.metrics.comparison import COLUMNS, compare_runs
from workbench.core.metrics.significance import StatisticsInputError

BASE = [0.50, 0.75, 0.25, 1.00, 0.50, 0.00, 0.75, 0.50, 0.25, 0.50]
NEW = [0.75, 1.00, 0.50, 1.00, 0.75, 0.25, 0.75, 0.75, 0.50, 0.75]
QIDS = [f"q{i}" for i in range(10)]


def table(values: dict[str, list[float]], qids=QIDS) -> pd.DataFrame:
    return pd.DataFrame(values, index=pd.Index(qids, name="query_id"))


def test_two_runs_spec_example():
    runs = {"base": table({"recall@5": BASE}), "new": table({"recall@5": NEW})}
    out = compare_runs(runs, test="randomization", seed=3, n_resamples=5_000)
    assert list(out.table.columns) == COLUMNS
    row = out.table.iloc[0]
    assert (row["measure"], row["baseline"], row["run"]) == ("recall@5", "base", "new")
    assert row["baseline_mean"] == pytest.approx(np.mean(BASE))
    assert row["run_mean"] == pytest.approx(np.mean(NEW))
    assert row["delta"] == pytest.approx(0.2)
    assert row["p_value"] < 0.01
    # Differences: eight +0.25, two 0 (queries q3 and q6).
    assert (row["wins"], row["ties"], row["losses"]) == (8, 2, 0)
    assert row["ci_low"] <= 0.2 <= row["ci_high"]
    # A single comparison: BH leaves the p-value unchanged.
    assert row["p_adjusted"] == pytest.approx(row["p_value"])
    meta = out.metadata()
    assert meta["seed"] == 3 and meta["test"] == "randomization" and meta["n_resamples"] == 5_000
    assert meta["n_common_queries"] == 10


def test_alignment_drops_and_reports_queries():
    base = table({"m": [0.1, 0.2, 0.3, 0.4]}, ["a", "b", "c", "d"])
    new = table({"m": [0.9, 0.3, 0.5]}, ["d", "b", "e"])  # different order, extra "e"
    out = compare_runs({"base": base, "new": new}, test="ttest")
    assert out.n_common_queries == 2
    assert out.dropped_queries == {"base": ["a", "c"], "new": ["e"]}
    row = out.table.iloc[0]
    # Aligned on b, d: base 0.2, 0.4; new 0.3, 0.9 -> differences 0.1, 0.5.
    assert row["baseline_mean"] == pytest.approx(0.3)
    assert row["run_mean"] == pytest.approx(0.6)
    assert row["delta"] == pytest.approx(0.3)
    assert row["p_value"] == pytest.approx(stats.ttest_rel([0.3, 0.9], [0.2, 0.4]).pvalue)


def test_nan_scores_dropped_per_measure():
    base = table({"m1": [0.1, np.nan, 0.3], "m2": [0.5, 0.5, 0.5]}, ["a", "b", "c"])
    new = table({"m1": [0.2, 0.2, 0.1], "m2": [0.6, 0.4, 0.5]}, ["a", "b", "c"])
    out = compare_runs({"base": base, "new": new}, test="ttest")
    assert out.nan_dropped == {"m1": ["b"], "m2": []}
    by_measure = out.table.set_index("measure")
    assert by_measure.loc["m1", "n_queries"] == 2
    assert by_measure.loc["m2", "n_queries"] == 3
    assert tuple(by_measure.loc["m2", ["wins", "ties", "losses"]]) == (1, 1, 1)


def test_three_runs_two_measures_bh_across_all():
    rng = np.random.default_rng(0)
    n = 25
    base = rng.uniform(size=(n, 2))
    runs = {
        "bm25": table({"ndcg@10": base[:, 0], "recall@5": base[:, 1]}, range(n)),
        "dense": table({"ndcg@10": base[:, 0] + 0.1, "recall@5": base[:, 1]}, range(n)),
        "hybrid": table(
            {"ndcg@10": base[:, 0] + rng.normal(0, 0.1, n), "recall@5": base[:, 1] + 0.02},
            range(n),
        ),
    }
    out = compare_runs(runs, ["recall@5", "ndcg@10"], test="ttest")
    assert list(zip(out.table["measure"], out.table["run"])) == [
        ("recall@5", "dense"),
        ("recall@5", "hybrid"),
        ("ndcg@10", "dense"),
        ("ndcg@10", "hybrid"),
    ]
    assert set(out.table["baseline"]) == {"bm25"}
    expected = stats.false_discovery_control(out.table["p_value"].to_numpy())
    assert out.table["p_adjusted"].to_numpy() == pytest.approx(expected)
    dense_recall = out.table.iloc[0]
    assert dense_recall["delta"] == pytest.approx(0.0)
    assert dense_recall["ties"] == n and dense_recall["p_value"] == 1.0
    hybrid_recall = out.table.iloc[1]
    assert hybrid_recall["wins"] == n


def test_same_seed_reproduces_table():
    rng = np.random.default_rng(1)
    runs = {name: table({"m": rng.uniform(size=10)}) for name in ("a", "b")}
    one = compare_runs(runs, test="bootstrap", seed=9, n_resamples=1_000)
    two = compare_runs(runs, test="bootstrap", seed=9, n_resamples=1_000)
    pd.testing.assert_frame_equal(one.table, two.table)


@pytest.mark.parametrize(
    "runs, kwargs, message",
    [
        ({"a": table({"m": BASE})}, {}, "at least two runs"),
        ({"a": table({"m": BASE}), "b": table({"x": NEW})}, {}, "no per-query scores for m"),
        (
            {"a": table({"m": BASE}), "b": table({"m": NEW}, [f"z{i}" for i in range(10)])},
            {},
            "no query in common",
        ),
        ({"a": table({"m": BASE}), "b": table({"m": NEW})}, {"test": "sign"}, "unknown test"),
        (
            {"a": table({"m": BASE[:2]}, ["q", "q"]), "b": table({"m": NEW})},
            {},
            "more than once",
        ),
        (
            {"a": table({"m": [np.nan]}, ["q"]), "b": table({"m": [0.1]}, ["q"])},
            {},
            "no query is scored",
        ),
    ],
)
def test_errors(runs, kwargs, message):
    with pytest.raises(StatisticsInputError, match=message):
        compare_runs(runs, **kwargs)


def test_plain_dict_input_matches_frames():
    runs = {
        "base": {"m": {"q1": 0.2, "q2": 0.4, "q3": 0.9}},
        "new": {"m": {"q3": 1.0, "q1": 0.6, "q2": 0.4}},
    }
    out = compare_runs(runs, test="ttest")
    row = out.table.iloc[0]
    # Aligned by id: differences q1 +0.4, q2 0, q3 +0.1.
    assert row["delta"] == pytest.approx(0.5 / 3)
    assert (row["wins"], row["ties"], row["losses"]) == (2, 1, 0)
    assert row["p_value"] == pytest.approx(stats.ttest_rel([0.6, 0.4, 1.0], [0.2, 0.4, 0.9]).pvalue)
