"""Per-stage evaluation of a retrieval pipeline and reranker lift.

Computing the same measures at the output of every stage (candidates, fusion, filter,
reranker) on the *same* queries shows where quality is gained or lost. This module takes the
per-query metric tables of each stage (no I/O, no metric computation) and summarises them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from workbench.core.metrics.comparison import align_queries
from workbench.core.metrics.significance import StatisticsInputError

# pool and pre scores this close are "equal": the recoverable gap is rounding noise and the
# lift ratio would be noise divided by noise.
GAP_TOLERANCE = 1e-12


@dataclass(frozen=True)
class StageReport:
    """Mean of each measure per stage, over the queries present in every stage.

    ``table``: index = stage name (in the given order), one column per measure; a stage
    without a measure gets NaN there, and per-query NaN scores are left out of that mean.
    ``n_queries`` is the number of common queries; ``dropped_queries`` maps each stage to
    the query ids it had that some other stage lacked.
    """

    table: pd.DataFrame
    n_queries: int
    dropped_queries: dict[str, list[str]] = field(default_factory=dict)

    def value(self, stage: str, measure: str) -> float:
        """The mean of ``measure`` at ``stage``; ``KeyError`` naming what is missing."""
        if stage not in self.table.index:
            raise KeyError(f"no stage {stage!r}; stages are {', '.join(self.table.index)}")
        if measure not in self.table.columns:
            raise KeyError(f"no measure {measure!r}; measures are {', '.join(self.table.columns)}")
        return float(self.table.loc[stage, measure])


@dataclass(frozen=True)
class Lift:
    """Share of the recoverable gap a reranker closed.

    ``value = (post - pre) / (pool - pre)`` where ``pool`` is the candidate pool's score at
    the large cutoff (e.g. recall@50), ``pre`` the score of the pool's own top k before
    reranking and ``post`` the top k after reranking. 1 means the reranker reached the
    pool's ceiling, 0 no change, negative that it made things worse. ``value`` is NaN with a
    ``reason`` when undefined.
    """

    value: float
    pool: float
    pre: float
    post: float
    reason: str | None = None

    @property
    def gap(self) -> float:
        """The recoverable gap ``pool - pre``."""
        return self.pool - self.pre


def reranker_lift(pool: float, pre: float, post: float) -> Lift:
    """Reranker lift ``(post - pre) / (pool - pre)``; see :class:`Lift`.

    Undefined (NaN with a reason) when an input is NaN, when ``pool == pre`` (no gap to
    recover: the reranker can only keep or lose quality) and when ``pool < pre`` (the pool
    score cannot bound the reranked one, which means mismatched measures or cutoffs).
    Example: pool recall@50 0.92, pre recall@5 0.61, post 0.79 -> 0.18 / 0.31 = 0.58.
    """
    pool, pre, post = float(pool), float(pre), float(post)
    if any(math.isnan(v) for v in (pool, pre, post)):
        return Lift(math.nan, pool, pre, post, "a stage score is NaN")
    gap = pool - pre
    if abs(gap) <= GAP_TOLERANCE:
        return Lift(math.nan, pool, pre, post, "pool score equals pre-rerank score: no gap")
    if gap < 0:
        return Lift(
            math.nan,
            pool,
            pre,
            post,
            "pool score is below the pre-rerank score; use the same measure at a larger cutoff",
        )
    return Lift((post - pre) / gap, pool, pre, post)


def stage_report(
    stages: Mapping[str, pd.DataFrame], measures: Sequence[str] | None = None
) -> StageReport:
    """Summarise per-query tables (index: query id, columns: measures) of named stages.

    ``measures`` defaults to the union of all stages' columns in first-seen order.
    Raises :class:`~workbench.core.metrics.significance.StatisticsInputError` (an ``InputError`` and a
    ``ValueError``) when no stage is given or the stages share no query.
    """
    if not stages:
        raise StatisticsInputError("no stages to report; pass {stage name: per-query table}")
    if measures is None:
        measures = list(dict.fromkeys(str(c) for frame in stages.values() for c in frame.columns))
    common, dropped = align_queries(stages)
    if len(common) == 0:
        raise StatisticsInputError("the stages have no query in common; evaluate them on the same queries")
    means = {
        name: {
            m: float(frame.loc[common, m].astype(float).mean()) if m in frame.columns else math.nan
            for m in measures
        }
        for name, frame in stages.items()
    }
    table = pd.DataFrame.from_dict(means, orient="index", columns=list(measures))
    table.index.name = "stage"
    return StageReport(table, len(common), dropped)


def stage_lift(
    report: StageReport,
    *,
    pool: tuple[str, str],
    pre: tuple[str, str],
    post: tuple[str, str],
) -> Lift:
    """:func:`reranker_lift` from a report; each argument is a ``(stage, measure)`` pair,
    e.g. ``pool=("fusion", "recall@50"), pre=("fusion", "recall@5"),
    post=("reranker", "recall@5")``."""
    return reranker_lift(report.value(*pool), report.value(*pre), report.value(*post))
