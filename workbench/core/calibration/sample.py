"""The calibration sample: which judged pool pairs the SMEs label, and which of them feed the gate.

**Drawing** (:func:`draw_sample`) from a judged pool (one row per pair with the judge's grade):

1. *Binary classes.* A judge-relevant (grade ≥ ``threshold``) and a judge-non-relevant class each
   get half of ``size`` (at least ``min_per_class``), capped by what the pool holds; what one class
   cannot fill goes to the other. A random sample of a pool where the judge calls 90% of the
   pairs relevant would hold too few non-relevant pairs to measure TNR; this oversamples them.
2. *Grades.* Within a class the quota is split equally over the judge grades of that class
   (water-filling: a grade with fewer pairs than its share gives the rest to the others), so the
   middle grades, where judges fail most, are well represented.
3. *Queries.* Within a grade the quota is spread as evenly as possible over the queries
   (water-filling again; the last partial round goes to queries in a seeded random order), so
   no single query dominates.
4. *Pairs.* Within each (grade, query) cell, ``m`` of its ``N`` pairs are drawn at random.

Each drawn pair's **inclusion weight** is ``N / m`` of its cell (the inverse of its inclusion
probability given the allocation), so ``Σ weight`` over the sample equals the pool's number of
judged pairs and any figure computed with these weights estimates the pool's figure
(Horvitz–Thompson). The allocation itself depends on the seed only through step 3's tie order.

**Refusal.** A pool with fewer than ``floor_size`` judged pairs, or fewer than
``floor_non_relevant`` judge-non-relevant pairs, cannot calibrate anything:
:class:`CalibrationSampleError` says what is missing. Between the floor and the asked size the
sample is drawn and :attr:`CalibrationSample.notes` says what fell short.

**Split** (:func:`split_sample`): within each judge grade a seeded share ``holdout_share`` of the
drawn pairs is *held out*; only held-out labels feed the gate. The rest is the *tuning* part
(prompt iteration, few-shot examples), so nothing the judge was tuned on is used to trust it.

The labelling order (``position``) is a seeded shuffle, so SMEs do not see pairs grouped by the
judge's grade (which would hint at it).

**Before any judge** (:func:`draw_unjudged_sample`): a pool no judge has graded yet has no
grade to stratify on, so ``size`` of its ``N`` pairs are drawn as a simple random sample without
replacement (weight ``N / size`` each, one stratum, no judge grade), split and ordered as above.
It measures any judge configuration that later grades its held-out pairs, with no oversampling of
the rarer class: a pool with few relevant pairs may need a larger sample to decide TPR.

**The query design** (:func:`draw_query_sample`, for judge-corrected metric intervals, PPI++ in
:mod:`workbench.core.metrics.ppi`): a simple random sample of ``n`` of the ``N`` queries whose
every pool pair carries a judge grade (drawn without replacement with the seed), and *every*
judged pool pair of each drawn query, so the SMEs' labels score a drawn query to the pool depth
the way the judge's labels score every query. Each pair's weight is ``N / n`` (its query's inverse
inclusion probability), its stratum the judge grade, the held-out split as above. The labelling
order keeps a query's pairs together (queries in a seeded random order, pairs shuffled within a
query), so an SME finishes one query before the next.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from workbench.errors import InputError

TUNING, HOLDOUT = "tuning", "holdout"


class CalibrationSampleError(InputError, ValueError):
    """The pool cannot provide a usable calibration sample (the message says what is missing)."""


@dataclass(frozen=True)
class SampleSpec:
    size: int = 200
    min_per_class: int = 50
    floor_size: int = 100
    floor_non_relevant: int = 30
    threshold: int = 2
    holdout_share: float = 0.75

    def check(self) -> None:
        if self.size < self.floor_size:
            raise CalibrationSampleError(
                f"a calibration sample of {self.size} pairs is too small; ask for at least {self.floor_size}")
        if not 0 < self.holdout_share <= 1:
            raise CalibrationSampleError(
                f"the held-out share must be in (0, 1], got {self.holdout_share}")


@dataclass(frozen=True)
class CalibrationSample:
    """The drawn pairs (the pool frame's columns plus ``stratum``, ``weight``, ``part``,
    ``position``), the seed that drew them and what fell short of the spec."""

    pairs: pd.DataFrame
    seed: int
    spec: SampleSpec | QuerySampleSpec  # the pair design's or the query design's
    pool_size: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    def part(self, name: str) -> pd.DataFrame:
        return self.pairs[self.pairs["part"] == name]


def water_fill(total: int, capacity: np.ndarray, rng: np.random.Generator | None = None) -> np.ndarray:
    """Integers ``a ≤ capacity`` summing to ``min(total, Σ capacity)``, as equal as possible.

    Everyone gets the same level ``k`` (or their whole capacity when smaller); the remaining
    units of the last partial round go one each to the slots with room, in ``rng``'s random
    order (in index order without ``rng``).
    """
    capacity = np.asarray(capacity, dtype=np.int64)
    total = int(min(total, capacity.sum()))
    if total <= 0 or capacity.size == 0:
        return np.zeros_like(capacity)
    # The largest level k with Σ min(cap, k) ≤ total, by bisection over k.
    lo, hi = 0, int(capacity.max())
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if np.minimum(capacity, mid).sum() <= total:
            lo = mid
        else:
            hi = mid - 1
    alloc = np.minimum(capacity, lo)
    left = total - int(alloc.sum())
    if left:
        room = np.flatnonzero(capacity > alloc)
        order = room if rng is None else rng.permutation(room)
        alloc[order[:left]] += 1
    return alloc


def _class_quotas(size: int, n_non: int, n_rel: int, min_per_class: int) -> tuple[int, int]:
    half = max(size // 2, min_per_class)
    non = min(n_non, max(half, size - n_rel))
    rel = min(n_rel, size - non)
    non = min(n_non, size - rel)  # what the relevant class could not fill
    return non, rel


def draw_sample(pool: pd.DataFrame, spec: SampleSpec = SampleSpec(), *, seed: int) -> CalibrationSample:
    """Draw a calibration sample from ``pool`` (columns ``query_id`` and ``judge_grade``, any
    others are carried along) by the module docstring's procedure, and split it."""
    spec.check()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise CalibrationSampleError(f"the seed must be an integer, got {seed!r}")
    missing = {"query_id", "judge_grade"} - set(pool.columns)
    if missing:
        raise CalibrationSampleError(f"the pool frame lacks {sorted(missing)}")
    pool = pool.reset_index(drop=True)
    grades = pool["judge_grade"].to_numpy(dtype=np.int64)
    relevant = grades >= spec.threshold
    n_pool, n_rel = len(pool), int(relevant.sum())
    n_non = n_pool - n_rel
    if n_pool < spec.floor_size or n_non < spec.floor_non_relevant:
        raise CalibrationSampleError(
            f"the pool has {n_pool} judged pairs, {n_non} of them judged not relevant (grade < "
            f"{spec.threshold}); a calibration sample needs at least {spec.floor_size} pairs with "
            f"{spec.floor_non_relevant} judged not relevant. Judge more of the pool (or pool deeper) first"
        )
    rng = np.random.default_rng(int(seed))
    notes = []
    q_non, q_rel = _class_quotas(spec.size, n_non, n_rel, spec.min_per_class)
    if q_non + q_rel < spec.size:
        notes.append(f"the pool has only {n_pool} judged pairs: the sample holds {q_non + q_rel}, "
                     f"not the {spec.size} asked")
    for what, quota, have in (("judged not relevant", q_non, n_non), ("judged relevant", q_rel, n_rel)):
        if quota < spec.min_per_class:
            notes.append(f"only {quota} pairs {what} (the pool has {have}); {spec.min_per_class} were wanted")

    levels = np.unique(grades)
    grade_quota: dict[int, int] = {}
    for quota, in_class in ((q_non, levels[levels < spec.threshold]), (q_rel, levels[levels >= spec.threshold])):
        caps = np.array([(grades == g).sum() for g in in_class], dtype=np.int64)
        for g, a in zip(in_class, water_fill(quota, caps)):
            grade_quota[int(g)] = int(a)

    query_codes, query_names = pd.factorize(pool["query_id"], sort=True)
    chosen, weights, strata, sizes = [], [], [], []
    for g, quota in sorted(grade_quota.items()):
        if quota == 0:
            continue
        in_grade = np.flatnonzero(grades == g)
        cells = query_codes[in_grade]
        caps = np.bincount(cells, minlength=len(query_names))
        alloc = water_fill(quota, caps, rng)
        # each query's pairs of the grade, in pool order: one stable sort instead of a scan per query
        by_query = in_grade[np.argsort(cells, kind="stable")]
        ends = np.cumsum(caps)
        for q in np.flatnonzero(alloc).tolist():
            k = int(alloc[q])
            members = by_query[ends[q] - caps[q]:ends[q]]
            chosen.append(np.sort(rng.choice(members, size=k, replace=False)))
            weights.append(len(members) / alloc[q])
            strata.append(g)
            sizes.append(k)
    idx = np.concatenate(chosen)
    out = pool.iloc[idx].copy()
    out["stratum"] = np.repeat(np.asarray(strata), sizes).astype(np.int64)
    out["weight"] = np.repeat(np.asarray(weights, dtype=np.float64), sizes)
    out = out.reset_index(drop=True)
    out["part"] = split_sample(out["stratum"].to_numpy(), spec.holdout_share, rng)
    out["position"] = rng.permutation(len(out)).astype(np.int64)
    out = out.sort_values("position", kind="stable").reset_index(drop=True)
    return CalibrationSample(out, int(seed), spec, n_pool, tuple(notes))


