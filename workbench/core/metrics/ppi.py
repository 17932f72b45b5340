"""Prediction-powered inference (PPI++) for the mean of per-query values.

A metric's mean over a query set is wanted "as human labels would score it", but humans
labelled only a random subset of the queries while an LLM judge labelled all of them. PPI++
(Angelopoulos, Duchi & Zrnic 2023, "PPI++: Efficient Prediction-Powered Inference") uses every
judge value and corrects its bias with the human ones; for IR metrics at the query level see
Oosterhuis et al. 2024. The interval is valid whatever the judge's quality (a useless judge
gets λ near 0 and the human-only interval back, never a wider one) and narrower the better the
judge agrees.

Notation
--------
``N`` queries, judge value ``f_i`` for every query, human value ``Y_i`` for the ``n`` queries of
a simple random sample ``L`` (drawn without replacement). Sample means: ``Ȳ_L``, ``f̄_L``;
``f̄`` is the mean of ``f`` over all ``N`` queries. ``s²(·)`` is a sample variance (ddof 1).

The target (:func:`ppi_mean`, what ``workbench ppi`` reports)
    ``θ = (1/N) Σ_{i=1..N} Y_i``: the mean over *all* queries as human labels would score them,
    a finite-population mean.

Estimator
    ``θ̂(λ) = λ·f̄ + mean_{i∈L}(Y_i − λ·f_i) = Ȳ_L + λ·(f̄ − f̄_L)``.

    The first term is the judge's mean over all N queries, not over the N − n unlabelled ones.
    Over all N is the same thing as keeping the human value of every labelled query and
    predicting only the rest: ``(n/N)·Ȳ_L + ((N−n)/N)·[λ·f̄_U + mean_L(Y − λf)]`` simplifies to
    ``θ̂(λ)`` above (``f̄_U`` the mean over the unlabelled queries). PPI++ (§2) takes its
    unlabelled points as a sample independent of the labelled one and estimates a
    super-population mean; here the query set is the population, so ``f̄`` is a known constant
    and ``θ̂(λ)`` is exactly unbiased for ``θ`` for any fixed λ (``E[f̄_L] = f̄`` and
    ``E[Ȳ_L] = θ`` under simple random sampling).

Variance (the difference estimator of survey sampling, with finite-population correction)
    ``Var θ̂(λ) = (1 − n/N) · S²(Y − λf) / n``, ``S²`` the population variance of the residual
    ``r_i = Y_i − λ f_i``, estimated without bias by ``s²`` of the labelled residuals. The
    human-only estimate ``Ȳ_L`` is the case λ = 0: ``(1 − n/N) · s²(Y_L) / n``.

Power tuning (λ, per estimate)
    ``S²(Y − λf) = S²(Y) − 2λ·S(Y, f) + λ²·S²(f)`` is smallest at ``λ* = S(Y, f) / S²(f)``.
    ``S(Y, f)`` is estimated on the labelled queries (sample covariance, ddof 1) and ``S²(f)``
    on all N queries (known exactly: PPI++ pools labelled and unlabelled predictions for it
    too). PPI++'s ``λ = Cov / ((1 + n/N)·Var)`` has the extra ``1 + n/N`` because its
    unlabelled mean is itself a sample of size N; here it is not (the limit N → ∞ of its
    formula). λ is clipped to [0, 1]: 0 is the human-only estimate, 1 classic PPI. A judge
    constant over all queries (``S²(f) = 0``) gets λ = 0.

Standard error with a tuned λ (delete-one jackknife, never above the human-only one)
    λ̂ is tuned on the same labelled queries whose residuals give ``s²``, which makes the plug-in
    ``s²(Y − λ̂f)`` too small (on TREC DL19 its 95% intervals covered 0.92-0.93). The standard
    error of the tuned estimate is therefore the jackknife's, with λ re-tuned in each replicate:
    ``θ̂_(−i)`` is the estimate with labelled query i left out (λ re-tuned on the other n − 1),
    ``SE²_jack = (1 − n/N) · ((n − 1)/n) · Σ_i (θ̂_(−i) − mean_i θ̂_(−i))²``. For a fixed λ the
    jackknife equals the plug-in ``(1 − n/N) · s²(Y − λf) / n`` exactly, so this is the same
    variance with the tuning's own noise added. With n = 2 a replicate of one query cannot tune
    λ, and the plug-in is used.

    The reported standard error is ``SE = min(SE_jack, SE_human)``, ``SE_human² = (1 − n/N) ·
    s²(Y_L) / n`` (the human-only one on the same queries). Why: at small n the jackknife is a
    noisy estimate of a noisy tuning. When a replicate's λ swings between the clip bounds (a
    weak judge, a discrete measure such as P@5 with few distinct values), ``SE_jack`` can exceed
    ``SE_human`` severalfold although the estimate it describes is ``Ȳ_L`` plus a small
    correction ``λ̂·(f̄ − f̄_L)``: for every fixed λ in ``[0, 2λ*]`` (λ* the population's best),
    ``Var θ̂(λ) ≤ Var Ȳ_L``, and λ = 0 is always available. Nobody would take a PPI++ interval
    wider than the human-only one on the same labels, so PPI++ never reports one:
    :attr:`PPIEstimate.capped` says when the cap applied (with n = 2 it caps the plug-in at λ̂
    alike). The estimate itself keeps λ̂; falling back to ``Ȳ_L`` as well covered less often in
    the simulation. The cap is a choice between two estimates of a standard error, so it gives up
    a little coverage against the uncapped jackknife: docs/ppi.md and benchmarks/ppi_coverage.py
    measure both. A fixed ``lam`` given by the caller is not capped: its plug-in variance is
    exactly unbiased.
    Every labelled human value equal (``SE_human = 0``) leaves nothing to cap: each replicate's
    covariance is 0 too, so λ = 0 throughout and ``SE_jack = 0`` (n ≥ 3).

Interval
    Student t with ``n − 1`` degrees of freedom: ``θ̂ ± t_{n−1, (1+c)/2} · SE`` (c the
    confidence), for PPI and human-only alike; with n = 2 the interval is wide, as it should be.
    n = N gives width 0 (the mean is known); so does a zero residual variance at a fixed λ.

Paired difference of two runs
    The same estimator on per-query differences ``Y = Y_B − Y_A``, ``f = f_B − f_A`` with its
    own λ (:func:`ppi_mean_difference`).

:func:`ppi_mean_independent` is PPI++ exactly as the paper and its reference package
``ppi-python`` (``ppi_mean_ci``) compute it, with a separate unlabelled sample; the tests check
it against that package. :func:`plan_sample_size` is the power analysis: how many labelled
queries give a target half-width.

Pure: numpy and the standard library (scipy.special for the t quantile), no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from workbench import lazylibs

__all__ = [
    "Interval",
    "PPIEstimate",
    "SampleSizePlan",
    "plan_sample_size",
    "ppi_mean",
    "ppi_mean_difference",
    "ppi_mean_independent",
    "jackknife_replicates",
    "jackknife_std_error",
    "t_quantile",
    "tuned_lambda",
]


@dataclass(frozen=True)
class Interval:
    """An estimate with its standard error and two-sided interval ``[low, high]``."""

    estimate: float
    low: float
    high: float
    std_error: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


@dataclass(frozen=True)
class PPIEstimate:
    """One PPI++ estimate: ``ppi`` (the judge-corrected estimate and interval), ``human_only``
    (the labelled queries alone), ``judge_only`` (the judge's mean over all queries, no
    interval: its bias is unknown), the tuned ``lam`` and the sample sizes. ``capped``: the
    tuned estimate's jackknife standard error exceeded the human-only one and the human-only
    one was used (module docstring), so ``ppi`` is exactly as wide as ``human_only``."""

    ppi: Interval
    human_only: Interval
    judge_only: float
    lam: float
    n_labelled: int
    n_total: int
    confidence: float
    capped: bool = False

    @property
    def width_ratio(self) -> float:
        """PPI interval width over the human-only width (NaN when the latter is 0)."""
        w = self.human_only.high - self.human_only.low
        return (self.ppi.high - self.ppi.low) / w if w > 0 else math.nan


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom."""

    return float(lazylibs.scipy_special.stdtrit(df, p))


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence}")


