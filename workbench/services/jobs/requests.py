"""Typed requests of background jobs: what a page asks for, written as JSON in the job's row.

Each request is a frozen dataclass with a ``kind`` (its key in :data:`KINDS`), the permission it
needs (``action``, :mod:`workbench.services.access`), whether a stopped run continues where it
stopped (``resumable``) or starts again (nothing half-written is kept either way: each write is
one transaction), and :meth:`run`, which calls the same service as the CLI command with the
project handed to it (a :class:`~workbench.store.brief.BriefDatabase` in the job's process).

``run(db, progress, notify)`` returns the result as JSON-ready data (the summary's fields).
Adding a kind: a dataclass here with those four members, registered in :data:`KINDS`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from workbench.config import load_settings
from workbench.errors import InputError
from workbench.services import lazy
from workbench.services.access import check_data_path, data_folders
from workbench.services.ingest import import_file
from workbench.services.progress import ProgressFactory


def _plain(value):
    """A summary as JSON-ready data (NaN as None, tuples as lists, anything else as text)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    try:
        return _plain(value.item())  # numpy scalars
    except AttributeError:
        return str(value)


@dataclass(frozen=True)
class ChunkRequest:
    """``workbench chunk``: a new chunking of every document (:func:`workbench.services.chunking.create_chunking`)."""

    name: str
    strategy: str
    size: int | None = None
    overlap: int | None = None
    kind: ClassVar[str] = "chunk"
    action: ClassVar[str] = "build"
    resumable: ClassVar[bool] = False  # one transaction: a stopped chunking stored nothing

    def title(self) -> str:
        return f"chunking {self.name} ({self.strategy})"

    def run(self, db, progress: ProgressFactory, notify) -> dict:
        from workbench.services.chunking import create_chunking

        return _plain(create_chunking(db, self.name, self.strategy, size=self.size, overlap=self.overlap,
                                      progress=progress))


@dataclass(frozen=True)
class DenseRequest:
    """``workbench retrieve dense``: chunk embeddings (cached per chunking and model, written in
    batches) then one query at a time (:func:`workbench.services.retrieval.runs.run_dense`)."""

    chunking: str
    name: str
    k: int = 100
    model: str | None = None
    kind: ClassVar[str] = "dense"
    action: ClassVar[str] = "build"
    resumable: ClassVar[bool] = True  # the embeddings already written are read from the cache

    def title(self) -> str:
        return f"dense run {self.name} on chunking {self.chunking}"

    def run(self, db, progress: ProgressFactory, notify) -> dict:
        from workbench.services.retrieval.runs import run_dense

        return _plain(run_dense(db, self.chunking, self.name, k=int(self.k), model=self.model or lazy.retrieval_dense.DEFAULT_MODEL,
                                progress=progress))


@dataclass(frozen=True)
class HybridRequest:
    """``workbench retrieve hybrid``: RRF of stored runs (:func:`workbench.services.retrieval.runs.run_hybrid`)."""

    name: str
    runs: tuple[str, ...]
    k: int = 100
    rrf_k: float = 60.0
    weights: dict | None = None
    kind: ClassVar[str] = "hybrid"
    action: ClassVar[str] = "build"
    resumable: ClassVar[bool] = False

    def title(self) -> str:
        return f"hybrid run {self.name} of {', '.join(self.runs)}"

    def run(self, db, progress: ProgressFactory, notify) -> dict:
        from workbench.services.retrieval.runs import run_hybrid

        with progress("fuse runs", None, "run") as advance:
            summary = run_hybrid(db, self.name, list(self.runs), k=int(self.k), rrf_k=float(self.rrf_k),
                                 weights=dict(self.weights) if self.weights else None)
            advance(len(self.runs))
        return _plain(summary)


@dataclass(frozen=True)
class PoolRequest:
    """``workbench pool``: a new pool of ``runs`` at ``depth``, or with ``add`` the runs added to
    the existing pool ``name`` (:mod:`workbench.services.pooling.pools`)."""

    name: str
    runs: tuple[str, ...]
    depth: int | None = None
    add: bool = False
    kind: ClassVar[str] = "pool"
    action: ClassVar[str] = "build"
    resumable: ClassVar[bool] = False  # one transaction

    def title(self) -> str:
        return f"{'runs added to ' if self.add else ''}pool {self.name} ({', '.join(self.runs)})"

    def run(self, db, progress: ProgressFactory, notify) -> dict:
        from workbench.services.pooling.request import PoolRequest as Pooling

        if not self.add and self.depth is None:
            raise InputError("{field:depth} is required for a new pool")
        # The one pooling request: the same check and service as workbench pool and Project.pool.
        summary = Pooling(self.name, self.runs, self.depth, add=self.add).run(db, progress=progress)
        result = _plain(summary)
        # The sentence the page says when it pools in its own run, for the jobs panel to show.
        result["summary"] = (f"pool {summary.name}: {summary.pairs_added:,} new pairs; {summary.pairs_total:,} in total"
                             if self.add else
                             f"pool {summary.name}: {summary.pairs_total:,} pairs over {summary.queries:,} queries")
        return result


