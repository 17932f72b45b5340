"""The import ledger: the same bytes imported twice as the same kind is a no-op."""

from __future__ import annotations

from workbench.services.ingest.result import ImportResult
from workbench.services.ingest.source import Source
from workbench.store import imports as imports_table
from workbench.store.database import Database


def earlier_import(db: Database, kind: str, sha256: str) -> dict | None:
    """The ledger row of an earlier import of the same bytes as ``kind``, if any."""
    cur = db.cursor()
    try:
        return imports_table.find_import(cur, kind, sha256)
    finally:
        cur.close()


def record(cur, source: Source, result: ImportResult) -> None:
    """Add the import to the ledger, in the import's own transaction (all or nothing)."""
    imports_table.record_import(
        cur, kind=result.kind, name=result.name, path=source.label, format=result.format,
        sha256=source.sha256, rows=result.rows, skipped=result.skipped_total + result.excluded,
    )
