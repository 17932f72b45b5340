"""Near-duplicate label propagation over a project's chunking (``workbench labels propagate``).

``propagate_labels(db, chunking, source=...)``
    Finds the near-duplicate pairs among the chunking's chunks (MinHash LSH + exact Jaccard of
    word shingles, :mod:`workbench.core.documents.near_duplicates`), copies every direct chunk-level label
    (the qrels of ``source``: ``human`` = SME and imported labels, ``llm``, or ``merged``) to the
    unlabelled near duplicates of its chunk for the same query, and stores them in
    ``propagated_labels`` (never in ``judgments``) with the similarity and the source chunk and
    grade. A new propagation of the same chunking replaces the previous one (only rows this
    command created are touched). The report says how many labels were propagated, the clusters,
    judged@k of each of the chunking's runs before and after, and the agreement between
    propagated and direct grades where both exist (leave-one-out, the measured error).

``revert_propagation(db, chunking)``
    Removes the active propagation's labels (the record stays, marked reverted).

``qrels_with_propagated(db, chunking, source)``
    Chunk qrels of ``source`` plus the propagated labels of items that have no direct label: the
    opt-in way for exports and evaluations to use them (direct labels always win).

Synthetic queries (tag ``synthetic``) take part like any query: a copy of a synthetic label is
a synthetic label, and reports that separate synthetic queries separate these too.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from workbench.core.documents import near_duplicates as nd
from workbench.core.formats import LABEL_SOURCES
from workbench.errors import ConfigError, InputError, clip
from workbench.services import visibility
from workbench.services.output_file import check_output, write_lines
from workbench.services.qrels.export import qrels_table
from workbench.store import propagated_labels as store
from workbench.store.chunks import chunking_exists, read_chunks
from workbench.store.database import Database
from workbench.store.runs import read_run_info, read_run_rows_many
from workbench.store.synthetic_queries import synthetic_query_ids

PROPAGATION_SOURCES = LABEL_SOURCES

#: Bounds of the whole-number options, inclusive. A shingle width and a permutation count are
#: stored as 32-bit INTEGER; MinHash (datasketch) takes seeds 0 .. 2**32 - 1; a signature holds
#: ``num_perm`` 64-bit values per distinct text, so 4,096 permutations (standard error of the
#: Jaccard estimate about 1/sqrt(4096) = 0.016) already cost 32 KiB a text.
OPTION_BOUNDS = {"shingle": (1, 2**31 - 1), "num_perm": (16, 4096), "seed": (0, 2**32 - 1), "k": (1, None)}


def check_options(**values: int) -> None:
    """Refuse a whole-number option of :func:`propagate_labels` outside :data:`OPTION_BOUNDS`
    (a :class:`ConfigError` naming it) before anything is read or written."""
    for key, value in values.items():
        low, high = OPTION_BOUNDS[key]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ConfigError(f"{{field}} must be a whole number, got {value!r}", field=key)
        if value < low or (high is not None and value > high):
            bound = f"from {low:,} to {high:,}" if high is not None else f"at least {low:,}"
            raise ConfigError(f"{{field}} must be {bound}, got {clip(f'{value:,}', quote=False)}", field=key)


@dataclass
class PropagationReport:
    chunking: str
    source: str
    threshold: float
    shingle: int
    num_perm: int
    seed: int
    chunks: int
    pairs: int
    clusters: int
    clustered_chunks: int
    direct_labels: int
    propagated: int
    replaced: int
    k: int
    judged_before: dict[str, float] = field(default_factory=dict)
    judged_after: dict[str, float] = field(default_factory=dict)
    agreement: dict = field(default_factory=dict)
    propagation_id: int | None = None
    dry_run: bool = False

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        a = self.agreement
        lines = [
            f"chunking {self.chunking}: {self.chunks:,} chunks, {self.pairs:,} near-duplicate pairs "
            f"(Jaccard of {self.shingle}-word shingles >= {self.threshold:g}) in {self.clusters:,} clusters "
            f"of {self.clustered_chunks:,} chunks",
            f"{'would propagate' if self.dry_run else 'propagated'} {self.propagated:,} labels from "
            f"{self.direct_labels:,} direct {self.source} labels"
            + (f" (replacing {self.replaced:,} of the previous propagation)" if self.replaced else ""),
        ]
        if a.get("n"):
            kappa = "-" if a["kappa"] is None else f"{a['kappa']:.3f}"
            lines.append(f"agreement with direct labels where both exist (leave-one-out): n={a['n']:,}, "
                         f"exact {a['exact']:.3f}, binary (grade>={a['threshold']}) {a['binary']:.3f}, "
                         f"kappa {kappa}")
        else:
            lines.append("agreement: no labelled chunk has a labelled near duplicate for the same query")
        for run in self.judged_before:
            lines.append(f"judged@{self.k} {run}: {self.judged_before[run]:.4f} -> {self.judged_after[run]:.4f}")
        return "\n".join(lines)


def _direct_labels(db: Database, chunking: str, source: str) -> pd.DataFrame:

    return qrels_table(db, level="chunk", chunking=chunking, source=source)


def _chunk_runs(db: Database, chunking: str) -> list[str]:
    info = read_run_info(db)
    return [str(n) for n, level, c in zip(info["name"], info["level"], info["chunking"])
            if level == "chunk" and c == chunking]


def _judged(db: Database, chunking: str, k: int, direct: pd.DataFrame, propagated: pd.DataFrame
            ) -> tuple[dict[str, float], dict[str, float]]:
    runs = _chunk_runs(db, chunking)
    if not runs:
        return {}, {}
    rows = read_run_rows_many(db, runs, depth=k, columns=["run_id", "query_id", "chunk_id", "rank"])
    rows = rows.rename(columns={"chunk_id": "item_id"})
    before_set = set(zip(direct["query_id"].astype(str), direct["item_id"].astype(str)))
    after_set = before_set | set(zip(propagated["query_id"].astype(str), propagated["item_id"].astype(str)))
    before, after = {}, {}
    for run in runs:
        part = rows[rows["run_id"] == run]
        before[run] = nd.judged_at_k(part, before_set, k)
        after[run] = nd.judged_at_k(part, after_set, k)
    return before, after


def propagate_labels(db: Database, chunking: str, *, source: str = "human", threshold: float = nd.DEFAULT_THRESHOLD,
                     shingle: int = nd.DEFAULT_SHINGLE, num_perm: int = nd.DEFAULT_NUM_PERM, seed: int = 1,
                     k: int = 10, dry_run: bool = False) -> PropagationReport:
    """Find near duplicates, propagate, store (unless ``dry_run``) and report (module docstring)."""
    if source not in PROPAGATION_SOURCES:
        raise InputError(f"unknown label source {source!r}; expected one of {', '.join(PROPAGATION_SOURCES)}")
    check_options(shingle=shingle, num_perm=num_perm, seed=seed, k=k)
    if not chunking_exists(db, chunking):
        raise InputError(f"no chunking named {chunking!r} in the project; create it with {{command:chunk}} "
                         f"or pick one listed by {{command:status}}")
    chunks = read_chunks(db, chunking, with_text=True)
    pairs = nd.near_duplicate_pairs(chunks["chunk_id"].astype(str).tolist(), chunks["text"].astype(str).tolist(),
                                    threshold=threshold, width=shingle, num_perm=num_perm, seed=seed)
    members = nd.clusters(pairs)
    direct = _direct_labels(db, chunking, source)
    labels = nd.propagate(direct, pairs)
    agreement = nd.propagation_agreement(direct, pairs)
    before, after = _judged(db, chunking, k, direct, labels)
    spans = chunks.set_index(chunks["chunk_id"].astype(str))[["doc_id", "start", "end"]]
    if len(labels):
        located = spans.loc[labels["item_id"]].reset_index(drop=True)
        labels = pd.concat([labels.reset_index(drop=True), located], axis=1)
        source_grades = {(q, i): g for q, i, g in zip(direct["query_id"], direct["item_id"], direct["grade"])}
        labels["source_grade"] = [source_grades[(q, s)] for q, s in zip(labels["query_id"], labels["source_item_id"])]
        labels = labels.rename(columns={"item_id": "chunk_id", "source_item_id": "source_chunk_id"})
    report = PropagationReport(
        chunking=chunking, source=source, threshold=float(threshold), shingle=int(shingle), num_perm=int(num_perm),
        seed=int(seed), chunks=len(chunks), pairs=len(pairs), clusters=len(set(members.values())),
        clustered_chunks=len(members), direct_labels=len(direct), propagated=len(labels), replaced=0, k=int(k),
        judged_before=before, judged_after=after, agreement=agreement, dry_run=dry_run)
    if dry_run:
        return report
    with db.transaction() as cur:
        for old in store.active_propagations(cur, chunking):
            report.replaced += store.revert(cur, old["propagation_id"])
        report.propagation_id = store.create_propagation(
            cur, chunking=chunking, source=source, threshold=threshold, shingle=shingle, num_perm=num_perm,
            seed=seed, pairs=len(pairs), clusters=report.clusters, labels=len(labels),
            report={"agreement": agreement, "judged_before": before, "judged_after": after, "k": k})
        store.write_pairs(cur, report.propagation_id, pairs)
        if len(labels):
            store.write_propagated(cur, report.propagation_id, labels)
    return report


def revert_propagation(db: Database, chunking: str) -> int:
    """Remove the labels of ``chunking``'s active propagation; returns how many were removed."""
    with db.transaction() as cur:
        active = store.active_propagations(cur, chunking)
        if not active:
            raise InputError(f"chunking {chunking!r} has no propagated labels to revert "
                             "(see {command})", command=f"labels propagate --chunking {chunking}")
        return sum(store.revert(cur, p["propagation_id"]) for p in active)


