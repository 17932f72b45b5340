"""The pandas reference implementation of depth-k pooling, kept only as a test oracle.

The pool service (:mod:`workbench.services.pooling.pools`) does the set work inside DuckDB; this
module computes the same pools and diagnostics from plain DataFrames, so tests (and the pooling
benchmarks) can check the service against an independent, readable implementation.

Tables:

* ``Pool.provenance`` — long form ``run_id, query_id, <id>, rank``: which runs retrieved
  each pooled pair and at which rank (only ranks ``<= depth`` of that run).
* ``Pool.pairs`` — one row per pooled pair: ``query_id, <id>, priority, score, n_runs,
  best_rank``. ``score`` is the RRF score among the pooled runs (k = ``Pool.k``, equal
  weights) and ``priority`` its 1-based rank within the query (ties: item id ascending).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.core.pooling import diagnostics as core_pooling
from workbench.core.pooling.fusion import (
    RunsLike,
    encode,
    fuse_coded,
    rank_within,
    stack_coded,
    unique_inverse,
)
from workbench.core.pooling.diagnostics import (
    MetricFn,
    PoolingError,
    _as_dicts,
    _call_metric,
    _isin,
    _judged,
    _overlap_frame,
    _p_at_k,
    _pair_codes,
    _per_query_share,
    _top_k,
)


def _runs_of(runs):
    """A :class:`Pool` stands for its runs cut at pool depth (its provenance)."""
    return runs.provenance if isinstance(runs, Pool) else runs


def judged_at_k(runs, labels: pd.DataFrame, k: int = 10, *, id_col: str | None = None,
                per_query: bool = False) -> pd.DataFrame:
    """:func:`workbench.core.pooling.diagnostics.judged_at_k` that also takes a :class:`Pool`."""
    if isinstance(runs, Pool):
        id_col = runs.id_col
    return core_pooling.judged_at_k(_runs_of(runs), labels, k, id_col=id_col, per_query=per_query)


@dataclass(frozen=True)
class Pool:
    """A judgment pool (see module docstring for the two tables)."""

    pairs: pd.DataFrame
    provenance: pd.DataFrame
    id_col: str
    depths: Mapping[str, int]
    k: float = 60

    @property
    def run_ids(self) -> list[str]:
        return list(self.depths)


@dataclass(frozen=True)
class PoolUpdate:
    """Result of :func:`add_runs_to_pool`.

    ``new_pairs``: pairs not in the old pool, with ``priority`` re-ranked among the new
    pairs only (1 = judge first). ``provenance``: the full updated provenance table.
    ``pool``: the updated pool (old + new pairs, priorities recomputed over all runs).
    """

    new_pairs: pd.DataFrame
    provenance: pd.DataFrame
    pool: Pool


def _check_depth(depth: int) -> int:
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise PoolingError(f"pool depth must be a positive integer, got {depth!r}")
    return int(depth)


def _priority(fused: pd.DataFrame, col: str) -> pd.DataFrame:
    return fused.rename(columns={"rank": "priority"})[
        ["query_id", col, "priority", "score", "n_runs", "best_rank"]
    ]


def build_pool(
    runs: RunsLike, depth: int, *, k: float = 60, id_col: str | None = None
) -> Pool:
    """Depth-``depth`` pool of ``runs`` (mapping, list or long table; see fusion.stack_runs).

    ``pool(q) = ∪_r { d : rank_r(q, d) <= depth }``. ``k`` is the RRF constant of the
    judging priority.
    """
    depth = _check_depth(depth)
    coded = stack_coded(runs, id_col=id_col)
    names = list(pd.unique(coded.table["run_id"]))
    coded = coded.subset(coded.table["rank"].to_numpy() <= depth)
    pairs = _priority(fuse_coded(coded, k=k), coded.col)
    return Pool(
        pairs=pairs, provenance=coded.table, id_col=coded.col,
        depths={n: depth for n in names}, k=k,
    )


def _runs_per_row(prov: pd.DataFrame, col: str) -> np.ndarray:
    """For each provenance row, how many runs pooled the same pair."""
    (key,) = _pair_codes(col, prov)
    _, inv = unique_inverse(key)
    return np.bincount(inv)[inv]


def add_runs_to_pool(pool: Pool, new_runs: RunsLike, depth: int) -> PoolUpdate:
    """Add runs to a pool; return only the pairs they newly bring, plus updated provenance.

    New run names must differ from the pool's. Pairs already pooled are not returned even
    if a new run ranks them higher (their provenance rows are still added). The new pairs'
    ``priority`` is their fused RRF order among the new pairs of each query.
    """
    depth = _check_depth(depth)
    if not isinstance(pool, Pool):
        raise PoolingError(f"expected a Pool, got {type(pool).__name__}")
    stacked = stack_coded(new_runs, id_col=pool.id_col).table
    col = pool.id_col
    names = list(pd.unique(stacked["run_id"]))
    clash = [n for n in names if n in pool.depths]
    if clash:
        raise PoolingError(f"runs {clash} are already in the pool; give the new runs other names")
    added = stacked.loc[stacked["rank"] <= depth]
    provenance = pd.concat([pool.provenance, added], ignore_index=True)
    coded = encode(provenance, col)
    keys: list = []
    pairs = _priority(fuse_coded(coded, k=pool.k, pair_keys_out=keys), col)
    # Fast path: when the old provenance names exactly the old pairs, a pair is new iff none
    # of its provenance rows is old (integer keys, no string hashing). Otherwise compare
    # with the old pair table itself.
    old_keys, _ = unique_inverse((coded.q_c * max(len(coded.i_u), 1) + coded.i_c)[: len(pool.provenance)])
    if len(old_keys) == len(pool.pairs):
        pos = np.minimum(np.searchsorted(old_keys, keys[0]), max(len(old_keys) - 1, 0))
        is_new = (old_keys[pos] != keys[0]) if len(old_keys) else np.ones(len(pairs), bool)
    else:
        is_new = ~_isin(pairs, pool.pairs, col)
    new_pairs = pairs.loc[is_new].reset_index(drop=True)
    q_c, _ = pd.factorize(new_pairs["query_id"])
    # Existing priorities already encode the fused order; re-number them among new pairs.
    new_pairs["priority"] = rank_within(
        q_c.astype(np.int64), -new_pairs["priority"].to_numpy(dtype=np.float64)
    )
    depths = {**pool.depths, **{n: depth for n in names}}
    updated = Pool(pairs=pairs, provenance=provenance, id_col=col, depths=depths, k=pool.k)
    return PoolUpdate(new_pairs=new_pairs, provenance=provenance, pool=updated)


def judging_order(
    pool: Pool,
    budget: int | None = None,
    *,
    per_query: bool = False,
    exclude: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Pool pairs in the order to judge them, optionally cut to a budget.

    Pairs in ``exclude`` (e.g. existing labels; NULL grades count as not judged) are
    skipped and priorities re-numbered among the rest. Global order: ``priority`` asc, then
    query_id, then item id — a round robin that gives every query its best pair first.
    ``budget`` keeps the first ``budget`` pairs overall, or per query with ``per_query``.
    """
    col = pool.id_col
    pairs = pool.pairs
    if exclude is not None:
        done = _judged(exclude, col)
        pairs = pairs.loc[~_isin(pairs, done, col)]
    pairs = pairs.reset_index(drop=True)
    q_c, _ = pd.factorize(pairs["query_id"])
    pairs["priority"] = rank_within(q_c.astype(np.int64), -pairs["priority"].to_numpy(dtype=np.float64))
    pairs = pairs.sort_values(["priority", "query_id", col], kind="stable").reset_index(drop=True)
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 0:
            raise PoolingError(f"budget must be an integer >= 0, got {budget!r}")
        pairs = pairs.loc[pairs["priority"] <= budget] if per_query else pairs.head(int(budget))
    return pairs.reset_index(drop=True)


