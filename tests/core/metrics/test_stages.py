"""Stage reports and reranker lift (specification section 7)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from workbench.core.metrics.stages import reranker_lift, stage_lift, stage_report


def test_spec_lift_example():
    # Pool recall@50 0.92, pre-rerank recall@5 0.61, post-rerank 0.79: the reranker closed
    # 0.18 / 0.31 of the recoverable gap, about 58%.
    lift = reranker_lift(0.92, 0.61, 0.79)
    assert round(lift.value, 2) == 0.58
    assert lift.value == pytest.approx(0.18 / 0.31)
    assert lift.gap == pytest.approx(0.31)
    assert lift.reason is None


def test_lift_bounds_and_sign():
    assert reranker_lift(0.9, 0.5, 0.9).value == pytest.approx(1.0)
    assert reranker_lift(0.9, 0.5, 0.5).value == 0.0
    assert reranker_lift(0.9, 0.5, 0.4).value == pytest.approx(-0.25)


@pytest.mark.parametrize(
    "pool, pre, post, reason",
    [
        (0.65, 0.65, 0.7, "no gap"),
        (0.5, 0.6, 0.7, "below the pre-rerank"),
        (float("nan"), 0.6, 0.7, "NaN"),
    ],
)
def test_lift_undefined(pool, pre, post, reason):
    lift = reranker_lift(pool, pre, post)
    assert math.isnan(lift.value)
    assert reason in lift.reason


def per_query(values: dict[str, list[float]], qids: list[str]) -> pd.DataFrame:
    return pd.DataFrame(values, index=pd.Index(qids, name="query_id"))


def test_stage_report_and_lift_by_hand():
    qids = ["q1", "q2", "q3", "q4"]
    stages = {
        "candidates": per_query({"recall@50": [1.0, 1.0, 0.5, 0.5]}, qids),
        "fusion": per_query(
            {"recall@50": [1.0, 1.0, 1.0, 0.5], "recall@5": [0.5, 0.0, 0.5, 0.5]}, qids
        ),
        # reranker scored one extra query that the other stages lack: it must be dropped
        "reranker": per_query({"recall@5": [1.0, 0.5, 0.5, 0.5, 0.0]}, qids + ["q5"]),
    }
    report = stage_report(stages)
    assert list(report.table.index) == ["candidates", "fusion", "reranker"]
    assert list(report.table.columns) == ["recall@50", "recall@5"]
    assert report.n_queries == 4
    assert report.dropped_queries["reranker"] == ["q5"]
    assert math.isnan(report.table.loc["candidates", "recall@5"])
    assert report.value("fusion", "recall@50") == pytest.approx(0.875)
    assert report.value("fusion", "recall@5") == pytest.approx(0.375)
    assert report.value("reranker", "recall@5") == pytest.approx(0.625)  # q5 excluded
    lift = stage_lift(
        report,
        pool=("fusion", "recall@50"),
        pre=("fusion", "recall@5"),
        post=("reranker", "recall@5"),
    )
    # (0.625 - 0.375) / (0.875 - 0.375) = 0.5
    assert lift.value == pytest.approx(0.5)
    with pytest.raises(KeyError, match="no stage 'rerank'"):
        report.value("rerank", "recall@5")
    with pytest.raises(KeyError, match="no measure"):
        report.value("fusion", "ndcg@10")


def test_stage_report_measure_subset_and_errors():
    stages = {"a": per_query({"m": [0.2, 0.4], "x": [1, 1]}, ["q1", "q2"])}
    report = stage_report(stages, ["m"])
    assert list(report.table.columns) == ["m"]
    assert report.value("a", "m") == pytest.approx(0.3)
    with pytest.raises(ValueError, match="no stages"):
        stage_report({})
    with pytest.raises(ValueError, match="no query in common"):
        stage_report({"a": per_query({"m": [1.0]}, ["q1"]), "b": per_query({"m": [1.0]}, ["q2"])})
