"""Pooling 10,000 queries x 6 runs x depth 100 through the service and the store.

Run: python benchmarks/pooling_service_bench.py [n_queries] [depth]. Prints timings; no
assertions. Setup (not timed in the pooling figure): six synthetic chunk-level runs of
``depth`` rows per query are written to a fresh project with ``write_run``; each query draws its
runs' items from a shared candidate set of 3·depth chunks (seed 0) so the runs overlap.

Timed: ``build_pool`` (read the runs' top-depth rows from DuckDB, pool + RRF priorities with
numpy, write pool_pairs and pool_provenance in one transaction), ``add_runs`` of a seventh run,
and ``pool_stats`` (sizes, contributions, overlap, judged@10, leave-one-run-out).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from workbench.services.pooling import add_runs, build_pool, pool_stats  # noqa: E402
from workbench.store.database import Database  # noqa: E402
from workbench.store.retrieval import set_run_scope  # noqa: E402
from workbench.store.runs import write_run  # noqa: E402


def synthetic_run(rng: np.random.Generator, n_queries: int, depth: int) -> pd.DataFrame:
    """``depth`` distinct items per query out of 3·depth candidates, ranked 1..depth."""
    pick = np.argsort(rng.random((n_queries, 3 * depth)), axis=1)[:, :depth]
    q = np.repeat(np.arange(n_queries), depth)
    doc = (q * 3 * depth + pick.ravel()).astype(np.int64)
    doc_id = "d" + pd.Series(doc).astype("str")
    return pd.DataFrame({
        "query_id": "q" + pd.Series(q).astype("str"),
        "doc_id": doc_id,
        "chunk_id": "bench:" + doc_id + ":0",
        "rank": np.tile(np.arange(1, depth + 1), n_queries),
        "score": np.tile(np.linspace(1.0, 0.01, depth), n_queries),
    })


def main() -> None:
    n_queries = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    depth = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp, Database(Path(tmp) / "bench.duckdb") as db:
        t = time.perf_counter()
        names = [f"run{i}" for i in range(7)]
        for name in names:
            with db.transaction() as tx:
                write_run(tx, name, "synthetic", synthetic_run(rng, n_queries, depth))
                set_run_scope(tx, name, "chunk", "bench")
        setup = time.perf_counter() - t

        t = time.perf_counter()
        built = build_pool(db, "bench", names[:6], depth)
        pool_s = time.perf_counter() - t
        t = time.perf_counter()
        added = add_runs(db, "bench", names[6:])
        add_s = time.perf_counter() - t
        t = time.perf_counter()
        stats = pool_stats(db, "bench", k=10)
        stats_s = time.perf_counter() - t

    print(f"queries {n_queries:,} x runs 6 x depth {depth}: {6 * n_queries * depth:,} run rows pooled")
    print(f"setup (write 7 runs, {7 * n_queries * depth:,} rows): {setup:.2f}s")
    print(f"build_pool (service + store): {pool_s:.2f}s -> {built.pairs_total:,} pairs, "
          f"{built.provenance_added:,} provenance rows")
    print(f"add_runs (1 run): {add_s:.2f}s -> {added.pairs_added:,} new pairs, "
          f"{added.provenance_added:,} provenance rows")
    print(f"pool_stats (k=10, no labels): {stats_s:.2f}s; mean pool size {stats.summary['mean_pool_size']:.1f}")


if __name__ == "__main__":
    main()