def propagated_qrels(db: Database, chunking: str) -> pd.DataFrame:
    """``query_id, item_id, grade, similarity, source_chunk_id`` of the active propagation."""
    rows = store.read_propagated(db, chunking)
    return rows.rename(columns={"chunk_id": "item_id"})[["query_id", "item_id", "grade", "similarity",
                                                         "source_chunk_id"]]


def qrels_with_propagated(db: Database, chunking: str, source: str = "merged") -> pd.DataFrame:
    """Chunk qrels of ``source`` plus propagated labels of items with no direct label:
    ``query_id, item_id, grade, propagated`` (bool)."""
    direct = _direct_labels(db, chunking, source).assign(propagated=False)
    copied = propagated_qrels(db, chunking)[["query_id", "item_id", "grade"]].assign(propagated=True)
    if copied.empty:
        return direct
    have = pd.MultiIndex.from_frame(direct[["query_id", "item_id"]].astype(str))
    keep = ~pd.MultiIndex.from_frame(copied[["query_id", "item_id"]].astype(str)).isin(have)
    out = pd.concat([direct, copied[keep]], ignore_index=True)
    out["grade"] = out["grade"].astype(np.int64)
    return out.sort_values(["query_id", "item_id"], kind="stable").reset_index(drop=True)


QUERY_SETS = ("all", "real", "synthetic")


