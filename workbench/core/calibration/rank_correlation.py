"""Agreement between two rankings of the same systems: Kendall's τ-b and τ_AP.

Used to ask whether the LLM judge's qrels rank retrievers as the human qrels do (Voorhees'
question for assessor disagreement): what matters is the systems' order, not the labels.

**Kendall's τ-b** over the ``n`` systems' scores ``x`` (reference) and ``y`` (candidate)::

    τ_b = (n_c − n_d) / sqrt((n_0 − n_1)(n_0 − n_2))

with ``n_c``/``n_d`` the concordant/discordant pairs, ``n_0 = n(n−1)/2``, ``n_1 = Σ t(t−1)/2``
over groups of tied ``x`` and ``n_2`` the same over ``y``. A pair tied in either is neither
concordant nor discordant. Undefined (NaN) when ``n < 2`` or every score of one side is tied.

**τ_AP** (Yilmaz, Aslam & Robertson, SIGIR 2008) weights swaps near the top more: with the
candidate ranking ``s_1 … s_N`` (best first)::

    τ_AP = 2/(N−1) · Σ_{i=2..N} C(i)/(i−1) − 1

where ``C(i)`` counts the systems ranked above ``s_i`` by the candidate that the reference also
ranks above ``s_i``. It is asymmetric (the reference is the human ranking). It assumes strict
orders: ties in either ranking are broken by system name, ascending (stated, so the result is
reproducible). Equal rankings give 1, reversed ones −1. Undefined (NaN) for ``N < 2``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from workbench.errors import InputError


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """τ-b of paired scores ``x`` and ``y`` (module docstring); NaN when undefined."""
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.shape != b.shape:
        raise InputError(f"Kendall's tau needs two score vectors of one length, got {a.size} and {b.size}")
    n = a.size
    if n < 2:
        return math.nan
    i, j = np.triu_indices(n, k=1)
    da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
    s = float(np.sum(da * db))  # concordant − discordant
    n0 = n * (n - 1) / 2
    n1 = float(np.sum(da == 0))
    n2 = float(np.sum(db == 0))
    denom = math.sqrt((n0 - n1) * (n0 - n2))
    return math.nan if denom == 0 else s / denom


def ranking(scores: Mapping[str, float]) -> list[str]:
    """Systems best first: by score descending, ties by name ascending."""
    return sorted(scores, key=lambda name: (-float(scores[name]), name))


def tau_ap(reference: Sequence[str], candidate: Sequence[str]) -> float:
    """τ_AP of the ``candidate`` ranking against the ``reference`` ranking (both best first,
    the same systems); NaN for fewer than two systems."""
    if sorted(reference) != sorted(candidate) or len(set(reference)) != len(reference):
        raise InputError("both rankings must hold the same distinct systems")
    n = len(candidate)
    if n < 2:
        return math.nan
    position = {name: k for k, name in enumerate(reference)}
    total = 0.0
    for i in range(1, n):
        here = position[candidate[i]]
        correct = sum(1 for above in candidate[:i] if position[above] < here)
        total += correct / i
    return 2.0 / (n - 1) * total - 1.0
