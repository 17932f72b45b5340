""":func:`workbench.services.evaluation.per_query_diff.query_diffs` on the engine's in-memory value
types, against values worked out by hand."""

from __future__ import annotations

import pytest

from workbench.core.metrics.evaluation import evaluate
from workbench.core.metrics.qrels_and_runs import qrels_from_dict, run_from_dict
from workbench.errors import ConfigError
from workbench.services.evaluation.per_query_diff import query_diffs

QRELS = {"a": {"d1": 2, "d2": 0, "d3": -1}, "b": {"d4": 1}, "c": {"d5": 0}}  # c: nothing relevant
RUNS = {
    "base": {"a": {"d1": 3.0, "d2": 2.0}, "b": {"d9": 1.0}, "c": {"d5": 1.0}},
    # a: d3 (-1: pooled, not judged) then d1; b: d4 first; c: nothing relevant anyway
    "new": {"a": {"d3": 5.0, "d1": 4.0}, "b": {"d4": 2.0, "d9": 2.0}, "c": {"d5": 1.0}},
}


def _diffs(measures, k=2):
    qrels = qrels_from_dict(QRELS)
    runs = {name: run_from_dict(r, name=name) for name, r in RUNS.items()}
    results = {name: evaluate(qrels, run, measures) for name, run in runs.items()}
    return query_diffs(qrels, runs, results, measures, k=k)


def test_sorted_by_delta_with_grades_and_unjudged_marked():
    # P@1 by hand: base a 1 (d1), b 0 (d9); new a 0 (d3 unjudged), b 1 (tie at 2.0: d9 > d4 by id,
    # so d9 first) -> 0. c has no relevant item: left out.
    rows = _diffs(["P@1"])
    assert [(r.query_id, r.baseline_value, r.run_value, r.delta) for r in rows] == [("a", 1.0, 0.0, -1.0),
                                                                                   ("b", 0.0, 0.0, 0.0)]
    assert rows[0].baseline_top == (("d1", 2), ("d2", 0))
    assert rows[0].run_top == (("d3", None), ("d1", 2))
    assert rows[1].baseline_top == (("d9", None),)
    assert rows[1].run_top == (("d9", None), ("d4", 1))  # ties: id descending, as trec_eval


def test_measures_in_order_then_runs():
    rows = _diffs(["recall@2", "P@1"], k=1)
    assert [(r.measure, r.query_id, r.delta) for r in rows] == [
        ("recall@2", "a", 0.0), ("recall@2", "b", 1.0), ("P@1", "a", -1.0), ("P@1", "b", 0.0)]
    assert all(len(r.run_top) <= 1 for r in rows)


def test_refuses_one_run_and_a_top_below_one():
    qrels = qrels_from_dict(QRELS)
    run = run_from_dict(RUNS["base"], name="base")
    with pytest.raises(ConfigError, match="at least two runs"):
        query_diffs(qrels, {"base": run}, {"base": evaluate(qrels, run, ["P@1"])}, ["P@1"])
    with pytest.raises(ConfigError, match="at least 1"):
        _diffs(["P@1"], k=0)
