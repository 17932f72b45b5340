"""Exporting judgments as JSON lines (``workbench export judgments``).

One JSON object per judgment, with exactly the keys of :data:`KEYS`, in that order:
``query_id, doc_id, chunk_id, start, end, grade, status, source, assessor, model,
prompt_version, reason, error, prompt_tokens, completion_tokens, latency_ms, cost_usd, evidence,
guidelines_sha256, raw_response``.
``raw_response``: for an LLM judgment the reply its grade was parsed from (or the last reply of an
invalid one); null for people. ``evidence``: an SME label's evidence, a list of ``[start, end]`` document offsets (one per
chosen sentence; ``[]`` when none was chosen); null for LLM and imported judgments.
``guidelines_sha256``: the SHA-256 of the labelling guidelines in force when an SME gave the label
(``workbench calibrate guidelines``); null when the sample had none then, and for LLM and imported
judgments.
``grade`` is null unless ``status`` is ``ok``; ``prompt_version`` is the prompt hash of LLM
judgments (null for people); missing values are null. Rows are ordered by query_id, doc_id,
start, end, then age.

``source``: ``llm``, ``human``, ``imported`` or ``all``. ``pool``: only the judgments of that pool
(its judge jobs' judgments, and other labels of a pooled (query, document) whose chunk is unknown
or pooled; see :func:`workbench.store.judging.export_judgment_rows`).

Written like every export (:mod:`workbench.services.output_file`): never over a database, a
link, a directory or a device; an existing file only with ``force``; all or nothing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from workbench.errors import InputError
from workbench.services import visibility
from workbench.services.output_file import check_output, write_lines
from workbench.store.database import Database
from workbench.store.judging import export_judgment_rows
from workbench.store.pools import read_pool

KEYS = ("query_id", "doc_id", "chunk_id", "start", "end", "grade", "status", "source", "assessor", "model",
        "prompt_version", "reason", "error", "prompt_tokens", "completion_tokens", "latency_ms", "cost_usd",
        "evidence", "guidelines_sha256", "raw_response")
SOURCES = ("llm", "human", "imported", "all")
_INTS = ("start", "end", "grade", "prompt_tokens", "completion_tokens")


@dataclass
class JudgmentExport:
    path: Path
    rows: int
    source: str
    pool: str | None
    replaced: bool = False

    def summary(self) -> str:
        scope = f" of pool {self.pool}" if self.pool else ""
        again = " (replaced)" if self.replaced else ""
        return f"wrote {self.rows:,} judgments{scope} (source {self.source}) to {self.path}{again}"


def _clean(value):
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    try:
        if value is pd.NA or (not isinstance(value, str) and pd.isna(value)):
            return None
    except (TypeError, ValueError):
        pass
    if hasattr(value, "item"):
        value = value.item()
    return value


def _lines(frame):
    for row in frame.itertuples(index=False):
        record = {}
        for key, value in zip(KEYS, row):
            value = _clean(value)
            if key in _INTS and value is not None:
                value = int(value)
            if key == "evidence" and value is not None:  # the SME's evidence spans, stored as JSON text
                value = [[int(s), int(e)] for s, e in json.loads(value)]
            record[key] = value
        if record["status"] != "ok":
            record["grade"] = None
        yield json.dumps(record, ensure_ascii=False) + "\n"


def export_judgments(db: Database, out: str | Path, *, pool: str | None = None, source: str = "all",
                     force: bool = False) -> JudgmentExport:
    """Write the judgments (see the module doc) to ``out``; returns what was written. Refused to
    annotators (:mod:`workbench.services.visibility`)."""
    visibility.require_read("label_files")
    if source not in SOURCES:
        raise InputError(f"unknown source {source!r}; expected one of {', '.join(SOURCES)}")
    out = Path(out)
    check_output(out, force=force)
    if pool is not None and read_pool(db, pool) is None:
        raise InputError(f"no pool named {pool!r}; see {{command:status}} for the pools")
    sources = ["llm", "human", "imported"] if source == "all" else [source]
    frame = export_judgment_rows(db, pool=pool, sources=sources)
    replaced = write_lines(out, _lines(frame), force=force)
    return JudgmentExport(out, len(frame), source, pool, replaced)
