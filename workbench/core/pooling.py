"""Depth-k judgment pools with provenance, judging priority and pool diagnostics.

The depth-``k`` pool of a query is the union of the top ``k`` items of each chosen run,
de-duplicated (TREC pooling). Tables:

* ``Pool.provenance`` — long form ``run_id, query_id, <id>, rank``: which runs retrieved
  each pooled pair and at which rank (only ranks ``<= depth`` of that run).
* ``Pool.pairs`` — one row per pooled pair: ``query_id, <id>, priority, score, n_runs,
  best_rank``. ``score`` is the RRF score among the pooled runs (k = ``Pool.k``, equal
  weights) and ``priority`` its 1-based rank within the query (ties: item id ascending), so a
  judging budget takes the most promising pairs first (:func:`judging_order`).

``<id>`` is ``chunk_id`` or ``doc_id`` as in :mod:`workbench.core.fusion`. Labels are tidy
``query_id, <id>, grade`` tables; rows with a NULL grade are treated as unjudged.

Everything is vectorised with pandas/numpy; there is no Python loop over pairs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.core.fusion import (
    RunsLike,
    encode,
    fuse_coded,
    rank_within,
    stack_coded,
    unique_inverse,
)
from workbench.errors import InputError

__all__ = [
    "PoolingError",
    "Pool",
    "PoolUpdate",
    "build_pool",
    "add_runs_to_pool",
    "judging_order",
    "pool_sizes",
    "unique_contributions",
    "run_overlap",
    "judged_at_k",
    "precision_at_k",
    "leave_one_run_out",
    "pattern_stats",
    "leave_one_run_out_unique",
]


class PoolingError(InputError, ValueError):
    """Pooling inputs or parameters are invalid."""


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


def _pair_codes(col: str, *dfs: pd.DataFrame) -> list[np.ndarray]:
    """Joint int64 codes of the (query_id, <col>) pairs of several tables (equal pair =
    equal code across tables). Faster than MultiIndex look-ups on millions of rows."""
    lengths = np.cumsum([len(d) for d in dfs])[:-1]
    q = pd.concat([d["query_id"].astype("str") for d in dfs], ignore_index=True)
    i = pd.concat([d[col].astype("str") for d in dfs], ignore_index=True)
    q_c, _ = pd.factorize(q)
    i_c, i_u = pd.factorize(i)
    key = q_c.astype(np.int64) * max(len(i_u), 1) + i_c
    return np.split(key, lengths)


def _isin(a: pd.DataFrame, b: pd.DataFrame, col: str) -> np.ndarray:
    """Row mask of ``a``: its (query_id, <col>) pair occurs in ``b``."""
    ka, kb = _pair_codes(col, a, b)
    return pd.Series(ka).isin(kb).to_numpy()


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


def _judged(labels: pd.DataFrame, col: str) -> pd.DataFrame:
    """Labelled pairs (non-NULL grade) as ``query_id, <col>, grade`` with string ids."""
    if not isinstance(labels, pd.DataFrame):
        raise PoolingError(f"labels must be a DataFrame, got {type(labels).__name__}")
    missing = [c for c in ("query_id", col, "grade") if c not in labels.columns]
    if missing:
        raise PoolingError(f"labels lack columns {missing}; they have {list(labels.columns)}")
    lab = labels.loc[labels["grade"].notna(), ["query_id", col, "grade"]]
    lab = lab.astype({"query_id": str, col: str})
    grade = pd.to_numeric(lab["grade"], errors="coerce")
    if grade.isna().any():
        raise PoolingError("labels.grade must be numeric (NULL for unjudged)")
    # A pair labelled twice counts once, with its highest grade.
    return (
        lab.assign(grade=grade)
        .groupby(["query_id", col], as_index=False, sort=False)["grade"]
        .max()
    )


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


def _overlap_frame(names: list[str], inter: np.ndarray) -> pd.DataFrame:
    """:func:`run_overlap`'s table from the run x run matrix of shared pair counts."""
    r = len(names)
    sizes = np.diag(inter)
    a, b = np.triu_indices(r, k=1)
    shared = inter[a, b]
    union = sizes[a] + sizes[b] - shared
    with np.errstate(invalid="ignore", divide="ignore"):
        jac = np.where(union > 0, shared / np.where(union > 0, union, 1), np.nan)
    return pd.DataFrame(
        {
            "run_a": [names[i] for i in a],
            "run_b": [names[i] for i in b],
            "shared": shared,
            "union": union,
            "jaccard": jac,
        }
    )


