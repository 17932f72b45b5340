"""The project's qrels: one rule (:mod:`workbench.core.qrels_policy`) for every caller.

Export (``workbench export qrels``), pool statistics, calibration, propagation, abstention and
evaluation all take their qrels from :func:`project_qrels`, so a pair is judged (and graded)
the same way everywhere. The policy comes from the ``[qrels]`` section of the settings unless
given; ``source`` (``human|llm|merged``, the ``--source``/``--labels`` flags) narrows it by
:meth:`QrelsPolicy.for_source`.

Gate: an LLM label counts (``llm_labels = "passed_gate"``) only when its judge configuration
(model, prompt hash) passed the calibration gate on some calibration sample: the sample's own
judge configuration when the sample names one, else every configuration that graded the
sample's pairs (the grade-3 labels ``workbench synth`` writes with its questions are labels by
construction, not a judge's grades: they count without the gate once the policy takes synthetic
queries in). The verdicts are memoised and stored with the project (:func:`gate_verdict`, keyed
by what they depend on), so the bootstrap behind them runs once per change of the calibration
labels, not on every qrels request or command. Synthetic queries (``workbench synth``) are
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
import threading
from dataclasses import dataclass, field, replace

import pandas as pd

from workbench.core.formats import LABEL_SOURCES
from workbench.core.qrels_policy import QrelsPolicy, merge_qrels
from workbench.errors import InputError
from workbench.services import visibility
from workbench.store.database import Database

SOURCES = LABEL_SOURCES


def default_policy(settings=None) -> QrelsPolicy:
    """The policy of ``settings`` (the resolved configuration when None)."""
    if settings is None:
        from workbench.config import load_settings

        settings = load_settings()
    return QrelsPolicy.from_settings(settings)


@dataclass(frozen=True)
class ProjectQrels:
    """Qrels of the project under a policy: ``table`` has ``query_id, item_id, grade, tier,
    assessors`` (``tier`` ``propagated`` for propagated labels)."""

    table: pd.DataFrame
    policy: QrelsPolicy
    level: str
    chunking: str | None
    passed_configurations: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

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
            gate = ("; judge configurations that passed: "
                    + (", ".join(f"{m or '?'}/{p[:8] or '?'}" for m, p in self.passed_configurations) or "none"))
        return f"{self.policy.describe()}; {at}{gate}"

    def counts(self) -> dict:
        """Qrels per grade and per winning tier."""
        return {"rows": len(self.table), "queries": int(self.table["query_id"].nunique()),
                "by_grade": {int(g): int(n) for g, n in self.table["grade"].value_counts().sort_index().items()},
                "by_tier": {str(t): int(n) for t, n in self.table["tier"].value_counts().sort_index().items()}}

    def to_qrels(self):
        """The metric engine's :class:`~workbench.core.metrics.qrels_and_runs.Qrels`."""
        import numpy as np
        import pyarrow as pa

        from workbench.core.metrics.qrels_and_runs import Qrels

        return Qrels(pa.array(self.table["query_id"].astype(str).tolist(), type=pa.string()),
                     pa.array(self.table["item_id"].astype(str).tolist(), type=pa.string()),
                     self.table["grade"].to_numpy(dtype=np.int64), source=f"project qrels {self.fingerprint}")


#: The columns of :func:`workbench.store.calibration.label_table` a gate verdict depends on: per
#: item its position, query, part, weight, judge grade and stratum, per label its annotator (an
#: adjudication is the annotator ``adjudication``), action and grade. The reference labels
#: (:func:`workbench.services.calibration.workflow.reference_labels`) are a function of these.
_GATE_INPUTS = ("position", "query_id", "part", "weight", "judge_grade", "stratum", "annotator", "action", "grade")


def _labels_fingerprint(table: pd.DataFrame) -> str:
    """sha256 of what a gate verdict reads from the calibration labels (module docstring of
    :mod:`workbench.core.calibration.gate`), taken from the gated part's current labels as
    stored (``table``, rows of :func:`workbench.store.calibration.label_table`): equal inputs
    give equal reference labels, so the reference labels need computing only when the verdict is
    not memoised."""
    columns = [c for c in _GATE_INPUTS if c in table.columns]
    h = hashlib.sha256(repr(("label rows", columns, len(table))).encode())
    if len(table):
        h.update(pd.util.hash_pandas_object(table[columns].reset_index(drop=True), index=False).to_numpy().tobytes())
    return h.hexdigest()


