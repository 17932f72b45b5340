"""PPI++ for a mean of per-query values (workbench/core/metrics/ppi.py).

Oracles: ``ppi-python``'s ``ppi_mean_ci`` / ``ppi_mean_pointestimate`` / ``classical_mean_ci``
(the paper's reference implementation) for the independent-sample form over 500 random cases;
exhaustive enumeration of every labelled subset of a small population for the finite-population
form (the estimator's exact mean and variance over all subsets, and the mean of its variance
estimate); hand-worked numbers; edge cases (λ clipping, constant judge, zero residual, n = 2,
n = N).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tests.support.prerequisites import require_module
from workbench.core.metrics.ppi import (
    jackknife_replicates,
    jackknife_std_error,
    plan_sample_size,
    ppi_mean,
    ppi_mean_difference,
    ppi_mean_independent,
    t_quantile,
    tuned_lambda,
)

N_ORACLE_CASES = 500


def same(a, b) -> bool:
    """Two intervals equal up to rounding (the jackknife and the plug-in sum differently)."""
    return all(x == pytest.approx(y, abs=1e-12) for x, y in ((a.estimate, b.estimate), (a.low, b.low),
                                                               (a.high, b.high), (a.std_error, b.std_error)))


def _random_case(rng: np.random.Generator):
    n = int(rng.integers(2, 60))
    big_n = int(rng.integers(1, 400))
    slope = rng.uniform(-1.5, 2.5)
    noise = rng.uniform(0.0, 1.0)
    f_lab = rng.uniform(0, 1, n)
    f_unl = rng.uniform(0, 1, big_n)
    y = np.clip(slope * f_lab + rng.normal(rng.uniform(-0.3, 0.3), noise, n), -1, 2)
    return y, f_lab, f_unl


def test_independent_form_equals_ppi_python_over_random_cases():
    ppi_py = require_module("ppi_py")
    rng = np.random.default_rng(20231103)
    clipped = {"low": 0, "high": 0, "inside": 0}
    for _ in range(N_ORACLE_CASES):
        y, f_lab, f_unl = _random_case(rng)
        confidence = float(rng.choice([0.8, 0.9, 0.95, 0.99]))
        alpha = 1 - confidence
        ours = ppi_mean_independent(y, f_lab, f_unl, confidence=confidence)
        lo, hi = ppi_py.ppi_mean_ci(y, f_lab, f_unl, alpha=alpha)
        point = ppi_py.ppi_mean_pointestimate(y, f_lab, f_unl)
        assert ours.ppi.low == pytest.approx(float(np.squeeze(lo)), abs=1e-10)
        assert ours.ppi.high == pytest.approx(float(np.squeeze(hi)), abs=1e-10)
        assert ours.ppi.estimate == pytest.approx(float(np.squeeze(point)), abs=1e-10)
        clo, chi = ppi_py.classical_mean_ci(y, alpha=alpha)
        assert (ours.human_only.low, ours.human_only.high) == pytest.approx((clo, chi), abs=1e-10)
        # a fixed λ gives the same interval too (0: classical, 1: plain PPI)
        for lam in (0.0, 0.37, 1.0):
            lo, hi = ppi_py.ppi_mean_ci(y, f_lab, f_unl, alpha=alpha, lam=lam)
            fixed = ppi_mean_independent(y, f_lab, f_unl, confidence=confidence, lam=lam)
            assert (fixed.ppi.low, fixed.ppi.high) == pytest.approx(
                (float(np.squeeze(lo)), float(np.squeeze(hi))), abs=1e-10)
        clipped["low" if ours.lam == 0 else "high" if ours.lam == 1 else "inside"] += 1
    # the random cases reach both clipping bounds and the interior
    assert min(clipped.values()) >= 20, clipped


def _population(seed: int, big_n: int = 10):
    rng = np.random.default_rng(seed)
    f = rng.uniform(0, 1, big_n)
    y = np.clip(0.8 * f + rng.normal(0.1, 0.15, big_n), 0, 1)
    return y, f


@pytest.mark.parametrize("n", [2, 3, 5, 9])
def test_finite_form_is_unbiased_and_its_variance_is_exact_over_every_subset(n):
    """For a fixed λ, over all C(N, n) subsets: E[θ̂] = θ exactly, Var[θ̂] = (1 − n/N)·S²(r)/n,
    and the variance estimate is unbiased for it (the survey-sampling facts the interval uses)."""
    y, f = _population(7)
    big_n = len(f)
    lam = 0.6
    estimates, variances = [], []
    for subset in itertools.combinations(range(big_n), n):
        idx = np.array(subset)
        est = ppi_mean(y[idx], f, idx, lam=lam)
        estimates.append(est.ppi.estimate)
        variances.append(est.ppi.std_error ** 2)
    estimates = np.array(estimates)
    residual_var = np.var(y - lam * f, ddof=1)
    assert estimates.mean() == pytest.approx(y.mean(), abs=1e-12)
    assert np.var(estimates) == pytest.approx((1 - n / big_n) * residual_var / n, rel=1e-9)
    assert np.mean(variances) == pytest.approx((1 - n / big_n) * residual_var / n, rel=1e-9)


def test_over_all_n_equals_human_values_where_labelled_plus_ppi_on_the_rest():
    y, f = _population(3, 12)
    idx = np.array([1, 4, 5, 8, 11])
    lam = 0.7
    est = ppi_mean(y[idx], f, idx, lam=lam)
    rest = np.setdiff1d(np.arange(12), idx)
    predicted_rest = lam * f[rest].mean() + np.mean(y[idx] - lam * f[idx])
    assert est.ppi.estimate == pytest.approx((5 * y[idx].mean() + 7 * predicted_rest) / 12, abs=1e-12)


def test_hand_worked_example():
    # N = 6 queries, judge f = [0.2, 0.4, 0.6, 0.8, 0.5, 0.5]; humans labelled the first four,
    # Y = [0.3, 0.3, 0.7, 0.9].
    #   mean f (all) = 3.0/6 = 0.5; var f (all, ddof 1) = (0.09+0.01+0.01+0.09+0+0)/5 = 0.04
    #   Ȳ_L = 0.55, f̄_L = 0.5; cov_L = (−0.25·−0.3 + −0.25·−0.1 + 0.15·0.1 + 0.35·0.3)/3
    #          = (0.075 + 0.025 + 0.015 + 0.105)/3 = 0.22/3 = 0.073333
    #   λ = 0.073333/0.04 = 1.8333 -> clipped to 1
    #   θ̂ = 0.55 + 1·(0.5 − 0.5) = 0.55
    #   residuals Y − f = [0.1, −0.1, 0.1, 0.1]: mean 0.05, s² = (0.0025+0.0225+0.0025+0.0025)/3 = 0.01
    #   SE = sqrt((1 − 4/6)·0.01/4) = sqrt(0.000833333) = 0.0288675
    #   t_{3, 0.975} = 3.182446; half-width = 0.0918693
    #   human only: s²(Y) = (0.0625+0.0625+0.0225+0.1225)/3 = 0.09; SE = sqrt(1/3·0.09/4) = 0.0866025
    #   half-width = 0.2756080
    f = np.array([0.2, 0.4, 0.6, 0.8, 0.5, 0.5])
    y = np.array([0.3, 0.3, 0.7, 0.9])
    est = ppi_mean(y, f, [0, 1, 2, 3])
    assert est.lam == 1.0
    assert est.judge_only == pytest.approx(0.5)
    assert est.ppi.estimate == pytest.approx(0.55)
    assert est.ppi.std_error == pytest.approx(0.0288675, abs=1e-7)
    assert est.ppi.half_width == pytest.approx(0.0918693, abs=1e-6)
    assert est.human_only.estimate == pytest.approx(0.55)
    assert est.human_only.half_width == pytest.approx(0.2756080, abs=1e-6)
    assert est.width_ratio == pytest.approx(1 / 3, abs=1e-6)
    assert t_quantile(0.975, 3) == pytest.approx(3.182446, abs=1e-6)


def test_hand_worked_interior_lambda_and_difference():
    # Two runs on N = 5 queries, labelled {0, 2, 4}.
    # judge A = [0.5, 0.5, 0.5, 0.5, 0.5], judge B = [0.6, 0.7, 0.4, 0.5, 0.8]
    # human A on labelled = [0.4, 0.6, 0.5], human B = [0.6, 0.4, 0.5]
    # differences: f = B − A = [0.1, 0.2, −0.1, 0.0, 0.3]; labelled f = [0.1, −0.1, 0.3]
    #   Y = [0.2, −0.2, 0.0]
    #   mean f (all) = 0.5/5 = 0.1; var f (all) = (0+0.01+0.04+0.01+0.04)/4 = 0.025
    #   Ȳ = 0, f̄_L = 0.1; cov_L = (0.2·0 + −0.2·−0.2 + 0·0.2)/2 = 0.02
    #   λ = 0.02/0.025 = 0.8
    #   θ̂ = 0 + 0.8·(0.1 − 0.1) = 0
    #   SE, delete-one jackknife with λ re-tuned (var f over all N stays 0.025, f̄ = 0.1):
    #     without pos 0: f [−0.1, 0.3], Y [−0.2, 0]: cov 0.04 -> λ 1.6 -> 1; θ = −0.1 + (0.1 − 0.1) = −0.1
    #     without pos 2: f [0.1, 0.3], Y [0.2, 0]: cov −0.02 -> λ 0; θ = 0.1
    #     without pos 4: f [0.1, −0.1], Y [0.2, −0.2]: cov 0.04 -> λ 1; θ = 0 + (0.1 − 0) = 0.1
    #     replicates [−0.1, 0.1, 0.1], mean 1/30; Σ dev² = 0.0177778 + 0.0044444 + 0.0044444 = 0.0266667
    #     SE² = (1 − 3/5)·(2/3)·0.0266667 = 0.00711111 -> SE_jack = 0.0843274
    #   human only: Y = [0.2, −0.2, 0.0], s² = (0.04 + 0.04 + 0)/2 = 0.04,
    #     SE_human = sqrt(0.4·0.04/3) = 0.0730297 < SE_jack: the reported SE is capped at it
    #   the plug-in at λ = 0.8 (fixed): residuals Y − 0.8 f = [0.12, −0.12, −0.24], deviations
    #     [0.20, −0.04, −0.16]; s² = 0.0672/2 = 0.0336; SE = sqrt(0.4·0.0336/3) = 0.0669328
    fa = np.full(5, 0.5)
    fb = np.array([0.6, 0.7, 0.4, 0.5, 0.8])
    est = ppi_mean_difference([0.4, 0.6, 0.5], [0.6, 0.4, 0.5], fa, fb, [0, 2, 4])
    assert est.lam == pytest.approx(0.8)
    assert est.ppi.estimate == pytest.approx(0.0, abs=1e-12)
    y, f = np.array([0.2, -0.2, 0.0]), fb - fa
    assert jackknife_std_error(y, f[[0, 2, 4]], f) == pytest.approx(0.0843274, abs=1e-7)
    assert est.human_only.std_error == pytest.approx(0.0730297, abs=1e-7)
    assert est.capped and est.ppi.std_error == pytest.approx(0.0730297, abs=1e-7)
    assert est.judge_only == pytest.approx(0.1)
    half = 4.302653 * 0.0730297  # t_{2, 0.975} = 4.302653
    assert (est.ppi.low, est.ppi.high) == pytest.approx((-half, half), abs=1e-6)
    assert est.width_ratio == pytest.approx(1.0)
    fixed = ppi_mean_difference([0.4, 0.6, 0.5], [0.6, 0.4, 0.5], fa, fb, [0, 2, 4], lam=0.8)
    assert fixed.ppi.std_error == pytest.approx(0.0669328, abs=1e-7)
    assert not fixed.capped  # a caller's fixed λ keeps its exact plug-in


def test_jackknife_replicates_equal_refitting_without_each_query():
    rng = np.random.default_rng(11)
    for _ in range(200):
        big_n = int(rng.integers(5, 40))
        n = int(rng.integers(3, big_n + 1))
        f = rng.uniform(0, 1, big_n)
        idx = rng.choice(big_n, n, replace=False)
        y = np.clip(rng.uniform(-0.5, 1.5) * f[idx] + rng.normal(0, 0.2, n), 0, 1)
        refit = [ppi_mean(np.delete(y, i), f, np.delete(idx, i)).ppi.estimate for i in range(n)]
        assert jackknife_replicates(y, f[idx], f) == pytest.approx(refit, abs=1e-12)


def test_with_a_fixed_lambda_the_jackknife_is_the_plug_in():
    """The tuned estimate's jackknife SE reduces to the plug-in when every replicate keeps the
    same λ (here all clip to 1)."""
    f = np.array([0.2, 0.4, 0.6, 0.8, 0.5, 0.5])
    y = np.array([0.3, 0.3, 0.7, 0.9])
    assert same(ppi_mean(y, f, [0, 1, 2, 3]).ppi, ppi_mean(y, f, [0, 1, 2, 3], lam=1.0).ppi)


def test_lambda_clips_at_zero_for_an_anticorrelated_judge():
    f = np.array([0.1, 0.9, 0.2, 0.8, 0.5, 0.3])
    y = 1 - f[:4]
    est = ppi_mean(y, f, [0, 1, 2, 3])
    assert est.lam == 0.0
    assert same(est.ppi, est.human_only)  # λ = 0 is the human-only estimate and interval


def test_constant_judge_gets_lambda_zero():
    f = np.full(8, 0.4)
    est = ppi_mean([0.1, 0.5, 0.9], f, [2, 3, 5])
    assert est.lam == 0.0
    assert tuned_lambda(np.array([0.1, 0.5, 0.9]), f[[2, 3, 5]], f) == 0.0
    assert same(est.ppi, est.human_only)


def test_zero_residual_variance_gives_a_point_interval():
    f = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
    est = ppi_mean(f[[0, 2, 4]], f, [0, 2, 4], lam=1.0)  # the judge is exact
    assert est.ppi.low == est.ppi.high == pytest.approx(f.mean())
    assert est.human_only.high > est.human_only.low
    tuned = ppi_mean(f[[0, 2, 4]], f, [0, 2, 4])  # λ = 1, but the jackknife sees its tuning vary
    assert tuned.lam == 1.0 and tuned.ppi.estimate == pytest.approx(f.mean())
    assert 0 < tuned.ppi.high - tuned.ppi.low < tuned.human_only.high - tuned.human_only.low


def test_two_labelled_queries_use_t_with_one_degree_of_freedom():
    f = np.array([0.0, 1.0, 0.5, 0.5])
    est = ppi_mean([0.2, 0.6], f, [0, 1], lam=0.0)
    # SE = sqrt((1 − 2/4)·s²/2), s² = 0.08 -> sqrt(0.02); t_{1, .975} = 12.7062
    assert est.human_only.half_width == pytest.approx(12.706205 * math.sqrt(0.02), abs=1e-5)


def test_every_query_labelled_gives_the_exact_mean():
    f = np.array([0.2, 0.4, 0.9])
    y = np.array([0.1, 0.5, 0.6])
    est = ppi_mean(y, f, [0, 1, 2])
    assert est.ppi.estimate == pytest.approx(y.mean())
    assert est.ppi.low == est.ppi.high == est.human_only.low == est.human_only.high


@pytest.mark.parametrize("args, match", [
    (([0.1], [0.1, 0.2], [0]), "at least 2"),
    (([0.1, 0.2], [0.1, 0.2, 0.3], [0, 0]), "distinct"),
    (([0.1, 0.2], [0.1, 0.2, 0.3], [0, 5]), "distinct"),
    (([0.1, 0.2], [0.1, 0.2, 0.3], [0]), "labelled positions"),
    (([0.1, math.nan], [0.1, 0.2, 0.3], [0, 1]), "NaN"),
])
def test_bad_input_is_refused(args, match):
    with pytest.raises(ValueError, match=match):
        ppi_mean(*args)


def test_bad_confidence_is_refused():
    with pytest.raises(ValueError, match="confidence"):
        ppi_mean([0.1, 0.2], [0.1, 0.2, 0.3], [0, 1], confidence=1.0)


def test_plan_finds_the_smallest_sufficient_sample():
    rng = np.random.default_rng(5)
    f = rng.uniform(0, 1, 200)
    y_all = np.clip(f + rng.normal(0, 0.05, 200), 0, 1)
    pilot = np.arange(10)
    plan = plan_sample_size(y_all[pilot], f, pilot, 0.02)
    assert 2 <= plan.n_ppi < plan.n_human <= 200
    # the sd each design assumes: the human values' own, and the one the pilot's PPI++ SE implies
    est = ppi_mean(y_all[pilot], f, pilot)
    assert plan.sd_human == pytest.approx(np.std(y_all[pilot], ddof=1))
    assert plan.sd_ppi == pytest.approx(est.ppi.std_error * math.sqrt(10 / (1 - 10 / 200)))
    p = (1 + plan.confidence) / 2

    def half(n, sd):
        return t_quantile(p, n - 1) * sd * math.sqrt((1 - n / 200) / n)

    for n, sd in ((plan.n_ppi, plan.sd_ppi), (plan.n_human, plan.sd_human)):
        assert half(n, sd) <= 0.02 < half(n - 1, sd)
    # a half-width no design can miss needs only the minimum; an impossible one every query
    assert plan_sample_size(y_all[pilot], f, pilot, 10.0).n_human == 2
    assert plan_sample_size(y_all[pilot], f, pilot, 1e-9).n_human == 200
