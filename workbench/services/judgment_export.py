"""Exporting judgments as JSON lines (``workbench export judgments``).

One JSON object per judgment, with exactly the keys of :data:`KEYS`, in that order:
``query_id, doc_id, chunk_id, start, end, grade, status, source, assessor, model,
prompt_version, reason, error, prompt_tokens, completion_tokens, latency_ms, cost_usd``.
``grade`` is null unless ``status`` is ``ok``; ``prompt_version`` is the prompt hash of LLM
judgments (null for people); missing values are null. Rows are ordered by query_id, doc_id,
start, end, then age.

``source``: ``llm``, ``human``, ``imported`` or ``all``. ``pool``: only the judgments of that pool
(its judge jobs' judgments, and other labels of a pooled (query, document) whose chunk is unknown
or pooled; see :func:`workbench.store.judging.export_judgment_rows`).

Never overwrites what it did not create: the target must be absent, empty, or an earlier
judgments export (its first line is an object with exactly these keys); a directory, a device, a
pipe, a database or any other file is refused. Written all or nothing (a temporary file renamed).
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import InputError
from workbench.store.database import Database
from workbench.store.judging import export_judgment_rows
from workbench.store.pools import read_pool

KEYS = ("query_id", "doc_id", "chunk_id", "start", "end", "grade", "status", "source", "assessor", "model",
        "prompt_version", "reason", "error", "prompt_tokens", "completion_tokens", "latency_ms", "cost_usd")
SOURCES = ("llm", "human", "imported", "all")
_INTS = ("start", "end", "grade", "prompt_tokens", "completion_tokens")


@dataclass
class JudgmentExport:
    path: Path
    rows: int
    source: str
    pool: str | None

    def summary(self) -> str:
        scope = f" of pool {self.pool}" if self.pool else ""
        return f"wrote {self.rows:,} judgments{scope} (source {self.source}) to {self.path}"


def check_target(path: Path) -> None:
    """Refuse a target this command did not create (see the module doc)."""
    if not os.path.lexists(path):
        return
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode) or not stat.S_ISREG(mode):
        raise InputError("exists and is not a regular file; choose a new file name for --out", path=str(path))
    with open(path, "rb") as handle:
        head = handle.read(65536)
    if not head:
        return
    if head[8:12] == b"DUCK" or head.startswith(b"SQLite format"):
        raise InputError("is a database; it is never overwritten, choose another --out", path=str(path))
    first = head.split(b"\n", 1)[0]
    try:
        obj = json.loads(first)
    except (ValueError, UnicodeDecodeError):
        obj = None
    if not (isinstance(obj, dict) and tuple(obj) == KEYS):
        raise InputError("exists and is not an earlier judgments export; it is left alone, "
                         "choose another --out (or remove it yourself)", path=str(path))


def _clean(value):
    if value is None:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    try:
        import pandas as pd

        if value is pd.NA or (not isinstance(value, str) and pd.isna(value)):
            return None
    except (TypeError, ValueError):
        pass
    if hasattr(value, "item"):
        value = value.item()
    return value


def export_judgments(db: Database, out: str | Path, *, pool: str | None = None, source: str = "all") -> JudgmentExport:
    """Write the judgments (see the module doc) to ``out``; returns what was written."""
    if source not in SOURCES:
        raise InputError(f"unknown source {source!r}; expected one of {', '.join(SOURCES)}")
    out = Path(out)
    check_target(out)
    if pool is not None and read_pool(db, pool) is None:
        raise InputError(f"no pool named {pool!r}; see `workbench status` for the pools")
    sources = ["llm", "human", "imported"] if source == "all" else [source]
    frame = export_judgment_rows(db, pool=pool, sources=sources)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    try:
        with partial.open("w", encoding="utf-8", newline="\n") as handle:
            for row in frame.itertuples(index=False):
                record = {}
                for key, value in zip(KEYS, row):
                    value = _clean(value)
                    if key in _INTS and value is not None:
                        value = int(value)
                    record[key] = value
                if record["status"] != "ok":
                    record["grade"] = None
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        os.replace(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return JudgmentExport(out, len(frame), source, pool)