def gate_verdict(db: Database, sample: str, thresholds=None, options=None, *, info: dict | None = None) -> str:
    """The calibration gate's verdict on ``sample`` (``pass|fail|inconclusive``), memoised.

    The same figures and decision as :func:`workbench.services.calibration.workflow.gate` (agreement of
    the judge with the SMEs' reference labels on the gated part, bootstrap intervals,
    :func:`workbench.core.calibration.gate.decide`), without the rest of the report. The bootstrap runs once
    per :func:`workbench.core.calibration.gate.gate_cache_key`: the sample's judge configuration, the labels'
    fingerprint, the seed, resamples, threshold, part, weighting and thresholds; a new label, a
    changed grade or another seed is a new key. Memoised in the process
    (:data:`workbench.core.calibration.gate.VERDICTS`) and stored with the project (``project_meta``, one
    entry per sample holding the key's hash), so a later command reuses it too. A verdict is not
    a label, so reading it needs no permission to see other people's labels. ``info``: the
    sample's :func:`workbench.store.calibration.read_sample`, when the caller has read it.
    """
    from workbench.core.calibration.gate import (
        INCONCLUSIVE,
        VERDICTS,
        GateThresholds,
        gate_cache_key,
        gate_on_labels,
    )
    from workbench.services.calibration import workflow as calibration
    from workbench.store.calibration import label_table, read_sample

    thresholds = GateThresholds() if thresholds is None else thresholds
    options = calibration.ReportOptions() if options is None else options
    info = read_sample(db, sample) if info is None else info
    judge = (info or {}).get("judge") or {}
    # The key is taken from the stored label rows (one query and a hash); the reference labels,
    # a group-by per item, are computed from the same rows only when the verdict is not memoised.
    table = label_table(db, sample)
    rows = calibration.gated_part(table, options)  # the label rows of the gated part
    key = gate_cache_key(sample=sample, judge=(judge.get("model"), judge.get("prompt_hash")),
                         labels_fingerprint=_labels_fingerprint(rows), seed=options.seed, n_boot=options.n_boot,
                         threshold=options.threshold, part=options.part, weighted=options.weighted,
                         thresholds=thresholds)

    def compute() -> str:
        part = calibration.gated_part(calibration.reference_labels(db, sample, table=table), options)
        if part.empty:
            return INCONCLUSIVE
        stored = _stored_verdict(db, sample, key)
        if stored is not None:
            return stored
        verdict = gate_on_labels(part, thresholds, part_name=options.part, threshold=options.threshold,
                                 seed=options.seed, n_boot=options.n_boot, weighted=options.weighted)[1].verdict
        _store_verdict(db, sample, key, verdict)
        return verdict

    return VERDICTS.get_or_compute(key, compute)


_META_PREFIX = "gate_verdict:"
_STORE_LOCK = threading.Lock()


def _stored_verdict(db: Database, sample: str, key: tuple) -> str | None:
    """The verdict stored with the project for exactly ``key`` (``project_meta``), else None."""
    import json

    from workbench.core.calibration.gate import EXIT_CODES, stored_key
    from workbench.store.meta import read_meta

    raw = read_meta(db).get(_META_PREFIX + sample)
    try:
        entry = json.loads(raw) if raw else None
    except ValueError:
        return None
    if isinstance(entry, dict) and entry.get("key") == stored_key(key) and entry.get("verdict") in EXIT_CODES:
        return str(entry["verdict"])
    return None