@dataclass(frozen=True)
class SweepRequest:
    """``workbench sweep``: the chunkings x retrievers grid (:func:`workbench.services.evaluation.sweep.run_sweep`,
    which resumes: the chunkings and runs a stopped grid stored are reused)."""

    chunkings: tuple[str, ...]
    retrievers: tuple[str, ...]
    measures: tuple[str, ...]
    budgets: tuple[int, ...] = ()
    labels: str = "merged"
    kind: ClassVar[str] = "sweep"
    action: ClassVar[str] = "build"
    resumable: ClassVar[bool] = True

    def title(self) -> str:
        return f"grid {' '.join(self.chunkings)} x {' '.join(self.retrievers)}"

    def run(self, db, progress: ProgressFactory, notify) -> dict:
        from workbench.services.evaluation.sweep import run_sweep

        result = run_sweep(db, ",".join(self.chunkings), ",".join(self.retrievers), list(self.measures),
                           budgets=tuple(self.budgets) or lazy.core_rag_context_budget.DEFAULT_BUDGETS, labels=self.labels, progress=progress,
                           notify=notify)
        return _plain(result.as_json())


#: The folder name prefix (under the system's temporary folder) of an upload a job imports.
UPLOAD_PREFIX = "workbench-upload-"


def upload_folder() -> Path:
    """A new folder for an uploaded file that an :class:`ImportRequest` job imports (and removes)."""
    return Path(tempfile.mkdtemp(prefix=UPLOAD_PREFIX))


@dataclass(frozen=True)
class ImportRequest:
    """``workbench import``: one file or folder of ``what`` (corpus, queries, qrels, run)
    (:func:`workbench.services.ingest.import_file`; a corpus is chunked into every existing
    chunking in the same transaction). ``upload``: ``path`` is an uploaded file the page wrote into
    an :func:`upload_folder`, removed when the job ends; else a path on the server, which must lie
    in ``[app] data_dirs`` as on the page (checked again here, in the job's process)."""

    what: str
    path: str
    label: str
    format: str | None = None
    name: str | None = None
    assessor: str | None = None
    skip_unknown: bool = False
    id_field: str | None = None
    text_field: str | None = None
    title_field: str | None = None
    upload: bool = False
    kind: ClassVar[str] = "import"
    action: ClassVar[str] = "import"
    resumable: ClassVar[bool] = False  # one transaction

    def title(self) -> str:
        return f"import of {self.label} ({self.what})"

    def run(self, db, progress: ProgressFactory, notify) -> dict:

        options = dict(format=self.format, name=self.name, assessor=self.assessor, skip_unknown=self.skip_unknown,
                       id_field=self.id_field, text_field=self.text_field, title_field=self.title_field)
        if self.upload:
            folder = Path(self.path).parent
            if not (folder.name.startswith(UPLOAD_PREFIX) and folder.parent == Path(tempfile.gettempdir())):
                raise InputError(f"an upload job reads only an upload folder of the app, not {folder}")
            if not Path(self.path).is_file():
                raise InputError(f"the uploaded file {self.label} is gone (its job ran before); upload it again")
            try:
                result = import_file(db, self.what, self.path, label=self.label, progress=progress, **options)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        else:
            data_dirs = load_settings().get("app", "data_dirs")
            allowed = check_data_path(self.path, data_dirs)
            result = import_file(db, self.what, allowed, label=self.label, progress=progress,
                                 allowed_folders=data_folders(data_dirs), **options)
        return {"summary": result.summary(data=True), "rows": result.rows, "name": result.name,
                "already_imported": result.already_imported is not None}


#: kind -> request class.
KINDS: dict[str, type] = {cls.kind: cls for cls in (ChunkRequest, DenseRequest, HybridRequest, PoolRequest,
                                                    SweepRequest, ImportRequest)}


def request_data(request) -> dict:
    """``request`` as JSON-ready data: ``{"kind": ..., field: value, ...}``."""
    return {"kind": request.kind, **_plain(dataclasses.asdict(request))}


def request_from_data(data: dict):
    """The typed request :func:`request_data` wrote; an unknown kind or field is an InputError."""
    data = dict(data)
    kind = str(data.pop("kind", ""))
    cls = KINDS.get(kind)
    if cls is None:
        raise InputError(f"unknown background job kind {kind!r}; known: {', '.join(sorted(KINDS))}")
    names = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise InputError(f"a {kind} job request has no field {', '.join(unknown)}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
    try:
        return cls(**values)
    except TypeError as exc:
        raise InputError(f"a {kind} job request is incomplete: {exc}") from None


def request_json(request) -> str:
    return json.dumps(request_data(request), sort_keys=True)


__all__ = ["KINDS", "ChunkRequest", "DenseRequest", "HybridRequest", "ImportRequest", "PoolRequest", "SweepRequest",
           "request_data", "request_from_data", "request_json"]