@dataclass(frozen=True)
class QuerySampleSpec:
    """The query design: ``queries`` drawn (at least 2), ``holdout_share`` as :class:`SampleSpec`."""

    queries: int
    threshold: int = 2
    holdout_share: float = 0.75

    def check(self) -> None:
        if isinstance(self.queries, bool) or int(self.queries) < 2:
            raise CalibrationSampleError(
                f"a query sample needs at least 2 queries (an interval needs two), got {self.queries}")
        if not 0 < self.holdout_share <= 1:
            raise CalibrationSampleError(
                f"the held-out share must be in (0, 1], got {self.holdout_share}")


def draw_query_sample(pool: pd.DataFrame, spec: QuerySampleSpec, *, seed: int) -> CalibrationSample:
    """A simple random sample of ``spec.queries`` of the queries of ``pool`` (columns ``query_id``
    and ``judge_grade``: every judged pair of the eligible queries; others carried along) with
    all their pairs, by the module docstring's query design. Refuses more queries than the pool
    has."""
    spec.check()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise CalibrationSampleError(f"the seed must be an integer, got {seed!r}")
    missing = {"query_id", "judge_grade"} - set(pool.columns)
    if missing:
        raise CalibrationSampleError(f"the pool frame lacks {sorted(missing)}")
    pool = pool.reset_index(drop=True)
    queries = np.array(sorted(pool["query_id"].astype(str).unique().tolist()), dtype=object)
    n_total, n = len(queries), int(spec.queries)
    if n > n_total:
        raise CalibrationSampleError(
            f"{n} queries asked, but only {n_total} queries have every pool pair judged; ask for at most "
            f"{n_total} (or judge the rest of the pool first)")
    rng = np.random.default_rng(int(seed))
    drawn = queries[rng.choice(n_total, size=n, replace=False)]  # in the seeded random order
    order = {q: i for i, q in enumerate(drawn)}
    qid = pool["query_id"].astype(str)
    out = pool[qid.isin(set(drawn))].copy()
    out["stratum"] = out["judge_grade"].to_numpy(dtype=np.int64)
    out["weight"] = float(n_total) / n
    out = out.reset_index(drop=True)
    out["part"] = split_sample(out["stratum"].to_numpy(), spec.holdout_share, rng)
    # queries in their drawn order, pairs shuffled within a query (no hint of the judge's grade)
    shuffle = rng.permutation(len(out))
    key = np.array([order[q] for q in out["query_id"].astype(str)], dtype=np.int64) * (len(out) + 1) + shuffle
    out = out.iloc[np.argsort(key, kind="stable")].reset_index(drop=True)
    out["position"] = np.arange(len(out), dtype=np.int64)
    return CalibrationSample(out, int(seed), spec, len(pool), ())


