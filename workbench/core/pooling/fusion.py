"""Reciprocal rank fusion (RRF) of ranked runs, plus the run normaliser pooling shares.

A *run* is a tidy table ``query_id, <item id>, rank`` or ``query_id, <item id>, score``; the
item id column is ``chunk_id`` or ``doc_id`` (or any name passed as ``id_col``). Several runs
are given as a mapping ``{run_id: DataFrame}``, a list of DataFrames (named ``run0``,
``run1``, ...) or one long DataFrame with a ``run_id`` column.

RRF (Cormack, Clarke & Büttcher, 2009)::

    score(q, d) = Σ_r  w_r / (k + rank_r(q, d))     over runs r that retrieved d for q

with ``k = 60`` by default and ``w_r = 1`` unless weights are given. A run that did not
retrieve ``d`` contributes nothing (not a penalty). Output ranks are 1-based per query,
ordered by score descending, ties broken by item id ascending (string order); scores equal
to 12 decimal places count as ties, so the order does not depend on float summation order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Union

import numpy as np
import pandas as pd

from workbench.errors import InputError

__all__ = [
    "FusionError", "RunsLike", "Coded", "encode", "detect_id_col", "stack_runs", "stack_coded",
    "rank_within", "rrf", "fuse_stacked", "fuse_coded", "fuse_wide", "unique_inverse",
    "check_run_summary", "duplicate_pair_error",
]


class FusionError(InputError, ValueError):
    """Runs or fusion parameters are malformed."""


RunsLike = Union[Mapping[str, pd.DataFrame], Sequence[pd.DataFrame], pd.DataFrame]

_ID_CANDIDATES = ("chunk_id", "doc_id", "item_id")
_TIE_DECIMALS = 12


def detect_id_col(columns: Sequence[str], id_col: str | None = None) -> str:
    """The item id column: ``id_col`` if given, else the one of chunk_id/doc_id/item_id present."""
    if id_col is not None:
        if id_col not in columns:
            raise FusionError(f"run lacks the item id column {id_col!r}; it has {list(columns)}")
        return id_col
    found = [c for c in _ID_CANDIDATES if c in columns]
    if len(found) != 1:
        raise FusionError(
            f"cannot tell the item id column from {list(columns)}: expected exactly one of "
            f"{list(_ID_CANDIDATES)}; pass id_col=..."
        )
    return found[0]


def rank_within(group: np.ndarray, score: np.ndarray, item: np.ndarray | None = None) -> np.ndarray:
    """1-based rank inside each group by ``score`` desc then ``item`` asc (deterministic).

    ``group`` and ``item`` are integer codes (``item`` codes must follow string order, e.g.
    from ``pd.factorize(..., sort=True)``); ``item=None`` means the rows are already in
    tie-break order (the sort is stable). Scores are rounded to 12 decimals for ordering.
    Returns ranks aligned with the input rows. Vectorised: one lexsort.
    """
    n = len(group)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    key = -np.round(np.asarray(score, dtype=np.float64), _TIE_DECIMALS)
    order = np.lexsort((key, group) if item is None else (item, key, group))
    return _ranks_in_sorted_groups(group, order)



def _ranks_in_sorted_groups(group: np.ndarray, order: np.ndarray) -> np.ndarray:
    """1-based position of each row within its group, given ``order`` that sorts rows by group
    and then by the ranking key; returned in the rows' original order."""
    n = len(order)
    g = group[order]
    new = np.ones(n, dtype=bool)
    new[1:] = g[1:] != g[:-1]
    first = np.flatnonzero(new)
    pos = np.arange(n, dtype=np.int64) - np.repeat(first, np.diff(np.r_[first, n]))
    ranks = np.empty(n, dtype=np.int64)
    ranks[order] = pos + 1
    return ranks