def export_qrels_with_propagated(db: Database, chunking: str, out, *, source: str = "merged",
                                 queries: str = "all", propagated: bool = True, force: bool = False) -> dict:
    """Write TREC chunk qrels of ``chunking`` (direct labels of ``source``, plus propagated labels
    of unlabelled items when ``propagated``) to a new file ``out``; ``queries`` keeps all
    queries, only real ones, or only synthetic ones (``workbench synth``). All or nothing: the
    file is written next to ``out`` and renamed when complete (:mod:`workbench.services.output_file`:
    never over a database, a link or, unless ``force``, an existing file). Returns the counts."""

    visibility.require_read("label_files")
    if queries not in QUERY_SETS:
        raise InputError(f"unknown query set {queries!r}; expected one of {', '.join(QUERY_SETS)}")
    check_output(out, force=force)  # before any work: never a database, a link or (unforced) a file
    if not chunking_exists(db, chunking):
        raise InputError(f"no chunking named {chunking!r} in the project; see {{command:status}}")
    table = qrels_with_propagated(db, chunking, source) if propagated else \
        _direct_labels(db, chunking, source).assign(propagated=False)
    synthetic = synthetic_query_ids(db)
    if queries != "all":
        keep = table["query_id"].astype(str).isin(synthetic)
        table = table[keep if queries == "synthetic" else ~keep]
    write_lines(out, (f"{q} Q0 {i} {int(g)}\n" for q, i, g in
                      zip(table["query_id"], table["item_id"], table["grade"])), force=force)
    return {"rows": int(len(table)), "propagated": int(table["propagated"].sum()),
            "queries": int(table["query_id"].nunique())}