def _as_values(values, name: str) -> np.ndarray:
    a = np.asarray(values, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} holds a NaN or infinite value")
    return a


def tuned_lambda(y: np.ndarray, f_labelled: np.ndarray, f_all: np.ndarray) -> float:
    """``λ = clip(s(Y, f_L) / s²(f_all), 0, 1)`` (module docstring); 0 when ``s²(f_all) = 0``."""
    var_f = float(np.var(f_all, ddof=1))
    if not var_f > 0:
        return 0.0
    cov = float(np.sum((y - y.mean()) * (f_labelled - f_labelled.mean())) / (len(y) - 1))
    return float(min(1.0, max(0.0, cov / var_f)))


def _t_interval(estimate: float, se: float, n: int, confidence: float) -> Interval:
    half = t_quantile((1 + confidence) / 2, n - 1) * se if se > 0 else 0.0
    return Interval(estimate=estimate, low=estimate - half, high=estimate + half, std_error=se)


def _finite_interval(residuals: np.ndarray, estimate: float, n_total: int, confidence: float) -> Interval:
    """``estimate ± t_{n−1} · sqrt((1 − n/N) · s²(residuals) / n)``."""
    n = len(residuals)
    variance = max(0.0, 1.0 - n / n_total) * float(np.var(residuals, ddof=1)) / n
    return _t_interval(estimate, math.sqrt(variance), n, confidence)


