"""Judgment pools over stored runs: build, extend with new runs, and diagnose.

A depth-k pool of a query is the union of the top ``k`` items of each pooled run (TREC
pooling, :mod:`workbench.core.pooling.diagnostics`). All pooled runs must rank the same items: one level
('chunk' or 'doc') and, for chunk runs, one chunking. Chunk pools store ``chunk_id`` and its
``doc_id``; document pools store ``chunk_id`` NULL.

Priority: ``pool_pairs.priority`` is the pair's rank within its query by RRF score
``Σ_r 1 / (60 + rank_r)`` over the pooled runs that retrieved it (ties by item id): judge
the lowest first. ``rrf_score`` is that score when the pair entered the pool.

Adding runs (:func:`add_runs`) never rewrites existing pairs (they may be judged already):
it inserts only the pairs no pooled run had found, with priorities continuing after the
query's current maximum (ordered among themselves by the RRF score over all runs, old and
new), and the new runs' provenance for every pair they retrieved within the pool depth.

Scale: the set work (union, new pairs, per-query sizes, overlap patterns) runs in DuckDB
(:mod:`workbench.store.pools`). A new pool's priorities are computed there too, in the one
statement that writes its pairs; the provenance is never copied (the view ``pool_provenance``
reads the pooled runs' rows). Elsewhere only integer codes and ranks reach numpy, where the core
(:func:`workbench.core.pooling.fusion.fuse_wide`, :func:`workbench.core.pooling.diagnostics.pattern_stats`)
computes priorities and diagnostics with the same formulas, tie rules and float sums as
:func:`workbench.core.pooling.diagnostics.build_pool`. Ids are joined back inside DuckDB when written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from workbench.config import DEFAULTS
from workbench.core.formats.names import check_name
from workbench.core.pooling import diagnostics as core_pooling
from workbench.core.pooling.fusion import check_run_summary, duplicate_pair_error, fuse_wide
from workbench.errors import InputError, StoreError, clip
from workbench.services import access
from workbench.services.coverage import coverage_notes
from workbench.services.progress import ProgressFactory, no_progress
from workbench.services.qrels.rule import default_policy, project_qrels, with_min_overlap
from workbench.services.retrieval.runs import read_runs_checked, same_scope
from workbench.store.chunks import read_chunks
from workbench.store.corpus import read_documents
from workbench.store.database import Database
from workbench.store.pools import (
    DuplicateRunRows,
    count_pool_pairs,
    count_pool_pairs_among,
    create_pool,
    derive_pool_provenance,
    drop_staged_pool_pairs,
    first_duplicate_run_row,
    read_pool,
    read_pool_pairs,
    read_pool_provenance,
    read_pool_sizes,
    read_pools,
    read_provenance_patterns,
    read_unique_pool_pairs_among,
    stage_new_pool_pairs,
    summarise_run_rows,
    update_pool_runs,
    write_fused_pool_pairs,
    write_staged_pool_pairs,
)
from workbench.store.runs import read_run_rows_many

POOL_RRF_K = 60


@dataclass(frozen=True)
class PoolSummary:
    """A pool :func:`build_pool` built or :func:`add_runs` grew (what ``Project.pool`` returns):
    ``pairs_added`` new pairs (all of them for a new pool), ``pairs_total`` (also ``pairs``) in the
    pool now, ``provenance_added`` run rows recorded, ``runs`` every pooled run in pooling order."""

    name: str
    level: str
    chunking: str | None
    depth: int
    runs: tuple[str, ...]
    queries: int
    pairs_added: int
    provenance_added: int
    pairs_total: int
    seconds: float
    #: A sentence per pooled run that does not cover every document (see services.coverage).
    notes: tuple[str, ...] = ()

    @property
    def pairs(self) -> int:
        """The pool's pairs now (``pairs_total``)."""
        return self.pairs_total

    def to_pandas(self) -> pd.DataFrame:
        """One row: ``name, level, chunking, depth, runs`` (comma-joined)``, queries, pairs,
        pairs_added, seconds``."""
        return pd.DataFrame([{"name": self.name, "level": self.level, "chunking": self.chunking, "depth": self.depth,
                              "runs": ",".join(self.runs), "queries": self.queries, "pairs": self.pairs,
                              "pairs_added": self.pairs_added, "seconds": self.seconds}])


