"""core.agreement: hand-worked examples, scikit-learn / krippendorff oracles on generated labels,
the bootstrap's seed, resampling unit and degenerate guards, Rogan–Gladen."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.support.prerequisites import require_module
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from workbench.core.calibration.agreement import (
    AgreementInputError,
    agreement,
    confusion,
    corrected_share,
    figures_from_confusion,
    kappa_from_confusion,
    krippendorff_alpha,
    pairwise_kappa,
    rogan_gladen,
    slice_members,
    wilson_interval,
    worst_disagreements,
)


def test_hand_worked_binary_example():
    # 10 pairs. Reference relevant (>= 2): 4; the candidate finds 3 of them and calls 1 of the
    # 6 non-relevant relevant. TP 3, FN 1, FP 1, TN 5.
    ref = [3, 2, 2, 3, 0, 0, 1, 1, 0, 1]
    cand = [3, 3, 1, 2, 0, 2, 1, 0, 0, 1]
    f = figures_from_confusion(confusion(ref, cand))
    assert f["tpr"] == pytest.approx(3 / 4)
    assert f["tnr"] == pytest.approx(5 / 6)
    assert f["precision"] == pytest.approx(3 / 4)
    # po = 8/10; pe = 0.4*0.4 + 0.6*0.6 = 0.52; kappa = 0.28/0.48
    assert f["kappa"] == pytest.approx(0.28 / 0.48)
    # exact: 3,0,1,0,1 equal at positions 0,4,6,8,9 -> 5/10
    assert f["exact"] == pytest.approx(0.5)
    # signed differences: 0,1,-1,-1,0,2,0,-1,0,0 -> 0
    assert f["msd"] == pytest.approx(0.0)


def test_matches_scikit_learn_on_generated_labels():
    rng = np.random.default_rng(7)
    checked = 0
    for trial in range(200):
        n = int(rng.integers(5, 300))
        r = rng.integers(0, 4, n)
        c = np.clip(r + rng.integers(-2, 3, n), 0, 3) if trial % 2 else rng.integers(0, 4, n)
        C = confusion(r, c)
        np.testing.assert_array_equal(C, confusion_matrix(r, c, labels=[0, 1, 2, 3]))
        for w in (None, "linear", "quadratic"):
            expected = cohen_kappa_score(r, c, labels=[0, 1, 2, 3], weights=w)
            got = float(kappa_from_confusion(C, w))
            assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected, abs=1e-12)
        for t in (1, 2, 3):
            f = figures_from_confusion(C, threshold=t)
            expected = cohen_kappa_score(r >= t, c >= t, labels=[False, True])
            got = float(f["kappa"])
            assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected, abs=1e-12)
        checked += 1
    assert checked == 200


def test_kappa_with_a_single_label():
    f = figures_from_confusion(confusion([0, 1, 2, 3], [2, 2, 2, 2]))
    assert float(f["kappa_graded"]) == 0.0 == cohen_kappa_score([0, 1, 2, 3], [2, 2, 2, 2])
    assert f["tpr"] == 1.0 and f["tnr"] == 0.0
    same = figures_from_confusion(confusion([2, 2, 2], [2, 2, 2]))
    assert math.isnan(float(same["kappa_graded"])) and math.isnan(float(same["tnr"]))


def test_grades_outside_the_levels_are_refused():
    with pytest.raises(AgreementInputError, match="candidate grade 5"):
        confusion([0, 1], [0, 5])
    with pytest.raises(AgreementInputError, match="2 labels but candidate has 1"):
        agreement([0, 1], [0])
    with pytest.raises(AgreementInputError, match="no paired labels"):
        agreement([], [])


def test_weights_reweight_like_replication():
    # Integer weights equal replicating the pairs.
    r = np.array([0, 1, 2, 3, 2, 0])
    c = np.array([0, 2, 2, 1, 3, 0])
    w = np.array([1, 3, 2, 1, 4, 2])
    fw = figures_from_confusion(confusion(r, c, weights=w))
    fr = figures_from_confusion(confusion(np.repeat(r, w), np.repeat(c, w)))
    for k in fw:
        assert float(fw[k]) == pytest.approx(float(fr[k]))


def test_bootstrap_is_seeded_and_reports_how():
    rng = np.random.default_rng(3)
    r = rng.integers(0, 4, 300)
    c = np.clip(r + rng.integers(-1, 2, 300), 0, 3)
    q = [f"q{i % 30}" for i in range(300)]
    a = agreement(r, c, query_ids=q, seed=11, n_boot=500)
    b = agreement(r, c, query_ids=q, seed=11, n_boot=500)
    d = agreement(r, c, query_ids=q, seed=12, n_boot=500)
    assert a.ci == b.ci and a.ci != d.ci
    assert a.seed == 11 and a.n_boot == 500 and a.resampling == "queries" and a.n_queries == 30
    few = agreement(r, c, query_ids=[f"q{i % 5}" for i in range(300)], seed=1, n_boot=200)
    assert few.resampling == "pairs" and any("only 5 queries" in n for n in few.notes)
    for name, (lo, hi) in a.ci.items():
        assert lo <= a.figures[name] <= hi, name


def test_perfect_tpr_interval_is_not_collapsed():
    # 20 relevant pairs, all found: a bootstrap interval would be [1, 1].
    r = np.array([3] * 20 + [0] * 80)
    c = np.array([3] * 20 + [0] * 70 + [2] * 10)
    res = agreement(r, c, seed=0, n_boot=300)
    lo, hi = res.ci["tpr"]
    assert hi == 1.0
    assert lo == pytest.approx(wilson_interval(20, 20)[0])
    assert lo < 0.9
    assert any("tpr" in n for n in res.notes)


def test_wilson_interval_hand_value():
    # 8 of 10, z = 1.959964: centre 0.7167, half 0.2266 -> (0.4902, 0.9433)
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)


def test_worst_disagreements_order():
    ref = [0, 3, 2, 1, 2, 0]
    cand = [3, 0, 1, 2, 2, 1]
    # crosses threshold 2: idx0 (0->3, +3), idx1 (3->0, -3), idx2 (2->1, -1), idx3 (1->2, +1)
    order = worst_disagreements(ref, cand, threshold=2).tolist()
    assert order == [0, 1, 3, 2, 5]
    assert 4 not in order


def test_slice_members():
    got = slice_members([["hr"], None, ["hr", "legal"], []])
    assert list(got) == ["hr", "legal"]
    assert got["hr"].tolist() == [0, 2] and got["legal"].tolist() == [2]


def test_krippendorff_alpha_against_the_package():
    krippendorff = require_module("krippendorff")
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(60):
        raters, units = int(rng.integers(2, 6)), int(rng.integers(5, 80))
        truth = rng.integers(0, 4, units)
        data = np.clip(truth + rng.integers(-1, 2, (raters, units)), 0, 3).astype(float)
        data[rng.random((raters, units)) < 0.2] = np.nan
        for level in ("ordinal", "interval", "nominal"):
            expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
            assert krippendorff_alpha(data, level=level) == pytest.approx(expected, abs=1e-9)
            checked += 1
    assert checked == 180


def test_krippendorff_alpha_hand_example():
    # Two raters, four units, nominal: values (1,1), (2,2), (1,2), (2,2).
    # Coincidences o11 = 2, o22 = 4, o12 = o21 = 1; n1 = 3, n2 = 5, n = 8.
    # alpha = 1 - (n-1) * (o12+o21) / (2 n1 n2) = 1 - 7*2/30 = 0.5333
    data = np.array([[1, 2, 1, 2], [1, 2, 2, 2]], dtype=float)
    assert krippendorff_alpha(data, level="nominal") == pytest.approx(1 - 14 / 30)


def test_pairwise_kappa():
    labels = {"ann": {1: 0, 2: 3, 3: 2, 4: 1}, "bob": {1: 0, 2: 3, 3: 1, 5: 2}, "cy": {9: 1}}
    got = {(a, b): (n, k) for a, b, n, k in pairwise_kappa(labels)}
    n, k = got[("ann", "bob")]
    assert n == 3 and k == pytest.approx(cohen_kappa_score([0, 3, 2], [0, 3, 1], labels=[0, 1, 2, 3]))
    assert got[("ann", "cy")][0] == 0 and math.isnan(got[("ann", "cy")][1])


def test_rogan_gladen_formula_and_clipping():
    assert float(rogan_gladen(0.5, 0.9, 0.8)) == pytest.approx((0.5 + 0.8 - 1) / (0.9 + 0.8 - 1))
    assert float(rogan_gladen(0.05, 0.9, 0.8)) == 0.0  # raw value negative: clipped
    assert math.isnan(float(rogan_gladen(0.5, 0.4, 0.5)))  # TPR + TNR <= 1


def test_corrected_share_carries_calibration_uncertainty():
    rng = np.random.default_rng(9)
    n = 400
    r = (rng.random(n) < 0.4).astype(int) * 3
    hit = rng.random(n)
    c = np.where(r == 3, np.where(hit < 0.9, 3, 0), np.where(hit < 0.85, 0, 3))
    cal = agreement(r, c, seed=1, n_boot=1000, keep_boot=True)
    share = corrected_share(3000, 10000, cal, seed=2)
    tpr, tnr = cal.figures["tpr"], cal.figures["tnr"]
    assert share.estimate == pytest.approx((0.3 + tnr - 1) / (tpr + tnr - 1))
    lo, hi = share.ci
    assert lo < share.estimate < hi
    # The binomial noise of 10,000 judged items alone is about +-0.01; the calibration pairs
    # make the interval several times wider.
    assert hi - lo > 0.04
    with pytest.raises(AgreementInputError, match="keep_boot"):
        corrected_share(1, 10, agreement(r, c, seed=1, n_boot=10))


def test_small_counts_get_at_least_the_wilson_interval():
    # 7 reference-non-relevant pairs, 5 rejected: TNR 5/7.
    r = np.array([0] * 7 + [3] * 100)
    c = np.array([0] * 5 + [3] * 2 + [3] * 90 + [0] * 10)
    res = agreement(r, c, seed=0, n_boot=500)
    wlo, whi = wilson_interval(5, 7)
    lo, hi = res.ci["tnr"]
    assert lo <= wlo and hi >= whi
    assert any("tnr rests on 7 pairs" in n for n in res.notes)


def test_the_standard_normal_matches_scipy():
    """Φ and Φ⁻¹ come from the standard library (no scipy.stats import per gate); scipy is the
    oracle on a grid of 2,000 points in each direction."""
    from scipy.stats import norm

    from workbench.core.calibration.agreement import STANDARD_NORMAL

    ps = np.linspace(1e-6, 1 - 1e-6, 2000)
    zs = np.linspace(-6, 6, 2000)
    assert max(abs(STANDARD_NORMAL.inv_cdf(float(p)) - norm.ppf(p)) for p in ps) < 1e-9
    assert max(abs(STANDARD_NORMAL.cdf(float(z)) - norm.cdf(z)) for z in zs) < 1e-12
