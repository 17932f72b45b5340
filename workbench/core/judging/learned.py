"""A judge that learns from its SMEs: features, model choice, operating point, grades.

Pure functions over arrays; :mod:`workbench.services.judge.learned` reads the project, calls
them and stores the result as a new judge configuration.

Features of a pool pair (query ``q``, passage ``c``), computed over the whole pool without
looking at any label, except the query effect, which reads tuning labels only (so nothing about a
held-out pair depends on a held-out label):

* each source judge configuration's grade (0-3) and its steps ``grade >= 1``, ``>= 2``,
  ``>= 3`` (so a logistic model on every feature may put the jump in relevance at any grade;
  the ``grades`` candidates read the grade alone, which generalised better from few labels on
  DL19); a pair it did not
  grade takes the configuration's mean grade over the pool and ``missing`` = 1 (the column only
  exists when some pair is missing);
* the grade minus the mean grade of the query's pool pairs (how it stands within its query)
  and the share of the query's pool pairs it graded >= 2 (how rich in relevant pairs the judge
  finds the query);
* per source, the grade with the text signals (:func:`grade_signal_features`): the rank share
  of BM25 and of the dense cosine among the query's pairs of the same grade
  (:func:`within_grade_rank_share`), ``grade · z(cosine)`` and ``[grade >= 2] ·
  rank_share(cosine)``, which a model linear in its columns cannot form alone;
* BM25 of ``q`` against ``c`` (:func:`bm25_scores`; document frequencies over the pool's
  distinct passages), its z-score within the query (:func:`within_query_z`) and its rank share
  within the query (:func:`within_query_rank_share`);
* query-term overlap (:func:`term_overlap`), ``log(1 + characters)`` and ``log(1 + tokens)``
  of the passage;
* the dense cosine ``<e(q), e(c)>`` of unit-length embeddings from the project's dense encoder
  (computed and cached by :mod:`workbench.services.judge.learned_dense`; named
  ``cosine[<encoder cache key>]``, so the encoder is part of the configuration's key), its
  z-score and its rank share within the query;
* per pooled run: ``1/rank`` (0 when the run did not pool the pair) and the z-score of the
  run's score within the query among the pairs the run pooled (0 when absent); the share of
  runs that pooled the pair and the best ``1/rank`` over runs.
* the query effect (:func:`query_effect`): how much more often than its judge-grade stratum
  predicts the query's tuning pairs were labelled relevant, shrunk towards 0 for queries with
  few labels; out of fold for every tuning row it is fitted on (:func:`out_of_fold_effect`).

The model (:func:`fit`): candidates (:func:`candidates`) are logistic regressions on the
source judges' grades alone (with and without the query effect), on the grades and the text
signals (with and without it), L2 logistic regressions on every standardised feature (C = 0.1,
1) and a small histogram gradient-boosting classifier, each scored by the weighted log loss of
its ``k``-fold cross-validated probabilities on the tuning labels (stratified folds, shuffled
with ``seed``; ``k`` = min(5, smaller class size)). The model is the average of all of them
(:data:`AVERAGE`: the mean of their probabilities, each member refitted on every tuning label),
scored the same way and reported beside them, but not picked by the lowest score: on a few
hundred labels the lowest-scoring single candidate changes from one draw of labels to the
next, and now and then it is a poor one (the grades alone, thresholded at grade 3), while the
average varies less. With only one candidate (no grade columns), that candidate. Weights
are the sample's inclusion weights normalised to mean 1, so the model and its operating point
aim at the pool the sample was drawn from, as the gate does (on DL19 an unweighted fit ranked
the pool's pairs worse: held-out κ 0.456 against 0.465 with 200 labels, 0.476 against 0.493
with 500, medians of three seeds).

The operating point (:func:`operating_point`): among the cross-validated probabilities as
thresholds, those whose weighted TPR and TNR reach the targets; among them the one with the
largest binary Cohen's κ (rule ``targets``). When none reaches both (rule ``kappa``), the
threshold that maximises the κ the model expects on the whole pool
(:func:`expected_kappa_threshold`: its probabilities of every pool pair taken as calibrated, no
label read); without the pool's probabilities, the threshold with the largest cross-validated
κ. Ties go to the lower threshold. The expected κ averages over thousands of pairs where the
cross-validated κ over a few hundred labels jumps from one threshold to the next, so its
threshold varies less from one draw of labels to another.

Grades (:func:`grades_from_probability`): ``p >= t`` is relevant (grade 2 or 3), else 0 or 1;
within each side the cut (``t_low`` below ``t``, ``t_high`` above) is the weighted quantile of
the side's cross-validated probabilities that gives the side the share of higher grades (1 resp.
3) its tuning labels have (:func:`grade_cuts`), so the learned judge's graded distribution
follows the SMEs' on each side.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from workbench import lazylibs

#: Bumped whenever a feature's definition or the choice of model changes (part of the
#: configuration key, so a learned judge made by other code is another configuration).
FEATURE_VERSION = 7
#: The fewest tuning labels and per-class labels a learned judge is fitted on.
MIN_LABELS = 30
MIN_PER_CLASS = 8
FOLDS = 5
#: The query effect's shrinkage: a query with n labels keeps n / (n + SMOOTHING) of its residual.
SMOOTHING = 5.0


# -- features ---------------------------------------------------------------------------------

def idf_lucene(df: np.ndarray, n: int) -> np.ndarray:
    """``ln(1 + (n - df + 0.5) / (df + 0.5))`` per term (Lucene's BM25 idf, never negative)."""
    df = np.asarray(df, dtype=np.float64)
    return np.log1p((n - df + 0.5) / (df + 0.5))


def bm25_scores(query_counts, passage_counts, idf: np.ndarray, avgdl: float, *, k1: float = 1.5,
                b: float = 0.75) -> np.ndarray:
    """BM25 of row ``i`` of ``query_counts`` against row ``i`` of ``passage_counts`` (scipy
    sparse matrices of term counts, pairs × vocabulary)::

        score_i = Σ_t qtf(i, t) · idf(t) · tf(i, t) / (tf(i, t) + k1 · (1 - b + b · dl_i / avgdl))

    ``dl_i`` is row ``i``'s token count; a term repeated in the query counts once per occurrence
    (as :mod:`workbench.retrieval.bm25`). A pair sharing no term scores 0; ``avgdl`` <= 0 counts as 1."""

    q = lazylibs.scipy_sparse.csr_matrix(query_counts)
    p = lazylibs.scipy_sparse.csr_matrix(passage_counts)
    n = p.shape[0]
    dl = np.asarray(p.sum(axis=1)).ravel()
    avgdl = float(avgdl) if avgdl and avgdl > 0 else 1.0
    matched = p.multiply(q > 0).tocoo()  # tf at the query's terms
    if matched.nnz == 0:
        return np.zeros(n)
    rows, cols, tf = matched.row, matched.col, matched.data.astype(np.float64)
    qtf = np.asarray(q[rows, cols]).ravel().astype(np.float64)
    part = qtf * idf[cols] * tf / (tf + k1 * (1.0 - b + b * dl[rows] / avgdl))
    return np.bincount(rows, weights=part, minlength=n)


def term_overlap(query_counts, passage_counts) -> np.ndarray:
    """Share of row ``i``'s distinct query terms that occur in passage ``i`` (0 for a query
    without indexed terms)."""

    q = lazylibs.scipy_sparse.csr_matrix(query_counts) > 0
    p = lazylibs.scipy_sparse.csr_matrix(passage_counts) > 0
    both = np.asarray(q.multiply(p).sum(axis=1)).ravel().astype(np.float64)
    terms = np.asarray(q.sum(axis=1)).ravel().astype(np.float64)
    return np.divide(both, terms, out=np.zeros_like(both), where=terms > 0)


def within_query_z(values: np.ndarray, groups: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """``(v - mean_g) / sd_g`` over the pairs of each query ``g`` (population sd; 0 where the sd
    is 0). ``mask``: only those pairs count and get a value (the others get 0)."""
    values = np.asarray(values, dtype=np.float64)
    groups = np.asarray(groups)
    mask = np.ones(len(values), bool) if mask is None else np.asarray(mask, bool)
    out = np.zeros(len(values))
    if not mask.any():
        return out
    g = groups[mask]
    v = values[mask]
    k = int(g.max()) + 1
    count = np.bincount(g, minlength=k).astype(np.float64)
    mean = np.bincount(g, weights=v, minlength=k) / np.maximum(count, 1)
    var = np.bincount(g, weights=(v - mean[g]) ** 2, minlength=k) / np.maximum(count, 1)
    sd = np.sqrt(var)
    z = np.divide(v - mean[g], sd[g], out=np.zeros_like(v), where=sd[g] > 0)
    out[mask] = z
    return out


def within_query_mean(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The mean of ``values`` over each pair's query."""
    values = np.asarray(values, dtype=np.float64)
    k = int(groups.max()) + 1 if len(groups) else 0
    count = np.bincount(groups, minlength=k).astype(np.float64)
    return (np.bincount(groups, weights=values, minlength=k) / np.maximum(count, 1))[groups]


def within_query_rank_share(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each pair's share of its query's pairs with a strictly lower value, plus half the ties
    (the mid-rank percentile, in [0, 1); 0 for a query of one pair)."""
    values = np.asarray(values, dtype=np.float64)
    groups = np.asarray(groups)
    order = np.lexsort((values, groups))
    out = np.zeros(len(values))
    g_sorted, v_sorted = groups[order], values[order]
    starts = np.flatnonzero(np.r_[True, g_sorted[1:] != g_sorted[:-1]])
    ends = np.r_[starts[1:], len(values)]
    for s, e in zip(starts, ends):
        v = v_sorted[s:e]
        lower = np.searchsorted(v, v, side="left")
        upper = np.searchsorted(v, v, side="right")
        out[order[s:e]] = (lower + (upper - lower - 1) / 2.0) / max(e - s, 1)
    return out


@dataclass
class FeatureTable:
    """Named feature columns of every pool pair (rows in the pool's pair order)."""

    names: list[str] = field(default_factory=list)
    columns: list[np.ndarray] = field(default_factory=list)

    def add(self, name: str, values) -> None:
        self.names.append(name)
        self.columns.append(np.asarray(values, dtype=np.float64))

    def matrix(self) -> np.ndarray:
        return np.column_stack(self.columns) if self.columns else np.zeros((0, 0))


def grade_features(table: FeatureTable, name: str, grades: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """A source configuration's grade features (module docstring); ``grades`` has NaN where it
    did not grade the pair. Returns the grades with the missing ones filled in."""
    grades = np.asarray(grades, dtype=np.float64)
    missing = np.isnan(grades)
    fill = float(np.nanmean(grades)) if (~missing).any() else 0.0
    g = np.where(missing, fill, grades)
    table.add(f"grade[{name}]", g)
    for k in (1, 2, 3):  # steps, so that a model linear in its features can put the jump at any grade
        table.add(f"grade>={k}[{name}]", (g >= k).astype(np.float64))
    if missing.any():
        table.add(f"missing[{name}]", missing.astype(np.float64))
    table.add(f"grade_vs_query[{name}]", g - within_query_mean(g, groups))
    table.add(f"query_share_relevant[{name}]", within_query_mean((g >= 2).astype(np.float64), groups))
    return g


def within_grade_rank_share(values: np.ndarray, groups: np.ndarray, grades: np.ndarray) -> np.ndarray:
    """:func:`within_query_rank_share` among the pairs of the same query *and* the same grade
    (how a pair's retrieval signal stands among the pairs the judge put in its bin). A pair
    alone in its (query, grade) bin gets 0; grades are compared as they are (a filled-in mean
    grade is a bin of its own)."""
    grades = np.asarray(grades, dtype=np.float64)
    _, bins = np.unique(np.column_stack([np.asarray(groups, dtype=np.float64), grades]), axis=0,
                        return_inverse=True)
    return within_query_rank_share(values, np.asarray(bins).ravel())


def grade_signal_features(table: FeatureTable, name: str, grades: np.ndarray, groups: np.ndarray,
                          bm25: np.ndarray, cosine: np.ndarray | None) -> None:
    """Features a model linear in its columns cannot form alone, of one source configuration's
    (filled) ``grades`` with the text signals: the rank share of BM25 (and of the dense cosine)
    within the pair's query and grade (:func:`within_grade_rank_share`), and with the cosine
    ``grade · z(cosine)`` and ``[grade >= 2] · rank_share(cosine)`` (z-score and rank share
    within the query)."""
    grades = np.asarray(grades, dtype=np.float64)
    table.add(f"bm25_rank_in_grade[{name}]", within_grade_rank_share(bm25, groups, grades))
    if cosine is None:
        return
    table.add(f"cosine_rank_in_grade[{name}]", within_grade_rank_share(cosine, groups, grades))
    table.add(f"grade_x_cosine_z[{name}]", grades * within_query_z(cosine, groups))
    table.add(f"relevant_x_cosine_rank[{name}]",
              (grades >= 2).astype(np.float64) * within_query_rank_share(cosine, groups))


def run_features(table: FeatureTable, runs: list[str], ranks: np.ndarray, scores: np.ndarray,
                 groups: np.ndarray) -> None:
    """Per-run features from ``ranks`` and ``scores`` (pairs × runs, NaN where the run did not
    pool the pair or has no score)."""
    if not runs:
        return
    pooled = ~np.isnan(ranks)
    recip = np.where(pooled, 1.0 / np.where(pooled, np.maximum(ranks, 1), 1), 0.0)
    for j, run in enumerate(runs):
        table.add(f"rr[{run}]", recip[:, j])
        has = ~np.isnan(scores[:, j])
        table.add(f"score_z[{run}]", within_query_z(np.nan_to_num(scores[:, j]), groups, has))
    table.add("runs_share", pooled.mean(axis=1))
    table.add("best_rr", recip.max(axis=1))


# -- the model ----------------------------------------------------------------------------------

def query_effect(groups: np.ndarray, y: np.ndarray, strata: np.ndarray, *, smoothing: float = SMOOTHING
                 ) -> dict[int, float]:
    """Each labelled query's shrunken residual relevance: ``Σ_i (y_i - r(s_i)) / (n_g + a)`` over
    the query's labelled pairs ``i``, where ``r(s)`` is the share of relevant labels among the
    labelled pairs of stratum ``s`` (the judge grade the sample was drawn by, so that a query
    whose pairs were drawn mostly from high judge grades is not taken for a relevant-rich
    query) and ``a`` = ``smoothing`` pulls a query with few labels towards 0. A query without
    labels has no entry (its effect is 0)."""
    groups = np.asarray(groups, dtype=np.int64)
    y = np.asarray(y, dtype=np.float64)
    strata = np.asarray(strata)
    keys, codes = np.unique(strata, return_inverse=True)
    rate = np.bincount(codes, weights=y) / np.bincount(codes)
    resid = y - rate[codes]
    k = int(groups.max()) + 1 if len(groups) else 0
    n = np.bincount(groups, minlength=k)
    total = np.bincount(groups, weights=resid, minlength=k)
    return {int(g): float(total[g] / (n[g] + smoothing)) for g in np.flatnonzero(n)}


def effect_column(effect: dict[int, float], groups: np.ndarray) -> np.ndarray:
    """The query effect of each row's query (0 for a query without labels)."""
    return np.array([effect.get(int(g), 0.0) for g in groups], dtype=np.float64)


def out_of_fold_effect(groups: np.ndarray, y: np.ndarray, strata: np.ndarray, splits) -> np.ndarray:
    """Each row's query effect computed without its own fold's labels (so a row's feature never
    holds its own label)."""
    out = np.zeros(len(y))
    for train, test in splits:
        out[test] = effect_column(query_effect(groups[train], y[train], strata[train]), groups[test])
    return out


def candidates(seed: int, n: int) -> list[tuple[str, object, str]]:
    """The candidate models (unfitted), in order of preference on ties, with the columns each
    reads: ``grades`` (the source judges' grades), ``grades+query`` (and the query effect),
    ``signals`` (the grades and the text signals: dense cosine, BM25, overlap, length, with their
    within-query normalisations; few columns, for few labels), ``signals+query`` or ``all``
    (every feature and the query effect)."""

    logistic = lambda c: lazylibs.sklearn_pipeline.make_pipeline(lazylibs.sklearn_preprocessing.StandardScaler(), lazylibs.sklearn_linear_model.LogisticRegression(C=c, max_iter=2000))  # noqa: E731
    return [("logistic on the judges' grades", logistic(1.0), "grades"),
            ("logistic on the judges' grades and the query effect", logistic(1.0), "grades+query"),
            ("logistic on the judges' grades and the text signals", logistic(1.0), "signals"),
            ("logistic on the judges' grades, the text signals and the query effect", logistic(1.0),
             "signals+query"),
            ("logistic on every feature, C=0.1", logistic(0.1), "all"),
            ("logistic on every feature, C=1", logistic(1.0), "all"),
            ("gradient boosting on every feature", lazylibs.sklearn_ensemble.HistGradientBoostingClassifier(
                max_iter=100, learning_rate=0.05, max_leaf_nodes=8, min_samples_leaf=max(5, n // 20),
                l2_regularization=1.0, random_state=int(seed)), "all")]


def _fit_one(model, x: np.ndarray, y: np.ndarray, w: np.ndarray):
    m = lazylibs.sklearn_base.clone(model)
    if isinstance(m, lazylibs.sklearn_pipeline.Pipeline):
        m.fit(x, y, **{f"{m.steps[-1][0]}__sample_weight": w})
    else:
        m.fit(x, y, sample_weight=w)
    return m


def weighted_log_loss(y: np.ndarray, p: np.ndarray, w: np.ndarray) -> float:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-np.sum(w * (y * np.log(p) + (1 - y) * np.log(1 - p))) / np.sum(w))


class Classifier(Protocol):
    """What a fitted model offers here (a scikit-learn classifier or pipeline)."""

    def predict_proba(self, x: np.ndarray) -> np.ndarray: ...


@dataclass
class Fit:
    """The chosen model refitted on every tuning label, its name, its cross-validated
    probabilities of the tuning pairs, every candidate's CV log loss, the columns it reads
    and, when it reads the query effect, each labelled query's effect (:func:`query_effect`
    over every tuning label)."""

    name: str
    model: Classifier
    cv_probability: np.ndarray
    scores: dict[str, float]
    folds: int
    columns: list[int] | None = None
    effect: dict[int, float] | None = None

    def predict(self, x: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """p(relevant) of rows ``x`` whose queries are ``groups`` (the codes the fit was given)."""

        x = x if self.columns is None else x[:, self.columns]
        if self.effect is not None:
            x = np.column_stack([x, effect_column(self.effect, groups)])
        with lazylibs.threadpoolctl.threadpool_limits(1):
            return self.model.predict_proba(x)[:, 1]


def check_labels(y: np.ndarray) -> str | None:
    """Why these tuning labels are too few to learn from (None when they suffice)."""
    y = np.asarray(y)
    pos, neg = int(y.sum()), int(len(y) - y.sum())
    if len(y) < MIN_LABELS:
        return f"{len(y)} SME labels on the tuning part; a learned judge needs at least {MIN_LABELS}"
    if min(pos, neg) < MIN_PER_CLASS:
        return (f"{pos} relevant and {neg} not relevant SME labels on the tuning part; a learned judge needs "
                f"at least {MIN_PER_CLASS} of each")
    return None


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, seed: int, *, groups: np.ndarray, strata: np.ndarray,
        base_columns: list[int] | None = None, signal_columns: list[int] | None = None) -> Fit:
    """Choose and fit the model on tuning features ``x``, binary labels ``y``, weights ``w``,
    query codes ``groups`` and strata ``strata`` (module docstring). The caller passes tuning
    pairs only. ``base_columns``: the source judges' grade columns (``grades`` candidates;
    without them only the ``all`` candidates run); ``signal_columns``: the text signals' columns
    (``signals`` candidates, with the grade columns). One thread: the models are small, and on a
    shared machine OpenMP's threads spend their time waiting for each other."""
    lazylibs.sklearn_ensemble  # loads the OpenMP runtime, so that the limit below reaches it
    lazylibs.sklearn_linear_model

    with lazylibs.threadpoolctl.threadpool_limits(1):
        return _fit(x, y, w, seed, np.asarray(groups, dtype=np.int64), np.asarray(strata), base_columns,
                    signal_columns)


def _fit(x, y, w, seed, groups, strata, base_columns, signal_columns=None) -> Fit:
    why = check_labels(y)
    if why is not None:
        raise ValueError(why)
    y = np.asarray(y, dtype=np.int64)
    w = np.asarray(w, dtype=np.float64)
    w = w / w.mean()
    k = int(min(FOLDS, y.sum(), len(y) - y.sum()))
    folds = lazylibs.sklearn_model_selection.StratifiedKFold(n_splits=k, shuffle=True, random_state=int(seed))
    splits = list(folds.split(x, y))
    everything = list(range(x.shape[1]))

    signals = list(base_columns or []) + [c for c in (signal_columns or []) if c not in (base_columns or [])]

    def reads(cols: str) -> list[int]:
        return list(base_columns) if cols.startswith("grades") else signals if cols.startswith("signals") \
            else everything

    def design(cols: str, rows: np.ndarray, effect: np.ndarray | None) -> np.ndarray:
        chosen = x[rows][:, reads(cols)]
        return np.column_stack([chosen, effect]) if effect is not None else chosen

    # (name, model, out-of-fold probabilities, columns); for the average, the model is the list
    # of the candidates it averages
    best: tuple[str, Any, np.ndarray, str] | None = None
    scores: dict[str, float] = {}
    tried: list[tuple[str, Any, np.ndarray, str]] = []
    for name, model, cols in candidates(seed, len(y)):
        if (cols.startswith("grades") and not base_columns) or (cols.startswith("signals") and not signal_columns):
            continue
        query = cols not in ("grades", "signals")
        p = np.zeros(len(y))
        for train, test in splits:
            # the training rows' effect out of fold within the training part, the test rows' from it all
            inner = list(lazylibs.sklearn_model_selection.StratifiedKFold(n_splits=k, shuffle=True, random_state=int(seed)).split(train, y[train])) \
                if query and min(y[train].sum(), len(train) - y[train].sum()) >= k else None
            e_train = (out_of_fold_effect(groups[train], y[train], strata[train], inner) if inner else
                       np.zeros(len(train))) if query else None
            e_test = effect_column(query_effect(groups[train], y[train], strata[train]), groups[test]) \
                if query else None
            m = _fit_one(model, design(cols, train, e_train), y[train], w[train])
            p[test] = m.predict_proba(design(cols, test, e_test))[:, 1]
        scores[name] = weighted_log_loss(y, p, w)
        tried.append((name, model, p, cols))
        if best is None or scores[name] < scores[best[0]] - 1e-12:
            best = (name, model, p, cols)
    if best is None:  # never: the "all" candidates are never skipped
        raise ValueError("no candidate model was fitted")
    if len(tried) > 1:  # the average of every candidate, scored the same way; always the model
        # (picking the lowest CV log loss among eight candidates on a few hundred labels picks
        # a different model from one draw of labels to the next, and a poor one now and then)
        p = np.mean([t[2] for t in tried], axis=0)
        scores[AVERAGE] = weighted_log_loss(y, p, w)
        best = (AVERAGE, tried, p, "average")
    name, model, p, cols = best
    rows = np.arange(len(y))
    effect = query_effect(groups, y, strata)
    e_all = out_of_fold_effect(groups, y, strata, splits)
    if cols == "average":
        members = []
        for _, member, _, member_cols in model:
            query = member_cols not in ("grades", "signals")
            members.append((_fit_one(member, design(member_cols, rows, e_all if query else None), y, w),
                            reads(member_cols), query))
        return Fit(name, _Average(members), p, scores, k, None, effect)
    query = cols not in ("grades", "signals")
    fitted = _fit_one(model, design(cols, rows, e_all if query else None), y, w)
    return Fit(name, fitted, p, scores, k, reads(cols), effect if query else None)


#: The name of the candidate that averages every other candidate's probability.
AVERAGE = "average of the candidates"


class _Average:
    """The mean ``p(relevant)`` of fitted ``members`` ``(model, columns, reads the query
    effect)``; ``predict_proba`` takes every feature column and the query effect last."""

    def __init__(self, members):
        self.members = members

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        ps = []
        for model, columns, query in self.members:
            part = x[:, columns]
            if query:
                part = np.column_stack([part, x[:, -1]])
            ps.append(model.predict_proba(part)[:, 1])
        p = np.mean(ps, axis=0)
        return np.column_stack([1 - p, p])


# -- the operating point and grades ------------------------------------------------------------

def binary_figures(y: np.ndarray, decision: np.ndarray, w: np.ndarray) -> dict[str, float]:
    """Weighted TPR, TNR and Cohen's κ of binary ``decision`` against ``y``."""
    y = np.asarray(y, bool)
    d = np.asarray(decision, bool)
    w = np.asarray(w, dtype=np.float64)
    tp, fn = w[y & d].sum(), w[y & ~d].sum()
    tn, fp = w[~y & ~d].sum(), w[~y & d].sum()
    total = tp + fn + tn + fp
    tpr = tp / (tp + fn) if tp + fn > 0 else float("nan")
    tnr = tn / (tn + fp) if tn + fp > 0 else float("nan")
    po = (tp + tn) / total
    pe = ((tp + fn) * (tp + fp) + (tn + fp) * (tn + fn)) / total ** 2
    kappa = (po - pe) / (1 - pe) if pe < 1 else float("nan")
    return {"tpr": float(tpr), "tnr": float(tnr), "kappa": float(kappa)}


@dataclass(frozen=True)
class OperatingPoint:
    threshold: float
    rule: str  # "targets": meets min TPR and TNR; "kappa": none did, largest (expected) kappa
    tpr: float
    tnr: float
    kappa: float
    min_tpr: float
    min_tnr: float
    #: the κ the model expects on the pool at the threshold (rule ``kappa`` with the pool's
    #: probabilities; None otherwise)
    expected_kappa: float | None = None

    def words(self) -> str:
        figures = f"cross-validated on the tuning part: TPR {self.tpr:.3f}, TNR {self.tnr:.3f}, κ {self.kappa:.3f}"
        if self.rule == "targets":
            return (f"p(relevant) >= {self.threshold:.3f}, chosen to meet the gate's targets TPR >= {self.min_tpr:g} "
                    f"and TNR >= {self.min_tnr:g} with the largest κ ({figures})")
        how = ("the cross-validated κ" if self.expected_kappa is None else
               f"the κ the model expects on the pool's pairs ({self.expected_kappa:.3f})")
        return (f"p(relevant) >= {self.threshold:.3f}, chosen to maximise {how}: no threshold meets TPR >= "
                f"{self.min_tpr:g} and TNR >= {self.min_tnr:g} ({figures})")


def expected_kappa_threshold(p: np.ndarray) -> tuple[float, float]:
    """``(t, κ̂)``: the threshold on the pool's probabilities ``p`` whose expected binary κ is
    largest, taking each ``p_i`` as the chance pair ``i`` is relevant. Deciding ``p_i >= t``
    relevant gives the expected counts ``TP = Σ_{p_i >= t} p_i``, ``FP = Σ_{p_i >= t} (1 - p_i)``,
    ``FN = Σ_{p_i < t} p_i``, ``TN = Σ_{p_i < t} (1 - p_i)``, and κ̂ is Cohen's κ of those counts.
    Candidate thresholds are the distinct values of ``p`` (all pairs at one value fall on the
    same side); ties of κ̂ go to the lower threshold. Empty ``p``: ``(0.5, nan)``; a single
    value: that value and κ̂ 0 (everything relevant); κ̂ undefined at every threshold (every
    ``p_i`` 1: ``p_e`` = 1): the smallest value and nan."""
    p = np.sort(np.asarray(p, dtype=np.float64))[::-1]
    if not len(p):
        return 0.5, float("nan")
    last = np.r_[p[1:] != p[:-1], True]  # the last pair of each run of equal values
    tp, fp = np.cumsum(p), np.cumsum(1.0 - p)
    positives, total = tp[-1], float(len(p))
    fn, tn = positives - tp, (total - positives) - fp
    po = (tp + tn) / total
    pe = ((tp + fn) * (tp + fp) + (tn + fp) * (tn + fn)) / total ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(pe < 1, (po - pe) / (1 - pe), np.nan)
    kappa = np.where(last, kappa, np.nan)
    if np.isnan(kappa).all():
        return float(p[-1]), float("nan")
    best = np.nanmax(kappa)
    i = int(np.flatnonzero(kappa >= best - 1e-12)[-1])  # the lowest threshold among ties
    return float(p[i]), float(kappa[i])


def operating_point(y: np.ndarray, p: np.ndarray, w: np.ndarray, *, min_tpr: float, min_tnr: float,
                    pool: np.ndarray | None = None) -> OperatingPoint:
    """The threshold on ``p`` (cross-validated probabilities of the tuning pairs, labels ``y``,
    weights ``w``; module docstring). ``pool``: the model's probabilities of every pool pair;
    when no threshold meets the targets, the threshold is :func:`expected_kappa_threshold` of
    them (and TPR, TNR and κ are still the cross-validated ones at it)."""
    y = np.asarray(y, bool)
    p = np.asarray(p, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    rows = []
    for t in np.unique(p):
        f = binary_figures(y, p >= t, w)
        rows.append((t, f["tpr"], f["tnr"], f["kappa"]))
    kappa = lambda r: r[3] if r[3] == r[3] else -2.0  # noqa: E731 - NaN kappa never wins
    meeting = [r for r in rows if r[1] >= min_tpr and r[2] >= min_tnr]
    if not meeting and pool is not None and len(pool):
        t, expected = expected_kappa_threshold(pool)
        f = binary_figures(y, p >= t, w)
        return OperatingPoint(t, "kappa", f["tpr"], f["tnr"], f["kappa"], min_tpr, min_tnr,
                              expected if expected == expected else None)
    candidates_, rule = (meeting, "targets") if meeting else (rows, "kappa")
    best = max(candidates_, key=lambda r: (kappa(r), -r[0]))
    return OperatingPoint(float(best[0]), rule, float(best[1]), float(best[2]), float(best[3]), min_tpr, min_tnr)


def _weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    order = np.argsort(values, kind="stable")
    v, w = values[order], weights[order]
    cum = np.cumsum(w) / w.sum()
    return float(v[min(int(np.searchsorted(cum, q, side="left")), len(v) - 1)])


def grade_cuts(grades: np.ndarray, p: np.ndarray, w: np.ndarray, threshold: float, relevant_min: int = 2
               ) -> tuple[float, float]:
    """``(t_low, t_high)`` (module docstring): on the side ``p < threshold`` the cut above
    which a pair is graded 1 rather than 0; on ``p >= threshold`` the cut for 3 rather than 2.
    A side without tuning pairs or without both grades uses the midpoint of its range."""
    grades = np.asarray(grades)
    p = np.asarray(p, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    out = []
    for side, lo, hi, upper in ((p < threshold, 0.0, threshold, relevant_min - 1),
                                (p >= threshold, threshold, 1.0, 3)):
        g, pp, ww = grades[side], p[side], w[side]
        share = float(ww[g >= upper].sum() / ww.sum()) if len(g) else 0.0
        if len(g) == 0 or share in (0.0, 1.0):
            out.append((lo + hi) / 2.0)
        else:
            cut = _weighted_quantile(pp, ww, 1.0 - share)
            out.append(min(max(cut, lo), hi))
    return out[0], out[1]


def grades_from_probability(p: np.ndarray, threshold: float, t_low: float, t_high: float) -> np.ndarray:
    """0-3: ``p >= threshold`` → 3 when ``p >= t_high`` else 2; otherwise 1 when ``p >= t_low``
    else 0."""
    p = np.asarray(p, dtype=np.float64)
    return np.where(p >= threshold, np.where(p >= t_high, 3, 2), np.where(p >= t_low, 1, 0)).astype(np.int64)


def fingerprint(*parts) -> str:
    """sha256 of the JSON of ``parts`` (sorted keys): the learned configuration's key."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()
