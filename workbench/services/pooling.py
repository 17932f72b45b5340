"""Judgment pools over stored runs: build, extend with new runs, and diagnose.

A depth-k pool of a query is the union of the top ``k`` items of each pooled run (TREC
pooling, :mod:`workbench.core.pooling`). All pooled runs must rank the same items: one level
('chunk' or 'doc') and, for chunk runs, one chunking. Chunk pools store ``chunk_id`` and its
``doc_id``; document pools store ``chunk_id`` NULL.

Priority: ``pool_pairs.priority`` is the pair's rank within its query by RRF score
``Σ_r 1 / (60 + rank_r)`` over the pooled runs that retrieved it (ties by item id): judge
the lowest first. ``rrf_score`` is that score when the pair entered the pool.

Adding runs (:func:`add_runs`) never rewrites existing pairs (they may be judged already):
it inserts only the pairs no pooled run had found, with priorities continuing after the
query's current maximum (ordered among themselves by the RRF score over all runs, old and
new), and the new runs' provenance for every pair they retrieved within the pool depth.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from workbench.config import DEFAULTS
from workbench.core import pooling as core_pooling
from workbench.core.spans import chunk_qrels, doc_qrels
from workbench.errors import InputError, StoreError
from workbench.services.progress import ProgressFactory, no_progress
from workbench.services.retrieval import read_runs_checked, same_scope
from workbench.store.chunks import read_chunks
from workbench.store.database import Database
from workbench.store.judgments import read_judgments
from workbench.store.pools import (
    create_pool, read_pool, read_pool_pairs, read_pool_provenance, read_pools, update_pool_runs,
    write_chunk_pool_pairs, write_pool_pairs, write_pool_provenance_from_runs,
)
from workbench.store.retrieval import read_run_rows_many

POOL_RRF_K = 60


@dataclass(frozen=True)
class PoolSummary:
    name: str
    level: str
    chunking: str | None
    depth: int
    runs: list[str]
    queries: int
    pairs_added: int
    provenance_added: int
    pairs_total: int
    seconds: float


def _check_depth(depth) -> int:
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1:
        raise InputError(f"pool depth must be a positive integer (items per run and query), got {depth!r}")
    return int(depth)


def _id_col(level: str) -> str:
    return "chunk_id" if level == "chunk" else "doc_id"


def _runs_table(db: Database, runs: list[str], depth: int, level: str) -> pd.DataFrame:
    """The runs' top ``depth`` rows as ``run_id, query_id, <id>, rank`` (input of core pooling)."""
    return read_run_rows_many(db, runs, depth=depth, columns=["run_id", "query_id", _id_col(level), "rank"])


def _write_pairs(tx, name: str, pairs: pd.DataFrame, level: str, runs: list[str]) -> int:
    """Store pairs (``query_id, <id>, priority, score``); chunk pairs get doc_id from the runs."""
    out = pairs.rename(columns={"score": "rrf_score"})
    if level == "chunk":
        n = write_chunk_pool_pairs(tx, name, out, runs)
        if n != len(out):  # every pooled chunk came from these runs' rows, so this cannot differ
            raise StoreError(f"pool {name!r}: stored {n} of {len(out)} pairs; the runs changed while pooling, retry")
        return n
    return write_pool_pairs(tx, name, out.assign(chunk_id=None))


def build_pool(db: Database, name: str, runs: list[str], depth: int, *,
               progress: ProgressFactory = no_progress) -> PoolSummary:
    """Create pool ``name``: the depth-``depth`` union of ``runs`` with priorities and provenance."""
    depth = _check_depth(depth)
    if not isinstance(name, str) or not name.strip():
        raise InputError("a pool needs a non-empty --name")
    if read_pool(db, name) is not None:
        raise StoreError(
            f"pool {name!r} already exists in {db.path}; add runs to it with "
            f"`workbench pool --name {name} --runs NEW --add`, or choose another --name"
        )
    started = time.perf_counter()
    info = read_runs_checked(db, list(runs))
    level, chunking = same_scope(info, "a pool")
    with progress(f"pool {name}", 3, "step") as advance:
        stacked = _runs_table(db, list(runs), depth, level)
        advance(1)
        if stacked.empty:
            raise InputError(f"runs {list(runs)} have no rows; nothing to pool")
        pool = core_pooling.build_pool(stacked, depth, k=POOL_RRF_K, id_col=_id_col(level))
        advance(1)
        with db.transaction() as tx:
            create_pool(tx, name, level=level, chunking=chunking, depth=depth, runs=list(runs))
            n_pairs = _write_pairs(tx, name, pool.pairs, level, list(runs))
            n_prov = write_pool_provenance_from_runs(tx, name, list(runs), depth)
        advance(1)
    return PoolSummary(name, level, chunking, depth, list(runs), int(pool.pairs["query_id"].nunique()),
                       n_pairs, n_prov, n_pairs, time.perf_counter() - started)


