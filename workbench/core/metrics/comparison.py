"""Compare N runs on the same queries: means, deltas, intervals, p-values, wins/losses.

Input is one per-query table per run (index: query id, one column per measure), e.g. the
``per_query`` frame of :func:`workbench.evaluation.evaluate`, or ``{measure: {query_id:
value}}``. Query ids are compared as strings. The first run is the baseline;
every other run is compared with it on every measure.

Why paired and aligned: queries differ far more from each other than systems do, so each
comparison uses only queries scored in *both* runs and works on per-query differences. A query
missing from any run is dropped for all runs (and reported), so every row of the result is
computed on the same query set for its measure; a NaN score drops the query for that measure.

Multiple comparisons: raw p-values of all (measure, run) rows are adjusted together with
Benjamini–Hochberg, since a table of m comparisons at alpha = 0.05 expects 0.05 m false hits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from workbench.core.metrics.significance import (
    TESTS,
    StatisticsInputError,
    benjamini_hochberg,
    bootstrap_ci,
    paired_test,
)

# Per-query differences this close to zero are ties, not wins: measures are ratios of small
# integers and two runs can reach the same value by different floating-point paths.
TIE_TOLERANCE = 1e-12

COLUMNS = [
    "measure", "baseline", "run", "n_queries", "baseline_mean", "run_mean", "delta",
    "ci_low", "ci_high", "p_value", "p_adjusted", "wins", "ties", "losses",
]  # fmt: skip


@dataclass(frozen=True)
class Comparison:
    """Result of :func:`compare_runs`.

    ``table`` has one row per (measure, non-baseline run) with :data:`COLUMNS`:
    ``delta = run_mean - baseline_mean`` over ``n_queries`` aligned queries; ``[ci_low,
    ci_high]`` the percentile bootstrap interval of the delta at ``confidence``; ``p_value``
    the two-sided paired ``test``; ``p_adjusted`` Benjamini–Hochberg over all rows; ``wins``
    / ``ties`` / ``losses`` count queries where the run is above / equal to / below the
    baseline. ``dropped_queries`` maps each run to the query ids it had that were not scored in
    every run; ``nan_dropped`` maps each measure to query ids dropped for a NaN score.
    """

    table: pd.DataFrame
    baseline: str
    runs: list[str]
    measures: list[str]
    test: str
    seed: int
    n_resamples: int
    confidence: float
    n_common_queries: int
    dropped_queries: dict[str, list[str]] = field(default_factory=dict)
    nan_dropped: dict[str, list[str]] = field(default_factory=dict)

    def metadata(self) -> dict[str, Any]:
        """Everything but the table, JSON-ready."""
        return {
            "baseline": self.baseline,
            "runs": list(self.runs),
            "measures": list(self.measures),
            "test": self.test,
            "seed": self.seed,
            "n_resamples": self.n_resamples,
            "confidence": self.confidence,
            "p_adjustment": "benjamini-hochberg",
            "n_common_queries": self.n_common_queries,
            "dropped_queries": {k: list(v) for k, v in self.dropped_queries.items()},
            "nan_dropped": {k: list(v) for k, v in self.nan_dropped.items()},
        }


def as_table(scores: pd.DataFrame | Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """A per-query table from a DataFrame or ``{measure: {query_id: value}}`` (index: str ids)."""
    frame = scores if isinstance(scores, pd.DataFrame) else pd.DataFrame(dict(scores))
    return frame.set_axis(frame.index.astype(str), axis=0)


def _check_tables(per_query: Mapping[str, pd.DataFrame], measures: Sequence[str]) -> None:
    if len(per_query) < 2:
        raise StatisticsInputError(f"need at least two runs to compare, got {len(per_query)}")
    if not measures:
        raise StatisticsInputError("no measures to compare")
    for name, frame in per_query.items():
        if frame.index.has_duplicates:
            dup = frame.index[frame.index.duplicated()][0]
            raise StatisticsInputError(f"run {name!r}: query {dup!r} appears more than once")
        missing = [m for m in measures if m not in frame.columns]
        if missing:
            raise StatisticsInputError(
                f"run {name!r} has no per-query scores for {', '.join(missing)}"
            )


def align_queries(
    per_query: Mapping[str, pd.DataFrame],
) -> tuple[pd.Index, dict[str, list[str]]]:
    """Queries present in every run (in the baseline's order) and, per run, those left out."""
    tables = list(per_query.values())
    common = tables[0].index
    for frame in tables[1:]:
        common = common[common.isin(frame.index)]
    dropped = {
        name: sorted(map(str, frame.index[~frame.index.isin(common)]))
        for name, frame in per_query.items()
    }
    return common, dropped


def compare_runs(
    per_query: Mapping[str, pd.DataFrame | Mapping[str, Mapping[str, float]]],
    measures: Sequence[str] | None = None,
    *,
    test: str = "randomization",
    seed: int = 0,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
) -> Comparison:
    """Compare every run with the first (baseline) on every measure; see :class:`Comparison`.

    ``measures`` defaults to the baseline table's columns. Each comparison re-seeds with the
    same ``seed``, so any row can be reproduced alone, independent of the other rows.

    Raises :class:`~workbench.core.metrics.significance.StatisticsInputError` (a ``ValueError``) for
    fewer than two runs, an unknown test, duplicated query ids, a missing measure, or a
    measure with no query scored in every run.
    """
    if test not in TESTS:
        raise StatisticsInputError(f"unknown test {test!r}; choose one of {', '.join(TESTS)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise StatisticsInputError(f"seed must be an int so it can be reported, got {seed!r}")
    tables = {name: as_table(scores) for name, scores in per_query.items()}
    runs = list(tables)
    if measures is None:
        measures = [str(c) for c in next(iter(tables.values())).columns] if runs else []
    measures = list(dict.fromkeys(measures))
    _check_tables(tables, measures)
    common, dropped = align_queries(tables)
    if len(common) == 0:
        raise StatisticsInputError("the runs have no query in common; nothing to compare")
    baseline = runs[0]

    rows: list[dict[str, Any]] = []
    nan_dropped: dict[str, list[str]] = {}
    for measure in measures:
        scores = pd.DataFrame({run: tables[run].loc[common, measure] for run in runs})
        scores = scores.astype(float)
        has_nan = scores.isna().any(axis=1)
        nan_dropped[measure] = sorted(map(str, scores.index[has_nan]))
        scores = scores[~has_nan]
        if scores.empty:
            raise StatisticsInputError(f"measure {measure!r}: no query is scored in every run")
        base = scores[baseline].to_numpy()
        for run in runs[1:]:
            other = scores[run].to_numpy()
            result = paired_test(test, base, other, n_resamples=n_resamples, seed=int(seed))
            ci = bootstrap_ci(
                base, other, confidence=confidence, n_resamples=n_resamples, seed=int(seed)
            )
            diff = other - base
            rows.append(
                {
                    "measure": measure,
                    "baseline": baseline,
                    "run": run,
                    "n_queries": int(diff.size),
                    "baseline_mean": float(base.mean()),
                    "run_mean": float(other.mean()),
                    "delta": result.delta,
                    "ci_low": ci.low,
                    "ci_high": ci.high,
                    "p_value": result.p_value,
                    "p_adjusted": np.nan,
                    "wins": int(np.count_nonzero(diff > TIE_TOLERANCE)),
                    "ties": int(np.count_nonzero(np.abs(diff) <= TIE_TOLERANCE)),
                    "losses": int(np.count_nonzero(diff < -TIE_TOLERANCE)),
                }
            )
    table = pd.DataFrame(rows, columns=COLUMNS)
    table["p_adjusted"] = benjamini_hochberg(table["p_value"].to_numpy(dtype=float))
    return Comparison(
        table=table,
        baseline=baseline,
        runs=runs,
        measures=measures,
        test=test,
        seed=int(seed),
        n_resamples=int(n_resamples),
        confidence=float(confidence),
        n_common_queries=len(common),
        dropped_queries=dropped,
        nan_dropped=nan_dropped,
    )
