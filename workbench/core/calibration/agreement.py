"""Agreement between a reference labeller (the SMEs) and a candidate (the LLM judge).

Every figure is a function of one weighted confusion matrix ``C`` (rows = reference grade,
columns = candidate grade, over the grade ``levels``), which is what makes the bootstrap cheap:
a resample is a new confusion matrix, drawn at once for all resamples.

Binary figures binarise both sides at ``threshold`` (relevant ⇔ grade ≥ threshold; TREC DL
counts grade 1 as not relevant, hence the default 2). With TP, FN, FP, TN the cells of the
collapsed 2×2 matrix:

- ``tpr = TP / (TP + FN)`` (sensitivity: the judge finds what the SMEs call relevant),
- ``tnr = TN / (TN + FP)`` (specificity), ``precision = TP / (TP + FP)``,
- ``kappa``: Cohen's κ on the 2×2 matrix.

Cohen's κ on a matrix ``C`` with ``n = ΣC``, expected counts ``E = rowsum ⊗ colsum / n`` and
disagreement weights ``w``: ``κ = 1 − Σ w·C / Σ w·E``; ``w = 1 − I`` (unweighted,
``kappa_graded`` on all levels), ``|i − j|`` (``kappa_linear``) or ``(i − j)²``
(``kappa_quadratic``), with ``i, j`` the level *positions* — scikit-learn's convention, equal to
the grade distance on the contiguous 0–3 scale. κ is 0 when one side uses a single level (it
agrees no better than chance) and NaN when ``Σ w·E = 0`` (both use the same single level: 0/0);
scikit-learn returns NaN there too.

``msd`` (mean signed difference, leniency) ``= Σ C[i, j]·(level_j − level_i) / n``: positive
when the candidate grades higher than the reference. ``exact`` is the share of identical grades.

Confidence intervals (:func:`agreement`): bootstrap with an explicit seed, BCa by default
(bias-corrected and accelerated: by simulation its 95% intervals cover 93–97% where the plain
percentile interval dips to 92–93% for rates near 0.9 at 100–200 pairs; ``interval="percentile"``
gives the plain one). Resampling
is by query clusters when the pairs carry query ids from at least :data:`MIN_CLUSTERS` queries,
else by pairs. Why clusters: the pairs of one query share its difficulty and the assessor's
reading of the topic, so they are not independent; resampling pairs would then understate the
spread. With few queries a cluster bootstrap is itself unreliable (too few distinct resamples),
so pairs are used and the report says so. The resampling unit, seed and resample count are part
of every result.

Degenerate proportions: when every reference-relevant pair is a hit (TPR = 1) every resample
says 1 too and the percentile interval collapses to [1, 1], which would let a gate pass on 20
lucky pairs. For ``tpr``, ``tnr`` and ``precision`` an all-or-nothing count therefore widens the
collapsed end to the Wilson score bound of the same count, and a proportion resting on fewer than
:data:`SMALL_COUNT` pairs gets at least its Wilson interval (a bootstrap of a handful of pairs is
itself unreliable).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

from workbench.errors import InputError, clip

GRADE_LEVELS: tuple[int, ...] = (0, 1, 2, 3)
DEFAULT_THRESHOLD = 2
DEFAULT_BOOTSTRAP = 2000
#: Most bootstrap resamples an agreement report draws (each is a confusion matrix in memory).
MAX_BOOTSTRAP = 100_000
CONFIDENCE = 0.95
# Below this many distinct queries the bootstrap resamples pairs instead of query clusters.
MIN_CLUSTERS = 20
# Proportions resting on fewer pairs than this get at least the Wilson interval.
SMALL_COUNT = 30

# The figures every agreement report carries, in display order.
FIGURES = ("tpr", "tnr", "precision", "kappa", "kappa_graded", "kappa_linear", "kappa_quadratic",
           "msd", "exact")

SeedLike = int | np.random.Generator


class AgreementInputError(InputError, ValueError):
    """Labels that cannot be compared (lengths differ, grades outside the levels, nothing paired)."""


# -- confusion matrices ----------------------------------------------------------------------

def level_index(grades: np.ndarray, levels: Sequence[int], *, what: str = "grade") -> np.ndarray:
    """Positions of ``grades`` within ``levels``; a grade not among the levels is an error."""
    grades = np.asarray(grades)
    levels_arr = np.asarray(levels)
    pos = np.searchsorted(levels_arr, grades)
    pos_clipped = np.minimum(pos, len(levels_arr) - 1)
    bad = levels_arr[pos_clipped] != grades
    if bad.any():
        first = grades[bad][0]
        raise AgreementInputError(
            f"{what} {first.item()} is not one of the levels {list(levels)} ({int(bad.sum())} such labels)"
        )
    return pos_clipped


def confusion(reference: Sequence[int] | np.ndarray, candidate: Sequence[int] | np.ndarray,
              levels: Sequence[int] = GRADE_LEVELS, weights: Sequence[float] | np.ndarray | None = None) -> np.ndarray:
    """The ``L×L`` (weighted) count matrix: rows = reference level, columns = candidate level."""
    ref = np.asarray(reference)
    cand = np.asarray(candidate)
    if ref.shape != cand.shape:
        raise AgreementInputError(
            f"reference has {ref.size} labels but candidate has {cand.size}; pair them first"
        )
    L = len(levels)
    cells = level_index(ref, levels, what="reference grade") * L + level_index(
        cand, levels, what="candidate grade")
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    return np.bincount(cells, weights=w, minlength=L * L).reshape(L, L).astype(np.float64)


@functools.lru_cache(maxsize=64)
def _disagreement_weights(L: int, kind: str | None) -> np.ndarray:
    """The ``L×L`` weights (read-only: one array per ``(L, kind)`` is shared by every call)."""
    w = _make_disagreement_weights(L, kind)
    w.flags.writeable = False
    return w


def _make_disagreement_weights(L: int, kind: str | None) -> np.ndarray:
    i, j = np.indices((L, L))
    if kind is None:
        return (i != j).astype(np.float64)
    if kind == "linear":
        return np.abs(i - j).astype(np.float64)
    if kind == "quadratic":
        return ((i - j) ** 2).astype(np.float64)
    raise ValueError(f"unknown kappa weighting {kind!r}; expected None, 'linear' or 'quadratic'")


def kappa_from_confusion(C: np.ndarray, weights: str | None = None) -> np.ndarray:
    """Cohen's κ of one confusion matrix ``(L, L)`` or a stack ``(..., L, L)`` (see module doc)."""
    return _kappas(np.asarray(C, dtype=np.float64), (weights,))[0]