def pool_sizes(pool: Pool) -> pd.DataFrame:
    """``query_id, pool_size`` — number of distinct pooled pairs per query."""
    return (
        pool.pairs.groupby("query_id", sort=True).size().rename("pool_size").reset_index()
    )


def unique_contributions(pool: Pool) -> pd.DataFrame:
    """``run_id, pooled, unique``: pairs a run put in the pool, and those only it did."""
    prov = pool.provenance
    only = pd.Series(_runs_per_row(prov, pool.id_col) == 1)
    out = only.groupby(prov["run_id"].to_numpy(), sort=False).agg(["size", "sum"])
    out.columns = ["pooled", "unique"]
    out = out.reindex(pool.run_ids, fill_value=0).rename_axis("run_id").reset_index()
    return out.astype({"pooled": np.int64, "unique": np.int64})


def _membership(pool: Pool) -> tuple[np.ndarray, list[str]]:
    """Pair x run membership matrix (uint8) of the pool."""
    prov = pool.provenance
    names = pool.run_ids
    (keys,) = _pair_codes(pool.id_col, prov)
    pair_c, uniques = pd.factorize(keys)
    run_c = pd.Categorical(prov["run_id"], categories=names).codes
    m = np.zeros((len(uniques), len(names)), dtype=np.uint8)
    m[pair_c, run_c] = 1
    return m, names