#: Largest pool depth (the depth is stored as a 32-bit integer).
MAX_DEPTH = 2**31 - 1


def check_depth(depth: object) -> int:
    """``depth`` as an ``int`` in ``[1, MAX_DEPTH]``, else one line naming ``{field:depth}``."""
    whole_number = "give {field:depth} a whole number of 1 or more"
    if isinstance(depth, bool) or not isinstance(depth, int) and not hasattr(depth, "__index__"):
        raise InputError(f"pool depth must be a positive integer (items per run and query), got "
                         f"{clip(repr(depth), 40, quote=False)}", field="depth", hint=whole_number)
    depth = int(depth.__index__())
    if depth < 1:
        raise InputError(f"pool depth must be a positive integer (items per run and query), got {depth}",
                         field="depth", hint=whole_number)
    if depth > MAX_DEPTH:
        raise InputError(f"pool depth must be at most {MAX_DEPTH:,} (a depth beyond a run's length pools all "
                         f"of it), got {clip(str(depth), 40, quote=False)}", field="depth", hint="lower {field:depth}")
    return depth


def _id_col(level: str) -> str:
    return "chunk_id" if level == "chunk" else "doc_id"


def _check_rows(tx, runs: list[str], depth: int, level: str) -> int:
    """Validate the runs' rows within ``depth`` as core pooling does; return their count.

    The same errors as :func:`core.fusion.stack_coded` (missing ids, ranks below 1), checked
    with one aggregate in DuckDB instead of loading the rows.
    """
    summary = summarise_run_rows(tx, runs, depth, level)
    check_run_summary(summary["run"].tolist(), summary["missing"].tolist(), summary["min_rank"].tolist(),
                      _id_col(level))
    return int(summary["rows"].sum())


def _check_no_duplicates(tx, staged, runs: list[str], depth: int, level: str, *, force: bool = False) -> None:
    """A run listing a (query, item) pair twice is an error (as in core pooling)."""
    present = np.zeros(len(staged.rows), dtype=np.int64)
    for r in staged.ranks:
        present += r > 0
    if force or (staged.rows > present).any():
        dup = first_duplicate_run_row(tx, runs, depth, level)
        if dup is not None:
            raise duplicate_pair_error(*dup, _id_col(level))


def build_pool(db: Database, name: str, runs: list[str], depth: int, *,
               progress: ProgressFactory = no_progress) -> PoolSummary:
    """Create pool ``name``: the depth-``depth`` union of ``runs`` with priorities and provenance.

    The union, its RRF scores and priorities are computed and written by one DuckDB statement
    (:func:`workbench.store.pools.write_fused_pool_pairs`, the same floats and tie rule as
    :func:`core.fusion.fuse_wide`); the provenance is the runs' rows within the depth, read
    from ``run_rows`` through the view ``pool_provenance`` (nothing is copied).
    """
    access.require("build")
    depth = check_depth(depth)
    check_name(name, "pool", "choose another {field}", field="name")
    if read_pool(db, name) is not None:
        raise StoreError(
            f"pool {name!r} already exists in {db.path}; add runs to it with "
            f"{{command}}, or choose another {{field:name}}", command=f"pool --name {name} --runs NEW --add",
        )
    started = time.perf_counter()
    info = read_runs_checked(db, list(runs))
    level, chunking = same_scope(info, "a pool")
    # Scores are summed run by run in name order: the order in which core pooling, reading the
    # rows ordered by run, meets them (bit-identical scores).
    order = sorted(set(runs))
    try:
        with progress(f"pool {name}", 3, "step") as advance, db.transaction() as tx:
            n_prov = _check_rows(tx, order, depth, level)
            if n_prov == 0:
                raise InputError(f"runs {', '.join(runs)} have no rows; nothing to pool")
            advance(1)
            create_pool(tx, name, level=level, chunking=chunking, depth=depth, runs=list(runs))
            n_pairs, queries = write_fused_pool_pairs(tx, name, order, depth, level, k=POOL_RRF_K)
            advance(1)
            # The provenance is the runs' rows within the depth, which _check_rows counted.
            derive_pool_provenance(tx, name, list(runs))
            advance(1)
    except DuplicateRunRows:  # rolled back; name the first duplicate as core pooling does
        with db.transaction() as tx:
            dup = first_duplicate_run_row(tx, order, depth, level)
        if dup is None:  # the rows changed since; cannot happen while the file is ours
            raise StoreError(f"pool {name!r}: a run changed while pooling; nothing was stored; retry") from None
        raise duplicate_pair_error(*dup, _id_col(level)) from None
    return PoolSummary(name, level, chunking, depth, tuple(runs), queries,
                       n_pairs, n_prov, n_pairs, time.perf_counter() - started,
                       tuple(coverage_notes(db, list(runs))))