def _kappas(C: np.ndarray, kinds: Sequence[str | None]) -> list[np.ndarray]:
    """κ of ``C`` for each weighting of ``kinds``: the expected counts, which every weighting
    shares, are computed once (the same arithmetic as one :func:`kappa_from_confusion` each)."""
    L = C.shape[-1]
    n = C.sum(axis=(-2, -1))
    rows = C.sum(axis=-1)
    cols = C.sum(axis=-2)
    out = []
    with np.errstate(invalid="ignore", divide="ignore"):
        expected = rows[..., :, None] * cols[..., None, :] / n[..., None, None]
        for kind in kinds:
            w = _disagreement_weights(L, kind)
            observed_d = (w * C).sum(axis=(-2, -1))
            expected_d = (w * expected).sum(axis=(-2, -1))
            kappa = 1.0 - observed_d / expected_d
            out.append(np.where(expected_d > 0, kappa, np.nan))
    return out


def collapse(C: np.ndarray, relevant: np.ndarray) -> np.ndarray:
    """The 2×2 matrix ``[[TN, FP], [FN, TP]]`` of ``C`` (``(..., L, L)``) given the boolean
    mask of relevant levels."""
    rel = np.asarray(relevant, dtype=bool)
    non = ~rel
    cells = [rows[..., :, cols].sum(axis=(-2, -1))
             for rows in (C[..., non, :], C[..., rel, :]) for cols in (non, rel)]
    out = np.empty(np.shape(cells[0]) + (2, 2), dtype=np.result_type(*cells))
    for k, cell in enumerate(cells):
        out[..., k // 2, k % 2] = cell
    return out


def figures_from_confusion(C: np.ndarray, levels: Sequence[int] = GRADE_LEVELS,
                           threshold: int = DEFAULT_THRESHOLD) -> dict[str, np.ndarray]:
    """Every figure of :data:`FIGURES` from ``C`` (``(L, L)`` or a stack ``(..., L, L)``)."""
    C = np.asarray(C, dtype=np.float64)
    levels_arr = np.asarray(levels, dtype=np.float64)
    relevant = levels_arr >= threshold
    B = collapse(C, relevant)
    tn, fp, fn, tp = B[..., 0, 0], B[..., 0, 1], B[..., 1, 0], B[..., 1, 1]
    n = C.sum(axis=(-2, -1))
    diff = levels_arr[None, :] - levels_arr[:, None]  # candidate − reference per cell
    diag = np.trace(C, axis1=-2, axis2=-1)
    graded, linear, quadratic = _kappas(C, (None, "linear", "quadratic"))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            "tpr": tp / (tp + fn),
            "tnr": tn / (tn + fp),
            "precision": tp / (tp + fp),
            "kappa": _kappas(B, (None,))[0],
            "kappa_graded": graded,
            "kappa_linear": linear,
            "kappa_quadratic": quadratic,
            "msd": (C * diff).sum(axis=(-2, -1)) / n,
            "exact": diag / n,
        }
    return out


