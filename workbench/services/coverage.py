"""Which documents each chunking and each run covers, for status, pages, pooling and evaluation.

Rules:

* A chunking covers a document when the document has at least one chunk in it. Documents
  imported after a chunking was made are chunked into it in the same transaction
  (:func:`workbench.services.chunking.chunk_into_existing`), so a chunking covers every
  document except those whose text yields no chunk (an empty text) and those of a project made
  before that rule.
* A run covers the documents the project held when it was made or imported (recorded in
  ``runs.corpus_documents``; documents are never deleted, so the newer ones are exactly those
  it did not see). A run made before that was recorded has unknown coverage (``None``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from workbench.store.chunks import read_chunkings
from workbench.store.database import Database
from workbench.store.runs import read_run_info


@dataclass(frozen=True)
class RunCoverage:
    """A run's coverage: ``documents`` it saw (None: unknown) of ``documents_now``."""

    name: str
    documents: int | None
    documents_now: int

    @property
    def complete(self) -> bool | None:
        return None if self.documents is None else self.documents >= self.documents_now

    @property
    def missing(self) -> int | None:
        return None if self.documents is None else max(self.documents_now - self.documents, 0)

    def note(self) -> str | None:
        """One sentence when the run does not cover every document (else None)."""
        if self.documents is None:
            return (f"run {self.name!r} was made before the workbench recorded coverage; it may not "
                    f"cover all {self.documents_now:,} documents")
        if self.complete:
            return None
        return (f"run {self.name!r} covers {self.documents:,} of {self.documents_now:,} documents: the "
                f"{self.missing:,} imported after it was made are not in it (re-run the retriever "
                f"under another name to include them)")


def _int_or_none(value) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


def run_coverage(db: Database, names: list[str] | None = None) -> list[RunCoverage]:
    """Coverage of the runs ``names`` (every run when None), in creation order."""
    info = read_run_info(db, names)
    return [RunCoverage(r["name"], _int_or_none(r["corpus_documents"]), int(r["documents_now"]))
            for _, r in info.iterrows()]


def coverage_notes(db: Database, names: list[str]) -> list[str]:
    """A sentence per run among ``names`` that does not cover every document."""
    return [note for coverage in run_coverage(db, names) if (note := coverage.note())]


def chunking_coverage(db: Database) -> pd.DataFrame:
    """``name, strategy, chunks, documents, documents_now, documents_empty, complete`` per chunking.

    A document with an empty text has nothing to chunk: a chunking that covers every other
    document is complete (``documents_empty`` says how many there are)."""
    frame = read_chunkings(db)
    out = frame[["name", "strategy", "chunks", "documents", "documents_now", "documents_empty"]].copy()
    out["complete"] = out["documents"] + out["documents_empty"] >= out["documents_now"]
    return out.reset_index(drop=True)


def runs_coverage_table(db: Database) -> pd.DataFrame:
    """``name, level, chunking, rows, queries, documents, documents_now, complete`` per run
    (``documents``/``complete`` are NA when unknown)."""
    info = read_run_info(db)
    out = info[["name", "level", "chunking", "rows", "queries"]].copy()
    out["documents"] = info["corpus_documents"].astype("Int64")
    out["documents_now"] = info["documents_now"].astype("int64")
    out["complete"] = (out["documents"] >= out["documents_now"]).astype("boolean")
    return out.reset_index(drop=True)
