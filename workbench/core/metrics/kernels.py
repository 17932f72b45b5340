"""Per-query measures as segment reductions over :class:`~workbench.core.metrics.ranking.RankedLists`.

Notation: for query q, rows i = 1..n are its retrieved docs in rank order, g_i their grade
(unjudged = no grade), ``rel`` the relevance threshold, rel_i = [g_i >= rel], R = number of
qrels rows with grade >= rel, N = number of judged non-relevant docs (0 <= grade < rel).

==============  =========================================================================
hit@k           1 if sum_{i<=k} rel_i > 0 else 0
precision@k     sum_{i<=k} rel_i / k            (k even when fewer than k were retrieved)
recall@k        sum_{i<=k} rel_i / R
f1@k            2 P R / (P + R) = 2 sum_{i<=k} rel_i / (k + R); 0 when nothing relevant
mrr[@k]         1 / rank of the first relevant doc (0 if none, or if it is below k)
map[@k]         (1/R) sum_{i<=k, rel_i} (sum_{j<=i} rel_j) / i
ndcg[@k]        DCG/IDCG, DCG = sum_{i<=k} gain(g_i) / log2(i+1); gain(g) = g (linear) or
                2^g - 1 (ndcg_exp); IDCG from *all* judged grades of q sorted descending,
                cut at k; 0 when IDCG = 0. Negative/unjudged grades give gain 0. With a
                measure-level ``rel``, grades below it give gain 0 (ranx's ``-l``).
rprec           sum_{i<=R} rel_i / R
err[@k]         sum_{r<=k} (1/r) R_r prod_{i<r} (1 - R_i), R_i = (2^min(g_i,gmax) - 1)/2^gmax
rbp             (1-p) sum_i x_i p^(i-1), x_i = rel_i (or min(g_i,gmax)/gmax if graded);
                two residuals, both reported:
                ``.residual`` = p^n for a list of n results: the most the unseen ranks
                below the list could add (the spec's definition; 0.8^5 = 0.33 on its example);
                ``.residual_unjudged`` = p^n + (1-p) sum_{i unjudged} p^(i-1): the most unseen
                ranks *and* unjudged docs in the list could add (Moffat & Zobel; trec_eval 10's
                rbp_resid). They differ only when the list holds unjudged docs.
bpref           (1/R) sum_{rel retrieved r} (1 - min(n_r, R) / min(R, N)), n_r = judged
                non-relevant docs ranked above r; the term is 1 when n_r = 0 (so N = 0 is safe)
judged@k        (docs in the top min(k, n) with a label >= 0) / min(k, n); 0 when n = 0
==============  =========================================================================

Every measure returns 0 for a query with nothing retrieved or R = 0 (rbp's residuals are 1 then).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import overload

import numpy as np

from workbench.core.metrics.measures import REGISTRY, Measure, MeasureError
from workbench.core.metrics.ranking import RankedLists, group_ranks


class _Context:
    """Arrays derived from the ranked lists, computed once and shared by the measures."""

    def __init__(self, ranked: RankedLists):
        self.r = ranked
        self.nq = ranked.n_queries
        self._cache: dict = {}

    def per_query(self, weights: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Sum of ``weights`` over the rows (optionally a boolean subset) of each query."""
        q = self.r.qidx if rows is None else self.r.qidx[rows]
        w = weights if rows is None else weights[rows]
        return np.bincount(q, weights=w, minlength=self.nq).astype(np.float64)

    @cached_property
    def judged(self) -> np.ndarray:
        return ~np.isnan(self.r.grade)

    @cached_property
    def n_ret(self) -> np.ndarray:
        return np.bincount(self.r.qidx, minlength=self.nq)

    def within_cumsum(self, x: np.ndarray) -> np.ndarray:
        """Inclusive cumulative sum of ``x`` restarting at every query, summed from each query's
        first row (so a query's values do not depend on the rows of other queries, and a run
        scored in parts gives the same floats as scored at once).

        The queries are the rows of a padded 2-D array summed along its rows (sequential
        accumulation); a query longer than that array's width (a ragged run) is summed alone.
        """
        x = np.asarray(x, dtype=np.float64)
        n = len(x)
        if n == 0:
            return np.zeros(0)
        starts = self.starts
        lengths = np.diff(np.r_[starts, n])
        width = int(lengths.max())
        if width * len(lengths) > 4 * n + 4096:  # ragged: the padded array would be too big
            width = max(1, int(np.quantile(lengths, 0.99)))
        short = lengths <= width
        out = np.empty(n)
        s, ln = starts[short], lengths[short]
        if len(s):
            padded = np.zeros((len(s), width))
            row = np.repeat(np.arange(len(s)), ln)
            col = np.arange(int(ln.sum())) - np.repeat(np.cumsum(ln) - ln, ln)
            at = np.repeat(s, ln) + col
            padded[row, col] = x[at]
            out[at] = np.cumsum(padded, axis=1)[row, col]
        for a, b in zip(starts[~short].tolist(), (starts[~short] + lengths[~short]).tolist()):
            out[a:b] = np.cumsum(x[a:b])
        return out

    @cached_property
    def starts(self) -> np.ndarray:
        """First row of each non-empty query block, in row order."""
        return np.flatnonzero(self.r.rank == 1)

    def relevant(self, rel: int) -> np.ndarray:
        key = ("rel", rel)
        if key not in self._cache:
            with np.errstate(invalid="ignore"):
                self._cache[key] = self.r.grade >= rel  # NaN compares False
        return self._cache[key]

    def n_relevant(self, rel: int) -> np.ndarray:
        key = ("R", rel)
        if key not in self._cache:
            g = self.r.judged_grade
            self._cache[key] = np.bincount(self.r.judged_qidx[g >= rel], minlength=self.nq).astype(np.float64)
        return self._cache[key]

    def n_nonrelevant(self, rel: int) -> np.ndarray:
        g = self.r.judged_grade
        return np.bincount(self.r.judged_qidx[g < rel], minlength=self.nq).astype(np.float64)

    @overload
    def top(self, k: int) -> np.ndarray: ...
    @overload
    def top(self, k: int | None) -> np.ndarray | None: ...
    def top(self, k: int | None) -> np.ndarray | None:
        if k is None:
            return None
        key = ("top", k)
        if key not in self._cache:
            self._cache[key] = self.r.rank <= k
        return self._cache[key]

    def rows(self, mask: np.ndarray) -> np.ndarray:
        """Indices of the rows where ``mask`` holds (cached by identity of the mask)."""
        key = ("rows", id(mask))
        hit = self._cache.get(key)
        if hit is None or hit[0] is not mask:
            hit = self._cache[key] = (mask, np.flatnonzero(mask))
        return hit[1]

    def count_rel(self, rel: int, k: int | None) -> np.ndarray:
        mask = self.relevant(rel)
        top = self.top(k)
        if top is not None:
            mask = mask & top
        return np.bincount(self.r.qidx[mask], minlength=self.nq).astype(np.float64)


