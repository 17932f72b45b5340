"""What an import did: :class:`ImportResult`, shared by every importer."""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench import lazylibs
from workbench.errors import render_text


@dataclass
class ImportResult:
    """What an import did. ``rows`` were written; the other counts say what was not and why;
    ``already_imported`` is the earlier import when the same bytes were seen before (then nothing
    was done), else None. ``summary()`` says it in one paragraph, ``to_pandas()`` as one row."""

    kind: str
    path: str
    format: str
    name: str | None = None
    rows: int = 0
    present: int = 0  # rows equal to stored rows, not written again
    excluded: int = 0  # rows the format says to leave out (Cranfield -1)
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows dropped (skip_unknown)
    already_imported: dict | None = None  # the earlier ledger row when the bytes were seen before
    level: str | None = None
    chunking: str | None = None
    queries_added: int = 0
    chunked: dict[str, int] = field(default_factory=dict)  # chunking -> chunks of the new documents
    empty_texts: int = 0  # new documents with an empty text (stored; nothing to chunk or retrieve)
    empty_example: str | None = None  # "file:line doc_id 'x'" of the first of them
    seconds: float = 0.0

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def to_pandas(self):
        """One row (what ``Project.import_*`` return, as a table): ``kind, path, format, name,
        rows, present, excluded, already_imported`` (True or False)``, level, chunking, seconds,
        skipped`` (rows skipped, all reasons)."""

        return lazylibs.pandas.DataFrame([{"kind": self.kind, "path": self.path, "format": self.format, "name": self.name,
                                           "rows": self.rows, "present": self.present, "excluded": self.excluded,
                                           "already_imported": self.already_imported is not None, "level": self.level,
                                           "chunking": self.chunking, "seconds": self.seconds, "skipped": self.skipped_total}])

    def summary(self, *, data: bool = False) -> str:
        """One human-readable paragraph (the CLI prints it; the app shows it): with ``data`` its fields
        as placeholders for a page to render (:func:`workbench.ui.words.page_message`), else as the CLI
        says them."""

        noun = {"corpus": "documents", "queries": "queries", "qrels": "judgments", "run": "run rows"}[self.kind]
        if self.already_imported is not None:
            earlier = self.already_imported
            return (f"{self.path}: already imported on {earlier['imported_at']:%Y-%m-%d %H:%M} as "
                    f"{self.kind} {earlier['name']!r} ({earlier['rows']:,} {noun}); nothing to do")
        what = f"run {self.name!r} ({self.level} level" + (f", chunking {self.chunking!r})" if self.chunking else ")") \
            if self.kind == "run" else ""
        parts = [(f"imported {self.rows:,} {noun}{' into ' + what if what else ''} from {self.path} "
                  f"(format {self.format})")]
        if self.queries_added:
            parts.append(f"registered {self.queries_added:,} queries from the rows")
        if self.chunked:
            parts.append("chunked the new documents into " + ", ".join(
                f"{name!r} ({n:,} chunks)" for name, n in self.chunked.items()))
        if self.empty_texts:
            parts.append(f"{self.empty_texts:,} of them have an empty text (nothing to chunk or retrieve; "
                         f"first: {self.empty_example})")
        if self.present:
            parts.append(f"{self.present:,} rows were already stored")
        if self.excluded:
            parts.append(f"excluded {self.excluded:,} rows with Cranfield code -1 (no grade)")
        for reason, n in self.skipped.items():
            parts.append(f"skipped {n:,} rows with {reason} ({{field:skip_unknown}})")
        text = "; ".join(parts)
        return text if data else render_text(text)