def split_sample(strata: np.ndarray, holdout_share: float, rng: np.random.Generator) -> np.ndarray:
    """``"holdout"``/``"tuning"`` per pair: within each stratum ``round(share · size)`` pairs
    (largest remainders make the total ``round(share · n)``) chosen at random are held out."""
    strata = np.asarray(strata)
    labels = np.full(len(strata), TUNING, dtype=object)
    names, counts = np.unique(strata, return_counts=True)
    exact = counts * holdout_share
    take = np.floor(exact).astype(np.int64)
    short = int(round(holdout_share * len(strata))) - int(take.sum())
    if short > 0:
        order = np.argsort(-(exact - take), kind="stable")
        take[order[:short]] += 1
    for name, k in zip(names, take):
        members = np.flatnonzero(strata == name)
        labels[rng.choice(members, size=int(k), replace=False)] = HOLDOUT
    return labels


def draw_unjudged_sample(pool: pd.DataFrame, size: int, *, holdout_share: float, seed: int) -> CalibrationSample:
    """A simple random sample of ``size`` pairs of a pool no judge graded (module docstring);
    ``pool`` has ``query_id`` (any other columns are carried along). ``judge_grade`` is missing
    (``<NA>``) and ``stratum`` 0 for every pair."""
    spec = SampleSpec(size=int(size), min_per_class=0, holdout_share=float(holdout_share))
    spec.check()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise CalibrationSampleError(f"the seed must be an integer, got {seed!r}")
    n_pool = len(pool)
    if n_pool < spec.floor_size:
        raise CalibrationSampleError(f"the pool has {n_pool} pairs; a calibration sample needs at least "
                                     f"{spec.floor_size}")
    rng = np.random.default_rng(int(seed))
    n = min(spec.size, n_pool)
    out = pool.reset_index(drop=True).iloc[np.sort(rng.choice(n_pool, size=n, replace=False))].reset_index(drop=True)
    out["judge_judgment_id"] = pd.array([pd.NA] * n, dtype="Int64")
    out["judge_grade"] = pd.array([pd.NA] * n, dtype="Int64")
    out["stratum"] = np.zeros(n, dtype=np.int64)
    out["weight"] = float(n_pool) / n
    out["part"] = split_sample(out["stratum"].to_numpy(), spec.holdout_share, rng)
    out["position"] = rng.permutation(n).astype(np.int64)
    out = out.sort_values("position", kind="stable").reset_index(drop=True)
    notes = () if n == spec.size else (f"the pool holds {n_pool} pairs: all of them were drawn",)
    return CalibrationSample(out, int(seed), spec, n_pool, notes)

