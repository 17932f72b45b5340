"""Budgeted judging: which pool pairs to judge first when labels are paid for.

Inputs
    ``pairs``: the pool, one row per ``(query_id, item_id)`` with ``priority`` (the pool's fused
    rank within the query, 1 = judge first) and, per compared run, the pair's rank in that run
    (``rank:<run>`` columns, 0 or NaN when the run did not retrieve it within the pool depth).
    Optional ``spread``: how much judges disagree on the pair (grade range of an ensemble or of
    several judges, 0-3).

Strategies (:func:`order_pairs`); every ordering breaks ties by (priority, query_id, item_id)
    ``priority``      the pool's own order: every query's first pair, then every second pair...
                      (the order ``workbench judge --limit`` uses).
    ``comparison``    pairs that can change a run comparison first. With the nDCG discount
                      ``d_r = 1 / log2(1 + rank_r)`` for a run that ranks the pair within ``k``
                      (else 0), the weight is ``sum over run pairs a < b of |d_a - d_b|``: a
                      pair every run ranks alike moves no difference between runs, one that a
                      single run ranks first moves every difference that run takes part in.
    ``disagreement``  pairs whose judges disagree most first (``spread``), where a human label
                      is worth most; pairs without a spread come after, in priority order.
    ``combined``      (default) ``mean_r d_r + comparison / C(R, 2) + spread / 3``: how much the
                      pair weighs in the runs' scores, in their differences, and how unsure the
                      judges are, each on a 0-1 scale.
    ``random``        a seeded shuffle: the baseline every strategy must beat.

Budget (:func:`select_within_budget`)
    Pairs are taken in order while the running cost stays within the budget; each pair's cost
    is in the budget's unit (1 per judge call, dollars from the judge's estimate, or SME
    seconds), so a pair that does not fit is skipped and a cheaper later one may still fit.

Expected effect on the intervals (:func:`interval_effect`)
    For P@k at a binary threshold, a query whose top k holds ``u`` unjudged pairs has a
    precision known only within ``[judged relevant / k, (judged relevant + u) / k]``: the
    interval from missing labels, width ``u / k``, averaged over queries. Treating each
    unjudged pair as relevant with the pool's observed rate ``p`` (the judged share relevant),
    the mean P@k carries a label variance ``sum_q u_q p (1 - p) / (k^2 Q^2)``; its 95%
    half-width ``1.96 sqrt(.)`` is what the budget removes. Both are reported before and after
    judging the selected pairs, per run.

Ranking agreement
    Kendall's tau-b between two score vectors over the same systems
    (:func:`workbench.core.calibration.rank_correlation.kendall_tau_b`, the one τ-b of the
    package; NaN when either vector is constant).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
import pandas as pd

from workbench.core.calibration.rank_correlation import kendall_tau_b
from workbench.errors import InputError

STRATEGIES = ("combined", "priority", "comparison", "disagreement", "random")
RANK_PREFIX = "rank:"


def run_columns(pairs: pd.DataFrame) -> list[str]:
    return [c for c in pairs.columns if c.startswith(RANK_PREFIX)]


def discounts(pairs: pd.DataFrame, k: int) -> np.ndarray:
    """``pairs x runs`` matrix of ``1 / log2(1 + rank)`` for ranks 1..k, else 0."""
    cols = run_columns(pairs)
    if not cols:
        return np.zeros((len(pairs), 0))
    ranks = pairs[cols].to_numpy(dtype=float)
    ranks = np.where(np.isnan(ranks), 0, ranks)
    inside = (ranks >= 1) & (ranks <= k)
    out = np.zeros_like(ranks)
    out[inside] = 1.0 / np.log2(1.0 + ranks[inside])
    return out


def comparison_weight(pairs: pd.DataFrame, k: int) -> np.ndarray:
    """``sum over run pairs a < b of |d_a - d_b|`` per pair (module docstring)."""
    d = discounts(pairs, k)
    weight = np.zeros(len(pairs))
    for a, b in combinations(range(d.shape[1]), 2):
        weight += np.abs(d[:, a] - d[:, b])
    return weight


def order_pairs(pairs: pd.DataFrame, strategy: str = "combined", *, k: int = 10, seed: int = 0) -> pd.DataFrame:
    """``pairs`` in judging order for ``strategy`` (module docstring), with a ``score`` column
    (higher first; for ``priority`` and ``random`` it is minus the position)."""
    if strategy not in STRATEGIES:
        raise InputError(f"unknown strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")
    missing = {"query_id", "item_id", "priority"} - set(pairs.columns)
    if missing:
        raise InputError(f"pool pairs need the columns query_id, item_id, priority (missing {sorted(missing)})")
    frame = pairs.reset_index(drop=True).copy()
    base = frame.sort_values(["priority", "query_id", "item_id"], kind="stable").index.to_numpy()
    position = np.empty(len(frame), dtype=np.int64)
    position[base] = np.arange(len(frame))
    if strategy == "random":
        rng = np.random.default_rng(seed)
        score = -rng.permutation(len(frame)).astype(float)
    elif strategy == "priority":
        score = -position.astype(float)
    else:
        runs = len(run_columns(frame))
        spread = (frame["spread"].to_numpy(dtype=float) if "spread" in frame else np.full(len(frame), np.nan))
        if strategy == "disagreement":
            score = np.where(np.isnan(spread), -1.0, spread)
        elif strategy == "comparison":
            score = comparison_weight(frame, k)
        else:
            d = discounts(frame, k)
            mean_d = d.mean(axis=1) if runs else np.zeros(len(frame))
            n_pairs = runs * (runs - 1) / 2
            cmp = comparison_weight(frame, k) / n_pairs if n_pairs else np.zeros(len(frame))
            score = mean_d + cmp + np.where(np.isnan(spread), 0.0, spread) / 3.0
    frame["score"] = score
    order = np.lexsort((position, -score))
    return frame.iloc[order].reset_index(drop=True)


def select_within_budget(ordered: pd.DataFrame, budget: float, cost: float | Sequence[float] | np.ndarray = 1.0
                         ) -> pd.DataFrame:
    """The pairs taken in order while the running cost stays within ``budget`` (module doc);
    adds a ``cost`` column."""
    if budget < 0 or not math.isfinite(budget):
        raise InputError(f"the budget must be a finite number >= 0, got {budget}")
    costs = np.broadcast_to(np.asarray(cost, dtype=float), (len(ordered),)).copy()
    if (costs < 0).any() or not np.isfinite(costs).all():
        raise InputError("every pair's cost must be a finite number >= 0")
    keep = np.zeros(len(ordered), dtype=bool)
    spent = 0.0
    for i, c in enumerate(costs):
        if spent + c <= budget + 1e-12:
            keep[i] = True
            spent += c
    return ordered.assign(cost=costs)[keep].reset_index(drop=True)


def interval_effect(pairs: pd.DataFrame, judged: Mapping[tuple[str, str], int], selected: set[tuple[str, str]],
                    *, k: int = 10, threshold: int = 2) -> pd.DataFrame:
    """Per run: mean width of the P@k interval from unjudged pairs and the 95% half-width of the
    label uncertainty, before and after judging ``selected`` (module docstring). ``judged``
    maps (query_id, item_id) to a known grade."""
    grades = list(judged.values())
    p = float(np.mean([g >= threshold for g in grades])) if grades else 0.5
    rows = []
    queries = sorted(pairs["query_id"].astype(str).unique())
    keys = list(zip(pairs["query_id"].astype(str), pairs["item_id"].astype(str)))
    for col in run_columns(pairs):
        ranks = pairs[col].to_numpy(dtype=float)
        in_top = (ranks >= 1) & (ranks <= k)
        unj_before = {q: 0 for q in queries}
        unj_after = {q: 0 for q in queries}
        for (q, item), top in zip(keys, in_top):
            if not top or (q, item) in judged:
                continue
            unj_before[q] += 1
            if (q, item) not in selected:
                unj_after[q] += 1
        n_q = len(queries)
        out: dict[str, str | float] = {"run": col[len(RANK_PREFIX):]}
        for label, unj in (("before", unj_before), ("after", unj_after)):
            u = np.array(list(unj.values()), dtype=float)
            out[f"width_{label}"] = float(u.mean() / k) if n_q else float("nan")
            out[f"half_width_{label}"] = (float(1.96 * math.sqrt(u.sum() * p * (1 - p)) / (k * n_q))
                                          if n_q else float("nan"))
        rows.append(out)
    return pd.DataFrame(rows, columns=["run", "width_before", "half_width_before", "width_after",
                                       "half_width_after"])


def pool_from_runs(runs: Mapping[str, Mapping[str, Mapping[str, float]]], depth: int) -> pd.DataFrame:
    """A depth-``depth`` pool over ``runs`` (``{run: {query_id: {item_id: score}}}``), with a
    ``rank:<run>`` column per run (0 = not in that run's top ``depth``) and the reciprocal-rank-
    fusion priority (k = 60; ties by item id). Ranks follow the metric engine's ordering: score
    descending, ties by item id descending."""
    rows: dict[tuple[str, str], dict[str, int]] = {}
    names = list(runs)
    for name, by_query in runs.items():
        for q, items in by_query.items():
            ordered = sorted(items.items(), key=lambda kv: (-kv[1], _desc(kv[0])))[:depth]
            for r, (item, _score) in enumerate(ordered, start=1):
                rows.setdefault((str(q), str(item)), {})[name] = r
    records = []
    for (q, item), ranks in rows.items():
        rrf = sum(1.0 / (60 + r) for r in ranks.values())
        records.append({"query_id": q, "item_id": item, "rrf": rrf,
                        **{RANK_PREFIX + n: ranks.get(n, 0) for n in names}})
    frame = pd.DataFrame(records)
    if frame.empty:
        return pd.DataFrame(columns=["query_id", "item_id", "priority", *[RANK_PREFIX + n for n in names]])
    frame = frame.sort_values(["query_id", "rrf", "item_id"], ascending=[True, False, True], kind="stable")
    frame["priority"] = frame.groupby("query_id").cumcount() + 1
    return frame.drop(columns="rrf").reset_index(drop=True)


def _desc(text: str) -> tuple:
    return tuple(-b for b in text.encode("utf-8")) + (1,)


def system_scores(qrels: Mapping[str, Mapping[str, int]], runs: Mapping[str, Mapping[str, Mapping[str, float]]],
                  measure: str) -> dict[str, float]:
    """Each run's mean ``measure`` under ``qrels`` (the metric engine; NaN when no query of the
    qrels has a relevant item)."""
    from workbench.core.metrics.evaluation import evaluate

    if not any(any(g >= 1 for g in items.values()) for items in qrels.values()):
        return {name: float("nan") for name in runs}
    return {name: float(evaluate(qrels, run, [measure]).aggregate[measure]) for name, run in runs.items()}


def simulate(full_qrels: Mapping[str, Mapping[str, int]], runs: Mapping[str, Mapping[str, Mapping[str, float]]], *,
             depth: int, budgets: Sequence[int], strategies: Sequence[str] = STRATEGIES, measure: str = "ndcg@10",
             k: int = 10, seeds: Sequence[int] = (0, 1, 2, 3, 4), spread: Mapping[tuple[str, str], float] | None = None
             ) -> pd.DataFrame:
    """How close a budgeted subset of a depth-``depth`` pool gets to the full-label ranking.

    For each strategy and budget (pairs judged), the selected pairs take their grade from
    ``full_qrels`` (a pooled pair the full qrels never judged counts as judged 0, as an assessor
    would label it), every other pair is unjudged, and each run's ``measure`` is computed; the
    row gives Kendall's tau-b between that system ranking and the ranking under the full qrels.
    ``random`` is averaged over ``seeds`` (``tau`` is the mean, ``tau_min``/``tau_max`` the
    range); other strategies are deterministic. Columns: ``strategy, budget, share, tau,
    tau_min, tau_max, relevant_found``.
    """
    pool = pool_from_runs(runs, depth)
    if spread:
        pool["spread"] = [spread.get((q, i), np.nan) for q, i in zip(pool["query_id"], pool["item_id"])]
    names = list(runs)
    truth = system_scores(full_qrels, runs, measure)
    truth_vec = [truth[n] for n in names]
    rows = []
    for strategy in strategies:
        for budget in budgets:
            taus, found = [], []
            for seed in (seeds if strategy == "random" else (0,)):
                chosen = order_pairs(pool, strategy, k=k, seed=seed).head(int(budget))
                qrels: dict[str, dict[str, int]] = {}
                rel = 0
                for q, item in zip(chosen["query_id"], chosen["item_id"]):
                    g = int(full_qrels.get(q, {}).get(item, 0))
                    qrels.setdefault(q, {})[item] = g
                    rel += g >= 2
                scores = system_scores(qrels, runs, measure)
                taus.append(kendall_tau_b(truth_vec, [scores[n] for n in names]))
                found.append(rel)
            arr = np.array(taus, dtype=float)
            rows.append({"strategy": strategy, "budget": int(min(budget, len(pool))),
                         "share": min(budget, len(pool)) / len(pool) if len(pool) else float("nan"),
                         "tau": float(np.nanmean(arr)) if np.isfinite(arr).any() else float("nan"),
                         "tau_min": float(np.nanmin(arr)) if np.isfinite(arr).any() else float("nan"),
                         "tau_max": float(np.nanmax(arr)) if np.isfinite(arr).any() else float("nan"),
                         "relevant_found": float(np.mean(found))})
    return pd.DataFrame(rows)
