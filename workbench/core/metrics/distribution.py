"""Per-query score distributions: the numbers a mean hides.

A mean recall of 0.80 can hide 20% of queries scoring 0.0, so every aggregate should be shown
next to its median, low tail and share of zeros.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from workbench import lazylibs

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class DistributionSummary:
    """Summary of one measure's per-query scores.

    ``count`` is the number of finite scores used; ``n_nan`` the number of NaN scores left out
    (queries the measure is undefined for). ``p10`` is the 10th percentile with numpy's default
    linear interpolation; ``share_zero`` is ``#{x == 0} / count``. With ``count == 0`` every
    statistic is NaN.
    """

    count: int
    n_nan: int
    mean: float
    median: float
    p10: float
    share_zero: float

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def summarize(values: Iterable[float]) -> DistributionSummary:
    """Summarise per-query scores, excluding (and counting) NaN.

    Infinite values are rejected with :class:`ValueError`: no retrieval measure produces them,
    so they signal a bug upstream rather than a score.
    """
    x = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)
    if x.ndim != 1:
        raise ValueError("per-query scores must be one-dimensional")
    nan = np.isnan(x)
    if np.isinf(x).any():
        raise ValueError("per-query scores contain infinite values")
    kept = x[~nan]
    if kept.size == 0:
        return DistributionSummary(0, int(nan.sum()), math.nan, math.nan, math.nan, math.nan)
    return DistributionSummary(
        count=int(kept.size),
        n_nan=int(nan.sum()),
        mean=float(kept.mean()),
        median=float(np.median(kept)),
        p10=float(np.percentile(kept, 10)),
        share_zero=float(np.count_nonzero(kept == 0.0) / kept.size),
    )


def summarize_table(per_query: pd.DataFrame) -> pd.DataFrame:
    """One :func:`summarize` row per column of a per-query table (index: measure name)."""

    rows = {str(c): summarize(per_query[c].to_numpy(dtype=float)).as_dict() for c in per_query}
    columns = ["count", "n_nan", "mean", "median", "p10", "share_zero"]
    frame = lazylibs.pandas.DataFrame.from_dict(rows, orient="index", columns=columns)
    frame.index.name = "measure"
    return frame
