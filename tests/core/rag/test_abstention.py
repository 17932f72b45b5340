"""Abstention metrics: hand-worked examples from the definitions, the never/always-abstaining
systems, and the curve's area against scikit-learn's ROC AUC."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.core.rag.abstention import (
    abstains_at, answer_abstains, best_threshold, curve_auc, rates, tags_say_unanswerable, threshold_curve,
)

# Five queries: a, b unanswerable; c, d, e answerable. e got no results (top score NaN).
#            a      b      c      d      e
TOP = [1.0, 3.0, 2.0, 4.0, math.nan]
UNANSWERABLE = [True, True, False, False, False]


def test_tags_mark_unanswerable_queries():
    assert tags_say_unanswerable({"type": "unanswerable", "source": "HR"})
    assert tags_say_unanswerable(["hr", "unanswerable"])
    assert tags_say_unanswerable({"unanswerable": True})
    assert not tags_say_unanswerable({"unanswerable": False})
    assert not tags_say_unanswerable({"type": "fact"})
    assert not tags_say_unanswerable(None)
    assert not tags_say_unanswerable(["answerable"])


def test_rates_at_a_threshold_by_hand():
    # threshold 2.5: a (1 < 2.5), c (2 < 2.5) and e (no results) abstain; b and d answer.
    abstained = abstains_at(TOP, 2.5)
    assert abstained.tolist() == [True, False, True, False, True]
    r = rates(UNANSWERABLE, abstained)
    assert (r.n_unanswerable, r.n_answerable, r.abstained_unanswerable, r.abstained_answerable) == (2, 3, 1, 2)
    assert r.abstention_rate == pytest.approx(1 / 2)
    assert r.false_abstention_rate == pytest.approx(2 / 3)
    assert r.balanced_accuracy == pytest.approx((1 / 2 + 1 / 3) / 2)


def test_the_threshold_is_strict():
    # a top score equal to the threshold answers
    assert abstains_at([2.0], 2.0).tolist() == [False]
    assert abstains_at([1.999], 2.0).tolist() == [True]


@pytest.mark.parametrize("always", [False, True])
def test_a_system_that_never_or_always_abstains_cannot_look_good(always):
    rng = np.random.default_rng(7)
    u = rng.random(200) < 0.2
    r = rates(u, np.full(200, always))
    # one of its rates looks perfect, the other is the worst possible; together chance level
    assert r.abstention_rate == (1.0 if always else 0.0)
    assert r.false_abstention_rate == (1.0 if always else 0.0)
    assert r.balanced_accuracy == 0.5


def test_rates_are_nan_without_a_kind_of_query():
    r = rates([False, False], [True, False])
    assert math.isnan(r.abstention_rate) and math.isnan(r.balanced_accuracy)
    assert r.false_abstention_rate == 0.5


def test_curve_by_hand():
    curve = threshold_curve(TOP, UNANSWERABLE)
    assert curve["threshold"].tolist()[:4] == [1.0, 2.0, 3.0, 4.0]
    assert curve["threshold"].iloc[4] > 4.0
    # t=1: only e abstains; t=2: a, e; t=3: a, c, e; t=4: a, b, c, e; above 4: all
    assert curve["abstention_rate"].tolist() == pytest.approx([0, 1 / 2, 1 / 2, 1, 1])
    assert curve["false_abstention_rate"].tolist() == pytest.approx([1 / 3, 1 / 3, 2 / 3, 2 / 3, 1])
    assert curve["abstained"].tolist() == [1, 2, 3, 4, 5]
    # balanced accuracy: (u + 1 - f) / 2 -> t=4 gives (1 + 1/3) / 2 = 2/3, the best
    assert best_threshold(curve) == 4.0
    # area: pairs (unanswerable lower than answerable), e counts as the lowest score:
    # (a,c) yes, (a,d) yes, (a,e) no, (b,c) no, (b,d) yes, (b,e) no -> 3 of 6
    assert curve_auc(curve) == pytest.approx(0.5)


def test_curve_area_equals_sklearn_roc_auc():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(13)
    checked = 0
    for _ in range(60):
        n = int(rng.integers(4, 60))
        u = rng.random(n) < 0.3
        if u.all() or not u.any():
            continue
        top = rng.integers(0, 6, n).astype(float)  # many ties
        top[rng.random(n) < 0.1] = np.nan  # no results
        score = np.where(np.isnan(top), np.inf, -top)  # lower top score = more likely unanswerable
        score = np.where(np.isinf(score), 1e9, score)
        assert curve_auc(threshold_curve(top, u)) == pytest.approx(roc_auc_score(u, score), abs=1e-12)
        checked += 1
    assert checked >= 50


def test_answer_texts_that_abstain():
    assert answer_abstains("The handbook does not say how many days you get.")
    assert answer_abstains("I don't know.")
    assert answer_abstains("I could not find any parking information.")
    assert answer_abstains("")
    assert answer_abstains(None)
    assert not answer_abstains("Engineering laptops are refreshed every 36 months.")
    assert not answer_abstains("No. Contractors use a loaner.")  # "No" is an answer, not an abstention


def test_rates_equal_sklearn_recall_and_balanced_accuracy():
    from sklearn.metrics import balanced_accuracy_score, recall_score

    rng = np.random.default_rng(29)
    checked = 0
    for _ in range(80):
        n = int(rng.integers(2, 80))
        u = rng.random(n) < rng.uniform(0.05, 0.6)
        if u.all() or not u.any():
            continue
        abstained = rng.random(n) < rng.uniform(0, 1)
        r = rates(u, abstained)
        # abstention rate = recall of "unanswerable"; 1 - false-abstention rate = recall of "answerable"
        assert r.abstention_rate == pytest.approx(recall_score(u, abstained, pos_label=True))
        assert 1 - r.false_abstention_rate == pytest.approx(recall_score(~u, ~abstained, pos_label=True))
        assert r.balanced_accuracy == pytest.approx(balanced_accuracy_score(u, abstained))
        checked += 1
    assert checked >= 70


def test_the_curve_equals_the_rates_at_each_of_its_thresholds():
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(40):
        n = int(rng.integers(1, 50))
        u = rng.random(n) < 0.3
        top = rng.integers(0, 8, n).astype(float)
        top[rng.random(n) < 0.15] = np.nan
        curve = threshold_curve(top, u)
        for row in curve.itertuples(index=False):
            r = rates(u, abstains_at(top, row.threshold))
            for got, want in ((row.abstention_rate, r.abstention_rate),
                              (row.false_abstention_rate, r.false_abstention_rate)):
                assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want)
            assert row.abstained == r.abstained_unanswerable + r.abstained_answerable
            checked += 1
    assert checked >= 100