def _runs_words(runs: list[str]) -> str:
    """``run 'a' is`` / ``runs 'a', 'b' are``: names in words, never a Python list."""
    names = ", ".join(repr(r) for r in runs)
    return f"run {names} is" if len(runs) == 1 else f"runs {names} are"


def _pool_record(db: Database, name: str) -> dict:
    record = read_pool(db, name)
    if record is None:
        known = ", ".join(read_pools(db)["name"]) or "none yet"
        raise InputError(f"no pool {name!r} in {db.path}; known pools: {known}")
    return record


def add_runs(db: Database, name: str, runs: list[str]) -> PoolSummary:
    """Add ``runs`` to pool ``name`` at its depth (rule in the module docstring).

    New pairs are found with an anti-join against the stored pairs in DuckDB; only they (and
    their ranks) reach numpy, where their RRF order over all runs, old and new, is computed.
    """
    access.require("build")
    started = time.perf_counter()
    record = _pool_record(db, name)
    already = [r for r in runs if r in record["runs"]]
    if already:
        raise InputError(f"{_runs_words(already)} already in pool {name!r} (its runs: {', '.join(record['runs'])}); "
                         f"add only runs it does not hold yet")
    info = read_runs_checked(db, list(runs))
    level, chunking = same_scope(info, "a pool")
    if (level, chunking) != (record["level"], record["chunking"]):
        raise InputError(
            f"pool {name!r} holds {record['level']} items of chunking {record['chunking']!r} but "
            f"runs {list(runs)} rank {level} items of chunking {chunking!r}; pool them separately"
        )
    depth = record["depth"]
    # Summation order of core pooling: the pool's provenance (ordered by run), then the new runs.
    old, new = sorted(set(record["runs"])), sorted(set(runs))
    with db.transaction() as tx:
        n_prov = _check_rows(tx, new, depth, level)
        if n_prov == 0:
            raise InputError(f"runs {list(runs)} have no rows within the pool depth {depth}; nothing to add")
        staged = stage_new_pool_pairs(tx, name, old, new, depth, level)
        # Rows of old pairs are not staged, so look for duplicates among all new rows.
        _check_no_duplicates(tx, staged, new, depth, level, force=True)
        score, rank = fuse_wide(staged.query, staged.ranks, k=POOL_RRF_K)
        # New pairs rank among themselves by their RRF over all runs, after the query's
        # current maximum priority (existing pairs are untouched).
        n_pairs = write_staged_pool_pairs(tx, name, level, staged.rid, rank + staged.top, score)
        if n_pairs != len(staged.rid):
            raise StoreError(f"pool {name!r}: stored {n_pairs} of {len(staged.rid)} pairs; retry")
        drop_staged_pool_pairs(tx)
        derive_pool_provenance(tx, name, list(runs))
        update_pool_runs(tx, name, record["runs"] + list(runs))
        total, queries = count_pool_pairs(tx, name)
    return PoolSummary(name, level, chunking, depth, (*record["runs"], *runs), queries,
                       n_pairs, n_prov, total, time.perf_counter() - started,
                       tuple(coverage_notes(db, record["runs"] + list(runs))))


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
    """The grade the labels give each pair at the pool's granularity: ``query_id, <id>, grade``
    (judged pairs only), by the project's one qrels rule (:func:`qrels_labels`: the same grades
    as pool statistics, ``workbench export qrels`` and evaluation). Chunk pools map the span
    labels onto the pool's chunking with the span rule (overlap / shorter span ``>= min_overlap``).
    ``attrs["qrels_policy"]`` states the policy."""
    return qrels_labels(db, level, chunking, min_overlap)


