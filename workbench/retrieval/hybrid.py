"""Hybrid retrieval: reciprocal rank fusion of stored runs (via :mod:`workbench.core.pooling.fusion`).

``score(q, i) = Σ_r w_r / (k + rank_r(q, i))`` over the runs ``r`` that retrieved item ``i``
for ``q`` (``k = 60`` and ``w_r = 1`` by default); output ranks are 1-based per query by score
descending, ties by item id ascending. All input runs must rank the same kind of item (chunks
of one chunking, or documents), otherwise the ids would not be comparable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from workbench.core.pooling.fusion import rrf
from workbench.errors import InputError


def parse_weights(text: str | None, runs: Sequence[str]) -> dict[str, float] | None:
    """``"1,0.5"`` (one per run, in order) or ``"bm25=1,dense=0.5"`` -> ``{run: weight}``."""
    if text is None or not str(text).strip():
        return None
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    try:
        if all("=" in p for p in parts):
            weights = {k.strip(): float(v) for k, v in (p.split("=", 1) for p in parts)}
        else:
            if len(parts) != len(runs):
                raise InputError(
                    f"--weights gives {len(parts)} values for {len(runs)} runs {list(runs)}; "
                    "give one weight per run, in the order of --runs, or name them (bm25=1,dense=0.5)"
                )
            weights = dict(zip(runs, (float(p) for p in parts)))
    except ValueError:
        raise InputError(f"--weights {text!r} must be numbers, like 1,0.5 or bm25=1,dense=0.5") from None
    return weights


def fuse(runs: Mapping[str, pd.DataFrame], *, k: float = 60, weights: Mapping[str, float] | None = None,
         top: int | None = 100, id_col: str = "chunk_id") -> pd.DataFrame:
    """RRF of ``runs`` (each ``query_id, <id_col>, rank``), cut to ``top`` per query.

    Returns ``query_id, <id_col>, score, rank``.
    """
    if len(runs) < 2:
        raise InputError(f"hybrid fusion needs at least two runs, got {list(runs)}")
    fused = rrf({name: df[["query_id", id_col, "rank"]] for name, df in runs.items()},
                k=k, weights=weights, id_col=id_col)
    if top is not None:
        fused = fused.loc[fused["rank"] <= top]
    return fused.reset_index(drop=True)
