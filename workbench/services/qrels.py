"""The project's qrels: one rule (:mod:`workbench.core.qrels_policy`) for every caller.

Export (``workbench export qrels``), pool statistics, calibration, propagation, abstention and
evaluation all take their qrels from :func:`project_qrels`, so a pair is judged (and graded)
the same way everywhere. The policy comes from the ``[qrels]`` section of the settings unless
given; ``source`` (``human|llm|merged``, the ``--source``/``--labels`` flags) narrows it by
:meth:`QrelsPolicy.for_source`.

Gate: an LLM label counts (``llm_labels = "passed_gate"``) only when its judge configuration
(model, prompt hash) passed the calibration gate on some calibration sample: the sample's own
judge configuration when the sample names one, else every configuration that graded the
sample's pairs. Synthetic queries (``workbench synth``) are excluded unless the policy says
``include`` or ``only``. Propagated labels (``workbench labels propagate``) are added at chunk
level, for items with no direct label, when the policy has ``propagated = true``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace

import pandas as pd

from workbench.core.qrels_policy import QrelsPolicy, merge_qrels
from workbench.errors import InputError
from workbench.store.database import Database

SOURCES = ("human", "llm", "merged")


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
        """The metric engine's :class:`~workbench.core.qrels_and_runs.Qrels`."""
        import numpy as np
        import pyarrow as pa

        from workbench.core.qrels_and_runs import Qrels

        return Qrels(pa.array(self.table["query_id"].astype(str).tolist(), type=pa.string()),
                     pa.array(self.table["item_id"].astype(str).tolist(), type=pa.string()),
                     self.table["grade"].to_numpy(dtype=np.int64), source=f"project qrels {self.fingerprint}")


def passed_judge_configurations(db: Database, settings=None) -> tuple[tuple[str, str], ...]:
    """``(model, prompt_hash)`` of every judge configuration that passed the gate on a
    calibration sample (module docstring)."""
    from workbench.core.gate import PASS, GateThresholds
    from workbench.services import calibration
    from workbench.store.calibration import judge_grades_for_sample, read_sample

    samples = calibration.list_samples(db)
    if samples.empty:
        return ()
    thresholds = GateThresholds() if settings is None else GateThresholds.from_settings(settings)
    passed: set[tuple[str, str]] = set()
    for name in samples["name"]:
        try:
            verdict = calibration.gate(db, str(name), thresholds=thresholds)["gate"]["verdict"]
        except InputError:
            continue
        if verdict != PASS:
            continue
        judge = (read_sample(db, str(name)) or {}).get("judge") or {}
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
        raise InputError("chunk-level qrels need a chunking; pass --chunking NAME (see `workbench status`)")
    if not chunking_exists(db, chunking):
        raise InputError(f"no chunking named {chunking!r} in the project; create it with `workbench chunk` "
                         f"or pick one listed by `workbench status`")
    return read_chunks(db, chunking)


def project_qrels(db: Database, *, level: str = "doc", chunking: str | None = None, source: str = "merged",
                  policy: QrelsPolicy | None = None, settings=None) -> ProjectQrels:
    """The project's qrels at ``level`` (``chunking`` for chunk level) under ``policy`` narrowed
    to ``source`` (module docstring)."""
    from workbench.store.qrels_labels import labelled_spans

    if source not in SOURCES:
        raise InputError(f"unknown source {source!r}; expected one of {', '.join(SOURCES)}")
    base = policy if policy is not None else default_policy(settings)
    pol = base.for_source(source)
    chunks = _check_level(db, level, chunking)
    spans = labelled_spans(db)
    passed: tuple[tuple[str, str], ...] = ()
    notes = []
    if "llm" in pol.order:
        is_llm = spans["tier"] == "llm"
        if pol.llm_labels == "none":
            spans = spans[~is_llm]
        elif pol.llm_labels == "passed_gate" and is_llm.any():
            passed = passed_judge_configurations(db, settings)
            ok = pd.MultiIndex.from_frame(spans[["model", "prompt_hash"]].astype(str)).isin(list(passed))
            dropped = int((is_llm & ~ok).sum())
            spans = spans[~is_llm | ok]
            if dropped:
                notes.append(f"{dropped:,} LLM labels left out: their judge configuration has not passed "
                             f"the calibration gate (`workbench calibrate report`), or opt in with llm_labels = all")
    spans = _synthetic_filter(db, spans, pol.synthetic)
    table = merge_qrels(spans, pol, level=level, chunks=chunks)
    if pol.propagated and level == "chunk":
        table = _with_propagated(db, table, str(chunking), pol.synthetic)
    return ProjectQrels(table, pol, level, chunking if level == "chunk" else None, passed, tuple(notes))


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
