"""Pareto frontier of configurations on quality (higher is better) and cost (lower is better).

A point ``i`` is *dominated* when some point ``j`` has ``quality_j >= quality_i`` and
``cost_j <= cost_i`` with at least one strict. The frontier is the set of points nobody
dominates. Points with a NaN coordinate are never on the frontier and dominate nobody.
Equal points do not dominate each other (both stay on the frontier). O(n log n): sort by cost
ascending (quality descending on ties) and keep the points that beat the best quality so far.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["pareto_frontier", "percentile_latency"]


def pareto_frontier(quality: Sequence[float], cost: Sequence[float]) -> np.ndarray:
    """Boolean mask: True where the point is on the frontier (module docstring)."""
    q = np.asarray(quality, dtype=float)
    c = np.asarray(cost, dtype=float)
    if q.shape != c.shape:
        raise ValueError(f"quality and cost need the same length, got {q.shape} and {c.shape}")
    ok = ~(np.isnan(q) | np.isnan(c))
    idx = np.flatnonzero(ok)
    mask = np.zeros(len(q), dtype=bool)
    if not len(idx):
        return mask
    order = idx[np.lexsort((-q[idx], c[idx]))]
    best = -np.inf
    i = 0
    while i < len(order):
        # A group of equal cost: only its best quality can be on the frontier (ties included).
        j = i
        while j < len(order) and c[order[j]] == c[order[i]]:
            j += 1
        top = q[order[i]]
        if top > best:
            for k in range(i, j):
                if q[order[k]] == top:
                    mask[order[k]] = True
            best = top
        i = j
    return mask


def percentile_latency(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (linear interpolation, numpy's default) of latencies; NaN if none."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    return float(np.percentile(v, p)) if v.size else float("nan")
