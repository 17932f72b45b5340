"""Chunk the whole corpus under a new, named chunking, and keep every chunking covering it.

A chunking is a definition (strategy and parameters) applied to every document of the project:
documents imported later are chunked into every existing chunking in the same transaction as
the import (:func:`chunk_into_existing`), so BM25 or dense retrieval on a chunking never skips
them silently. A chunking's definition is immutable: re-chunking means creating a chunking with
another name. Labels are never touched, because judgments are anchored to character spans of
documents, not to chunk ids; :func:`workbench.core.documents.spans.chunk_qrels` maps them onto any
chunking later.

Default parameters per strategy (used when the caller passes ``size``/``overlap`` = None):

============  =====================================  =========
strategy      size means                             default
============  =====================================  =========
document      (no parameters)                        --
fixed         characters per window                  1000, overlap 0
section       maximum characters per section chunk   2000, overlap 0
sentences     sentences per window                   5, overlap 0
============  =====================================  =========
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, fields

import pandas as pd

from workbench.core.documents.chunking import STRATEGIES, ChunkingSpec, chunk_documents
from workbench.errors import InputError, StoreError
from workbench.services import access
from workbench.services.progress import ProgressFactory, no_progress
from workbench.store.chunks import (
    chunking_definitions,
    chunking_exists,
    read_chunkings,
    write_chunking,
    write_chunks,
)
from workbench.store.corpus import read_documents
from workbench.store.database import Cursor, Database

DEFAULT_SIZE = {"fixed": 1000, "section": 2000, "sentences": 5}


@dataclass(frozen=True)
class ChunkingSummary:
    """A chunking :func:`create_chunking` built (also what :meth:`workbench.api.Project.chunk`
    returns, as ``Chunking``); ``chunks_per_doc`` holds ``min``, ``mean`` and ``max``."""

    name: str
    strategy: str
    params: dict
    documents: int
    chunks: int
    seconds: float
    chunks_per_doc: dict = field(default_factory=dict)

    def to_pandas(self) -> pd.DataFrame:
        """One row: every field but ``params`` and ``chunks_per_doc``."""
        return pd.DataFrame([{f.name: getattr(self, f.name) for f in fields(self)
                              if f.name not in ("params", "chunks_per_doc")}])


def chunking_spec(name: str, strategy: str, size: int | None = None, overlap: int | None = None,
                  unit: str | None = None) -> ChunkingSpec:
    """Validated spec from front-end arguments (``size`` is ``max_size`` for ``section``)."""
    if strategy not in STRATEGIES:
        raise InputError(f"unknown chunking strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    params: dict = {}
    if strategy == "document":
        if size is not None or overlap is not None:
            raise InputError("the 'document' strategy takes no {field} or {field:overlap}", field="size", hint="drop them")
    else:
        key = "max_size" if strategy == "section" else "size"
        params[key] = DEFAULT_SIZE[strategy] if size is None else size
        params["overlap"] = 0 if overlap is None else overlap
        if unit is not None:
            if strategy != "fixed":
                raise InputError(f"unit applies to the 'fixed' strategy only, not {strategy!r}")
            params["unit"] = unit
    return ChunkingSpec(name, strategy, params)


def create_chunking(db: Database, name: str, strategy: str, *, size: int | None = None,
                    overlap: int | None = None, unit: str | None = None,
                    progress: ProgressFactory = no_progress) -> ChunkingSummary:
    """Chunk every document into chunking ``name`` and store it in one transaction.

    Raises :class:`StoreError` when the name is taken (chunkings are never overwritten, since
    runs and pools refer to their chunk ids) and :class:`InputError` for an empty corpus.
    """
    access.require("build")
    spec = chunking_spec(name, strategy, size, overlap, unit)
    if chunking_exists(db, name):
        raise StoreError(f"chunking {name!r} already exists in {db.path}", field="name",
                         hint="choose another {field} (chunkings are immutable because runs and pools refer "
                              "to their chunk ids)")
    started = time.perf_counter()
    documents = read_documents(db)
    if documents.empty:
        raise InputError(
            f"{db.path} holds no documents to chunk; import a corpus first "
            f"({{command:import corpus FILE}})"
        )
    with progress(f"chunk {name}", len(documents), "doc") as advance:
        chunks = chunk_documents(spec, documents[["doc_id", "text"]])
        advance(len(documents))
    with db.transaction() as tx:
        n = write_chunking(tx, name, spec.strategy, dict(spec.params), chunks)
    per_doc = chunks.groupby("doc_id").size()
    return ChunkingSummary(
        name=name, strategy=spec.strategy, params=dict(spec.params), documents=len(documents),
        chunks=n, seconds=time.perf_counter() - started,
        chunks_per_doc={"min": int(per_doc.min()) if len(per_doc) else 0,
                        "mean": float(per_doc.mean()) if len(per_doc) else 0.0,
                        "max": int(per_doc.max()) if len(per_doc) else 0},
    )


def chunk_into_existing(cur: Cursor, documents: pd.DataFrame) -> dict[str, int]:
    """Chunk ``documents`` (``doc_id, text``; new to the project) into every existing chunking,
    inside the caller's transaction (the import's, so documents and their chunks are stored
    together or not at all). Returns ``{chunking: chunks written}``."""
    written: dict[str, int] = {}
    if documents.empty:
        return written
    for name, strategy, params in chunking_definitions(cur):
        spec = ChunkingSpec(name, strategy, json.loads(params) if params else {})
        written[name] = write_chunks(cur, name, chunk_documents(spec, documents[["doc_id", "text"]]))
    return written


def list_chunkings(db: Database) -> pd.DataFrame:
    """Every chunking: ``name, strategy, params, created_at, chunks, documents, documents_now``
    (``documents``: how many documents it covers; ``documents_now``: how many the project holds)."""
    return read_chunkings(db)
