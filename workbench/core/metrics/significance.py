"""Paired significance tests for comparing two runs on the same queries.

All tests take per-query scores ``a`` (baseline) and ``b`` (new system) in the same query
order and work on the paired differences ``d_i = b_i - a_i``; the effect reported is the
mean difference ``mean(d) = mean(b) - mean(a)`` (positive: ``b`` is better).

Smucker, Allan & Carterette (2007) found the randomization test, the paired bootstrap and the
paired t-test mostly agree on IR data; the sign and Wilcoxon tests are deliberately absent.

Randomness always comes from an explicit ``seed`` (an ``int``) or a ``numpy.random.Generator``;
results carry the int seed (``None`` when a Generator was passed) so a run can be repeated.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workbench import lazylibs
from workbench.errors import InputError

# Sign matrices and resample indices are built in blocks of rows: large enough for numpy to
# vectorise, small enough that a block (rows x n_queries) stays around 2M cells (~16 MB).
_BLOCK_CELLS = 2_000_000

SeedLike = int | np.random.Generator


class StatisticsInputError(InputError, ValueError):
    """Per-query scores a statistical routine cannot use (length mismatch, empty, NaN).

    A :class:`ValueError` for library callers and a :class:`~workbench.errors.WorkbenchError`
    so the CLI prints it as one line.
    """


@dataclass(frozen=True)
class PairedTestResult:
    """Outcome of one paired test of ``b`` against ``a``.

    ``delta`` is ``mean(b) - mean(a)``; ``statistic`` is the test statistic (the mean
    difference for resampling tests, Student's t for the t-test); ``n_resamples`` and ``seed``
    are ``None`` for the t-test, which needs no randomness.
    """

    test: str
    delta: float
    statistic: float
    p_value: float
    n: int
    n_resamples: int | None = None
    seed: int | None = None


@dataclass(frozen=True)
class BootstrapCI:
    """Percentile bootstrap interval of the mean paired difference ``mean(b - a)``."""

    delta: float
    low: float
    high: float
    confidence: float
    n_resamples: int
    seed: int | None


def paired_differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    """Return ``b - a`` as a float array after checking the pair is usable.

    Raises :class:`StatisticsInputError` when the lengths differ, the input is empty or any
    score is NaN/infinite (a NaN would silently poison every resampled mean).
    """
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.ndim != 1 or y.ndim != 1:
        raise StatisticsInputError("per-query scores must be one-dimensional sequences")
    if x.shape != y.shape:
        raise StatisticsInputError(
            f"paired scores differ in length ({x.size} vs {y.size}); "
            "align both runs on the same queries first"
        )
    if x.size == 0:
        raise StatisticsInputError("no paired scores: both runs need at least one query")
    bad = ~(np.isfinite(x) & np.isfinite(y))
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise StatisticsInputError(
            f"{int(bad.sum())} paired score(s) are NaN or infinite (first at position {first}); "
            "drop or fill those queries before testing"
        )
    return y - x


def _block_rows(n: int) -> int:
    return max(1, _BLOCK_CELLS // n)


def _rng(seed: SeedLike) -> tuple[np.random.Generator, int | None]:
    if isinstance(seed, np.random.Generator):
        return seed, None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise StatisticsInputError(f"seed must be an int or numpy Generator, got {seed!r}")
    return np.random.default_rng(int(seed)), int(seed)


def _check_resamples(n_resamples: int) -> int:
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)):
        raise StatisticsInputError(f"n_resamples must be an int, got {n_resamples!r}")
    if n_resamples < 1:
        raise StatisticsInputError(f"n_resamples must be at least 1, got {n_resamples}")
    return int(n_resamples)


def _tolerance(observed: float) -> float:
    # Resampled means that equal the observed one up to rounding must count as "as extreme";
    # otherwise e.g. flipping only zero differences could look less extreme by 1 ulp.
    return 1e-12 * max(1.0, abs(observed))


def randomization_test(
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_resamples: int = 10_000,
    seed: SeedLike = 0,
) -> PairedTestResult:
    """Two-sided paired randomization (sign-flip permutation) test.

    Under H0 the labels "a"/"b" are exchangeable within each query, so each difference
    ``d_i`` keeps its magnitude but its sign is a fair coin. With ``R = n_resamples`` random
    sign vectors ``s`` the p-value is::

        p = (#{r : |mean(s_r * d)| >= |mean(d)|} + 1) / (R + 1)

    The ``+1`` counts the observed assignment, so ``p`` is never 0 and the test is valid
    (never anti-conservative) for any ``R``. Edge cases: all differences zero gives ``p = 1``;
    the smallest reachable p is ``1 / (R + 1)``.
    """
    d = paired_differences(a, b)
    n_resamples = _check_resamples(n_resamples)
    rng, int_seed = _rng(seed)
    n = d.size
    observed = float(d.mean())
    threshold = abs(observed) - _tolerance(observed)
    extreme = 0
    done = 0
    while done < n_resamples:
        rows = min(_block_rows(n), n_resamples - done)
        signs = rng.integers(0, 2, size=(rows, n), dtype=np.int8) * 2 - 1
        flipped = (signs @ d) / n
        extreme += int(np.count_nonzero(np.abs(flipped) >= threshold))
        done += rows
    p = (extreme + 1) / (n_resamples + 1)
    return PairedTestResult("randomization", observed, observed, p, n, n_resamples, int_seed)


def _bootstrap_means(d: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of ``n_resamples`` resamples of ``d`` drawn with replacement (query-level)."""
    n = d.size
    out = np.empty(n_resamples)
    done = 0
    while done < n_resamples:
        rows = min(_block_rows(n), n_resamples - done)
        idx = rng.integers(0, n, size=(rows, n))
        out[done : done + rows] = d[idx].mean(axis=1)
        done += rows
    return out


def bootstrap_ci(
    a: Sequence[float],
    b: Sequence[float],
    *,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    seed: SeedLike = 0,
) -> BootstrapCI:
    """Paired percentile bootstrap interval for ``mean(b) - mean(a)``.

    Queries are resampled with replacement (pairs stay together); the interval is the
    ``(1 - confidence) / 2`` and ``1 - (1 - confidence) / 2`` quantiles of the resampled mean
    differences (numpy's linear interpolation). ``delta`` is the observed mean difference, not
    the bootstrap mean. With one query, or identical differences, the interval collapses to
    that point.
    """
    if not (0.0 < confidence < 1.0) or isinstance(confidence, bool):
        raise StatisticsInputError(f"confidence must be strictly between 0 and 1, got {confidence}")
    d = paired_differences(a, b)
    n_resamples = _check_resamples(n_resamples)
    rng, int_seed = _rng(seed)
    means = _bootstrap_means(d, n_resamples, rng)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return BootstrapCI(float(d.mean()), float(low), float(high), confidence, n_resamples, int_seed)


def bootstrap_test(
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_resamples: int = 10_000,
    seed: SeedLike = 0,
) -> PairedTestResult:
    """Two-sided paired bootstrap test (shift method, Smucker et al. 2007).

    H0 is imposed by centring the differences, ``d0 = d - mean(d)``; resampling ``d0`` with
    replacement gives the null distribution of the mean, and::

        p = (#{r : |mean(d0*_r)| >= |mean(d)|} + 1) / (R + 1)

    All differences equal gives ``d0 = 0`` everywhere: ``p = 1`` if that common value is 0,
    else ``p = 1 / (R + 1)``.
    """
    d = paired_differences(a, b)
    n_resamples = _check_resamples(n_resamples)
    rng, int_seed = _rng(seed)
    observed = float(d.mean())
    means = _bootstrap_means(d - observed, n_resamples, rng)
    extreme = int(np.count_nonzero(np.abs(means) >= abs(observed) - _tolerance(observed)))
    p = (extreme + 1) / (n_resamples + 1)
    return PairedTestResult("bootstrap", observed, observed, p, d.size, n_resamples, int_seed)


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> PairedTestResult:
    """Two-sided paired Student t-test on ``d = b - a``.

    ``t = mean(d) / (sd(d) / sqrt(n))`` with the sample standard deviation (``ddof=1``) and
    ``n - 1`` degrees of freedom; ``p = 2 * P(T_{n-1} >= |t|)``. Needs ``n >= 2``.
    Zero variance is decided here rather than left to a 0/0: all differences 0 gives
    ``t = 0, p = 1``; all equal and non-zero gives ``t = ±inf, p = 0``.
    """
    d = paired_differences(a, b)
    n = d.size
    if n < 2:
        raise StatisticsInputError("the paired t-test needs at least two queries")
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    # Differences equal up to rounding (e.g. 0.1 - 0.3 vs 0.4 - 0.6) have sd ~ 1e-17 and
    # would give an absurd t; treat that as exactly zero variance.
    if sd <= 1e-12 * max(1.0, float(np.abs(d).max())):
        if abs(mean) <= _tolerance(mean):
            return PairedTestResult("ttest", mean, 0.0, 1.0, n)
        return PairedTestResult("ttest", mean, math.copysign(math.inf, mean), 0.0, n)
    t = mean / (sd / math.sqrt(n))

    p = float(2.0 * lazylibs.scipy.stats.t.sf(abs(t), df=n - 1))
    return PairedTestResult("ttest", mean, t, min(p, 1.0), n)


TESTS = ("randomization", "bootstrap", "ttest")


def paired_test(
    test: str,
    a: Sequence[float],
    b: Sequence[float],
    *,
    n_resamples: int = 10_000,
    seed: SeedLike = 0,
) -> PairedTestResult:
    """Dispatch to one of :data:`TESTS` by name (the t-test ignores ``n_resamples``/``seed``)."""
    if test == "randomization":
        return randomization_test(a, b, n_resamples=n_resamples, seed=seed)
    if test == "bootstrap":
        return bootstrap_test(a, b, n_resamples=n_resamples, seed=seed)
    if test == "ttest":
        return paired_t_test(a, b)
    raise StatisticsInputError(f"unknown test {test!r}; choose one of {', '.join(TESTS)}")


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (false discovery rate), in input order.

    With the ``m`` non-NaN p-values sorted ascending, ``p_(1) <= ... <= p_(m)``::

        q_(i) = min_{j >= i} min(1, m * p_(j) / j)

    Rejecting every hypothesis with ``q <= alpha`` controls the FDR at ``alpha`` (independent
    or positively dependent tests). NaN entries (comparisons that could not be tested) stay
    NaN and do not count towards ``m``. Values outside [0, 1] raise.
    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise StatisticsInputError("p-values must be a one-dimensional sequence")
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if not ok.any():
        return out
    vals = p[ok]
    if ((vals < 0) | (vals > 1)).any():
        raise StatisticsInputError("p-values must lie in [0, 1]")
    m = vals.size
    order = np.argsort(vals, kind="stable")
    scaled = vals[order] * m / np.arange(1, m + 1)
    # Step-up: each adjusted value is the smallest scaled value at or above its rank.
    adjusted_sorted = np.minimum.accumulate(scaled[::-1])[::-1]
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(adjusted_sorted, 1.0)
    out[ok] = adjusted
    return out