def jackknife_replicates(y: np.ndarray, f_labelled: np.ndarray, f_all: np.ndarray) -> np.ndarray:
    """``θ̂_(−i)`` for each labelled query i: the tuned estimate without it (λ re-tuned on the
    other n − 1 queries, as :func:`tuned_lambda`), in closed form. Needs n >= 3."""
    n = len(y)
    var_f = float(np.var(f_all, ddof=1))
    y_loo = (y.sum() - y) / (n - 1)
    f_loo = (f_labelled.sum() - f_labelled) / (n - 1)
    if var_f > 0:
        cross = (float(np.dot(y, f_labelled)) - y * f_labelled - (n - 1) * y_loo * f_loo) / (n - 2)
        lam_loo = np.clip(cross / var_f, 0.0, 1.0)
    else:
        lam_loo = np.zeros(n)
    return y_loo + lam_loo * (float(f_all.mean()) - f_loo)


def jackknife_std_error(y: np.ndarray, f_labelled: np.ndarray, f_all: np.ndarray) -> float:
    """The delete-one jackknife standard error of the tuned estimate, uncapped:
    ``sqrt((1 − n/N) · ((n − 1)/n) · Σ_i (θ̂_(−i) − mean θ̂_(−i))²)`` over
    :func:`jackknife_replicates` (n >= 3). :func:`ppi_mean` reports ``min`` of it and the
    human-only standard error."""
    n, n_total = len(y), len(f_all)
    replicates = jackknife_replicates(y, f_labelled, f_all)
    variance = max(0.0, 1.0 - n / n_total) * (n - 1) / n * float(np.sum((replicates - replicates.mean()) ** 2))
    return math.sqrt(variance)


