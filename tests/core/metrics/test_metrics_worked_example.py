"""The specification's running worked example, number by number.

Query: ranked [d7, d3, d1, d9, d4]; grades d1=3, d3=2, d5=2, d4=1, every other chunk 0 (so
d7 and d9 are judged non-relevant). R = {d1, d3, d4, d5}. The expected values are the ones
worked by hand in the specification (seeds/000, section 2), rounded to 2 decimals there.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.support.prerequisites import require_module

from workbench import evaluate
from workbench.core.metrics.qrels_and_runs import qrels_from_dict, run_from_dict

QRELS = {"q": {"d1": 3, "d3": 2, "d5": 2, "d4": 1, "d7": 0, "d9": 0}}
RUN = {"q": {"d7": 0.9, "d3": 0.8, "d1": 0.7, "d9": 0.6, "d4": 0.5}}

# measure -> value worked in the specification
WORKED = {
    "hit@1": 0.0,
    "hit@3": 1.0,
    "hit@5": 1.0,
    "precision@1": 0.0,
    "P@3": 2 / 3,
    "P@5": 0.60,
    "recall@1": 0.0,
    "R@3": 0.50,
    "R@5": 0.75,
    "f1@5": 2 * 0.60 * 0.75 / 1.35,
    "RR": 0.50,
    "mrr@10": 0.50,
    "AP": (0.50 + 2 / 3 + 0.60) / 4,
    "Rprec": 0.50,
    "ndcg@5": 3.149 / 5.693,
    "ndcg_exp@5": 5.780 / 10.823,
    "ERR@5": 0.5 * 3 / 8 + (1 / 3) * (5 / 8) * (7 / 8) + 0.2 * (5 / 8) * (1 / 8) * (1 / 8),
    "RBP(p=0.8)": 0.2 * (0.8 + 0.64 + 0.4096),
}
ROUNDED = {  # the 2-decimal numbers printed in the specification
    "P@3": 0.67, "P@5": 0.60, "R@3": 0.50, "R@5": 0.75, "f1@5": 0.67, "RR": 0.50, "AP": 0.44,
    "Rprec": 0.50, "ndcg@5": 0.55, "ndcg_exp@5": 0.53, "ERR@5": 0.37, "RBP(p=0.8)": 0.37,
}


@pytest.fixture(scope="module", params=["dicts", "columns"])
def result(request):
    if request.param == "dicts":
        return evaluate(QRELS, RUN, list(WORKED))
    return evaluate(qrels_from_dict(QRELS), run_from_dict(RUN), list(WORKED))


@pytest.mark.parametrize("measure", list(WORKED))
def test_worked_value(result, measure):
    # the hand computation rounds intermediate sums to 3 decimals: allow that much
    assert result.aggregate[measure] == pytest.approx(WORKED[measure], abs=1e-3)


@pytest.mark.parametrize("measure", list(ROUNDED))
def test_two_decimals_as_printed(result, measure):
    assert round(result.aggregate[measure], 2) == ROUNDED[measure]


def test_rbp_residual_is_p_to_the_n(result):
    assert result.aggregate["RBP(p=0.8).residual"] == pytest.approx(0.8**5)
    assert round(result.aggregate["RBP(p=0.8).residual"], 2) == 0.33


def test_rbp_residual_counts_unjudged_docs():
    # Without d7/d9 in the qrels they are unjudged: their weight could still be gained. The
    # spec's residual stays p^n = 0.33 (it counts the unseen ranks below the list only); the
    # unjudged residual (trec_eval's rbp_resid) adds d7's and d9's weight: 0.33 + 0.2 (1 + 0.8^3) = 0.63.
    qrels = {"q": {"d1": 3, "d3": 2, "d5": 2, "d4": 1}}
    res = evaluate(qrels, RUN, ["rbp@0.8"])
    assert res.aggregate["rbp@0.8.residual"] == pytest.approx(0.8**5)
    assert round(res.aggregate["rbp@0.8.residual"], 2) == 0.33
    assert res.aggregate["rbp@0.8.residual_unjudged"] == pytest.approx(0.8**5 + 0.2 * (1 + 0.8**3))
    assert round(res.aggregate["rbp@0.8.residual_unjudged"], 2) == 0.63
    assert res.aggregate["rbp@0.8"] == pytest.approx(0.36992)


def test_ap_retrieved_only_denominator_is_not_ours(result):
    # 0.59 divides by the 3 retrieved relevant docs; standard AP divides by |R| = 4.
    assert round((0.50 + 2 / 3 + 0.60) / 3, 2) == 0.59
    assert round(result.aggregate["AP"], 2) == 0.44


def test_mrr_over_three_queries():
    qrels = {"a": {"x": 1}, "b": {"x": 1}, "c": {"x": 1}}
    run = {"a": {"y": 2, "x": 1}, "b": {"x": 1}, "c": {"y": 1}}
    assert evaluate(qrels, run, "mrr").aggregate["mrr"] == pytest.approx(0.50)


def test_ndcg_agrees_with_sklearn_when_missed_docs_are_passed():
    sk = require_module("sklearn.metrics")
    docs = ["d7", "d3", "d1", "d9", "d4", "d5"]
    grades = np.array([[0, 2, 3, 0, 1, 2]])
    scores = np.array([[5, 4, 3, 2, 1, 0]])  # d5, missed, scores below every retrieved doc
    ours = evaluate(QRELS, RUN, ["ndcg@5"]).aggregate["ndcg@5"]
    assert ours == pytest.approx(sk.ndcg_score(grades, scores, k=5), abs=1e-12)
    assert round(ours, 2) == 0.55
    # The pitfall: passing only the retrieved docs drops d5 from the ideal ranking.
    wrong = sk.ndcg_score(grades[:, :5], scores[:, :5], k=5)
    assert round(wrong, 2) == 0.66 and not math.isclose(wrong, ours)
    assert docs[5] not in RUN["q"]
