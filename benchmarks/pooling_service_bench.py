"""Pooling 10,000 queries x 6 runs x depth 100 through the service and the store.

Run: python benchmarks/pooling_service_bench.py [n_queries] [depth] [--check]. Prints timings.
``--check`` (untimed, use it with about 1,000 queries) also recomputes the pool and its
diagnostics with the pure core on the same run rows and asserts the stored pool and the stats
are identical (priorities, RRF scores bit for bit, sizes, contributions, overlap). Setup (not timed in the pooling figure): six synthetic chunk-level runs of
``depth`` rows per query are written to a fresh project with ``write_run``; each query draws its
runs' items from a shared candidate set of 3·depth chunks (seed 0) so the runs overlap.

Timed: ``build_pool`` (read the runs' top-depth rows from DuckDB, pool + RRF priorities with
numpy, write pool_pairs and pool_provenance in one transaction), ``add_runs`` of a seventh run,
and ``pool_stats`` (sizes, contributions, overlap, judged@10, leave-one-run-out).

The service keeps the set work in DuckDB and hands only integer codes to numpy (see
:mod:`workbench.services.pooling.pools`). Before that change (pandas round trips of every pair and
provenance row), 10k x 6 x 100 took about 12-26 s for build_pool, 16-23 s for add_runs and
21-34 s for pool_stats on a shared 2-core machine.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support import reference_pooling as core_pooling  # noqa: E402
from workbench.services.pooling.pools import POOL_RRF_K, add_runs, build_pool, pool_stats
from workbench.store.database import Database
from workbench.store.chunks import CHUNK_COLUMNS, write_chunking
from workbench.store.pools import read_pool_pairs
from workbench.store.runs import read_run_rows_many, set_run_scope, write_run


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


def check(db: Database, names: list[str], depth: int, stats) -> str:
    """The stored pool and its stats equal the pure core's on the same rows (see docstring)."""
    cols = ["run_id", "query_id", "chunk_id", "rank"]
    first = core_pooling.build_pool(read_run_rows_many(db, names[:6], depth=depth, columns=cols),
                                    depth, k=POOL_RRF_K, id_col="chunk_id")
    update = core_pooling.add_runs_to_pool(first, read_run_rows_many(db, names[6:], depth=depth, columns=cols),
                                           depth)
    top = first.pairs.groupby("query_id")["priority"].max()
    new = update.new_pairs.assign(
        priority=update.new_pairs["priority"] + update.new_pairs["query_id"].map(top).fillna(0).astype(np.int64))
    expected = pd.concat([first.pairs, new], ignore_index=True)[["query_id", "chunk_id", "priority", "score"]]
    stored = read_pool_pairs(db, "bench").rename(columns={"rrf_score": "score"})[expected.columns]
    key = ["query_id", "chunk_id"]
    pd.testing.assert_frame_equal(
        stored.sort_values(key).reset_index(drop=True).astype({"priority": np.int64}),
        expected.sort_values(key).reset_index(drop=True).astype({"priority": np.int64}), check_exact=True)
    pool = update.pool
    pd.testing.assert_frame_equal(stats.sizes, core_pooling.pool_sizes(pool), check_exact=True)
    pd.testing.assert_frame_equal(stats.contributions, core_pooling.unique_contributions(pool), check_exact=True)
    pd.testing.assert_frame_equal(stats.overlap, core_pooling.run_overlap(pool), check_exact=True)
    return f"check: stored pool ({len(stored):,} pairs) and stats equal the pure core's"


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--check"]
    n_queries = int(args[0]) if len(args) > 0 else 10_000
    depth = int(args[1]) if len(args) > 1 else 100
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp, Database(Path(tmp) / "bench.duckdb") as db:
        t = time.perf_counter()
        names = [f"run{i}" for i in range(7)]
        with db.transaction() as tx:  # the runs rank chunks of chunking 'bench': it must exist
            write_chunking(tx, "bench", "synthetic", {}, pd.DataFrame(columns=CHUNK_COLUMNS))
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
        checked = check(db, names, depth, stats) if "--check" in sys.argv[1:] else None

    print(f"queries {n_queries:,} x runs 6 x depth {depth}: {6 * n_queries * depth:,} run rows pooled")
    print(f"setup (write 7 runs, {7 * n_queries * depth:,} rows): {setup:.2f}s")
    print(f"build_pool (service + store): {pool_s:.2f}s -> {built.pairs_total:,} pairs, "
          f"{built.provenance_added:,} provenance rows")
    print(f"add_runs (1 run): {add_s:.2f}s -> {added.pairs_added:,} new pairs, "
          f"{added.provenance_added:,} provenance rows")
    print(f"pool_stats (k=10, no labels): {stats_s:.2f}s; mean pool size {stats.summary['mean_pool_size']:.1f}")
    if checked:
        print(checked)


if __name__ == "__main__":
    main()