def _div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros_like(num, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


# --- binary measures ------------------------------------------------------------------
def _hit(c: _Context, m: Measure, rel: int) -> np.ndarray:
    return (c.count_rel(rel, m.cutoff) > 0).astype(np.float64)


def _precision(c: _Context, m: Measure, rel: int) -> np.ndarray:
    return c.count_rel(rel, m.cutoff) / m.cutoff


def _recall(c: _Context, m: Measure, rel: int) -> np.ndarray:
    return _div(c.count_rel(rel, m.cutoff), c.n_relevant(rel))


def _f1(c: _Context, m: Measure, rel: int) -> np.ndarray:
    hits = c.count_rel(rel, m.cutoff)
    return _div(2.0 * hits, m.cutoff + c.n_relevant(rel)) * (hits > 0)


# The sparse measures below work on the indices of the relevant (or top-k) rows only: the
# same numbers, summed in the same row order, as the dense formulas in the module docstring.
def _mrr(c: _Context, m: Measure, rel: int) -> np.ndarray:
    rows = c.rows(c.relevant(rel))
    q = c.r.qidx[rows]
    first = rows[np.r_[True, q[1:] != q[:-1]]] if len(rows) else rows  # first relevant row per query
    if m.cutoff is not None:
        first = first[c.r.rank[first] <= m.cutoff]
    out = np.zeros(c.nq)
    out[c.r.qidx[first]] = 1.0 / c.r.rank[first]
    return out


def _map(c: _Context, m: Measure, rel: int) -> np.ndarray:
    rows = c.rows(c.relevant(rel))
    q = c.r.qidx[rows]
    prec = group_ranks(q) / c.r.rank[rows]  # relevant docs up to and including the row / rank
    if m.cutoff is not None:
        keep = c.r.rank[rows] <= m.cutoff
        q, prec = q[keep], prec[keep]
    return _div(np.bincount(q, weights=prec, minlength=c.nq), c.n_relevant(rel))


def _rprec(c: _Context, m: Measure, rel: int) -> np.ndarray:
    big_r = c.n_relevant(rel)
    rows = c.relevant(rel) & (c.r.rank <= big_r[c.r.qidx])
    return _div(np.bincount(c.r.qidx[rows], minlength=c.nq).astype(np.float64), big_r)


def _bpref(c: _Context, m: Measure, rel: int) -> np.ndarray:
    relevant = c.relevant(rel)
    nonrel = c.judged & ~relevant
    above = c.within_cumsum(nonrel) - nonrel  # judged non-relevant ranked above each row
    big_r = c.n_relevant(rel)
    big_n = c.n_nonrelevant(rel)
    q = c.r.qidx
    denom = np.minimum(big_r, big_n)[q]
    penalty = np.zeros(len(q))
    np.divide(np.minimum(above, big_r[q]), denom, out=penalty, where=(above > 0) & (denom > 0))
    return _div(c.per_query(1.0 - penalty, relevant), big_r)


def _judged(c: _Context, m: Measure, rel: int) -> np.ndarray:
    if m.cutoff is None:  # never: parsing requires judged's k
        raise MeasureError("judged needs a cutoff, e.g. judged@10")
    counted = np.bincount(c.r.qidx[c.judged & c.top(m.cutoff)], minlength=c.nq).astype(np.float64)
    return _div(counted, np.minimum(c.n_ret, m.cutoff).astype(np.float64))


# --- graded measures ------------------------------------------------------------------
def _graded(grade: np.ndarray, m: Measure) -> np.ndarray:
    """Grades as non-negative numbers: unjudged/negative -> 0, below a measure's rel -> 0."""
    g = np.nan_to_num(grade, nan=0.0)
    g = np.maximum(g, 0.0)
    if m.rel is not None:
        g = np.where(g >= m.rel, g, 0.0)
    return g


def _gain(g: np.ndarray, m: Measure) -> np.ndarray:
    return np.exp2(g) - 1.0 if m.name == "ndcg_exp" else g


def _ndcg(c: _Context, m: Measure, rel: int) -> np.ndarray:
    rows = None if m.cutoff is None else c.rows(c.top(m.cutoff))
    grade, rank, qidx = (c.r.grade, c.r.rank, c.r.qidx) if rows is None else (
        c.r.grade[rows], c.r.rank[rows], c.r.qidx[rows])
    gain = _gain(_graded(grade, m), m)
    disc = gain / np.log2(rank + 1.0)
    dcg = np.bincount(qidx, weights=disc, minlength=c.nq)
    # ideal: all judged grades of the query, best first. Only positive grades add to it and they
    # sort before the rest, so they keep their ranks when the rest is dropped first.
    g = c.r.judged_grade  # integers
    if m.rel is not None:
        g = np.where(g >= m.rel, g, 0)
    pos = np.flatnonzero(g > 0)
    g, iq = g[pos], c.r.judged_qidx[pos]
    top = int(g.max()) if len(g) else 0
    if c.nq * (top + 1) < 2**62:  # one integer key: query ascending, grade descending
        # stable: qrels grouped by query (the usual file) are runs of ascending queries, which
        # timsort merges in about half the time of a quicksort
        order = np.argsort(iq.astype(np.int64) * (top + 1) + (top - g), kind="stable")
    else:
        order = np.lexsort((-g, iq))
    iq = iq[order]
    ig = _gain(g[order].astype(np.float64), m)  # equal grades in any order: the same terms
    irank = group_ranks(iq)
    if m.cutoff is not None:
        keep = irank <= m.cutoff
        iq, ig, irank = iq[keep], ig[keep], irank[keep]
    idcg = np.bincount(iq, weights=ig / np.log2(irank + 1.0), minlength=c.nq)
    return _div(dcg, idcg)


def _err(c: _Context, m: Measure, rel: int) -> np.ndarray:
    gmax = m.top_grade
    g = np.minimum(_graded(c.r.grade, m), gmax)  # a grade above the scale counts as the top
    stop = (np.exp2(g) - 1.0) / 2.0**gmax  # < 1, so log1p(-stop) is finite
    log_go_on = np.log1p(-stop)
    reach = np.exp(c.within_cumsum(log_go_on) - log_go_on)  # prod_{i<r} (1 - R_i)
    return c.per_query(stop * reach / c.r.rank, c.top(m.cutoff))


def _rbp(c: _Context, m: Measure, rel: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = m.persistence
    weight = (1.0 - p) * np.power(p, c.r.rank - 1.0)
    if m.graded:
        x = np.minimum(_graded(c.r.grade, m), m.top_grade) / m.top_grade
    else:
        x = c.relevant(rel).astype(np.float64)
    score = c.per_query(weight * x)
    unseen = np.power(p, c.n_ret.astype(np.float64))
    return score, unseen, unseen + c.per_query(weight, ~c.judged)


#: The kernel of each measure of :data:`workbench.core.metrics.measures.REGISTRY`, by name
#: (``ndcg_exp`` shares nDCG's kernel, which reads the gain from the measure). The two tables
#: must name the same measures: :func:`registry_gaps` lists the differences, and a test fails on
#: a measure without a kernel or a kernel without a measure.
_Kernel = Callable[[_Context, Measure, int], np.ndarray | tuple[np.ndarray, np.ndarray, np.ndarray]]
KERNELS: dict[str, _Kernel] = {
    "hit": _hit, "precision": _precision, "recall": _recall, "f1": _f1, "mrr": _mrr,
    "map": _map, "ndcg": _ndcg, "ndcg_exp": _ndcg, "rprec": _rprec, "err": _err,
    "rbp": _rbp, "bpref": _bpref, "judged": _judged,
}


def registry_gaps(registry=None, kernels=None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(measures without a kernel, kernels without a measure)`` between ``registry`` (default
    :data:`~workbench.core.metrics.measures.REGISTRY`) and ``kernels`` (default :data:`KERNELS`),
    each sorted; both empty when every measure can be computed and every kernel is reachable."""

    names = set(REGISTRY if registry is None else registry)
    computed = set(KERNELS if kernels is None else kernels)
    return tuple(sorted(names - computed)), tuple(sorted(computed - names))

RESIDUAL_SUFFIX = ".residual"  # p^n, the spec's residual
UNJUDGED_RESIDUAL_SUFFIX = ".residual_unjudged"  # p^n + unjudged weight, trec_eval's rbp_resid


def compute(ranked: RankedLists, measures: list[tuple[str, Measure]], rel: int) -> dict[str, np.ndarray]:
    """Per-query values (one array over ``ranked.query_ids``) for each ``(label, Measure)``.

    RBP adds ``label + ".residual"`` (p^n) and ``label + ".residual_unjudged"`` (trec_eval's
    rbp_resid: p^n plus the weight of the unjudged ranks).
    """
    ctx = _Context(ranked)
    out: dict[str, np.ndarray] = {}
    for label, measure in measures:
        value = KERNELS[measure.name](ctx, measure, rel if measure.rel is None else measure.rel)
        if isinstance(value, tuple):
            out[label], out[label + RESIDUAL_SUFFIX], out[label + UNJUDGED_RESIDUAL_SUFFIX] = value
        else:
            out[label] = value
    return out
