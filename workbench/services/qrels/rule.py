"""The project's qrels: one rule (:mod:`workbench.core.qrels_policy`) for every caller.

Export (``workbench export qrels``), pool statistics, calibration, propagation, abstention and
evaluation all take their qrels from :func:`project_qrels`, so a pair is judged (and graded)
the same way everywhere. The policy comes from the ``[qrels]`` section of the settings unless
given; ``source`` (``human|llm|merged``, the ``--source``/``--labels`` flags) narrows it by
:meth:`QrelsPolicy.for_source`.

Gate: an LLM label counts (``llm_labels = "passed_gate"``) only when *its own* judge
configuration (:mod:`workbench.store.judge_configs`) has a current pass on some calibration
sample (:mod:`workbench.services.calibration.verdicts`: a sample gates the configuration it was
drawn on and any configuration gated there on request; another configuration that graded the
same pairs is "not gated" and its labels stay out). The grade-3 labels ``workbench synth``
writes with its questions are labels by construction, not a judge's grades: they count without
the gate once the policy takes synthetic queries in. Verdicts are stored with the project and
memoised, so the bootstrap behind one runs once per change of its inputs. Synthetic queries (``workbench synth``) are
excluded unless the policy says ``include`` or ``only``. Propagated labels (``workbench labels
propagate``) are added at chunk level, for items with no direct label, when the policy has
``propagated = true``.

Callers, and where a grade per pair is derived some other way on purpose:

* ``workbench export qrels`` (every format; ``spans`` keeps, per query and document, the spans
  of the tier that decides the document: :func:`decisive_spans_of`), pool statistics and the
  pool peek (:func:`workbench.services.pooling.pools.qrels_labels` / ``pool_labels``), the Queries &
  Labels page's qrels table (:func:`pair_grades`), evaluation, rank agreement, propagation,
  abstention and the Qrels page all take their grades from here.
* The calibration report compares the judge with the SMEs item by item, so it reads each source
  on its own (an SME reference per item, each judge configuration's grade): merging them first
  would compare the judge with itself.
* The judge's own repeated samples of one pair are combined by the judge (its ensemble rule)
  before they are stored: they are one assessor's label, not several assessors.
* Budgeted judging reads each assessor's grade on its own (the spread between assessors, and
  which pairs each side has judged already): it plans judging work, it grades nothing.
* The synthetic-query BM25 baseline scores each question against its own chunk by construction.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import pyarrow as pa

from workbench.core.formats import LABEL_SOURCES
from workbench.core.metrics.qrels_and_runs import Qrels
from workbench.core.qrels_policy import QrelsPolicy, decisive_spans, merge_qrels
from workbench.errors import InputError
from workbench.services import lazy, visibility
from workbench.services.calibration import verdicts
from workbench.store.chunks import chunking_exists, read_chunks
from workbench.store.database import Database
from workbench.store.propagated_labels import read_propagated
from workbench.store.qrels_labels import count_labelled_spans, labelled_spans
from workbench.store.synthetic_queries import read_questions, synthetic_query_ids

SOURCES = LABEL_SOURCES


def default_policy(settings=None) -> QrelsPolicy:
    """The policy of ``settings`` (the resolved configuration when None)."""
    if settings is None:
        settings = lazy.config.load_settings()
    return QrelsPolicy.from_settings(settings)


@dataclass(frozen=True)
class ProjectQrels:
    """Qrels of the project under a policy: ``table`` has ``query_id, item_id, grade, tier,
    assessors`` (``tier`` ``propagated`` for propagated labels)."""

    table: pd.DataFrame
    policy: QrelsPolicy
    level: str
    chunking: str | None
    passed_configurations: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: ``(label, state)`` of every judge configuration when the gate applied (the statement's list).
    configurations: tuple[tuple[str, str], ...] = ()

    @property
    def fingerprint(self) -> str:
        """sha256 of the policy, level, chunking and sorted ``query_id item_id grade`` lines:
        equal fingerprints mean identical qrels under an identical rule."""
        h = hashlib.sha256()
        h.update(repr((sorted(self.policy.as_dict().items()), self.level, self.chunking)).encode())
        for q, i, g in zip(self.table["query_id"], self.table["item_id"], self.table["grade"]):
            h.update(f"{q}\t{i}\t{int(g)}\n".encode())
        return h.hexdigest()[:16]

    def statement(self) -> str:
        """The policy line every output carries, with the level and the gate's outcome."""
        at = f"chunk level ({self.chunking})" if self.level == "chunk" else "document level"
        gate = ""
        if "llm" in self.policy.order and self.policy.llm_labels == "passed_gate":
            passed = [label for label, state in self.configurations if state == "passed"]
            others = [f"{label} ({state})" for label, state in self.configurations if state != "passed"]
            gate = "; judge configurations that passed: " + (", ".join(passed) or "none")
            if others:
                gate += "; left out: " + ", ".join(others)
        return f"{self.policy.describe()}; {at}{gate}"

    def counts(self) -> dict:
        """Qrels per grade and per winning tier."""
        return {"rows": len(self.table), "queries": int(self.table["query_id"].nunique()),
                "by_grade": {int(g): int(n) for g, n in self.table["grade"].value_counts().sort_index().items()},
                "by_tier": {str(t): int(n) for t, n in self.table["tier"].value_counts().sort_index().items()}}

    def to_qrels(self):
        """The metric engine's :class:`~workbench.core.metrics.qrels_and_runs.Qrels`."""


        return Qrels(pa.array(self.table["query_id"].astype(str).tolist(), type=pa.string()),
                     pa.array(self.table["item_id"].astype(str).tolist(), type=pa.string()),
                     self.table["grade"].to_numpy(dtype=np.int64), source=f"project qrels {self.fingerprint}")