def _load_pool(db: Database, name: str) -> tuple[dict, core_pooling.Pool]:
    """The stored pool as its record and a :class:`core.pooling.Pool`."""
    record = read_pool(db, name)
    if record is None:
        known = ", ".join(read_pools(db)["name"]) or "none yet"
        raise StoreError(f"no pool {name!r} in {db.path}; known pools: {known}")
    col = _id_col(record["level"])
    prov = read_pool_provenance(db, name).rename(columns={"run": "run_id"})
    prov = prov[["run_id", "query_id", col, "rank"]].reset_index(drop=True)
    pairs = read_pool_pairs(db, name)
    counts = prov.groupby(["query_id", col], sort=False).agg(n_runs=("run_id", "size"), best_rank=("rank", "min"))
    pairs = (pairs.rename(columns={"rrf_score": "score"})
             .merge(counts.reset_index(), on=["query_id", col], how="left"))
    pairs = pairs[["query_id", col, "priority", "score", "n_runs", "best_rank"]]
    pool = core_pooling.Pool(pairs=pairs, provenance=prov, id_col=col,
                             depths={r: record["depth"] for r in record["runs"]}, k=POOL_RRF_K)
    return record, pool


def add_runs(db: Database, name: str, runs: list[str]) -> PoolSummary:
    """Add ``runs`` to pool ``name`` at its depth (rule in the module docstring)."""
    started = time.perf_counter()
    record, pool = _load_pool(db, name)
    already = [r for r in runs if r in record["runs"]]
    if already:
        raise InputError(f"run(s) {already} are already in pool {name!r} (runs: {record['runs']})")
    info = read_runs_checked(db, list(runs))
    level, chunking = same_scope(info, "a pool")
    if (level, chunking) != (record["level"], record["chunking"]):
        raise InputError(
            f"pool {name!r} holds {record['level']} items of chunking {record['chunking']!r} but "
            f"runs {list(runs)} rank {level} items of chunking {chunking!r}; pool them separately"
        )
    stacked = _runs_table(db, list(runs), record["depth"], level)
    update = core_pooling.add_runs_to_pool(pool, stacked, record["depth"])
    new_pairs = update.new_pairs
    # Continue each query's priorities after its current maximum (existing pairs are untouched).
    top = pool.pairs.groupby("query_id")["priority"].max()
    offset = new_pairs["query_id"].map(top).fillna(0).astype(np.int64)
    new_pairs = new_pairs.assign(priority=new_pairs["priority"].astype(np.int64) + offset.to_numpy())
    with db.transaction() as tx:
        n_pairs = _write_pairs(tx, name, new_pairs, level, list(runs))
        n_prov = write_pool_provenance_from_runs(tx, name, list(runs), record["depth"])
        update_pool_runs(tx, name, record["runs"] + list(runs))
    total = len(pool.pairs) + n_pairs
    queries = int(pd.concat([pool.pairs["query_id"], new_pairs["query_id"]]).nunique())
    return PoolSummary(name, level, chunking, record["depth"], record["runs"] + list(runs), queries,
                       n_pairs, n_prov, total, time.perf_counter() - started)


@dataclass(frozen=True)
class PoolStats:
    """Diagnostics of one pool against the current labels (tables are DataFrames)."""

    pool: dict
    k: int
    sizes: pd.DataFrame            # query_id, pool_size
    contributions: pd.DataFrame    # run_id, pooled, unique
    overlap: pd.DataFrame          # run_a, run_b, shared, union, jaccard
    judged: pd.DataFrame           # run_id, judged_at_k
    leave_one_out: pd.DataFrame    # run_id, unique_pairs, unique_judged, metric_with, metric_without, delta
    pairs: int
    judged_pairs: int
    summary: dict = field(default_factory=dict)


def pool_labels(db: Database, level: str, chunking: str | None,
                min_overlap: float = DEFAULTS["evaluation"]["min_overlap"]) -> pd.DataFrame:
    """Current labels at the pool's granularity: ``query_id, <id>, grade`` (judged pairs only).

    Labels are span judgments; chunk pools map them onto the pool's chunking with
    :func:`workbench.core.spans.chunk_qrels` (a chunk is judged for a query iff one of the
    query's judged spans covers ``>= min_overlap`` of the shorter of the two), document pools
    take the maximum grade per document (:func:`doc_qrels`).
    """
    spans = read_judgments(db, status="ok")[["query_id", "doc_id", "start", "end", "grade"]]
    spans = spans.astype({"grade": "float64"})
    if level == "chunk":
        chunks = read_chunks(db, chunking)
        return chunk_qrels(chunks, spans, min_overlap=min_overlap)
    return doc_qrels(spans)