def run_overlap(pool: Pool) -> pd.DataFrame:
    """Pairwise overlap of the runs' pooled pairs (all queries together).

    ``run_a, run_b, shared, union, jaccard`` for every unordered pair of runs, where
    ``shared = |A ∩ B|``, ``union = |A ∪ B|``, ``jaccard = shared / union`` (NaN if both
    are empty). Sets are the (query, item) pairs each run placed in the pool.
    """
    m, names = _membership(pool)
    r = len(names)
    inter = np.zeros((r, r), dtype=np.int64)
    block = 1 << 20  # float32 counts are exact below 2**24 rows per block
    for s in range(0, len(m), block):
        part = m[s : s + block].astype(np.float32)
        inter += np.rint(part.T @ part).astype(np.int64)
    return _overlap_frame(names, inter)


def precision_at_k(
    runs,
    labels: pd.DataFrame,
    k: int = 10,
    *,
    rel_threshold: float = 1,
    id_col: str | None = None,
    per_query: bool = False,
) -> pd.DataFrame:
    """P@k with unjudged items counted as not relevant.

    ``P@k(q) = |{d in top_k(q) : grade(q, d) >= rel_threshold}| / k``; per-run mean over the
    queries the run answered. Returns ``run_id, precision_at_k``.
    """
    top, col = _top_k(_runs_of(runs), k, pool_col(runs, id_col))
    lab = _judged(labels, col)
    rel = lab.loc[lab["grade"] >= rel_threshold]
    return _per_query_share(top, _isin(top, rel, col), k, per_query, "precision_at_k")


def leave_one_run_out(
    pool: Pool,
    labels: pd.DataFrame,
    *,
    k: int = 10,
    metric: MetricFn | None = None,
    rel_threshold: float = 1,
    runs: RunsLike | None = None,
) -> pd.DataFrame:
    """How much each run's score depends on the pairs only it brought into the pool.

    For every pooled run ``r`` let ``U_r`` be the pooled pairs no other run contributed.
    ``metric_with`` scores ``r`` against all labels; ``metric_without`` against the labels
    minus ``U_r`` — as if ``r`` had not been pooled, so its unique finds are unjudged.
    ``delta = metric_with - metric_without``; a large delta means runs outside the pool
    would be under-rated (pool bias).

    ``metric``: None -> P@k (grade >= ``rel_threshold``), computed vectorised. Otherwise a
    callable ``metric(qrels, run)`` with pytrec_eval-style dicts ``{query_id: {id: grade}}``
    and ``{query_id: {id: score}}`` (score = 1/rank) returning a float or a per-query
    mapping (averaged). ``runs``: full runs to score (default: the pool's runs cut at their
    pool depth, so choose ``k <= depth``). Returns ``run_id, unique_pairs, unique_judged,
    metric_with, metric_without, delta``.
    """
    col = pool.id_col
    lab = _judged(labels, col)
    prov = pool.provenance
    only = prov.loc[_runs_per_row(prov, col) == 1, ["run_id", "query_id", col]]
    top_all, _ = _top_k(pool.provenance if runs is None else runs, k, col)
    rows = []
    for run_id in pool.run_ids:  # loop over runs (a handful), not over pairs
        mine = only.loc[only["run_id"] == run_id]
        removed = _isin(lab, mine, col)
        lab_without = lab.loc[~removed]
        top = top_all.loc[top_all["run_id"] == run_id]
        if metric is None:
            with_ = _p_at_k(top, lab, col, k, rel_threshold)
            without = _p_at_k(top, lab_without, col, k, rel_threshold)
        else:
            with_ = _call_metric(metric, *_as_dicts(top, lab, col))
            without = _call_metric(metric, *_as_dicts(top, lab_without, col))
        rows.append(
            {
                "run_id": run_id,
                "unique_pairs": len(mine),
                "unique_judged": int(removed.sum()),
                "metric_with": with_,
                "metric_without": without,
                "delta": with_ - without,
            }
        )
    columns = ["run_id", "unique_pairs", "unique_judged", "metric_with", "metric_without", "delta"]
    return pd.DataFrame(rows, columns=columns)



def pool_col(runs, id_col: str | None) -> str | None:
    return runs.id_col if isinstance(runs, Pool) else id_col
