"""The pool service (set work in DuckDB) equals the pure core pooling on random runs.

The service computes pools and their statistics with SQL aggregates and integer codes for
speed; :mod:`tests.support.reference_pooling` computes the same things from plain DataFrames. Random
runs (overlapping items, several queries, seeded) and random labels must give identical pairs,
priorities, RRF scores and statistics through both paths.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.support import reference_pooling as core
from tests.support.retrieval_fixtures import write_chunk_run, write_corpus
from workbench.services.chunking import create_chunking
from workbench.services.pooling.pools import POOL_RRF_K, add_runs, build_pool, pool_stats
from workbench.store.database import Database
from workbench.store.pools import read_pool_pairs

N_DOCS, N_QUERIES, DEPTH, K = 30, 6, 5, 4


def _random_runs(rng: np.random.Generator, names: list[str]) -> dict[str, list[tuple]]:
    runs = {}
    for name in names:
        rows = []
        for q in range(N_QUERIES):
            length = int(rng.integers(0, 9))  # some queries unanswered, some runs deeper than DEPTH
            docs = rng.choice(12, size=length, replace=False) + q  # shared candidates -> overlap
            rows += [(f"q{q}", f"doc:d{d % N_DOCS}:0", rank) for rank, d in enumerate(docs, start=1)]
        runs[name] = rows
    return runs


def _core_frame(rows_by_run: dict[str, list[tuple]]) -> pd.DataFrame:
    return pd.DataFrame(
        [(run, q, item, rank) for run, rows in rows_by_run.items() for q, item, rank in rows],
        columns=["run_id", "query_id", "chunk_id", "rank"],
    )


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_service_pool_and_stats_equal_core(db_path, seed):
    rng = np.random.default_rng(seed)
    docs = {f"d{i}": f"document number {i} " * 3 for i in range(N_DOCS)}
    queries = {f"q{q}": f"query {q}" for q in range(N_QUERIES)}
    labelled = rng.choice(N_QUERIES * N_DOCS, size=40, replace=False)
    labels = [{"query_id": f"q{x // N_DOCS}", "doc_id": f"d{x % N_DOCS}", "start": 0,
               "end": len(docs[f"d{x % N_DOCS}"]), "grade": int(rng.integers(0, 4))} for x in labelled]
    names = ["A", "B", "C", "D"]
    runs = _random_runs(rng, names)
    with Database(db_path) as db:
        write_corpus(db, docs, queries, labels)
        create_chunking(db, "doc", "document")
        for name in names:
            write_chunk_run(db, name, runs[name])
        build_pool(db, "p", names[:3], DEPTH)
        add_runs(db, "p", names[3:])
        stored = read_pool_pairs(db, "p")
        stats = pool_stats(db, "p", k=K)

    first = core.build_pool(_core_frame({n: runs[n] for n in names[:3]}), DEPTH, k=POOL_RRF_K, id_col="chunk_id")
    update = core.add_runs_to_pool(first, _core_frame({n: runs[n] for n in names[3:]}), DEPTH)
    top = first.pairs.groupby("query_id")["priority"].max()
    later = update.new_pairs.assign(
        priority=update.new_pairs["priority"] + update.new_pairs["query_id"].map(top).fillna(0).astype(np.int64))
    expected = pd.concat([first.pairs, later], ignore_index=True)

    key = ["query_id", "chunk_id"]
    got = stored.rename(columns={"rrf_score": "score"}).sort_values(key).reset_index(drop=True)
    want = expected.sort_values(key).reset_index(drop=True)
    assert got[key].astype(str).values.tolist() == want[key].astype(str).values.tolist()
    assert got["priority"].astype(int).tolist() == want["priority"].astype(int).tolist()
    assert np.allclose(got["score"].to_numpy(float), want["score"].to_numpy(float), rtol=0, atol=1e-15)

    pool = update.pool
    pd.testing.assert_frame_equal(stats.sizes.reset_index(drop=True),
                                  core.pool_sizes(pool).reset_index(drop=True), check_dtype=False)
    pd.testing.assert_frame_equal(stats.contributions.reset_index(drop=True),
                                  core.unique_contributions(pool).reset_index(drop=True), check_dtype=False)
    pd.testing.assert_frame_equal(stats.overlap.reset_index(drop=True),
                                  core.run_overlap(pool).reset_index(drop=True), check_dtype=False)

    label_frame = pd.DataFrame(labels).assign(chunk_id=lambda f: "doc:" + f["doc_id"] + ":0")
    label_frame = label_frame[["query_id", "chunk_id", "grade"]]
    all_rows = _core_frame(runs)
    judged = core.judged_at_k(all_rows, label_frame, K, id_col="chunk_id")
    got_j = stats.judged.dropna().sort_values("run_id").reset_index(drop=True)
    want_j = judged.sort_values("run_id").reset_index(drop=True)
    assert got_j["run_id"].tolist() == want_j["run_id"].tolist()
    assert np.allclose(got_j["judged_at_k"].to_numpy(float), want_j["judged_at_k"].to_numpy(float))

    loo = core.leave_one_run_out(pool, label_frame, k=K, runs=all_rows)
    cols = ["run_id", "unique_pairs", "unique_judged"]
    assert stats.leave_one_out[cols].astype(str).values.tolist() == loo[cols].astype(str).values.tolist()
    assert np.allclose(stats.leave_one_out[["metric_with", "metric_without", "delta"]].to_numpy(float),
                       loo[["metric_with", "metric_without", "delta"]].to_numpy(float), equal_nan=True)