def ppi_mean(y, f_all, labelled, *, confidence: float = 0.95, lam: float | None = None) -> PPIEstimate:
    """PPI++ estimate of the mean of ``Y`` over all queries (module docstring).

    ``f_all``: the judge's value for each of the N queries; ``labelled``: the positions in
    ``f_all`` of the n human-labelled queries (distinct); ``y``: their human values, in the
    same order. ``lam``: a fixed λ instead of the tuned one (0 gives the human-only estimate,
    1 classic PPI). Raises :class:`ValueError` for n < 2, mismatched lengths, repeated or
    out-of-range positions, non-finite values or a confidence outside (0, 1).
    """
    _check_confidence(confidence)
    y = _as_values(y, "human values")
    f_all = _as_values(f_all, "judge values")
    idx = np.asarray(labelled, dtype=np.int64)
    n, n_total = len(y), len(f_all)
    if idx.ndim != 1 or len(idx) != n:
        raise ValueError(f"{n} human values but {idx.size} labelled positions")
    if n < 2:
        raise ValueError(f"need at least 2 labelled queries, got {n}")
    if idx.min() < 0 or idx.max() >= n_total or len(np.unique(idx)) != n:
        raise ValueError("labelled positions must be distinct positions in the judge values")
    f_lab = f_all[idx]
    tuned = lam is None
    lam = tuned_lambda(y, f_lab, f_all) if lam is None else float(lam)
    f_mean = float(f_all.mean())
    estimate = float(y.mean() + lam * (f_mean - f_lab.mean()))
    human = _finite_interval(y, float(y.mean()), n_total, confidence)
    if tuned:
        if n >= 3:
            se = jackknife_std_error(y, f_lab, f_all)
        else:
            se = math.sqrt(max(0.0, 1.0 - n / n_total) * float(np.var(y - lam * f_lab, ddof=1)) / n)
        # never wider than the human-only interval on the same queries (module docstring); the
        # tolerance keeps λ = 0 (whose jackknife is the human-only SE, summed differently) uncapped
        capped = se > human.std_error * (1 + 1e-9)
        ppi = _t_interval(estimate, human.std_error if capped else se, n, confidence)
    else:
        capped = False
        ppi = _finite_interval(y - lam * f_lab, estimate, n_total, confidence)
    return PPIEstimate(ppi=ppi, human_only=human, judge_only=f_mean, lam=lam, n_labelled=n,
                       n_total=n_total, confidence=confidence, capped=capped)


def ppi_mean_difference(y_a, y_b, f_a_all, f_b_all, labelled, *, confidence: float = 0.95,
                        lam: float | None = None) -> PPIEstimate:
    """PPI++ estimate of ``mean(Y_B) − mean(Y_A)`` over all queries: :func:`ppi_mean` on the
    per-query differences (human ``y_b − y_a`` on the labelled queries, judge
    ``f_b − f_a`` on all), with its own λ."""
    y = _as_values(y_b, "human values") - _as_values(y_a, "human values")
    f = _as_values(f_b_all, "judge values") - _as_values(f_a_all, "judge values")
    return ppi_mean(y, f, labelled, confidence=confidence, lam=lam)


def ppi_mean_independent(y, f_labelled, f_unlabelled, *, confidence: float = 0.95,
                         lam: float | None = None) -> PPIEstimate:
    """PPI++ for a super-population mean with an unlabelled sample independent of the labelled
    one, as in the paper (and ``ppi_py.ppi_mean_ci``, whose conventions this follows exactly):

    * ``λ = clip( (1/n)·Σ_L (Y − Ȳ)(f − f̄_L) / ((1 + n/N)·s²(f_L ∪ f_U)), 0, 1 )``,
      the variance over the pooled n + N predictions (ddof 1), N = len(f_unlabelled);
    * ``θ̂ = λ·f̄_U + mean_L(Y − λ f)``;
    * ``SE² = λ²·σ̂²(f_U)/N + σ̂²(Y − λ f_L)/n`` with ``σ̂²`` the ddof-0 variance;
    * a normal interval ``θ̂ ± z_{(1+c)/2}·SE``.

    ``human_only`` is the classical normal interval ``Ȳ ± z·σ̂(Y)/√n`` (ddof 0, as
    ``ppi_py.classical_mean_ci`` with λ = 0); ``n_total`` is ``n + N``.
    """
    _check_confidence(confidence)
    y = _as_values(y, "human values")
    f_lab = _as_values(f_labelled, "judge values of the labelled queries")
    f_unl = _as_values(f_unlabelled, "judge values of the unlabelled queries")
    n, big_n = len(y), len(f_unl)
    if len(f_lab) != n:
        raise ValueError(f"{n} human values but {len(f_lab)} judge values for them")
    if n < 2 or big_n < 1:
        raise ValueError(f"need at least 2 labelled and 1 unlabelled value, got {n} and {big_n}")
    if lam is None:
        cov = float(np.sum((y - y.mean()) * (f_lab - f_lab.mean())) / n)
        var = float(np.var(np.concatenate([f_lab, f_unl]), ddof=1))
        lam = float(min(1.0, max(0.0, cov / ((1 + n / big_n) * var)))) if var > 0 else 0.0
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    estimate = float(lam * f_unl.mean() + np.mean(y - lam * f_lab))
    se = math.sqrt(lam * lam * float(np.var(f_unl)) / big_n + float(np.var(y - lam * f_lab)) / n)
    se_h = math.sqrt(float(np.var(y)) / n)
    return PPIEstimate(
        ppi=Interval(estimate, estimate - z * se, estimate + z * se, se),
        human_only=Interval(float(y.mean()), float(y.mean()) - z * se_h, float(y.mean()) + z * se_h, se_h),
        judge_only=float(f_unl.mean()), lam=float(lam), n_labelled=n, n_total=n + big_n,
        confidence=confidence)


