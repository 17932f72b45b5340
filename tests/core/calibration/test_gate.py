"""core.gate: verdicts from bounds, reasons, the further-labels estimate (hand-worked)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.core.calibration.agreement import AgreementResult, agreement
from workbench.core.calibration.gate import CANNOT_ESTIMATE_YET, EXIT_CODES, ON_THE_THRESHOLD, GateThresholds, decide


def _result(ci: dict, figures: dict, n: int = 400, rel: int = 200) -> AgreementResult:
    """An agreement result with chosen figures and intervals (the gate reads nothing else
    but the confusion matrix's class totals)."""
    C = np.zeros((4, 4))
    C[3, 3] = rel
    C[0, 0] = n - rel
    full_fig = {k: 0.5 for k in ("precision", "kappa_graded", "kappa_linear", "kappa_quadratic", "msd", "exact")}
    full_fig.update(figures)
    full_ci = {k: (0.4, 0.6) for k in full_fig}
    full_ci.update(ci)
    return AgreementResult(n=n, levels=(0, 1, 2, 3), threshold=2, confusion=C, figures=full_fig, ci=full_ci,
                           seed=0, n_boot=100, resampling="pairs", n_queries=None)


def test_pass_when_every_lower_bound_clears():
    r = _result({"tpr": (0.88, 0.95), "tnr": (0.86, 0.93), "kappa": (0.65, 0.8)},
                {"tpr": 0.92, "tnr": 0.9, "kappa": 0.72})
    g = decide(r)
    assert g.verdict == "pass" and g.more_labels_needed == 0 and g.exit_code == 0
    assert len(g.reasons) == 3 and all("clears" in x for x in g.reasons)


def test_fail_when_an_upper_bound_is_below():
    r = _result({"tpr": (0.88, 0.95), "tnr": (0.70, 0.80), "kappa": (0.5, 0.8)},
                {"tpr": 0.92, "tnr": 0.75, "kappa": 0.65})
    g = decide(r)
    assert g.verdict == "fail" and g.exit_code == 1
    assert any("TNR" in x and "upper bound below 0.85" in x for x in g.reasons)


def test_inconclusive_with_labels_needed_hand_worked():
    # kappa 0.65 [0.55, 0.75] with threshold 0.60: the lower half-width is 0.10, the gap 0.05.
    # The bound reaches 0.60 at n' = n (0.10/0.05)^2 = 4n -> 3n = 1200 more pairs (n = 400).
    r = _result({"tpr": (0.88, 0.95), "tnr": (0.86, 0.93), "kappa": (0.55, 0.75)},
                {"tpr": 0.92, "tnr": 0.9, "kappa": 0.65})
    g = decide(r)
    assert g.verdict == "inconclusive" and g.exit_code == 2
    assert g.more_labels_needed == 1200


def test_labels_needed_uses_the_class_behind_tpr():
    # TPR 0.90 [0.80, 0.97] vs 0.85: lower half-width 0.10, gap 0.05 -> 4x the relevant pairs.
    # With 100 relevant of 400, the sample grows to 1600: 1200 more pairs. The upper side is
    # used when the estimate is below: TPR 0.80 [0.70, 0.90]: (0.10/0.05)^2 -> also 1200.
    for fig, ci in ((0.90, (0.80, 0.97)), (0.80, (0.70, 0.90))):
        r = _result({"tpr": ci, "tnr": (0.86, 0.93), "kappa": (0.65, 0.8)},
                    {"tpr": fig, "tnr": 0.9, "kappa": 0.72}, n=400, rel=100)
        g = decide(r)
        assert g.verdict == "inconclusive"
        assert g.more_labels_needed == 1200


def test_small_sample_cannot_pass_but_can_fail():
    r = _result({"tpr": (0.9, 1.0), "tnr": (0.9, 1.0), "kappa": (0.8, 1.0)},
                {"tpr": 1.0, "tnr": 1.0, "kappa": 1.0}, n=60, rel=30)
    g = decide(r)
    assert g.verdict == "inconclusive"
    assert any("only 60 labelled pairs" in x for x in g.reasons)
    assert g.more_labels_needed == 40
    r = _result({"tpr": (0.1, 0.5), "tnr": (0.9, 1.0), "kappa": (0.1, 0.3)},
                {"tpr": 0.3, "tnr": 1.0, "kappa": 0.2}, n=60, rel=30)
    assert decide(r).verdict == "fail"


def test_estimate_on_threshold_gives_no_count():
    r = _result({"tpr": (0.80, 0.90), "tnr": (0.86, 0.93), "kappa": (0.65, 0.8)},
                {"tpr": 0.85, "tnr": 0.9, "kappa": 0.72})
    g = decide(r)
    assert g.verdict == "inconclusive" and g.more_labels_needed is None
    assert g.reasons[-1] == ON_THE_THRESHOLD


def test_no_count_yet_is_not_never():
    """A class with no pairs: the count cannot be estimated *yet*, which is not the same as a
    figure on its threshold that more labels are not expected to decide."""
    r = agreement([0] * 120, [0] * 110 + [2] * 10, seed=0, n_boot=100)
    g = decide(r)
    assert g.verdict == "inconclusive" and g.more_labels_needed is None
    assert g.reasons[-1] == CANNOT_ESTIMATE_YET
    assert ON_THE_THRESHOLD not in g.reasons


def test_nan_figure_is_inconclusive():
    r = agreement([0] * 120, [0] * 110 + [2] * 10, seed=0, n_boot=100)
    g = decide(r)
    assert math.isnan(r.figures["tpr"])
    assert g.verdict == "inconclusive"  # kappa is 0 on every resample: not a measured failure
    assert any("no reference-relevant pairs" in x for x in g.reasons)
    assert any("one class only" in x for x in g.reasons)


def test_high_risk_thresholds_and_settings():
    t = GateThresholds().stricter(0.90)
    assert (t.min_tpr, t.min_tnr, t.min_kappa) == (0.90, 0.90, 0.60)
    r = _result({"tpr": (0.87, 0.95), "tnr": (0.86, 0.93), "kappa": (0.65, 0.8)},
                {"tpr": 0.92, "tnr": 0.9, "kappa": 0.72})
    assert decide(r).verdict == "pass"
    assert decide(r, t).verdict == "inconclusive"
    assert EXIT_CODES == {"pass": 0, "fail": 1, "inconclusive": 2}


def test_gate_on_real_agreement_result():
    rng = np.random.default_rng(4)
    r = rng.integers(0, 4, 1000)
    c = np.where(rng.random(1000) < 0.97, r, rng.integers(0, 4, 1000))
    g = decide(agreement(r, c, seed=1, n_boot=300))
    assert g.verdict == "pass"
    assert decide(agreement(r, rng.integers(0, 4, 1000), seed=1, n_boot=300)).verdict == "fail"


@pytest.mark.parametrize("n", [100, 400])
def test_labels_needed_estimate_is_roughly_right(n):
    """The half-width shrinks as 1/sqrt(n): at the predicted size the interval's bound lands
    close to the threshold (same rates, 4x the data)."""
    rng = np.random.default_rng(n)
    ref = rng.integers(0, 4, n)
    cand = np.where(rng.random(n) < 0.8, ref, rng.integers(0, 4, n))
    res = agreement(ref, cand, seed=2, n_boot=1000)
    lo, hi = res.ci["kappa"]
    threshold = (res.figures["kappa"] + lo) / 2  # halfway to the lower bound: needs 4x the pairs
    g = decide(res, GateThresholds(min_tpr=0.0, min_tnr=0.0, min_kappa=threshold, min_pairs=1, min_per_class=1))
    assert g.verdict == "inconclusive"
    assert g.more_labels_needed == pytest.approx(3 * n, rel=0.02)
    bigger = agreement(np.tile(ref, 4), np.tile(cand, 4), seed=2, n_boot=1000)
    assert bigger.ci["kappa"][0] == pytest.approx(threshold, abs=0.25 * (res.figures["kappa"] - lo))


def test_impractical_label_counts_say_so():
    # TPR 0.855 [0.72, 0.93] vs 0.85: (0.135 / 0.005)^2 = 729 times the pairs behind it.
    r = _result({"tpr": (0.72, 0.93), "tnr": (0.86, 0.93), "kappa": (0.65, 0.8)},
                {"tpr": 0.855, "tnr": 0.9, "kappa": 0.72})
    g = decide(r)
    assert g.verdict == "inconclusive" and g.more_labels_needed == 400 * 728
    assert any("over ten times" in x for x in g.reasons)


# -- the verdict cache --------------------------------------------------------------------------

def test_class_minimums_count_pairs_not_weights():
    # 30 reference-relevant and 70 non-relevant pairs, a perfect judge, relevant pairs weighted 0.5:
    # the weighted relevant share is 15 / 85 = 0.176, and share x n = 17.6 "pairs" is what the gate
    # used to compare with the minimum of 30. Counts are counts: 30 pairs clear it, the gate passes
    # (TPR 30/30 has Wilson lower bound 0.886, TNR 70/70 0.948, kappa 1).
    ref = np.array([3] * 30 + [0] * 70)
    r = agreement(ref, ref, threshold=2, weights=np.array([0.5] * 30 + [1.0] * 70), seed=0, n_boot=500)
    assert r.n_relevant == pytest.approx(15.0) and (r.relevant_pairs, r.not_relevant_pairs) == (30, 70)
    g = decide(r)
    assert g.verdict == "pass", g.reasons
    assert not any("reference-relevant pairs" in x for x in g.reasons)


def test_a_perfect_judge_is_told_to_label_not_to_improve():
    # 2 reference-relevant pairs of 100, judge right on all: TPR 2/2 = 1.0 with Wilson interval
    # [0.342, 1]: more labels decide it (and the class minimum of 30 wants 100 x (30/2 - 1) = 1400
    # more), far over ten times the 100 so far. A judge at 1.0 cannot get better.
    ref = np.array([3] * 2 + [0] * 98)
    g = decide(agreement(ref, ref, threshold=2, seed=0, n_boot=500))
    assert g.verdict == "inconclusive" and g.more_labels_needed > 1000
    assert "only 2 reference-relevant pairs; at least 30 are needed to pass" in g.reasons
    assert not any("improving the judge" in x for x in g.reasons)
    assert "only more labels will" in g.reasons[-1]


def test_an_imperfect_judge_near_its_threshold_is_told_improving_it_may_decide():
    # kappa 0.61 [0.40, 0.80] vs 0.60: half-width 0.21, gap 0.01 -> 400 x (21^2 - 1) = 176,000 more.
    r = _result({"tpr": (0.88, 0.95), "tnr": (0.86, 0.93), "kappa": (0.40, 0.80)},
                {"tpr": 0.92, "tnr": 0.9, "kappa": 0.61})
    g = decide(r)
    assert g.more_labels_needed == 176_000 and "improving the judge" in g.reasons[-1]


# -- high-risk slices (hand-worked) -----------------------------------------------------------

def _passing():
    return decide(_result({"tpr": (0.88, 0.95), "tnr": (0.86, 0.93), "kappa": (0.65, 0.8)},
                          {"tpr": 0.92, "tnr": 0.9, "kappa": 0.72}))


def test_a_high_risk_slice_below_its_rate_fails_the_gate_whatever_the_overall_figures():
    from workbench.core.calibration.gate import decide_slice, with_slices

    # the case: restricted content with TPR 0.158 (its interval wholly below 0.90)
    bad = decide_slice("restricted", _result({"tpr": (0.05, 0.30), "tnr": (0.92, 0.99)},
                                             {"tpr": 0.158, "tnr": 0.96}, n=40, rel=12), 0.90)
    assert bad.status == "below" and "'restricted'" in bad.reason and "TPR 0.158" in bad.reason
    for overall in (_passing(), decide(_result({"tpr": (0.80, 0.95)}, {"tpr": 0.9, "tnr": 0.9, "kappa": 0.7}))):
        g = with_slices(overall, [bad])
        assert g.verdict == "fail" and g.exit_code == 1 and g.reasons[-1] == bad.reason


def test_an_undecided_high_risk_slice_keeps_a_pass_inconclusive():
    from workbench.core.calibration.gate import decide_slice, with_slices

    straddles = decide_slice("hr", _result({"tpr": (0.85, 0.97), "tnr": (0.91, 0.99)},
                                           {"tpr": 0.93, "tnr": 0.95}, n=60, rel=30), 0.90)
    assert straddles.status == "undecided" and "straddles 0.90" in straddles.reason
    assert with_slices(_passing(), [straddles]).verdict == "inconclusive"
    # clears only with both bounds at the rate and enough pairs of each class
    clear = decide_slice("hr", _result({"tpr": (0.91, 0.99), "tnr": (0.92, 0.99)},
                                       {"tpr": 0.95, "tnr": 0.96}, n=60, rel=30), 0.90)
    assert clear.status == "clears" and with_slices(_passing(), [clear]).verdict == "pass"
    few = decide_slice("hr", _result({"tpr": (1.0, 1.0), "tnr": (1.0, 1.0)}, {"tpr": 1.0, "tnr": 1.0},
                                     n=6, rel=3), 0.90)
    assert few.status == "undecided" and "fewer than 10 pairs of a class" in few.reason
    # a failing gate stays failed, an inconclusive one inconclusive
    failing = decide(_result({"tnr": (0.70, 0.80)}, {"tpr": 0.92, "tnr": 0.75, "kappa": 0.65}))
    assert with_slices(failing, [clear, straddles]).verdict == "fail"