def qrels_labels(db: Database, level: str, chunking: str | None,
                 min_overlap: float = DEFAULTS["evaluation"]["min_overlap"]) -> pd.DataFrame:
    """The project's qrels at the pool's granularity by the one qrels rule
    (:func:`workbench.services.qrels.rule.project_qrels`, the same as ``workbench export qrels``):
    ``query_id, <id>, grade``."""

    project = project_qrels(db, level=level, chunking=chunking, policy=with_min_overlap(default_policy(), min_overlap))
    out = project.table[["query_id", "item_id", "grade"]].rename(columns={"item_id": _id_col(level)})
    out.attrs["qrels_policy"] = "; ".join([project.statement(), *project.notes])
    return out


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
    record = _pool_record(db, name)
    level, runs = record["level"], record["runs"]
    col = _id_col(level)
    labels = qrels_labels(db, level, record["chunking"], min_overlap)
    runs_top = read_run_rows_many(db, runs, depth=int(k))[["run_id", "query_id", col, "rank"]]
    # Sizes, contributions and overlap from aggregates over the stored pool (no pool in pandas).
    sizes = read_pool_sizes(db, name)
    n_pairs = int(sizes["pool_size"].sum())
    contributions, overlap = core_pooling.pattern_stats(runs, *read_provenance_patterns(db, name, runs, level))
    if runs_top.empty:
        judged = pd.DataFrame({"run_id": runs, "judged_at_k": np.nan})
    else:
        judged = core_pooling.judged_at_k(runs_top, labels, int(k), id_col=col)
        # A run with no rows answers no query: show it with NaN rather than dropping it.
        judged = judged.set_index("run_id").reindex(runs).rename_axis("run_id").reset_index()
    # Leave-one-run-out needs each run's unique pairs only where they are labelled.
    keys = labels[["query_id", col]].astype(str).drop_duplicates().set_axis(["query_id", "item"], axis=1)
    judged_keys = (labels.loc[labels["grade"].notna(), ["query_id", col]].astype(str).drop_duplicates()
                   .set_axis(["query_id", "item"], axis=1))
    unique = read_unique_pool_pairs_among(db, name, level, judged_keys)
    if runs_top.empty:  # score the pool's own rows (cut at its depth), as core pooling does
        scored = read_pool_provenance(db, name).rename(columns={"run": "run_id"})[["run_id", "query_id", col, "rank"]]
    else:
        scored = runs_top
    loo = core_pooling.leave_one_run_out_unique(
        runs, dict(zip(contributions["run_id"], contributions["unique"])), unique, labels,
        runs=scored, id_col=col, k=int(k), rel_threshold=relevance_threshold)
    judged_pairs = count_pool_pairs_among(db, name, level, keys)
    summary = {
        "queries": len(sizes),
        "pairs": n_pairs,
        "judged_pairs": judged_pairs,
        "unjudged_pairs": n_pairs - judged_pairs,
        "min_pool_size": int(sizes["pool_size"].min()) if len(sizes) else 0,
        "mean_pool_size": float(sizes["pool_size"].mean()) if len(sizes) else 0.0,
        "max_pool_size": int(sizes["pool_size"].max()) if len(sizes) else 0,
        "coverage_notes": coverage_notes(db, list(record["runs"])),
        "qrels_policy": labels.attrs.get("qrels_policy", ""),
    }
    return PoolStats(record, int(k), sizes, contributions, overlap, judged, loo,
                     n_pairs, judged_pairs, summary)


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