def _top_k(runs: RunsLike | Pool, k: int, id_col: str | None) -> tuple[pd.DataFrame, str]:
    """Each run's top ``k`` per query as ``run_id, query_id, <id>, position`` (1..k)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise PoolingError(f"cutoff k must be a positive integer, got {k!r}")
    if isinstance(runs, Pool):
        coded = encode(runs.provenance, runs.id_col)
    else:
        coded = stack_coded(runs, id_col=id_col)
    stacked = coded.table
    # Ranks may tie; position breaks ties by item id so exactly k items count at cutoff k.
    group = coded.run_c * max(len(coded.q_u), 1) + coded.q_c
    pos = _positions(group, stacked["rank"].to_numpy(dtype=np.int64), coded.i_c, max(len(coded.i_u), 1))
    keep = pos <= k
    top = stacked.loc[keep].assign(position=pos[keep])
    return top.reset_index(drop=True), coded.col


def _positions(group: np.ndarray, rank: np.ndarray, item: np.ndarray, n_items: int) -> np.ndarray:
    """1-based position inside each group by (rank, item id): ``rank_within`` for integer
    ranks, with one argsort of a combined int64 key when it cannot overflow."""
    if len(group) == 0:
        return np.empty(0, dtype=np.int64)
    max_rank = int(rank.max()) + 1
    if (int(group.max()) + 1) * max_rank * n_items >= 2**62:
        return rank_within(group, -rank.astype(np.float64), item)
    key = (group * max_rank + rank) * n_items + item  # unique: one row per (run, query, item)
    order = np.argsort(key)
    g = group[order]
    new = np.ones(len(g), dtype=bool)
    new[1:] = g[1:] != g[:-1]
    first = np.flatnonzero(new)
    pos = np.empty(len(g), dtype=np.int64)
    pos[order] = np.arange(len(g)) - np.repeat(first, np.diff(np.r_[first, len(g)])) + 1
    return pos


def _per_query_share(top: pd.DataFrame, flag: np.ndarray, k: int, per_query: bool, name: str):
    per_q = (
        top.assign(_f=flag)
        .groupby(["run_id", "query_id"], sort=False)["_f"]
        .sum()
        .div(k)
        .rename(name)
        .reset_index()
    )
    if per_query:
        return per_q
    order = list(pd.unique(top["run_id"]))
    out = per_q.groupby("run_id", sort=False)[name].mean().reindex(order)
    return out.rename_axis("run_id").reset_index()


def judged_at_k(
    runs: RunsLike | Pool,
    labels: pd.DataFrame,
    k: int = 10,
    *,
    id_col: str | None = None,
    per_query: bool = False,
) -> pd.DataFrame:
    """judged@k: share of each run's top ``k`` that carries a label (any grade, 0 included).

    ``judged@k(q) = |{d in top_k(q) : d labelled for q}| / k`` — divided by ``k`` even when
    the run returned fewer items (as trec_eval does). The per-run value is the mean over the
    queries the run answered. Returns ``run_id, judged_at_k`` (plus ``query_id`` with
    ``per_query=True``). ``runs`` may be a :class:`Pool` (its runs cut at pool depth).
    """
    top, col = _top_k(runs, k, id_col)
    lab = _judged(labels, col)
    return _per_query_share(top, _isin(top, lab, col), k, per_query, "judged_at_k")


def precision_at_k(
    runs: RunsLike | Pool,
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
    top, col = _top_k(runs, k, id_col)
    lab = _judged(labels, col)
    rel = lab.loc[lab["grade"] >= rel_threshold]
    return _per_query_share(top, _isin(top, rel, col), k, per_query, "precision_at_k")


MetricFn = Callable[[dict, dict], "float | Mapping[str, float]"]


def _as_dicts(top: pd.DataFrame, lab: pd.DataFrame, col: str) -> tuple[dict, dict]:
    """``qrels {q: {id: grade}}`` and ``run {q: {id: score}}`` with score = 1 / rank."""
    qrels = {
        q: dict(zip(g[col], g["grade"].astype(int)))
        for q, g in lab.groupby("query_id", sort=False)
    }
    run = {
        q: dict(zip(g[col], 1.0 / g["rank"].to_numpy(dtype=np.float64)))
        for q, g in top.groupby("query_id", sort=False)
    }
    return qrels, run


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
    top_all, _ = _top_k(pool if runs is None else runs, k, col)
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


def _p_at_k(top: pd.DataFrame, lab: pd.DataFrame, col: str, k: int, thr: float) -> float:
    if top.empty:
        return float("nan")
    rel = lab.loc[lab["grade"] >= thr]
    flag = _isin(top, rel, col)
    return float(pd.Series(flag).groupby(top["query_id"].to_numpy()).sum().div(k).mean())


def _call_metric(metric: MetricFn, qrels: dict, run: dict) -> float:
    value = metric(qrels, run)
    if isinstance(value, Mapping):
        vals = list(value.values())
        return float(np.mean(vals)) if vals else float("nan")
    return float(value)


def pattern_stats(
    run_ids: list[str], per_run: np.ndarray, rows: np.ndarray, pairs: np.ndarray
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`unique_contributions` and :func:`run_overlap` from provenance patterns.

    A pattern is one distinct row of a pair's provenance counts: ``per_run[h, j]`` is how many
    provenance rows run ``run_ids[j]`` has for each pair of pattern ``h``, ``rows[h]`` how many
    provenance rows such a pair has in all, and ``pairs[h]`` how many pairs share the pattern.
    A pool of millions of pairs has at most ``2 ** len(run_ids)`` patterns (usually far fewer),
    so a database can count them and this stays tiny. Returns ``(contributions, overlap)``
    equal to ``unique_contributions(pool)`` and ``run_overlap(pool)``.
    """
    names = list(run_ids)
    per_run = np.asarray(per_run, dtype=np.int64).reshape(-1, len(names))
    rows = np.asarray(rows, dtype=np.int64)
    pairs = np.asarray(pairs, dtype=np.int64)
    pooled = (per_run * pairs[:, None]).sum(axis=0)
    unique = ((per_run == 1) & (rows == 1)[:, None]).astype(np.int64) * pairs[:, None]
    contributions = pd.DataFrame(
        {"run_id": names, "pooled": pooled.astype(np.int64), "unique": unique.sum(axis=0).astype(np.int64)}
    )
    member = (per_run > 0).astype(np.int64)
    inter = (member * pairs[:, None]).T @ member
    return contributions, _overlap_frame(names, inter)