def _store_verdict(db: Database, sample: str, key: tuple, verdict: str) -> None:
    """Keep the verdict with the project (one entry per sample, replaced when its inputs change),
    so that the next command need not rerun the bootstrap. Best effort: a project opened read-only,
    or busy, keeps nothing and the verdict is computed again next time."""
    import json

    from workbench.core.calibration.gate import stored_key
    from workbench.errors import StoreError
    from workbench.store.database import StoreInterrupted
    from workbench.store.meta import set_meta

    if getattr(db, "read_only", False):
        return
    # A cache entry not kept (the file not writable, full, damaged: StoreError) only costs a
    # recomputation, so it must not fail the qrels request; Ctrl-C still stops the command. One
    # writer per process (page sessions run in threads), so two never race on the entry.
    try:
        with _STORE_LOCK, db.transaction() as tx:
            set_meta(tx, _META_PREFIX + sample, json.dumps({"key": stored_key(key), "verdict": verdict}))
    except StoreInterrupted:
        raise
    except StoreError:
        return


def passed_judge_configurations(db: Database, settings=None) -> tuple[tuple[str, str], ...]:
    """``(model, prompt_hash)`` of every judge configuration that passed the gate on a
    calibration sample (module docstring); verdicts come from :func:`gate_verdict` (memoised),
    with the ``[calibration]`` thresholds, relevance grade and resamples of ``settings`` (the
    resolved configuration when None) and seed 0, as on the Calibration page."""
    from workbench.core.calibration.gate import PASS, GateThresholds
    from workbench.services.calibration import workflow as calibration
    from workbench.store.calibration import judge_grades_for_sample, read_sample

    samples = calibration.list_samples(db)
    if samples.empty:
        return ()
    if settings is None:
        from workbench.config import load_settings

        settings = load_settings()
    # the thresholds, relevance grade and resamples the Calibration page and `calibrate report` use
    thresholds = GateThresholds.from_settings(settings)
    options = calibration.ReportOptions(threshold=int(settings.get("calibration", "relevant_min_grade")),
                                        n_boot=int(settings.get("calibration", "bootstrap_resamples")))
    passed: set[tuple[str, str]] = set()
    for name in samples["name"]:
        info = read_sample(db, str(name))
        try:
            verdict = gate_verdict(db, str(name), thresholds, options, info=info)
        except InputError:
            continue
        if verdict != PASS:
            continue
        judge = (info or {}).get("judge") or {}
        graded = judge_grades_for_sample(db, str(name))[["model", "prompt_hash"]].drop_duplicates()
        for model, prompt_hash in graded.itertuples(index=False):
            if judge.get("model") not in (None, model) or judge.get("prompt_hash") not in (None, prompt_hash):
                continue
            passed.add((str(model), str(prompt_hash)))
    return tuple(sorted(passed))


