"""Pooling 10,000 queries x 6 runs x depth 100 through the service and the store, against the
pandas reference on the same rows, measured in the same run.

Run: python benchmarks/pooling_service_bench.py [n_queries] [depth] [--rounds N] [--check].
``--check`` (untimed, use it with about 1,000 queries) also recomputes the pool and its
diagnostics with the pure core on the same run rows and asserts the stored pool and the stats
are identical (priorities, RRF scores bit for bit, sizes, contributions, overlap). Setup (not
timed): a chunking ``bench`` and six synthetic chunk-level runs of ``depth`` rows per query
written to a fresh project with ``write_run``; each query draws its runs' items from a shared
candidate set of 3·depth chunks (seed 0) so the runs overlap. Pooling uses ranks only, so
score ties play no part here.

Timed, in ``--rounds`` rounds (default 3), each step of ours followed by the pandas peer
(tests/support/reference_pooling.py on the same rows, already in memory as DataFrames):
``build_pool`` (union of the runs' top-depth rows, RRF priorities and the pool_pairs write in
one DuckDB statement; the provenance is read from run_rows, not copied; a new pool each round) against
``build_pool``; ``add_runs`` of a seventh run against ``add_runs_to_pool``; ``pool_stats``
(sizes, contributions, overlap, judged@10, leave-one-run-out) against ``pool_sizes`` +
``unique_contributions`` + ``run_overlap``. Reported: CPU seconds of the process (DuckDB's
threads included) as medians, the ratio ours / pandas as median and min-max over the rounds,
and the load average before and after.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

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


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def cpu(fn):
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def main() -> None:
    argv = sys.argv[1:]
    rounds = 3
    if "--rounds" in argv:
        at = argv.index("--rounds")
        rounds = int(argv[at + 1])
        del argv[at:at + 2]
    args = [a for a in argv if a != "--check"]
    n_queries = int(args[0]) if len(args) > 0 else 10_000
    depth = int(args[1]) if len(args) > 1 else 100
    rng = np.random.default_rng(0)
    print(load())
    with tempfile.TemporaryDirectory() as tmp, Database(Path(tmp) / "bench.duckdb") as db:
        t = time.perf_counter()
        names = [f"run{i}" for i in range(7)]
        with db.transaction() as tx:  # the runs rank chunks of chunking 'bench': it must exist
            write_chunking(tx, "bench", "synthetic", {}, pd.DataFrame(columns=CHUNK_COLUMNS))
        for name in names:
            with db.transaction() as tx:
                write_run(tx, name, "synthetic", synthetic_run(rng, n_queries, depth))
                set_run_scope(tx, name, "chunk", "bench")
        cols = ["run_id", "query_id", "chunk_id", "rank"]
        first_rows = read_run_rows_many(db, names[:6], depth=depth, columns=cols)
        new_rows = read_run_rows_many(db, names[6:], depth=depth, columns=cols)
        setup = time.perf_counter() - t

        steps = {"build_pool": ([], []), "add_runs (1 run)": ([], []), "pool_stats (k=10)": ([], [])}
        for i in range(rounds):
            pool = "bench" if i == 0 else f"bench{i}"
            s, built = cpu(lambda: build_pool(db, pool, names[:6], depth))
            p, ref = cpu(lambda: core_pooling.build_pool(first_rows, depth, k=POOL_RRF_K, id_col="chunk_id"))
            steps["build_pool"][0].append(s), steps["build_pool"][1].append(p)
            s, added = cpu(lambda: add_runs(db, pool, names[6:]))
            p, update = cpu(lambda: core_pooling.add_runs_to_pool(ref, new_rows, depth))
            steps["add_runs (1 run)"][0].append(s), steps["add_runs (1 run)"][1].append(p)
            s, stats = cpu(lambda: pool_stats(db, pool, k=10))
            p, _ = cpu(lambda: (core_pooling.pool_sizes(update.pool), core_pooling.unique_contributions(update.pool),
                                core_pooling.run_overlap(update.pool)))
            steps["pool_stats (k=10)"][0].append(s), steps["pool_stats (k=10)"][1].append(p)
            if i == 0:
                first_stats = stats
        checked = check(db, names, depth, first_stats) if "--check" in sys.argv[1:] else None

    print(f"queries {n_queries:,} x runs 6 x depth {depth}: {6 * n_queries * depth:,} run rows pooled; "
          f"{rounds} alternated rounds")
    print(f"setup (write 7 runs, {7 * n_queries * depth:,} rows; untimed below): {setup:.2f}s wall")
    print(f"pool: {built.pairs_total:,} pairs, {built.provenance_added:,} provenance rows; add_runs: "
          f"{added.pairs_added:,} new pairs; mean pool size {first_stats.summary['mean_pool_size']:.1f}")
    print(f"\n  {'step':<20} {'service':>9} {'pandas':>9} {'ratio':>6} {'min-max':>11}  target")
    for step, (ours, theirs) in steps.items():
        r = [a / b for a, b in zip(ours, theirs)]
        target = "<= 1.00" if step == "build_pool" else ""
        print(f"  {step:<20} {median(ours):>8.2f}s {median(theirs):>8.2f}s {median(r):>6.2f} "
              f"{min(r):>5.2f}-{max(r):<5.2f}  {target}")
    print("\nCPU seconds (process, all threads): medians over the rounds; ratio = service / pandas per round; "
          "the service also writes the pool to DuckDB, the pandas reference keeps it in memory")
    if checked:
        print(checked)
    print(load())


if __name__ == "__main__":
    main()
