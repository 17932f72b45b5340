"""Table ``imports``: the ledger of imported files. Importing the same bytes twice as the same
kind is a no-op because the ledger remembers their sha256."""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.store.database import Cursor, Database

if TYPE_CHECKING:  # not imported at run time: pandas is most of the CLI's start-up time
    import pandas as pd

_LEDGER_COLUMNS = ("import_id", "kind", "name", "path", "format", "rows", "skipped", "imported_at")


def find_import(cur: Cursor, kind: str, sha256: str) -> dict | None:
    """The ledger row of an earlier import of the same bytes as ``kind``, if any."""
    rows = cur.execute(
        f"SELECT {', '.join(_LEDGER_COLUMNS)} FROM imports WHERE kind = ? AND sha256 = ?",
        [kind, sha256],
    ).fetchall()
    return dict(zip(_LEDGER_COLUMNS, rows[0])) if rows else None


def record_import(cur: Cursor, *, kind: str, name: str | None, path: str, format: str, sha256: str,
                  rows: int, skipped: int) -> None:
    cur.execute(
        "INSERT INTO imports (kind, name, path, format, sha256, rows, skipped) VALUES (?, ?, ?, ?, ?, ?, ?)",
        [kind, name, path, format, sha256, int(rows), int(skipped)],
    )


def read_imports(db: Database, limit: int = 50) -> pd.DataFrame:
    """The most recent imports first."""
    return db.query_df(
        f"SELECT {', '.join(_LEDGER_COLUMNS)}, sha256 FROM imports ORDER BY import_id DESC LIMIT ?",
        [int(limit)],
    )