def unique_inverse(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique values of an int array and the inverse index (like ``np.unique``).

    Sort-based on purpose: numpy 2's hash-based ``np.unique`` is several times slower on
    millions of distinct int64 keys.
    """
    n = len(key)
    if n == 0:
        return key[:0], np.empty(0, dtype=np.int64)
    order = np.argsort(key, kind="stable")
    sk = key[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    new[1:] = sk[1:] != sk[:-1]
    inv = np.empty(n, dtype=np.int64)
    inv[order] = np.cumsum(new) - 1
    return sk[new], inv


@dataclass
class Coded:
    """A stacked runs table with integer codes for its run, query and item columns.

    ``q_u`` / ``i_u`` are the sorted unique ids, so code order is string order. Internal to
    fusion and pooling: it lets them factorize millions of string ids once.
    """

    table: pd.DataFrame
    col: str
    run_c: np.ndarray
    q_c: np.ndarray
    i_c: np.ndarray
    q_u: pd.Index
    i_u: pd.Index

    def subset(self, mask: np.ndarray) -> "Coded":
        return Coded(
            self.table.loc[mask].reset_index(drop=True), self.col,
            self.run_c[mask], self.q_c[mask], self.i_c[mask], self.q_u, self.i_u,
        )


def encode(table: pd.DataFrame, col: str) -> Coded:
    """Integer-code a ``run_id, query_id, <col>, rank`` table (ids as strings)."""
    run_c, _ = pd.factorize(table["run_id"])
    q_c, q_u = pd.factorize(table["query_id"], sort=True)
    i_c, i_u = pd.factorize(table[col], sort=True)
    return Coded(
        table, col, run_c.astype(np.int64, copy=False), q_c.astype(np.int64, copy=False),
        i_c.astype(np.int64, copy=False),
        pd.Index(q_u, dtype="str"), pd.Index(i_u, dtype="str"),
    )


def _named_runs(runs: RunsLike) -> list[tuple[str, pd.DataFrame]]:
    if isinstance(runs, pd.DataFrame):
        if "run_id" not in runs.columns:
            raise FusionError(
                "a single runs table needs a run_id column; or pass {run_id: DataFrame}"
            )
        names = pd.unique(runs["run_id"].astype(str))
        rid = runs["run_id"].astype(str)
        return [(n, runs.loc[rid == n].drop(columns="run_id")) for n in names]
    if isinstance(runs, Mapping):
        items = [(str(k), v) for k, v in runs.items()]
    elif isinstance(runs, Sequence) and not isinstance(runs, str):
        items = [(f"run{i}", v) for i, v in enumerate(runs)]
    else:
        raise FusionError(
            f"runs must be a mapping, a list of DataFrames or a DataFrame, got {type(runs).__name__}"
        )
    for name, df in items:
        if not isinstance(df, pd.DataFrame):
            raise FusionError(f"run {name!r} is a {type(df).__name__}, expected a DataFrame")
    return items


def stack_runs(runs: RunsLike, *, id_col: str | None = None) -> tuple[pd.DataFrame, str]:
    """Validate runs and stack them as ``run_id, query_id, <id_col>, rank``.

    ``rank`` is taken from a ``rank`` column when present (integers >= 1; ties allowed), else
    derived from ``score`` (descending, ties by item id ascending). Ids become strings. A
    (query, item) pair listed twice in one run is an error. Returns ``(table, id_col)``.
    """
    coded = stack_coded(runs, id_col=id_col)
    return coded.table, coded.col


def stack_coded(runs: RunsLike, *, id_col: str | None = None) -> Coded:
    """:func:`stack_runs` returning the integer-coded form (see :class:`Coded`)."""
    items = _named_runs(runs)
    if not items:
        raise FusionError("no runs given")
    names = [n for n, _ in items]
    if len(set(names)) != len(names):
        raise FusionError(f"run names must be unique, got {names}")
    col = None
    parts = []
    for name, df in items:
        c = detect_id_col(list(df.columns), id_col if id_col is not None else col)
        if col is None:
            col = c
        if "query_id" not in df.columns:
            raise FusionError(f"run {name!r} lacks a query_id column; it has {list(df.columns)}")
        has_rank = "rank" in df.columns
        if not has_rank and "score" not in df.columns:
            raise FusionError(f"run {name!r} needs a rank or a score column")
        value = df["rank"] if has_rank else df["score"]
        if value.isna().any() or df["query_id"].isna().any() or df[col].isna().any():
            raise FusionError(f"run {name!r} has missing query_id, {col} or {value.name} values")
        value = pd.to_numeric(value, errors="coerce")
        if value.isna().any() or not np.isfinite(value.to_numpy(dtype=np.float64)).all():
            raise FusionError(f"run {name!r}: {'rank' if has_rank else 'score'} must be finite numbers")
        if has_rank:
            r = value.to_numpy(dtype=np.float64)
            if (r < 1).any() or (r != np.floor(r)).any():
                raise FusionError(f"run {name!r}: ranks must be integers >= 1 (1 = best)")
        # Keep ids as pandas string arrays: round trips through numpy object arrays are
        # the slowest part of stacking millions of rows.
        parts.append(
            pd.DataFrame(
                {
                    "run_id": pd.array([name] * len(df), dtype="str"),
                    "query_id": df["query_id"].astype("str").reset_index(drop=True),
                    col: df[col].astype("str").reset_index(drop=True),
                    "_rank": value.to_numpy(dtype=np.float64) if has_rank else np.nan,
                    "_score": np.nan if has_rank else value.to_numpy(dtype=np.float64),
                }
            )
        )
    stacked = pd.concat(parts, ignore_index=True)
    if col is None:  # never: the first run sets it
        raise FusionError("no runs given")
    coded = encode(stacked, col)
    n_q, n_i = len(coded.q_u), max(len(coded.i_u), 1)
    pair = (coded.run_c * n_q + coded.q_c) * n_i + coded.i_c
    srt = np.sort(pair)
    dup = np.flatnonzero(srt[1:] == srt[:-1])
    if dup.size:
        row = stacked.iloc[int(np.flatnonzero(pair == srt[dup[0]])[1])]
        raise FusionError(
            f"run {row['run_id']!r} lists query {row['query_id']!r} / {col} {row[col]!r} twice; "
            "keep one row per pair"
        )
    rank = stacked["_rank"].to_numpy()
    need = np.isnan(rank)
    if need.any():
        group = coded.run_c[need] * n_q + coded.q_c[need]
        rank = rank.copy()
        rank[need] = rank_within(group, stacked["_score"].to_numpy()[need], coded.i_c[need])
    stacked["rank"] = rank.astype(np.int64)
    coded.table = stacked[["run_id", "query_id", col, "rank"]]
    return coded


def _weights(names: list[str], weights) -> np.ndarray:
    if weights is None:
        return np.ones(len(names))
    if isinstance(weights, Mapping):
        missing = [n for n in names if n not in weights]
        extra = [k for k in weights if k not in names]
        if missing or extra:
            raise FusionError(
                f"weights must name exactly the runs {names}; missing {missing}, unknown {extra}"
            )
        w = np.array([float(weights[n]) for n in names])
    else:
        w = np.asarray(list(weights), dtype=np.float64)
        if len(w) != len(names):
            raise FusionError(f"got {len(w)} weights for {len(names)} runs {names}")
    if not np.isfinite(w).all() or (w < 0).any():
        raise FusionError(f"weights must be finite and >= 0, got {w.tolist()}")
    return w


def rrf(
    runs: RunsLike,
    *,
    k: float = 60,
    weights: Mapping[str, float] | Sequence[float] | None = None,
    depth: int | None = None,
    id_col: str | None = None,
) -> pd.DataFrame:
    """Fuse runs with reciprocal rank fusion (formula and tie rule in the module docstring).

    ``depth`` keeps only ranks ``<= depth`` of every run before fusing (None: all). Returns
    ``query_id, <id_col>, score, rank`` sorted by query_id, rank.
    """
    if isinstance(k, bool) or not isinstance(k, (int, float, np.number)) or not np.isfinite(k) or k < 0:
        raise FusionError(f"RRF k must be a finite number >= 0, got {k!r}")
    if depth is not None:
        if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
            raise FusionError(f"depth must be a positive integer or None, got {depth!r}")
    coded = stack_coded(runs, id_col=id_col)
    names = list(pd.unique(coded.table["run_id"]))
    w = _weights(names, weights)
    if depth is not None:
        coded = coded.subset(coded.table["rank"].to_numpy() <= depth)
    fused = fuse_coded(coded, k=k, weights=dict(zip(names, w)))
    return fused[["query_id", coded.col, "score", "rank"]]


def fuse_stacked(
    stacked: pd.DataFrame,
    col: str,
    *,
    k: float = 60,
    weights: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """RRF over an already validated ``run_id, query_id, <col>, rank`` table (no checks).

    Returns ``query_id, <col>, score, rank, n_runs, best_rank`` sorted by query_id, rank,
    where ``n_runs`` counts the runs that retrieved the pair and ``best_rank`` is its best
    rank in any of them. Used by :func:`rrf` and by pooling.
    """
    return fuse_coded(encode(stacked, col), k=k, weights=weights)


def fuse_coded(
    coded: Coded,
    *,
    k: float = 60,
    weights: Mapping[str, float] | None = None,
    pair_keys_out: list | None = None,
) -> pd.DataFrame:
    """:func:`fuse_stacked` on an integer-coded table.

    If ``pair_keys_out`` is a list, the int64 pair keys ``q_code * n_items + item_code`` of
    the output rows are appended to it (callers use them for fast set operations).
    """
    t = coded.table
    if weights is None:
        w_row = np.ones(len(t))
    else:
        names = list(weights)
        codes = pd.Categorical(t["run_id"], categories=names).codes
        w_row = np.array([weights[n] for n in names], dtype=np.float64)[codes]
    ranks = t["rank"].to_numpy(dtype=np.int64)
    contrib = w_row / (k + ranks.astype(np.float64))
    n_i = max(len(coded.i_u), 1)
    key = coded.q_c * n_i + coded.i_c
    uniq, inv = unique_inverse(key)
    score = np.bincount(inv, weights=contrib, minlength=len(uniq))
    n_runs = np.bincount(inv, minlength=len(uniq)).astype(np.int64)
    best = np.full(len(uniq), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(best, inv, ranks)
    uq, ui = uniq // n_i, uniq % n_i
    # uniq is sorted by (query, item), so a stable sort by (query, -score) breaks ties by item.
    rank = rank_within(uq, score, None)
    order = np.lexsort((rank, uq))
    if pair_keys_out is not None:
        pair_keys_out.append(uniq[order])
    return pd.DataFrame(
        {
            "query_id": coded.q_u.take(uq[order]).array,
            coded.col: coded.i_u.take(ui[order]).array,
            "score": score[order],
            "rank": rank[order],
            "n_runs": n_runs[order],
            "best_rank": best[order],
        }
    )


def fuse_wide(
    group: np.ndarray,
    ranks: Sequence[np.ndarray],
    *,
    k: float = 60,
    weights: Sequence[float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """RRF of pairs given in wide form: ``(score, rank)`` per row, rank 1-based within group.

    One row per (query, item) pair; ``group`` is the query's integer code and the rows are
    sorted by query and then item id ascending (string order), so ties (scores equal to 12
    decimals) keep row order, as in :func:`fuse_coded`. ``ranks`` holds one integer array per
    run: the pair's rank in that run, 0 where the run did not retrieve it. Scores are summed
    run by run in the order given; when that is the order in which :func:`fuse_coded` meets
    the runs' rows (its table's run order), the scores are bit-identical to its scores.
    Vectorised: a loop over runs, never over pairs.
    """
    group = np.asarray(group, dtype=np.int64)
    score = np.zeros(len(group), dtype=np.float64)
    for j, r in enumerate(ranks):
        r = np.asarray(r, dtype=np.int64)
        if len(r) != len(group):
            raise FusionError(f"run column {j} has {len(r)} ranks for {len(group)} pairs")
        if not len(r):
            continue
        if r.min() < 0:
            raise FusionError(f"run column {j} has negative ranks; use 0 for 'not retrieved'")
        w = 1.0 if weights is None else float(weights[j])
        # Ranks are small integers: look the contribution w / (k + rank) up in a table
        # (the same float operations as fuse_coded, so the same bits); rank 0 adds 0.0.
        table = np.zeros(int(r.max()) + 1, dtype=np.float64)
        table[1:] = w / (k + np.arange(1, len(table), dtype=np.int64).astype(np.float64))
        score += table[r]
    return score, _rank_by_score(group, score)


def _rank_by_score(group: np.ndarray, score: np.ndarray) -> np.ndarray:
    """``rank_within(group, score, None)`` with one argsort of an int64 key where exact.

    ``np.round(s, 12)`` is ``rint(s * 1e12) / 1e12``; for ``|s| < 1`` the division keeps the
    order and the ties of the integers ``rint(s * 1e12)``, so those integers order the rows
    exactly as rank_within's rounded scores do.
    """
    n = len(group)
    if n == 0:
        return np.empty(0, dtype=np.int64)
    if not (np.isfinite(score).all() and np.abs(score).max() < 1.0 and group.min() >= 0):
        return rank_within(group, score, None)
    m = np.rint(score * 1e12).astype(np.int64)
    lo, hi = int(m.min()), int(m.max())
    span = hi - lo + 1
    if (int(group.max()) + 1) * span >= 2**62:
        return rank_within(group, score, None)
    order = np.argsort(group * span + (hi - m), kind="stable")
    return _ranks_in_sorted_groups(group, order)


def check_run_summary(names: Sequence[str], missing: Sequence[int], min_rank: Sequence[float],
                      col: str) -> None:
    """Raise :func:`stack_coded`'s error for the first run (in ``names`` order) with rows that
    lack an id (``missing`` > 0) or ranks below 1 (``min_rank`` < 1)."""
    for name, miss, low in zip(names, missing, min_rank):
        if miss:
            raise FusionError(f"run {name!r} has missing query_id, {col} or rank values")
        if low is not None and not pd.isna(low) and low < 1:
            raise FusionError(f"run {name!r}: ranks must be integers >= 1 (1 = best)")


def duplicate_pair_error(run: str, query_id: str, item: str, col: str) -> FusionError:
    """The error :func:`stack_coded` raises when a run lists a (query, item) pair twice."""
    return FusionError(
        f"run {run!r} lists query {query_id!r} / {col} {item!r} twice; keep one row per pair"
    )