def passed_judge_configurations(db: Database, settings=None) -> tuple[str, ...]:
    """Keys of the judge configurations whose own labels the gate admits
    (:func:`workbench.services.calibration.verdicts.passed_configurations`)."""

    return verdicts.passed_configurations(db, settings)


def judge_configuration_states(db: Database, settings=None):
    """Every judge configuration with its gate state
    (:func:`workbench.services.calibration.verdicts.states`): what the statement names."""

    return verdicts.states(db, settings)


def _check_level(db: Database, level: str, chunking: str | None) -> pd.DataFrame | None:

    if level not in ("doc", "chunk"):
        raise InputError(f"unknown level {level!r}; expected doc or chunk")
    if level == "doc":
        return None
    if not chunking:
        raise InputError("chunk-level qrels need a chunking; {set_field:chunking NAME} (see {command:status})")
    if not chunking_exists(db, chunking):
        raise InputError(f"no chunking named {chunking!r} in the project; create it with {{command:chunk}} "
                         f"or pick one listed by {{command:status}}")
    return read_chunks(db, chunking)


@dataclass(frozen=True)
class AdmittedSpans:
    """The span judgments the rule reads (``spans``: ``query_id, doc_id, start, end, grade,
    tier, assessor, model, prompt_hash, config``) after the gate and the synthetic filter, under
    ``policy`` (already narrowed to the source)."""

    spans: pd.DataFrame
    policy: QrelsPolicy
    passed_configurations: tuple[str, ...]
    notes: tuple[str, ...]
    configurations: tuple[tuple[str, str], ...] = ()


def admitted_spans(db: Database, *, source: str = "merged", policy: QrelsPolicy | None = None,
                   settings=None, query_ids=None) -> AdmittedSpans:
    """The labels the one rule admits for ``source`` (module docstring): tiers of the policy's
    order, LLM labels only from configurations that passed the gate (unless opted in),
    synthetic queries by the policy. Callers that need spans rather than qrels (the ``spans``
    export, gold spans) read them here so that they admit exactly what the qrels admit.
    ``query_ids``: only those queries' labels are read (None: all); every step of the rule is per
    label, so the result is the rows of the whole project's that belong to those queries (the
    left-out note then counts those queries' labels only)."""

    if source not in SOURCES:
        raise InputError(f"unknown source {source!r}; expected one of {', '.join(SOURCES)}")
    if settings is None and (policy is None or "llm" in policy.order):  # read once, for the policy and the gate

        settings = lazy.config.load_settings()
    base = policy if policy is not None else default_policy(settings)
    pol = base.for_source(source)
    queries = None if query_ids is None else [str(q) for q in query_ids]
    # The tier filter and the gate are applied in the read where they can be (the rows dropped
    # are only counted), so a project of a million ungated LLM labels is not read into memory.
    tiers = [t for t in pol.order if t != "llm" or pol.llm_labels != "none"]
    passed: tuple[str, ...] = ()
    configs: tuple[tuple[str, str], ...] = ()
    notes = []
    llm_total = (count_labelled_spans(db, queries, tiers=["llm"])
                 if "llm" in tiers and pol.llm_labels == "passed_gate" else 0)
    gated = llm_total > 0
    if gated:
        found = judge_configuration_states(db, settings)
        configs = tuple((s.config.label, s.state) for s in found)
        passed = tuple(s.config.key for s in found if s.state == "passed")
    # synthetic queries taken in: labels by construction pass without the gate, so read them all
    in_read = gated and pol.synthetic == "exclude"
    spans = labelled_spans(db, queries, tiers=tiers, llm_configs=list(passed) if in_read else None)
    if gated:
        is_llm = spans["tier"] == "llm"
        if in_read:
            dropped = llm_total - int(is_llm.sum())
        else:
            ok = spans["config"].astype(str).isin(set(passed)).to_numpy() | _by_construction(db, spans)
            dropped = int((is_llm & ~ok).sum())
            spans = spans[~is_llm | ok]
        if dropped:
            notes.append(f"{dropped:,} LLM labels left out: their judge configuration has not passed "
                         f"the calibration gate (`workbench calibrate report`), or opt in with llm_labels = all")
    spans = _synthetic_filter(db, spans, pol.synthetic)
    if visibility.limited():  # an annotator: their own labels and the imported ones (services.visibility)
        spans = visibility.visible_spans(spans)
        notes.append(visibility.LIMITED_NOTE)
    return AdmittedSpans(spans.reset_index(drop=True), pol, passed, tuple(notes), configs)