@dataclass(frozen=True)
class SampleSizePlan:
    """How many labelled queries (of ``n_total``) reach ``half_width``: ``n_ppi`` with the
    judge's values corrected by PPI++, ``n_human`` with human labels alone; ``lam`` and the
    per-query standard deviations the plan assumes (from the pilot)."""

    half_width: float
    n_ppi: int
    n_human: int
    lam: float
    sd_ppi: float
    sd_human: float
    n_pilot: int
    n_total: int
    confidence: float


def _needed(sd: float, half_width: float, n_total: int, confidence: float) -> int:
    """The smallest n in [2, N] with ``t_{n−1}·sqrt((1 − n/N)·sd²/n) ≤ half_width`` (n = N
    always qualifies: the mean over every query is known exactly)."""
    p = (1 + confidence) / 2
    for n in range(2, n_total + 1):
        if t_quantile(p, n - 1) * sd * math.sqrt(max(0.0, 1 - n / n_total) / n) <= half_width:
            return n
    return n_total


def plan_sample_size(y_pilot, f_all, labelled, half_width: float, *, confidence: float = 0.95) -> SampleSizePlan:
    """PPI power analysis: the labelled sample size that gives a target half-width.

    From a pilot (``y_pilot`` human values at positions ``labelled`` of ``f_all``, n_p ≥ 2; the
    CLI asks for 5) it estimates the per-query standard deviations the two designs face and
    takes them as the population's: human only ``s(Y)``; PPI++ the one its interval implies,
    ``SE_pilot · sqrt(n_p / (1 − n_p/N))`` (the jackknife SE, so the noise of tuning λ is in it,
    capped at the human-only SE, so ``n_ppi <= n_human``; ``s(Y − λf)`` when the pilot is every
    query). It returns for each design the smallest n whose
    half-width ``t_{n−1, (1+c)/2} · sd · sqrt((1 − n/N) / n)`` is at most ``half_width``. The plan
    is as good as the pilot's variance estimates: with 5 pilot queries they are rough (on TREC
    DL19 with pilots of 8, samples of the planned size reached 0.95-1.0 of the target half-width
    in the median: benchmarks/ppi_coverage.py).
    """
    if not half_width > 0:
        raise ValueError(f"the target half-width must be positive, got {half_width}")
    est = ppi_mean(y_pilot, f_all, labelled, confidence=confidence)
    y = _as_values(y_pilot, "human values")
    f_lab = _as_values(f_all, "judge values")[np.asarray(labelled, dtype=np.int64)]
    n_p = est.n_labelled
    fpc = 1 - n_p / est.n_total
    sd_ppi = est.ppi.std_error * math.sqrt(n_p / fpc) if fpc > 0 else float(np.std(y - est.lam * f_lab, ddof=1))
    sd_human = float(np.std(y, ddof=1))
    n_total = est.n_total
    return SampleSizePlan(half_width=half_width, n_ppi=_needed(sd_ppi, half_width, n_total, confidence),
                          n_human=_needed(sd_human, half_width, n_total, confidence), lam=est.lam,
                          sd_ppi=sd_ppi, sd_human=sd_human, n_pilot=est.n_labelled, n_total=n_total,
                          confidence=confidence)
