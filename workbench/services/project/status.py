"""The pipeline state of a project: what it holds, which step is done, what comes next.

Both front ends show the same :class:`ProjectStatus`; each names the next step in its own words
(a command in the CLI, a page in the app) and only when it can offer that step.

Steps, in pipeline order, and the rule that sets each one's state
(``done`` / ``partial`` / ``to do`` / ``not available yet``):

=============  ===========================  ==================================================
step           count                        state
=============  ===========================  ==================================================
corpus         documents                    done: documents and queries exist; partial: only one
                                            of the two; to do: neither.
chunks         chunkings                    done: at least one chunking covers every document
                                            (has a chunk of it; documents imported later are
                                            chunked into every chunking); partial: chunkings
                                            exist but none covers every document; to do: no
                                            chunking. Every chunking that misses documents is
                                            named in ``warnings``.
runs           runs                         done: at least one run covers every document;
                                            partial: runs exist but none does; to do: no run. A
                                            run covers the documents the project held when it
                                            was made or imported (documents imported later are
                                            not in it); runs that miss documents are named in
                                            ``warnings``. A run whose coverage was not recorded
                                            (made before migration 6) counts as covering, with
                                            a warning.
pool           pools                        done: a pool with pairs exists; to do otherwise.
judgments      successful LLM labels        done: the LLM judge labelled every pair of at least
                                            one pool; partial: it labelled some; to do: none.
calibration    calibration samples          done: SMEs labelled every held-out pair of a
                                            calibration sample; partial: a sample exists and
                                            is not fully labelled; to do: no sample.
qrels          labelled pool pairs          done: every pair of at least one pool carries a
                                            label; partial: some pairs of a pool do; to do: no
                                            pool pair is labelled. Human and imported labels
                                            count; LLM labels count as the qrels policy says
                                            (default: once their judge configuration passed
                                            the calibration gate, as in every qrels output).
                                            Labels outside every pool (imported qrels) do not
                                            make qrels done.
evaluation     stored evaluations           not available yet: the project has no
                                            ``evaluations`` table; done: one is stored; to do
                                            otherwise.
=============  ===========================  ==================================================

A pair counts as labelled when a successful judgment anchors to it: for chunk pools, a judged
span overlapping the chunk by at least ``min_overlap`` of the shorter span
(:func:`workbench.core.documents.spans.chunk_qrels`); for document pools, any judged span of the document.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from workbench.config import DEFAULTS
from workbench.core.documents.spans import chunk_qrels
from workbench.services.chunking import list_chunkings
from workbench.services.coverage import chunking_coverage as coverage
from workbench.services.coverage import runs_coverage_table
from workbench.services.pooling.pools import list_pools
from workbench.services.qrels.rule import admitted_spans
from workbench.services.retrieval.runs import list_runs
from workbench.store.calibration import label_table, read_samples
from workbench.store.chunks import read_chunks
from workbench.store.database import Database
from workbench.store.judgments import graded_judgments
from workbench.store.meta import read_meta, table_counts
from workbench.store.pools import count_pool_pairs_among, count_pool_pairs_judged, read_pool_pairs

DONE, PARTIAL, TODO, UNAVAILABLE = "done", "partial", "to do", "not available yet"
# A table whose presence means a later feature is installed (its migration has run and its
# table is registered in store.meta's counted tables).
EVALUATION_TABLE = "evaluations"


@dataclass(frozen=True)
class PipelineStep:
    key: str
    title: str
    count: int
    state: str
    detail: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def done(self) -> bool:
        return self.state == DONE

    @property
    def actionable(self) -> bool:
        """Not done and the project can offer it (a feature not installed is skipped)."""
        return self.state in (TODO, PARTIAL)


@dataclass(frozen=True)
class ProjectStatus:
    path: Path
    counts: dict[str, int]
    steps: list[PipelineStep] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)
    chunkings: pd.DataFrame = field(default_factory=pd.DataFrame)
    runs: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def next_step(self) -> PipelineStep | None:
        """The first step still to do (or partly done)."""
        return self.next_step_among(None)

    def next_step_among(self, offered: set[str] | None) -> PipelineStep | None:
        """The first actionable step whose key is in ``offered`` (None: any).

        A front end passes the steps it can offer (the commands or pages that exist), so it never
        points at a command or page it does not have.
        """
        return next((s for s in self.steps if s.actionable and (offered is None or s.key in offered)), None)

    @property
    def labels(self) -> int:
        """Labels with a grade (status ok), every source; failed LLM calls are not labels."""
        return sum(n for key, n in self.counts.items() if key.startswith("judgments.") and key.endswith(".ok"))

    @property
    def warnings(self) -> list[str]:
        return [w for s in self.steps for w in s.warnings]


def chunking_coverage(db: Database, documents: int | None = None) -> pd.DataFrame:
    """Every chunking with ``name, strategy, params, chunks, documents, total_documents,
    empty_documents, complete``.

    ``documents`` is how many documents have at least one chunk in the chunking (the rule of
    :mod:`workbench.services.coverage`); ``total_documents`` how many the project holds,
    ``empty_documents`` how many of them have an empty text (nothing to chunk; they do not keep a
    chunking from being complete).
    """

    cov = coverage(db).rename(columns={"documents_now": "total_documents", "documents_empty": "empty_documents"})
    params = list_chunkings(db)[["name", "params"]]
    out = cov.merge(params, on="name", how="left")
    out = out.astype({"documents": "int64", "total_documents": "int64", "empty_documents": "int64", "complete": bool})
    return out[["name", "strategy", "params", "chunks", "documents", "total_documents", "empty_documents", "complete"]]


def run_coverage(db: Database, documents: int | None = None) -> pd.DataFrame:
    """Every run with ``name, retriever, level, chunking, params, rows, queries, documents,
    total_documents, complete, known``.

    A run covers the documents the project held when it was made or imported (the rule of
    :mod:`workbench.services.coverage`); ``documents`` is NA when that was not recorded (runs made
    before migration 6): ``known`` is then False and the run counts as complete, with a warning.
    """

    cov = runs_coverage_table(db).rename(columns={"documents_now": "total_documents"})
    extra = list_runs(db)[["name", "retriever", "params"]]
    out = cov.merge(extra, on="name", how="left")
    out["known"] = out["documents"].notna()
    out["complete"] = out["complete"].fillna(True).astype(bool)
    return out[["name", "retriever", "level", "chunking", "params", "rows", "queries", "documents",
                "total_documents", "complete", "known"]]


def _labelled_pool_pairs(db: Database, pools: pd.DataFrame, judgments: pd.DataFrame,
                         min_overlap: float) -> dict[str, int]:
    """Per pool: how many of its pairs carry a label from ``judgments`` (ok, graded spans).

    Only the pairs whose (query, document) has a graded span can be labelled, so only their
    chunks are read (a status page must not read every chunk of a large corpus).
    """
    spans = judgments.loc[judgments["grade"].notna(), ["query_id", "doc_id", "start", "end", "grade"]]
    spans = spans.astype({"grade": "float64"})
    judged_keys = spans[["query_id", "doc_id"]].drop_duplicates()
    out: dict[str, int] = {}
    for pool in pools.itertuples(index=False):
        if spans.empty or not pool.pairs:
            out[pool.name] = 0
            continue
        if pool.level != "chunk":  # document pools: any graded span of the document, counted in SQL
            keys = judged_keys.rename(columns={"doc_id": "item"}).astype(str)
            out[pool.name] = count_pool_pairs_among(db, pool.name, "doc", keys)
            continue
        pairs = read_pool_pairs(db, pool.name)[["query_id", "doc_id", "chunk_id"]]
        pairs = pairs.merge(judged_keys, on=["query_id", "doc_id"])
        if pairs.empty:
            out[pool.name] = 0
            continue
        chunks = read_chunks(db, pool.chunking, chunk_ids=pairs["chunk_id"].unique().tolist())
        labels = chunk_qrels(chunks, spans.merge(pairs[["query_id", "doc_id"]].drop_duplicates()),
                             min_overlap=min_overlap)
        out[pool.name] = int(len(pairs.merge(labels[["query_id", "chunk_id"]].drop_duplicates(),
                                             on=["query_id", "chunk_id"])))
    return out


def _labels_the_qrels_admit(db: Database, llm: int) -> tuple[pd.DataFrame, str]:
    """The labels the project's qrels admit, read from the one rule itself
    (:func:`workbench.services.qrels.rule.admitted_spans`: tier order, the gate for LLM labels unless
    the user opted in, synthetic queries by the policy), with a note on LLM labels left out
    (``llm``: how many ok LLM judgments the project holds)."""

    found = admitted_spans(db, source="merged")
    admitted = found.spans
    if not llm:
        return admitted, ""
    # every judge configuration by name with its gate state: a second judge is never hidden
    # behind the first one's pass
    states = ("judge configurations: " + ", ".join(f"{label} ({state})" for label, state in found.configurations)
              if found.configurations else "")
    kept = int((admitted["tier"] == "llm").sum())
    if kept >= llm:
        return admitted, states
    note = ("LLM labels count once their judge passes the calibration gate" if kept == 0 else
            f"{llm - kept:,} LLM labels wait for their judge to pass the calibration gate")
    return admitted, f"{note}; {states}" if states else note


def _labelled_state(labelled: dict[str, int], pools: pd.DataFrame) -> tuple[str, str]:
    """State and detail of a "labels cover a pool" step."""
    if pools.empty or not pools["pairs"].sum():
        return TODO, "no pool yet"
    parts, state = [], TODO
    for pool in pools.itertuples(index=False):
        n = labelled.get(pool.name, 0)
        parts.append(f"{pool.name}: {n:,} of {int(pool.pairs):,} pairs labelled")
        if pool.pairs and n >= pool.pairs:
            state = DONE
        elif n and state != DONE:
            state = PARTIAL
    return state, "; ".join(parts)


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"


def _calibration_step(db: Database) -> PipelineStep:
    """Calibration: samples drawn for SMEs to label, and how much of their held-out part is labelled."""

    samples = read_samples(db)
    if samples.empty:
        return PipelineStep("calibration", "Calibration", 0, TODO, "no calibration sample yet")
    parts, state = [], TODO
    for sample in samples.itertuples(index=False):
        labels = label_table(db, sample.name)
        holdout = int(sample.holdout)
        done = int(labels.loc[(labels["action"] == "label") & (labels["part"] == "holdout"), "position"].nunique())
        parts.append(f"{sample.name}: {done:,} of {holdout:,} held-out pairs labelled by SMEs")
        if holdout and done >= holdout:
            state = DONE
        elif done and state != DONE:
            state = PARTIAL
    if state == TODO:  # samples exist, nobody labelled yet: the labelling has started in all but name
        state = PARTIAL
    return PipelineStep("calibration", "Calibration", len(samples), state, "; ".join(parts))


def project_status(db: Database, *, min_overlap: float = DEFAULTS["evaluation"]["min_overlap"]) -> ProjectStatus:
    """Counts per table and the pipeline in order, each step's state set by the rule in the module doc."""
    counts = table_counts(db)
    n_docs, n_queries = counts.get("documents", 0), counts.get("queries", 0)
    steps: list[PipelineStep] = []

    corpus_state = DONE if n_docs and n_queries else (PARTIAL if n_docs or n_queries else TODO)
    steps.append(PipelineStep("corpus", "Corpus", n_docs, corpus_state,
                              f"{_plural(n_docs, 'document')}, {_plural(n_queries, 'query', 'queries')}"))

    chunkings = chunking_coverage(db, n_docs)
    chunk_warnings = tuple(
        f"chunking {c.name} covers {c.documents:,} of {c.total_documents:,} documents"
        for c in chunkings.itertuples(index=False) if not c.complete)
    chunk_state = TODO if chunkings.empty else (DONE if chunkings["complete"].any() else PARTIAL)
    steps.append(PipelineStep(
        "chunks", "Chunks", len(chunkings), chunk_state,
        "; ".join(f"{c.name}: {c.chunks:,} chunks over {c.documents:,} of {c.total_documents:,} documents"
                  + (f" ({c.empty_documents:,} with an empty text: nothing to chunk)" if c.empty_documents else "")
                  for c in chunkings.itertuples(index=False)) or "no chunking yet",
        chunk_warnings))

    runs = run_coverage(db, n_docs)
    run_warnings = tuple(
        f"run {r.name} covers {int(r.documents):,} of {r.total_documents:,} documents "
        f"(documents imported after it was made are not in it)" if r.known else
        f"run {r.name} was made before the workbench recorded coverage; it may not cover all "
        f"{r.total_documents:,} documents"
        for r in runs.itertuples(index=False) if not r.complete or not r.known)
    run_state = TODO if runs.empty else (DONE if runs["complete"].any() else PARTIAL)
    steps.append(PipelineStep(
        "runs", "Runs", len(runs), run_state,
        "; ".join(f"{r.name}: {int(r.documents):,} of {r.total_documents:,} documents" if r.known
                  else f"{r.name}: coverage not recorded" for r in runs.itertuples(index=False))
        or "no run yet", run_warnings))


    pools = list_pools(db)
    pool_state = DONE if len(pools) and pools["pairs"].sum() else TODO
    steps.append(PipelineStep(
        "pool", "Pool", len(pools), pool_state,
        "; ".join(f"{p.name}: {int(p.pairs):,} pairs over {int(p.queries):,} queries"
                  for p in pools.itertuples(index=False)) or "no pool yet"))

    # counted in SQL; the labels themselves (only their spans) are read only when a pool asks
    n_labels = sum(n for key, n in counts.items() if key.startswith("judgments.") and key.endswith(".ok"))
    n_llm = counts.get("judgments.llm.ok", 0)
    llm_labelled: dict[str, int] = {}
    if len(pools) and pools["pairs"].sum() and n_llm:
        if (pools["level"] != "chunk").all():  # document pools: counted in SQL, no label read
            llm_labelled = {p.name: count_pool_pairs_judged(db, p.name, "llm") if p.pairs else 0
                            for p in pools.itertuples(index=False)}
        else:
            llm_labelled = _labelled_pool_pairs(db, pools, graded_judgments(db, ["llm"]), min_overlap)
    llm_state, llm_detail = _labelled_state(llm_labelled, pools)
    failed = counts.get("judgments.llm.failed", 0) + counts.get("judgments.llm.invalid", 0)
    if failed:
        llm_detail += f"; {_plural(failed, 'failed call')}"
    steps.append(PipelineStep("judgments", "LLM judgments", n_llm, llm_state, llm_detail))

    steps.append(_calibration_step(db))

    # LLM labels count towards qrels by the qrels policy's own rule (services/qrels): by default
    # only those of a judge configuration that passed the calibration gate.
    # without a pool nothing is labelled and no note is shown: the rule need not read the labels
    labelled: dict[str, int] = {}
    left_out = ""
    if len(pools):
        trusted, left_out = _labels_the_qrels_admit(db, n_llm)
        labelled = _labelled_pool_pairs(db, pools, trusted, min_overlap)
    qrels_state, qrels_detail = _labelled_state(labelled, pools)
    if left_out and len(pools):
        qrels_detail += f" ({left_out})"
    outside = "" if len(pools) else f"; {_plural(n_labels, 'label')} outside any pool"
    steps.append(PipelineStep("qrels", "Qrels", max(labelled.values(), default=0), qrels_state,
                              qrels_detail + outside))

    if EVALUATION_TABLE in counts:
        n = counts[EVALUATION_TABLE]
        steps.append(PipelineStep("evaluation", "Evaluation", n, DONE if n else TODO,
                                  _plural(n, "stored evaluation") if n else "no stored evaluation yet"))
    else:
        steps.append(PipelineStep("evaluation", "Evaluation", 0, UNAVAILABLE,
                                  "evaluations are not stored in the project yet"))

    return ProjectStatus(path=db.path, counts=counts, steps=steps, meta=read_meta(db),
                         chunkings=chunkings, runs=runs)
