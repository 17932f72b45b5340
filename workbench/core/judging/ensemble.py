"""Aggregating a pair's samples (self-consistency) or several judges' grades into one judgment.

Only ``ok`` samples vote; a failed or invalid sample is kept in ``samples`` as ``null`` and never
counts as a grade. Methods:

``majority``  the most frequent grade; a tie goes to the tied grade nearest the mean of all ok
              grades, then to the lower grade (deterministic, and never above what most samples
              said).
``mean``      the mean of the ok grades rounded half up (``floor(mean + 0.5)``): 1.5 -> 2.

``spread`` = max - min of the ok grades (0 when one sample). With no ok sample the result is not
a grade: status ``failed`` if any sample failed, else ``invalid``, with the samples' errors.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

METHODS = ("majority", "mean")


def aggregate_grades(grades: Sequence[int | None], method: str = "majority") -> tuple[int | None, float | None]:
    """``(grade, spread)`` of the non-null ``grades`` by ``method``; ``(None, None)`` when none."""
    if method not in METHODS:
        raise ValueError(f"unknown aggregate {method!r}")
    ok = [int(g) for g in grades if g is not None]
    if not ok:
        return None, None
    spread = float(max(ok) - min(ok))
    mean = sum(ok) / len(ok)
    if method == "mean":
        return math.floor(mean + 0.5), spread
    counts = Counter(ok)
    top = max(counts.values())
    tied = [g for g, c in counts.items() if c == top]
    return min(tied, key=lambda g: (abs(g - mean), g)), spread


def aggregate_status(statuses: Sequence[str]) -> str:
    """``ok`` if any sample is ok, else ``failed`` if any failed, else ``invalid``."""
    if "ok" in statuses:
        return "ok"
    return "failed" if "failed" in statuses else "invalid"
