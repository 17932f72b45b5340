"""Pool diagnostics the pool service computes from what DuckDB aggregates.

A depth-``k`` pool of a query is the union of the top ``k`` items of each chosen run,
de-duplicated (TREC pooling); :mod:`workbench.services.pooling.pools` builds and extends pools inside
the database. What stays here is pure arithmetic on small inputs:

* :func:`pattern_stats` — each run's pooled and unique pairs, and the run x run overlap, from
  the pool's provenance *patterns* (at most ``2 ** runs`` rows, counted by the database);
* :func:`judged_at_k` — the share of each run's top ``k`` that is labelled;
* :func:`leave_one_run_out_unique` — how much each run's score depends on the pairs only it
  brought into the pool.

``<id>`` is ``chunk_id`` or ``doc_id`` as in :mod:`workbench.core.pooling.fusion`. Labels are tidy
``query_id, <id>, grade`` tables; rows with a NULL grade are treated as unjudged. The pandas
reference implementation of whole pools (used only to check the service) lives in
``tests/support/reference_pooling.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from workbench.core.pooling.fusion import (
    RunsLike,
    rank_within,
    stack_coded,
)
from workbench.errors import InputError

__all__ = [
    "PoolingError",
    "judged_at_k",
    "leave_one_run_out_unique",
    "pattern_stats",
]


class PoolingError(InputError, ValueError):
    """Pooling inputs or parameters are invalid."""


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


def _overlap_frame(names: list[str], inter: np.ndarray) -> pd.DataFrame:
    """The overlap table from the run x run matrix of shared pair counts."""
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


def _top_k(runs: RunsLike, k: int, id_col: str | None) -> tuple[pd.DataFrame, str]:
    """Each run's top ``k`` per query as ``run_id, query_id, <id>, position`` (1..k)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise PoolingError(f"cutoff k must be a positive integer, got {k!r}")
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
    runs: RunsLike,
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
    ``per_query=True``).
    """
    top, col = _top_k(runs, k, id_col)
    lab = _judged(labels, col)
    return _per_query_share(top, _isin(top, lab, col), k, per_query, "judged_at_k")


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
    """Each run's pooled and unique pairs, and the run x run overlap, from provenance patterns.

    A pattern is one distinct row of a pair's provenance counts: ``per_run[h, j]`` is how many
    provenance rows run ``run_ids[j]`` has for each pair of pattern ``h``, ``rows[h]`` how many
    provenance rows such a pair has in all, and ``pairs[h]`` how many pairs share the pattern.
    A pool of millions of pairs has at most ``2 ** len(run_ids)`` patterns (usually far fewer),
    so a database can count them and this stays tiny. Returns ``(contributions, overlap)``
    ``contributions`` is ``run_id, pooled, unique`` (pairs a run put in the pool, and those only
    it did); ``overlap`` is ``run_a, run_b, shared, union, jaccard`` for every unordered pair of
    runs (``jaccard = shared / union``, NaN if both are empty).
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
    """How much each run's score depends on the pairs only it brought into the pool.

    For every pooled run ``r`` let ``U_r`` be the pooled pairs no other run contributed.
    ``metric_with`` scores ``r`` against all labels; ``metric_without`` against the labels
    minus ``U_r`` — as if ``r`` had not been pooled, so its unique finds are unjudged.
    ``delta = metric_with - metric_without``; a large delta means runs outside the pool
    would be under-rated (pool bias).

    ``unique_pairs`` maps each run to the number of pooled pairs only it contributed (``U_r``);
    ``unique`` lists such pairs as ``run_id, query_id, <id_col>`` — at least every one that is
    labelled (the others cannot change a score, so a caller may leave them out). ``runs`` are
    the runs to score. ``metric``: None -> P@k (grade >= ``rel_threshold``), computed vectorised;
    otherwise ``metric(qrels, run)`` with pytrec_eval-style dicts ``{query_id: {id: grade}}`` and
    ``{query_id: {id: score}}`` (score = 1/rank) returning a float or a per-query mapping
    (averaged). Returns ``run_id, unique_pairs, unique_judged, metric_with, metric_without,
    delta``.
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