def project_qrels(db: Database, *, level: str = "doc", chunking: str | None = None, source: str = "merged",
                  policy: QrelsPolicy | None = None, settings=None, query_ids=None) -> ProjectQrels:
    """The project's qrels at ``level`` (``chunking`` for chunk level) under ``policy`` narrowed
    to ``source`` (module docstring); ``query_ids``: those queries' qrels only, read from their
    labels only (a pair's grade depends on that pair's labels alone)."""
    if source not in SOURCES:
        raise InputError(f"unknown source {source!r}; expected one of {', '.join(SOURCES)}")
    chunks = _check_level(db, level, chunking)
    admitted = admitted_spans(db, source=source, policy=policy, settings=settings, query_ids=query_ids)
    pol = admitted.policy
    table = merge_qrels(admitted.spans, pol, level=level, chunks=chunks)
    if pol.propagated and level == "chunk" and not visibility.limited():  # copies of others' grades
        table = _with_propagated(db, table, str(chunking), pol.synthetic)
        if query_ids is not None:
            table = table[table["query_id"].isin([str(q) for q in query_ids])].reset_index(drop=True)
    return ProjectQrels(table, pol, level, chunking if level == "chunk" else None, admitted.passed_configurations,
                        admitted.notes, admitted.configurations)


def decisive_spans_of(db: Database, *, source: str = "merged", policy: QrelsPolicy | None = None,
                      settings=None) -> tuple[pd.DataFrame, ProjectQrels]:
    """The span judgments behind the document qrels (:func:`workbench.core.qrels_policy.decisive_spans`)
    and those qrels (for their statement): ``query_id, doc_id, start, end, grade, tier, assessor``."""

    admitted = admitted_spans(db, source=source, policy=policy, settings=settings)
    spans = decisive_spans(admitted.spans, admitted.policy)
    qrels = ProjectQrels(merge_qrels(admitted.spans, admitted.policy, level="doc"), admitted.policy, "doc", None,
                         admitted.passed_configurations, admitted.notes, admitted.configurations)
    return spans[["query_id", "doc_id", "start", "end", "grade", "tier", "assessor"]].reset_index(drop=True), qrels


def _by_construction(db: Database, spans: pd.DataFrame):
    """Which rows of ``spans`` are the grade-3 labels ``workbench synth`` wrote with its questions
    (same query, document, span and generator model): labels by construction, not a judge's
    grades, so the gate does not apply to them once the policy takes synthetic queries in."""

    questions = read_questions(db)
    if questions.empty:
        return pd.Series(False, index=spans.index).to_numpy()
    keys = ["query_id", "doc_id", "start", "end", "model"]
    made = pd.MultiIndex.from_frame(questions[keys].astype({"start": "int64", "end": "int64"}).astype(str))
    mine = pd.MultiIndex.from_frame(spans[keys].astype({"start": "int64", "end": "int64"}).astype(str))
    return ((spans["tier"] == "llm").to_numpy() & mine.isin(made))


def _synthetic_filter(db: Database, frame: pd.DataFrame, mode: str) -> pd.DataFrame:
    if mode == "include" or frame.empty:
        return frame

    synthetic = synthetic_query_ids(db)
    if not synthetic:
        return frame if mode == "exclude" else frame.iloc[:0]
    keep = frame["query_id"].astype(str).isin(synthetic)
    return frame[keep if mode == "only" else ~keep]


def _with_propagated(db: Database, table: pd.DataFrame, chunking: str, synthetic: str) -> pd.DataFrame:

    copied = read_propagated(db, chunking)
    if copied.empty:
        return table
    copied = pd.DataFrame({"query_id": copied["query_id"].astype(str), "item_id": copied["chunk_id"].astype(str),
                           "grade": copied["grade"].astype("int64"), "tier": "propagated", "assessors": 1})
    copied = _synthetic_filter(db, copied, synthetic)
    have = pd.MultiIndex.from_frame(table[["query_id", "item_id"]].astype(str))
    keep = ~pd.MultiIndex.from_frame(copied[["query_id", "item_id"]]).isin(have)
    out = pd.concat([table, copied[keep]], ignore_index=True)
    return out.sort_values(["query_id", "item_id"], kind="stable").reset_index(drop=True)


def with_min_overlap(policy: QrelsPolicy, min_overlap: float | None) -> QrelsPolicy:
    """``policy`` with another chunk-matching overlap (callers that take ``min_overlap``)."""
    return policy if min_overlap is None else replace(policy, min_overlap=float(min_overlap))


def pair_grades(db: Database, *, query_ids=None, source: str = "merged", policy: QrelsPolicy | None = None,
                settings=None) -> ProjectQrels:
    """Document qrels (optionally of some queries only) under the rule: what the Queries &
    Labels page shows next to the raw labels. ``table``: ``query_id, item_id, grade, tier,
    assessors``. Only the given queries' labels are read (:func:`admitted_spans`)."""
    return project_qrels(db, level="doc", source=source, policy=policy, settings=settings, query_ids=query_ids)