def _check_level(db: Database, level: str, chunking: str | None) -> pd.DataFrame | None:
    from workbench.store.chunks import chunking_exists, read_chunks

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
    tier, assessor, model, prompt_hash``) after the gate and the synthetic filter, under
    ``policy`` (already narrowed to the source)."""

    spans: pd.DataFrame
    policy: QrelsPolicy
    passed_configurations: tuple[tuple[str, str], ...]
    notes: tuple[str, ...]


def admitted_spans(db: Database, *, source: str = "merged", policy: QrelsPolicy | None = None,
                   settings=None) -> AdmittedSpans:
    """The labels the one rule admits for ``source`` (module docstring): tiers of the policy's
    order, LLM labels only from configurations that passed the gate (unless opted in),
    synthetic queries by the policy. Callers that need spans rather than qrels (the ``spans``
    export, gold spans) read them here so that they admit exactly what the qrels admit."""
    from workbench.store.qrels_labels import labelled_spans

    if source not in SOURCES:
        raise InputError(f"unknown source {source!r}; expected one of {', '.join(SOURCES)}")
    if settings is None and (policy is None or "llm" in policy.order):  # read once, for the policy and the gate
        from workbench.config import load_settings

        settings = load_settings()
    base = policy if policy is not None else default_policy(settings)
    pol = base.for_source(source)
    spans = labelled_spans(db)
    spans = spans[spans["tier"].isin(pol.order)]
    passed: tuple[tuple[str, str], ...] = ()
    notes = []
    if "llm" in pol.order:
        is_llm = spans["tier"] == "llm"
        if pol.llm_labels == "none":
            spans = spans[~is_llm]
        elif pol.llm_labels == "passed_gate" and is_llm.any():
            passed = passed_judge_configurations(db, settings)
            ok = pd.MultiIndex.from_frame(spans[["model", "prompt_hash"]].astype(str)).isin(list(passed))
            if pol.synthetic != "exclude":
                ok = ok | _by_construction(db, spans)
            dropped = int((is_llm & ~ok).sum())
            spans = spans[~is_llm | ok]
            if dropped:
                notes.append(f"{dropped:,} LLM labels left out: their judge configuration has not passed "
                             f"the calibration gate (`workbench calibrate report`), or opt in with llm_labels = all")
    spans = _synthetic_filter(db, spans, pol.synthetic)
    if visibility.limited():  # an annotator: their own labels and the imported ones (services.visibility)
        spans = visibility.visible_spans(spans)
        notes.append(visibility.LIMITED_NOTE)
    return AdmittedSpans(spans.reset_index(drop=True), pol, passed, tuple(notes))


def project_qrels(db: Database, *, level: str = "doc", chunking: str | None = None, source: str = "merged",
                  policy: QrelsPolicy | None = None, settings=None) -> ProjectQrels:
    """The project's qrels at ``level`` (``chunking`` for chunk level) under ``policy`` narrowed
    to ``source`` (module docstring)."""
    if source not in SOURCES:
        raise InputError(f"unknown source {source!r}; expected one of {', '.join(SOURCES)}")
    chunks = _check_level(db, level, chunking)
    admitted = admitted_spans(db, source=source, policy=policy, settings=settings)
    pol = admitted.policy
    table = merge_qrels(admitted.spans, pol, level=level, chunks=chunks)
    if pol.propagated and level == "chunk" and not visibility.limited():  # copies of others' grades
        table = _with_propagated(db, table, str(chunking), pol.synthetic)
    return ProjectQrels(table, pol, level, chunking if level == "chunk" else None, admitted.passed_configurations,
                        admitted.notes)


def decisive_spans_of(db: Database, *, source: str = "merged", policy: QrelsPolicy | None = None,
                      settings=None) -> tuple[pd.DataFrame, ProjectQrels]:
    """The span judgments behind the document qrels (:func:`workbench.core.qrels_policy.decisive_spans`)
    and those qrels (for their statement): ``query_id, doc_id, start, end, grade, tier, assessor``."""
    from workbench.core.qrels_policy import decisive_spans

    admitted = admitted_spans(db, source=source, policy=policy, settings=settings)
    spans = decisive_spans(admitted.spans, admitted.policy)
    qrels = ProjectQrels(merge_qrels(admitted.spans, admitted.policy, level="doc"), admitted.policy, "doc", None,
                         admitted.passed_configurations, admitted.notes)
    return spans[["query_id", "doc_id", "start", "end", "grade", "tier", "assessor"]].reset_index(drop=True), qrels


def _by_construction(db: Database, spans: pd.DataFrame):
    """Which rows of ``spans`` are the grade-3 labels ``workbench synth`` wrote with its questions
    (same query, document, span and generator model): labels by construction, not a judge's
    grades, so the gate does not apply to them once the policy takes synthetic queries in."""
    from workbench.store.synthetic_queries import read_questions

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
    from workbench.store.synthetic_queries import synthetic_query_ids

    synthetic = synthetic_query_ids(db)
    if not synthetic:
        return frame if mode == "exclude" else frame.iloc[:0]
    keep = frame["query_id"].astype(str).isin(synthetic)
    return frame[keep if mode == "only" else ~keep]


def _with_propagated(db: Database, table: pd.DataFrame, chunking: str, synthetic: str) -> pd.DataFrame:
    from workbench.store.propagated_labels import read_propagated

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
    assessors``."""
    qrels = project_qrels(db, level="doc", source=source, policy=policy, settings=settings)
    if query_ids is None:
        return qrels
    keep = qrels.table["query_id"].isin([str(q) for q in query_ids])
    return replace(qrels, table=qrels.table[keep].reset_index(drop=True))