def leave_one_run_out_unique(
    run_ids: list[str],
    unique_pairs: Mapping[str, int],
    unique: pd.DataFrame,
    labels: pd.DataFrame,
    *,
    runs: RunsLike,
    id_col: str,
    k: int = 10,
    metric: MetricFn | None = None,
    rel_threshold: float = 1,
) -> pd.DataFrame:
    """:func:`leave_one_run_out` without the pool's provenance table.

    ``unique_pairs`` maps each run to the number of pooled pairs only it contributed (``U_r``);
    ``unique`` lists such pairs as ``run_id, query_id, <id_col>`` — at least every one that is
    labelled (the others cannot change a score, so a caller may leave them out). ``runs`` are
    the runs to score, as in :func:`leave_one_run_out`. Same result table and formulas.
    """
    col = id_col
    lab = _judged(labels, col)
    top_all, _ = _top_k(runs, k, col)
    rows = []
    for run_id in run_ids:  # loop over runs (a handful), not over pairs
        mine = unique.loc[unique["run_id"] == run_id]
        removed = _isin(lab, mine, col) if len(mine) else np.zeros(len(lab), dtype=bool)
        lab_without = lab.loc[~removed]
        top = top_all.loc[top_all["run_id"] == run_id]
        if metric is None:
            with_ = _p_at_k(top, lab, col, k, rel_threshold)
            without = with_ if not removed.any() else _p_at_k(top, lab_without, col, k, rel_threshold)
        else:
            with_ = _call_metric(metric, *_as_dicts(top, lab, col))
            without = _call_metric(metric, *_as_dicts(top, lab_without, col))
        rows.append(
            {
                "run_id": run_id,
                "unique_pairs": int(unique_pairs.get(run_id, 0)),
                "unique_judged": int(removed.sum()),
                "metric_with": with_,
                "metric_without": without,
                "delta": with_ - without,
            }
        )
    columns = ["run_id", "unique_pairs", "unique_judged", "metric_with", "metric_without", "delta"]
    return pd.DataFrame(rows, columns=columns)
