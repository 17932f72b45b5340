"""Kendall's τ-b against scipy.stats.kendalltau, τ_AP against hand-worked examples."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import kendalltau

from workbench.core.calibration.rank_correlation import kendall_tau_b, ranking, tau_ap
from workbench.errors import InputError


def test_tau_b_equals_scipy_with_and_without_ties():
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(300):
        n = int(rng.integers(2, 15))
        # few distinct values half the time: many ties on either side
        levels = int(rng.integers(2, 5)) if rng.random() < 0.5 else 1000
        x = rng.integers(0, levels, n).astype(float)
        # continuous y a third of the time: ties on one side only
        y = rng.integers(0, levels, n).astype(float) if rng.random() < 0.67 else rng.random(n)
        ours = kendall_tau_b(x, y)
        theirs = kendalltau(x, y, variant="b").statistic
        if math.isnan(theirs):
            assert math.isnan(ours)
        else:
            assert ours == pytest.approx(theirs, abs=1e-12)
        checked += 1
    assert checked == 300


def test_tau_b_hand_worked_and_undefined():
    # A > B > C > D by human, judge swaps the top two: 5 concordant, 1 discordant -> 4/6
    assert kendall_tau_b([4, 3, 2, 1], [3, 4, 2, 1]) == pytest.approx(2 / 3)
    assert math.isnan(kendall_tau_b([1.0], [2.0]))
    assert math.isnan(kendall_tau_b([1, 1, 1], [1, 2, 3]))  # one side has no order
    assert kendall_tau_b([1, 2, 3], [1, 2, 3]) == 1.0
    assert kendall_tau_b([1, 2, 3], [3, 2, 1]) == -1.0
    # (1,2,3) vs (1,3,2): pairs 12 C, 13 C, 23 D -> (2-1)/3
    assert kendall_tau_b([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    with pytest.raises(InputError, match="one length"):
        kendall_tau_b([1, 2], [1, 2, 3])


def test_tau_ap_hand_worked():
    human = ["A", "B", "C", "D"]
    # swap at the top: C(2)=0, C(3)=2, C(4)=3 -> 2/3 * (0/1 + 2/2 + 3/3) - 1 = 1/3
    assert tau_ap(human, ["B", "A", "C", "D"]) == pytest.approx(1 / 3)
    # the same single swap at the bottom: 2/3 * (1 + 1 + 2/3) - 1 = 7/9 (top swaps weigh more)
    assert tau_ap(human, ["A", "B", "D", "C"]) == pytest.approx(7 / 9)
    assert tau_ap(human, human) == 1.0
    assert tau_ap(human, human[::-1]) == -1.0
    # three systems, the last one first: C(2)=0 (C above A is wrong), C(3)=1 (A above B is right,
    # C above B is wrong) -> 2/2 * (0/1 + 1/2) - 1 = -1/2 (Kendall's tau: 1 - 2*2/3 = -1/3)
    assert tau_ap(["A", "B", "C"], ["C", "A", "B"]) == pytest.approx(-0.5)
    assert kendall_tau_b([3, 2, 1], [2, 1, 3]) == pytest.approx(-1 / 3)
    assert math.isnan(tau_ap(["A"], ["A"]))
    with pytest.raises(InputError):
        tau_ap(["A", "B"], ["A", "C"])


def test_tau_ap_equals_tau_for_two_systems_and_ranking_breaks_ties_by_name():
    assert tau_ap(["A", "B"], ["B", "A"]) == kendall_tau_b([2, 1], [1, 2]) == -1.0
    assert ranking({"b": 0.5, "a": 0.5, "c": 0.9}) == ["c", "a", "b"]