def _proportion_counts(C: np.ndarray, levels: Sequence[int], threshold: int) -> dict[str, tuple[float, float]]:
    """``(successes, trials)`` behind each proportion figure (for the Wilson guard)."""
    relevant = np.asarray(levels) >= threshold
    B = collapse(C, relevant)
    tn, fp, fn, tp = float(B[0, 0]), float(B[0, 1]), float(B[1, 0]), float(B[1, 1])
    return {"tpr": (tp, tp + fn), "tnr": (tn, tn + fp), "precision": (tp, tp + fp)}


def wilson_interval(successes: float, trials: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (NaN, NaN for zero trials)."""
    if trials <= 0:
        return (math.nan, math.nan)
    z = STANDARD_NORMAL.inv_cdf(0.5 + confidence / 2)
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


# -- the bootstrap ---------------------------------------------------------------------------

#: The standard normal (Φ and Φ⁻¹) from the standard library: scipy.stats gives the same values
#: (both to double precision) but costs seconds to import on a busy machine, on every gate.
STANDARD_NORMAL = NormalDist()

def _rng(seed: SeedLike) -> tuple[np.random.Generator, int | None]:
    if isinstance(seed, np.random.Generator):
        return seed, None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise AgreementInputError(f"seed must be an integer, got {seed!r}")
    return np.random.default_rng(int(seed)), int(seed)


def _bootstrap(units: np.ndarray, n_boot: int, rng: np.random.Generator
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(resampled confusions, distinct units, their multiplicities)``: ``units`` is
    ``(m, L, L)``, one (weighted) confusion matrix per resampling unit (a pair or a query); each
    resample draws ``m`` units with replacement and sums them. Identical units are merged first,
    so a draw is one multinomial over the distinct units (exactly the same distribution as
    drawing indices, and fast: pairs have at most L² distinct units when unweighted)."""
    m, L, _ = units.shape
    distinct, counts = _unique_rows(units.reshape(m, L * L))
    draws = rng.multinomial(m, counts / m, size=n_boot).astype(np.float64)
    return (draws @ distinct).reshape(n_boot, L, L), distinct.reshape(-1, L, L), counts


def _unique_rows(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(flat, axis=0, return_counts=True)`` (the distinct rows in lexicographic
    order, and how often each occurs) by one ``lexsort`` of the columns, a fraction of the cost
    of sorting the rows as structured records. The rows hold no NaN (weights are finite)."""
    if flat.shape[0] == 0:
        return flat.copy(), np.zeros(0, dtype=np.intp)
    ordered = flat[np.lexsort(flat.T[::-1])]
    starts = np.concatenate(([True], (ordered[1:] != ordered[:-1]).any(axis=1)))
    first = np.flatnonzero(starts)
    return ordered[first], np.diff(np.append(first, len(ordered)))


def bca_interval(values: np.ndarray, estimate: float, jackknife: np.ndarray, multiplicity: np.ndarray,
                 confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Bias-corrected and accelerated (BCa, Efron 1987) bootstrap interval.

    ``z0 = Φ⁻¹(share of resamples below the estimate, ties counted half)``; the acceleration
    ``a = Σ m_u·d_u³ / (6·(Σ m_u·d_u²)^{3/2})`` with ``d_u = θ̄ − θ_(−u)`` from the leave-one-unit-out
    values ``jackknife`` (one per distinct unit, ``multiplicity`` copies each); the interval is the
    ``Φ(z0 + (z0 + z_q)/(1 − a·(z0 + z_q)))`` quantiles of the resamples for ``z_q = ±z``. Falls
    back to the percentile interval when the estimate or the jackknife is not finite.
    """
    finite = values[np.isfinite(values)]
    ok_jack = np.isfinite(jackknife)
    if finite.size == 0 or not math.isfinite(estimate) or not ok_jack.all():
        return percentile_interval(values, confidence)
    below = np.mean(finite < estimate) + 0.5 * np.mean(finite == estimate)
    lo, hi = np.quantile(finite, _bca_levels(below, finite.size, jackknife, multiplicity, confidence))
    return (float(lo), float(hi))


def _bca_levels(below: float, size: int, jackknife: np.ndarray, multiplicity: np.ndarray,
                confidence: float) -> list[float]:
    """The two quantile levels of :func:`bca_interval` from the share ``below`` of the ``size``
    resamples below the estimate and the jackknife values."""
    below = min(max(below, 1.0 / (2 * size)), 1 - 1.0 / (2 * size))
    z0 = STANDARD_NORMAL.inv_cdf(float(below))
    mult = multiplicity.astype(np.float64)
    mean_jack = float((jackknife * mult).sum() / mult.sum())
    d = mean_jack - jackknife
    denom = float((mult * d * d).sum()) ** 1.5
    a = float((mult * d ** 3).sum() / (6 * denom)) if denom > 0 else 0.0
    z = STANDARD_NORMAL.inv_cdf(0.5 + confidence / 2)
    qs = []
    for zq in (-z, z):
        shifted = z0 + zq
        qs.append(STANDARD_NORMAL.cdf(z0 + shifted / (1 - a * shifted)))
    return qs


def bca_intervals(stats: Mapping[str, np.ndarray], estimates: Mapping[str, float],
                  jackknife: Mapping[str, np.ndarray], multiplicity: np.ndarray, names: Sequence[str],
                  confidence: float = CONFIDENCE) -> dict[str, tuple[float, float]]:
    """:func:`bca_interval` of each figure of ``names`` (the same intervals, to the last bit):
    the figures whose resamples, estimate and jackknife are all finite share one comparison
    with their estimates and one quantile call, which is most of the cost of an agreement
    report; the others go through :func:`bca_interval` one by one."""
    out: dict[str, tuple[float, float]] = {}
    batch = []
    for name in names:
        if (math.isfinite(estimates[name]) and np.isfinite(jackknife[name]).all()
                and np.isfinite(stats[name]).all()):
            batch.append(name)
        else:
            out[name] = bca_interval(stats[name], estimates[name], jackknife[name], multiplicity, confidence)
    if batch:
        values = np.stack([stats[name] for name in batch])
        est = np.array([estimates[name] for name in batch], dtype=np.float64)[:, None]
        below = np.mean(values < est, axis=1) + 0.5 * np.mean(values == est, axis=1)
        levels = [q for i, name in enumerate(batch)
                  for q in _bca_levels(below[i], values.shape[1], jackknife[name], multiplicity, confidence)]
        found = np.quantile(values, levels, axis=1)  # found[level, figure]
        for i, name in enumerate(batch):
            out[name] = (float(found[2 * i, i]), float(found[2 * i + 1, i]))
    return {name: out[name] for name in names}


def percentile_interval(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The central ``confidence`` percentile interval of the finite ``values`` (NaN when none)."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return (math.nan, math.nan)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(finite, [alpha, 1 - alpha])
    return (float(lo), float(hi))


@dataclass(frozen=True)
class AgreementResult:
    """Figures (point estimates), their intervals and how they were obtained."""

    n: int
    levels: tuple[int, ...]
    threshold: int
    confusion: np.ndarray
    figures: dict[str, float]
    ci: dict[str, tuple[float, float]]
    seed: int | None
    n_boot: int
    resampling: str  # "queries" | "pairs"
    n_queries: int | None
    confidence: float = CONFIDENCE
    notes: tuple[str, ...] = field(default_factory=tuple)
    interval: str = "bca"
    stratified: bool = False
    boot: dict[str, np.ndarray] | None = field(default=None, repr=False, compare=False)
    #: The confusion matrix in pairs when ``confusion`` holds weights (None: unweighted, the same).
    counts: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def n_relevant(self) -> float:
        """Reference-relevant weight (the pair count when no weights were given)."""
        rel = np.asarray(self.levels) >= self.threshold
        return float(self.confusion[rel].sum())

    @property
    def pair_counts(self) -> np.ndarray:
        """The confusion matrix in pairs (counts, never weights)."""
        return self.confusion if self.counts is None else self.counts

    @property
    def relevant_pairs(self) -> int:
        """Reference-relevant pairs: a count, whatever the weights."""
        rel = np.asarray(self.levels) >= self.threshold
        return int(round(float(self.pair_counts[rel].sum())))

    @property
    def not_relevant_pairs(self) -> int:
        """Reference-non-relevant pairs: a count, whatever the weights."""
        rel = np.asarray(self.levels) >= self.threshold
        return int(round(float(self.pair_counts[~rel].sum())))


def _units(ref_idx: np.ndarray, cand_idx: np.ndarray, L: int, weights: np.ndarray | None,
           clusters: np.ndarray | None) -> np.ndarray:
    cells = ref_idx * L + cand_idx
    w = np.ones(len(cells)) if weights is None else weights
    if clusters is None:
        units = np.zeros((len(cells), L * L))
        units[np.arange(len(cells)), cells] = w
        return units.reshape(-1, L, L)
    _, code = np.unique(clusters, return_inverse=True)
    q = int(code.max()) + 1
    flat = np.zeros(q * L * L)
    np.add.at(flat, code * L * L + cells, w)
    return flat.reshape(q, L, L)


def agreement(reference: Sequence[int], candidate: Sequence[int], *,
              levels: Sequence[int] = GRADE_LEVELS, threshold: int = DEFAULT_THRESHOLD,
              query_ids: Sequence[str] | None = None, weights: Sequence[float] | None = None,
              seed: SeedLike = 0, n_boot: int = DEFAULT_BOOTSTRAP, confidence: float = CONFIDENCE,
              resampling: str = "auto", interval: str = "bca", strata: Sequence | None = None,
              keep_boot: bool = False) -> AgreementResult:
    """Figures of :data:`FIGURES` with bootstrap intervals for paired labels.

    ``weights`` (one per pair, e.g. inverse inclusion probabilities of a stratified calibration
    sample) re-weight every figure to the population the sample was drawn from.
    ``resampling``: ``"auto"`` (queries when ``query_ids`` span ≥ :data:`MIN_CLUSTERS` queries,
    else pairs), ``"queries"`` or ``"pairs"``. ``strata`` (one per pair, e.g. the judge grade a
    stratified calibration sample was drawn by) makes the bootstrap resample within each stratum,
    keeping its size fixed as the design did; without it, re-weighted figures get needlessly wide
    intervals (by simulation TNR's 95% interval covered 99.5% instead of 95%).
    """
    ref = np.asarray(reference)
    cand = np.asarray(candidate)
    levels = tuple(int(v) for v in levels)
    if ref.shape != cand.shape or ref.ndim != 1:
        raise AgreementInputError(
            f"reference has {ref.size} labels but candidate has {cand.size}; pair them first"
        )
    if ref.size == 0:
        raise AgreementInputError("no paired labels: the two label sets share no (query, item) pair")
    if n_boot < 1:
        raise AgreementInputError(f"the number of bootstrap resamples must be positive, got {n_boot}")
    if n_boot > MAX_BOOTSTRAP:
        raise AgreementInputError(f"the number of bootstrap resamples must be at most {MAX_BOOTSTRAP:,}, "
                                  f"got {clip(str(n_boot), 40, quote=False)}")
    L = len(levels)
    ref_idx = level_index(ref, levels, what="reference grade")
    cand_idx = level_index(cand, levels, what="candidate grade")
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    if w is not None and (w.shape != ref.shape or not np.all(np.isfinite(w)) or np.any(w <= 0)):
        raise AgreementInputError("weights must be one positive finite number per pair")
    C = confusion(ref, cand, levels, w)
    point = {k: float(v) for k, v in figures_from_confusion(C, levels, threshold).items()}

    n_queries = None
    clusters = None
    if query_ids is not None:
        qarr = np.asarray(query_ids, dtype=object)
        if qarr.shape != ref.shape:
            raise AgreementInputError("query_ids must hold one query id per pair")
        n_queries = len(set(qarr.tolist()))
    notes: list[str] = []
    if resampling == "auto":
        resampling = "queries" if n_queries is not None and n_queries >= MIN_CLUSTERS else "pairs"
        if n_queries is not None and resampling == "pairs":
            notes.append(f"only {n_queries} queries (< {MIN_CLUSTERS}): the bootstrap resamples "
                         "pairs, which treats pairs of one query as independent")
    if resampling == "queries":
        if query_ids is None:
            raise AgreementInputError("resampling by queries needs the query id of every pair")
        clusters = np.asarray(query_ids, dtype=object).astype(str)
    elif resampling != "pairs":
        raise AgreementInputError(f"unknown resampling {resampling!r}; expected auto, queries or pairs")

    rng, seed_int = _rng(seed)
    if strata is None:
        units = _units(ref_idx, cand_idx, L, w, clusters)
        boots, distinct, multiplicity = _bootstrap(units, n_boot, rng)
    else:
        # Resample within each stratum (its size fixed, as the sampling design fixed it);
        # clusters, when used, are nested in strata (a query's pairs of one stratum).
        sarr = np.asarray(strata)
        if sarr.shape != ref.shape:
            raise AgreementInputError("strata must hold one stratum per pair")
        boots = np.zeros((n_boot, L, L))
        distinct_parts, mult_parts = [], []
        for value in np.unique(sarr):
            members = sarr == value
            units = _units(ref_idx[members], cand_idx[members], L, None if w is None else w[members],
                           None if clusters is None else clusters[members])
            b, d, mult = _bootstrap(units, n_boot, rng)
            boots += b
            distinct_parts.append(d)
            mult_parts.append(mult)
        distinct, multiplicity = np.concatenate(distinct_parts), np.concatenate(mult_parts)
    stats = figures_from_confusion(boots, levels, threshold)
    if interval == "bca":
        jack = figures_from_confusion(C[None, :, :] - distinct, levels, threshold)
        ci = bca_intervals(stats, point, jack, multiplicity, FIGURES, confidence)
    elif interval == "percentile":
        ci = {name: percentile_interval(stats[name], confidence) for name in FIGURES}
    else:
        raise AgreementInputError(f"unknown interval method {interval!r}; expected bca or percentile")
    # The Wilson guard for all-or-nothing proportions (see the module docstring); the count of
    # pairs behind it is unweighted (weights are positive, so all-or-nothing is the same).
    raw = C if w is None else confusion(ref, cand, levels)
    for name, (k, m) in _proportion_counts(raw, levels, threshold).items():
        if m <= 0:
            continue
        lo, hi = ci[name]
        if k == 0 or k == m:
            wlo, whi = wilson_interval(k, m, confidence)
            ci[name] = (min(lo, wlo), hi) if k == m else (lo, max(hi, whi))
            notes.append(f"{name} is {point[name]:.0f} on all {int(m)} pairs: its interval uses the Wilson bound")
        elif m < SMALL_COUNT:
            # A bootstrap of a handful of pairs is itself unreliable: take at least the Wilson
            # interval of the same share over the same number of pairs.
            wlo, whi = wilson_interval(point[name] * m, m, confidence)
            ci[name] = (min(lo, wlo), max(hi, whi))
            notes.append(f"{name} rests on {int(m)} pairs only: its interval is at least the Wilson interval")
    return AgreementResult(
        n=int(ref.size), levels=levels, threshold=int(threshold), confusion=C, figures=point,
        ci=ci, seed=seed_int, n_boot=int(n_boot), resampling=resampling, n_queries=n_queries,
        confidence=confidence, notes=tuple(notes), boot=stats if keep_boot else None, interval=interval,
        stratified=strata is not None, counts=None if w is None else raw,
    )


# -- slices, disagreements -------------------------------------------------------------------

def worst_disagreements(reference: Sequence[int], candidate: Sequence[int], *,
                        threshold: int = DEFAULT_THRESHOLD, limit: int = 20) -> np.ndarray:
    """Indices of the worst disagreements, worst first: pairs on opposite sides of the binary
    threshold before the others, then by the grade distance, then the candidate over-grading
    (a judge calling junk relevant pollutes qrels) before under-grading, then input order.
    Pairs that agree exactly are never listed."""
    ref = np.asarray(reference, dtype=np.int64)
    cand = np.asarray(candidate, dtype=np.int64)
    diff = cand - ref
    crosses = (ref >= threshold) != (cand >= threshold)
    idx = np.flatnonzero(diff != 0)
    order = np.lexsort((idx, -(diff[idx] > 0).astype(np.int64), -np.abs(diff[idx]), -crosses[idx].astype(np.int64)))
    return idx[order][:limit]


def slice_members(tags: Sequence[Sequence[str] | None]) -> dict[str, np.ndarray]:
    """``{tag: indices of the pairs whose query carries it}``, tags in sorted order."""
    members: dict[str, list[int]] = {}
    for i, pair_tags in enumerate(tags):
        for tag in pair_tags or ():
            members.setdefault(str(tag), []).append(i)
    return {tag: np.asarray(members[tag], dtype=np.int64) for tag in sorted(members)}


# -- several human assessors -----------------------------------------------------------------

def krippendorff_alpha(ratings: np.ndarray, *, level: str = "ordinal",
                       levels: Sequence[int] | None = None) -> float:
    """Krippendorff's α for a ``raters × units`` matrix (NaN = the rater did not label the unit).

    Coincidences: a unit with ``m_u ≥ 2`` values adds ``1/(m_u − 1)`` to ``o[c, k]`` for each
    ordered pair of its values from different raters; ``n_c = Σ_k o[c, k]``, ``n = Σ n_c``.
    ``α = 1 − (n − 1)·Σ o[c,k]·δ²(c,k) / Σ n_c·n_k·δ²(c,k)``, with
    ``δ²`` nominal ``[c ≠ k]``, interval ``(v_c − v_k)²`` and ordinal
    ``(Σ_{g=c..k} n_g − (n_c + n_k)/2)²`` (ranks, not values). The levels default to the
    values present (as the ``krippendorff`` package does). NaN when there is no disagreement
    to expect (one value only) or no unit has two values.
    """
    R = np.asarray(ratings, dtype=np.float64)
    if R.ndim != 2:
        raise AgreementInputError("ratings must be a raters × units matrix")
    present = np.unique(R[np.isfinite(R)])
    values = present if levels is None else np.asarray(levels, dtype=np.float64)
    if levels is not None and not np.isin(present, values).all():
        raise AgreementInputError(f"ratings hold values outside the levels {list(levels)}")
    L = len(values)
    if L == 0:
        return math.nan
    counts = np.zeros((R.shape[1], L))
    for r in range(R.shape[0]):
        row = R[r]
        ok = np.isfinite(row)
        counts[np.flatnonzero(ok), np.searchsorted(values, row[ok])] += 1
    m = counts.sum(axis=1)
    keep = m >= 2
    if not keep.any():
        return math.nan
    counts, m = counts[keep], m[keep]
    wts = 1.0 / (m - 1)
    o = (counts * wts[:, None]).T @ counts - np.diag((counts * wts[:, None]).sum(axis=0))
    n_c = o.sum(axis=1)
    n = n_c.sum()
    c, k = np.indices((L, L))
    if level == "nominal":
        delta = (c != k).astype(np.float64)
    elif level == "interval":
        delta = (values[c] - values[k]) ** 2
    elif level == "ordinal":
        cum = np.concatenate([[0.0], np.cumsum(n_c)])
        lo, hi = np.minimum(c, k), np.maximum(c, k)
        delta = (cum[hi + 1] - cum[lo] - (n_c[c] + n_c[k]) / 2) ** 2
    else:
        raise ValueError(f"unknown level of measurement {level!r}; expected nominal, ordinal or interval")
    expected = (np.outer(n_c, n_c) * delta).sum()
    if expected == 0:
        return math.nan
    return float(1.0 - (n - 1) * (o * delta).sum() / expected)


def pairwise_kappa(labels: Mapping[str, Mapping[object, int]], *, levels: Sequence[int] = GRADE_LEVELS,
                   weights: str | None = None) -> list[tuple[str, str, int, float]]:
    """Cohen's κ between every two assessors on the items both labelled:
    ``[(a, b, n_shared, κ)]`` with ``a < b``; κ is NaN when they share no item. Unweighted
    over every level by default (grades 0–3: a 2 against a 3 disagrees as much as a 0 against
    a 3); :func:`pairwise_binary_kappa` gives the relevant / not relevant κ."""
    return _pairwise(labels, levels, lambda C: kappa_from_confusion(C, weights))


def _pairwise(labels: Mapping[str, Mapping[object, int]], levels: Sequence[int],
              kappa) -> list[tuple[str, str, int, float]]:
    """``[(a, b, n_shared, kappa(confusion of a's and b's shared items))]`` for every two
    assessors ``a < b``; NaN when they share no item."""
    names = sorted(labels)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            shared = sorted(set(labels[a]) & set(labels[b]), key=str)
            if not shared:
                out.append((a, b, 0, math.nan))
                continue
            C = confusion([labels[a][s] for s in shared], [labels[b][s] for s in shared], levels)
            out.append((a, b, len(shared), float(kappa(C))))
    return out


def pairwise_binary_kappa(labels: Mapping[str, Mapping[object, int]], *, threshold: int = DEFAULT_THRESHOLD,
                          levels: Sequence[int] = GRADE_LEVELS) -> list[tuple[str, str, int, float]]:
    """Cohen's κ between every two assessors on relevant / not relevant (grade ≥ ``threshold``)
    over the items both labelled: ``[(a, b, n_shared, κ)]`` with ``a < b``, the pairs of
    :func:`pairwise_kappa`. κ of the collapsed 2×2 matrix (module doc): 0 when one assessor
    puts every shared item on one side, NaN when both put every item on the same side (0/0)
    or they share no item. E.g. grades ``[0, 3, 2]`` and ``[0, 3, 1]`` at threshold 2 are
    ``[0, 1, 1]`` and ``[0, 1, 0]``: p_o = 2/3, p_e = 2/3·1/3 + 1/3·2/3 = 4/9, κ = 0.4."""
    relevant = np.asarray(levels) >= threshold
    return _pairwise(labels, levels, lambda C: kappa_from_confusion(collapse(C, relevant)))


# -- bias-corrected prevalence (Rogan–Gladen) ------------------------------------------------

@dataclass(frozen=True)
class CorrectedShare:
    """A share of relevant items corrected for the judge's error rates.

    ``observed``: the share the judge calls relevant among ``n_observed`` items; ``estimate``:
    ``(observed + TNR − 1) / (TPR + TNR − 1)`` clipped to [0, 1]; ``ci`` carries both the
    calibration uncertainty (TPR/TNR from the bootstrap resamples of the calibration pairs)
    and the binomial noise of ``observed``. ``estimate`` is NaN when ``TPR + TNR ≤ 1`` (the
    judge is no better than chance and nothing can be corrected)."""

    observed: float
    n_observed: int
    estimate: float
    ci: tuple[float, float]
    tpr: float
    tnr: float
    clipped: bool
    seed: int | None
    n_boot: int
    note: str | None = None


def rogan_gladen(observed: np.ndarray | float, tpr: np.ndarray | float, tnr: np.ndarray | float) -> np.ndarray:
    """``(p + TNR − 1)/(TPR + TNR − 1)`` clipped to [0, 1]; NaN where ``TPR + TNR ≤ 1``."""
    tpr = np.asarray(tpr, dtype=np.float64)
    tnr = np.asarray(tnr, dtype=np.float64)
    denom = tpr + tnr - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        theta = (np.asarray(observed, dtype=np.float64) + tnr - 1) / denom
    return np.where(denom > 0, np.clip(theta, 0.0, 1.0), np.nan)


def corrected_share(observed_relevant: int, n_observed: int, calibration: AgreementResult, *,
                    seed: SeedLike = 0, n_boot: int | None = None) -> CorrectedShare:
    """The Rogan–Gladen corrected share of relevant items (see :class:`CorrectedShare`).

    ``calibration`` must come from :func:`agreement` with ``keep_boot=True`` (its TPR/TNR
    resamples are reused, so the same calibration uncertainty flows into this interval).
    """
    if n_observed <= 0:
        raise AgreementInputError("no judged items to correct: the observed share needs at least one item")
    if not 0 <= observed_relevant <= n_observed:
        raise AgreementInputError(f"{observed_relevant} relevant out of {n_observed} is not a share")
    if calibration.boot is None:
        raise AgreementInputError("the calibration result holds no resamples; call agreement(keep_boot=True)")
    rng, seed_int = _rng(seed)
    tpr_b = calibration.boot["tpr"]
    tnr_b = calibration.boot["tnr"]
    B = len(tpr_b) if n_boot is None else int(n_boot)
    pick = rng.integers(0, len(tpr_b), size=B) if n_boot is not None else np.arange(B)
    p = observed_relevant / n_observed
    p_b = rng.binomial(n_observed, p, size=B) / n_observed
    theta_b = rogan_gladen(p_b, tpr_b[pick], tnr_b[pick])
    tpr, tnr = calibration.figures["tpr"], calibration.figures["tnr"]
    raw = (p + tnr - 1) / (tpr + tnr - 1) if tpr + tnr > 1 else math.nan
    estimate = float(rogan_gladen(p, tpr, tnr))
    undefined = float(np.mean(~np.isfinite(theta_b)))
    note = None
    if not math.isfinite(estimate):
        note = "TPR + TNR ≤ 1: the judge is no better than chance, so no correction is possible"
    elif undefined > 0:
        note = f"{undefined:.1%} of resamples had TPR + TNR ≤ 1 and were left out of the interval"
    return CorrectedShare(
        observed=p, n_observed=int(n_observed), estimate=estimate,
        ci=percentile_interval(theta_b, calibration.confidence), tpr=tpr, tnr=tnr,
        clipped=bool(math.isfinite(raw) and not 0 <= raw <= 1), seed=seed_int, n_boot=B, note=note,
    )
