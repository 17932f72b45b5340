"""Paired tests checked against scipy, exact enumeration and the specification's example."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from workbench.core.metrics.significance import (
    StatisticsInputError,
    benjamini_hochberg,
    bootstrap_ci,
    bootstrap_test,
    paired_t_test,
    paired_test,
    randomization_test,
)
from workbench.errors import WorkbenchError

# Specification section 3.1: recall@5 per query of a base and a new retriever.
BASE = [0.50, 0.75, 0.25, 1.00, 0.50, 0.00, 0.75, 0.50, 0.25, 0.50]
NEW = [0.75, 1.00, 0.50, 1.00, 0.75, 0.25, 0.75, 0.75, 0.50, 0.75]


def exact_randomization_p(a, b):
    """Exact two-sided sign-flip p-value: share of all 2^n sign vectors at least as extreme."""
    d = np.asarray(b, float) - np.asarray(a, float)
    observed = abs(d.mean())
    hits = 0
    total = 0
    for signs in itertools.product((-1.0, 1.0), repeat=d.size):
        total += 1
        if abs(np.dot(signs, d) / d.size) >= observed - 1e-12:
            hits += 1
    return hits / total


def test_spec_example_delta_and_p():
    result = randomization_test(BASE, NEW, n_resamples=10_000, seed=0)
    assert round(result.delta, 3) == 0.2
    assert result.p_value < 0.01
    assert result.seed == 0 and result.n_resamples == 10_000 and result.n == 10


def test_spec_example_exact_p():
    # 8 of 10 differences are +0.25, 2 are 0: only the all-positive and all-negative flips of
    # the 8 non-zero ones reach |mean| = 0.2, i.e. 2 * 2^2 of 2^10 assignments.
    assert exact_randomization_p(BASE, NEW) == pytest.approx(8 / 1024)
    result = randomization_test(BASE, NEW, n_resamples=50_000, seed=3)
    assert result.p_value == pytest.approx(8 / 1024, abs=0.002)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_randomization_matches_exact_enumeration(seed):
    rng = np.random.default_rng(100 + seed)
    a = rng.uniform(size=9)
    b = a + rng.normal(0.08, 0.2, size=9)
    exact = exact_randomization_p(a, b)
    mc = randomization_test(a, b, n_resamples=40_000, seed=seed).p_value
    # Monte-Carlo standard error is at most sqrt(0.25 / 40000) = 0.0025.
    assert mc == pytest.approx(exact, abs=0.012)


def test_randomization_is_seed_reproducible_and_generator_accepted():
    r1 = randomization_test(BASE[:6], NEW[::-1][:6], n_resamples=3_000, seed=7)
    r2 = randomization_test(BASE[:6], NEW[::-1][:6], n_resamples=3_000, seed=7)
    assert r1 == r2
    r3 = randomization_test(BASE, NEW, n_resamples=100, seed=np.random.default_rng(1))
    assert r3.seed is None


def test_randomization_p_bounds():
    same = randomization_test(BASE, BASE, n_resamples=500, seed=0)
    assert same.delta == 0 and same.p_value == 1.0
    # p is never 0: the observed assignment counts.
    far = randomization_test([0.0] * 30, [1.0] * 30, n_resamples=999, seed=0)
    assert far.p_value == pytest.approx(1 / 1000)


def test_swapping_runs_flips_delta_not_p():
    ab = randomization_test(BASE, NEW, n_resamples=2_000, seed=5)
    ba = randomization_test(NEW, BASE, n_resamples=2_000, seed=5)
    assert ba.delta == pytest.approx(-ab.delta)
    assert ba.p_value == ab.p_value


@given(
    st.lists(
        st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=2, max_size=40
    ).filter(lambda pairs: len({round(y - x, 9) for x, y in pairs}) > 1)
)
@settings(max_examples=60, deadline=None)
def test_t_test_matches_scipy(pairs):
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    ours = paired_t_test(a, b)
    ref = stats.ttest_rel(b, a)
    assert ours.statistic == pytest.approx(ref.statistic, rel=1e-9, abs=1e-9)
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)
    assert ours.delta == pytest.approx(np.mean(b) - np.mean(a))


def test_t_test_zero_variance():
    assert paired_t_test([0.1, 0.2], [0.1, 0.2]).p_value == 1.0
    shifted = paired_t_test([0.1, 0.3, 0.5], [0.2, 0.4, 0.6])
    assert shifted.p_value == 0.0 and shifted.statistic == math.inf
    with pytest.raises(StatisticsInputError, match="at least two"):
        paired_t_test([0.1], [0.2])


def test_bootstrap_ci_reproducible_and_covers():
    ci1 = bootstrap_ci(BASE, NEW, n_resamples=5_000, seed=11)
    ci2 = bootstrap_ci(BASE, NEW, n_resamples=5_000, seed=11)
    assert ci1 == ci2 and ci1.seed == 11
    assert ci1.delta == pytest.approx(0.2)
    # Eight differences are 0.25 and two are 0, so a resampled mean is 0.025 * K with
    # K ~ Binomial(10, 0.8). P(K <= 4) = 0.006 and P(K <= 5) = 0.033 put the 2.5% quantile at
    # K = 5; P(K <= 9) = 0.89 puts the 97.5% quantile at K = 10.
    assert stats.binom.cdf(4, 10, 0.8) < 0.025 < stats.binom.cdf(5, 10, 0.8)
    assert ci1.low == pytest.approx(0.125) and ci1.high == pytest.approx(0.25)


def test_bootstrap_ci_depends_on_seed():
    rng = np.random.default_rng(0)
    a, b = rng.uniform(size=30), rng.uniform(size=30)
    one = bootstrap_ci(a, b, n_resamples=2_000, seed=1)
    assert one == bootstrap_ci(a, b, n_resamples=2_000, seed=1)
    assert (one.low, one.high) != (
        bootstrap_ci(a, b, n_resamples=2_000, seed=2).low,
        bootstrap_ci(a, b, n_resamples=2_000, seed=2).high,
    )
    assert one.low <= one.delta <= one.high


def test_bootstrap_ci_against_scipy_bootstrap():
    rng = np.random.default_rng(0)
    a = rng.uniform(size=60)
    b = np.clip(a + rng.normal(0.05, 0.15, size=60), 0, 1)
    ours = bootstrap_ci(a, b, n_resamples=20_000, seed=1)
    ref = stats.bootstrap(
        (b - a,), np.mean, n_resamples=20_000, method="percentile", rng=np.random.default_rng(2)
    ).confidence_interval
    assert ours.low == pytest.approx(ref.low, abs=0.006)
    assert ours.high == pytest.approx(ref.high, abs=0.006)


def test_bootstrap_ci_coverage_of_known_mean():
    # Differences drawn from N(0.1, 0.2): a 90% interval should contain 0.1 most of the time.
    rng = np.random.default_rng(42)
    hits = 0
    for trial in range(200):
        d = rng.normal(0.1, 0.2, size=40)
        ci = bootstrap_ci(np.zeros(40), d, confidence=0.9, n_resamples=1_000, seed=trial)
        hits += ci.low <= 0.1 <= ci.high
    assert 0.82 <= hits / 200 <= 0.97


def test_bootstrap_test_behaviour():
    strong = bootstrap_test(BASE, NEW, n_resamples=5_000, seed=0)
    assert strong.delta == pytest.approx(0.2) and strong.p_value < 0.01
    null = bootstrap_test(BASE, BASE, n_resamples=500, seed=0)
    assert null.p_value == 1.0
    rng = np.random.default_rng(5)
    a = rng.uniform(size=50)
    b = a + rng.normal(0.0, 0.2, size=50)
    boot = bootstrap_test(a, b, n_resamples=20_000, seed=1).p_value
    assert boot == pytest.approx(stats.ttest_rel(b, a).pvalue, abs=0.05)


def test_paired_test_dispatch():
    assert paired_test("ttest", BASE, NEW).test == "ttest"
    assert paired_test("bootstrap", BASE, NEW, n_resamples=100).test == "bootstrap"
    assert paired_test("randomization", BASE, NEW, n_resamples=100).n_resamples == 100
    with pytest.raises(StatisticsInputError, match="unknown test"):
        paired_test("wilcoxon", BASE, NEW)


@pytest.mark.parametrize(
    "a, b, message",
    [
        ([0.1, 0.2], [0.1], "differ in length"),
        ([], [], "no paired scores"),
        ([0.1, float("nan")], [0.2, 0.3], "NaN"),
        ([[0.1]], [[0.2]], "one-dimensional"),
    ],
)
@pytest.mark.parametrize("fn", [randomization_test, bootstrap_ci, bootstrap_test, paired_t_test])
def test_input_errors(fn, a, b, message):
    with pytest.raises(StatisticsInputError, match=message) as info:
        fn(a, b)
    assert isinstance(info.value, ValueError) and isinstance(info.value, WorkbenchError)


def test_parameter_errors():
    with pytest.raises(ValueError, match="n_resamples"):
        randomization_test(BASE, NEW, n_resamples=0)
    with pytest.raises(ValueError, match="seed"):
        randomization_test(BASE, NEW, seed="x")
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci(BASE, NEW, confidence=1.5)


def test_bh_hand_example():
    # m = 5; sorted p = .01 .02 .03 .04 .05 -> scaled .05 .05 .05 .05 .05.
    # Unsorted input keeps its order.
    p = [0.04, 0.01, 0.05, 0.02, 0.03]
    assert benjamini_hochberg(p) == pytest.approx([0.05] * 5)
    # m = 4: scaled = .001*4/1, .02*4/2, .03*4/3, .5*4/4 = .004 .04 .04 .5
    assert benjamini_hochberg([0.5, 0.001, 0.03, 0.02]) == pytest.approx([0.5, 0.004, 0.04, 0.04])


@given(st.lists(st.floats(0, 1), min_size=1, max_size=50))
@settings(max_examples=100, deadline=None)
def test_bh_matches_scipy(p):
    assert benjamini_hochberg(p) == pytest.approx(stats.false_discovery_control(p), abs=1e-12)


def test_bh_nan_passthrough_and_errors():
    out = benjamini_hochberg([0.01, float("nan"), 0.04])
    assert math.isnan(out[1])
    assert out[[0, 2]] == pytest.approx(stats.false_discovery_control([0.01, 0.04]))
    assert benjamini_hochberg([]).size == 0
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        benjamini_hochberg([0.2, 1.2])
