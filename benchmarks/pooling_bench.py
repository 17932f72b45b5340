"""Time the pandas reference pooling (tests/support/reference_pooling.py): depth-100 pooling of 10,000 queries x 6 runs, plus the pool statistics.

Run: python benchmarks/pooling_bench.py [n_queries] [depth]. Prints timings; no assertions.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.reference_pooling import (  # noqa: E402
    add_runs_to_pool,
    build_pool,
    judged_at_k,
    judging_order,
    leave_one_run_out,
    pool_sizes,
    run_overlap,
    unique_contributions,
)


def synthetic_runs(n_queries: int, n_runs: int, run_depth: int, n_docs: int = 50_000, seed: int = 0):
    """Runs that share a per-query candidate set so pools overlap realistically."""
    rng = np.random.default_rng(seed)
    q = np.repeat(np.arange(n_queries), run_depth)
    runs = {}
    for r in range(n_runs):
        # Half of each run's docs come from a small shared per-query set, half at random.
        shared = (q * 7919 + rng.integers(0, 2 * run_depth, len(q))) % n_docs
        rand = rng.integers(0, n_docs, len(q))
        docs = np.where(rng.random(len(q)) < 0.5, shared, rand)
        df = pd.DataFrame({"query_id": q, "doc_id": docs}).drop_duplicates(["query_id", "doc_id"])
        df["rank"] = df.groupby("query_id").cumcount() + 1
        df["query_id"] = "q" + df["query_id"].astype(str)
        df["doc_id"] = "d" + df["doc_id"].astype(str)
        runs[f"run{r}"] = df
    return runs


def timed(label, fn):
    t0 = time.perf_counter()
    out = fn()
    print(f"{label:28s} {time.perf_counter() - t0:7.2f} s")
    return out


def main() -> None:
    n_queries = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    depth = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    runs = synthetic_runs(n_queries, 6, depth + 20)
    print(f"{n_queries} queries x 6 runs, {sum(len(r) for r in runs.values()):,} run rows, depth {depth}")
    first = {k: runs[k] for k in list(runs)[:5]}
    pool = timed("build_pool (5 runs)", lambda: build_pool(first, depth))
    update = timed("add_runs_to_pool (+1 run)", lambda: add_runs_to_pool(pool, {"run5": runs["run5"]}, depth))
    pool = update.pool
    print(f"pool pairs {len(pool.pairs):,}, new pairs from run5 {len(update.new_pairs):,}")
    full = timed("build_pool (6 runs)", lambda: build_pool(runs, depth))
    timed("pool_sizes", lambda: pool_sizes(full))
    timed("unique_contributions", lambda: unique_contributions(full))
    timed("run_overlap", lambda: run_overlap(full))
    labels = judging_order(full, 20, per_query=True)[["query_id", "doc_id"]].assign(grade=1)
    timed("judging_order(20/query)", lambda: judging_order(full, 20, per_query=True))
    timed("judged_at_k(10)", lambda: judged_at_k(runs, labels, 10))
    timed("leave_one_run_out(P@10)", lambda: leave_one_run_out(full, labels, k=10))


if __name__ == "__main__":
    main()