def pool_stats(db: Database, name: str, *, k: int = 10,
               min_overlap: float = DEFAULTS["evaluation"]["min_overlap"],
               relevance_threshold: int = DEFAULTS["evaluation"]["relevance_threshold"]) -> PoolStats:
    """Size per query, unique contributions, pairwise overlap, judged@k and leave-one-run-out.

    judged@k and leave-one-run-out score each run's own top ``k`` (read from its stored rows,
    so ``k`` may exceed the pool depth); leave-one-run-out uses P@k with grade
    ``>= relevance_threshold`` (formula in :func:`core.pooling.leave_one_run_out`).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    record, pool = _load_pool(db, name)
    col = pool.id_col
    labels = pool_labels(db, record["level"], record["chunking"], min_overlap)
    runs_top = read_run_rows_many(db, record["runs"], depth=int(k))[["run_id", "query_id", col, "rank"]]
    sizes = core_pooling.pool_sizes(pool)
    contributions = core_pooling.unique_contributions(pool)
    overlap = core_pooling.run_overlap(pool)
    if runs_top.empty:
        judged = pd.DataFrame({"run_id": record["runs"], "judged_at_k": np.nan})
    else:
        judged = core_pooling.judged_at_k(runs_top, labels, int(k), id_col=col)
        # A run with no rows answers no query: show it with NaN rather than dropping it.
        judged = judged.set_index("run_id").reindex(record["runs"]).rename_axis("run_id").reset_index()
    loo = core_pooling.leave_one_run_out(pool, labels, k=int(k), rel_threshold=relevance_threshold,
                                         runs=runs_top if not runs_top.empty else None)
    keys = pd.MultiIndex.from_arrays([pool.pairs["query_id"].astype(str), pool.pairs[col].astype(str)])
    label_keys = pd.MultiIndex.from_arrays([labels["query_id"].astype(str), labels[col].astype(str)])
    judged_pairs = int(keys.isin(label_keys).sum())
    summary = {
        "queries": int(len(sizes)),
        "pairs": int(len(pool.pairs)),
        "judged_pairs": judged_pairs,
        "unjudged_pairs": int(len(pool.pairs)) - judged_pairs,
        "min_pool_size": int(sizes["pool_size"].min()) if len(sizes) else 0,
        "mean_pool_size": float(sizes["pool_size"].mean()) if len(sizes) else 0.0,
        "max_pool_size": int(sizes["pool_size"].max()) if len(sizes) else 0,
    }
    return PoolStats(record, int(k), sizes, contributions, overlap, judged, loo,
                     int(len(pool.pairs)), judged_pairs, summary)


def list_pools(db: Database) -> pd.DataFrame:
    return read_pools(db)


def pool_pairs(db: Database, name: str) -> pd.DataFrame:
    """Pairs of pool ``name`` ordered by query and priority."""
    if read_pool(db, name) is None:
        raise StoreError(f"no pool {name!r} in {db.path}")
    return read_pool_pairs(db, name)


def pool_preview(db: Database, name: str, query_id: str, limit: int = 5) -> pd.DataFrame:
    """The first ``limit`` pairs of one query by priority, with the item text to show.

    Columns: ``priority, doc_id, chunk_id, rrf_score, text`` (chunk text for chunk pools, the
    document text for document pools).
    """
    from workbench.store.corpus import read_documents

    record = read_pool(db, name)
    if record is None:
        raise StoreError(f"no pool {name!r} in {db.path}")
    pairs = read_pool_pairs(db, name)
    pairs = pairs.loc[pairs["query_id"] == query_id].sort_values("priority").head(int(limit))
    if record["level"] == "chunk":
        chunks = read_chunks(db, record["chunking"], with_text=True, chunk_ids=pairs["chunk_id"].tolist())
        text = chunks.set_index("chunk_id")["text"]
        pairs = pairs.assign(text=pairs["chunk_id"].map(text))
    else:
        docs = read_documents(db, pairs["doc_id"].tolist())
        pairs = pairs.assign(text=pairs["doc_id"].map(docs.set_index("doc_id")["text"]))
    return pairs[["priority", "doc_id", "chunk_id", "rrf_score", "text"]].reset_index(drop=True)
