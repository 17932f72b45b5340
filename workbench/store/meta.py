"""Table ``project_meta`` (key/value) and the row counts of every table."""

from __future__ import annotations

from workbench.store.database import Cursor, Database

COUNTED_TABLES = ("documents", "queries", "chunkings", "chunks", "runs", "run_rows", "judgments")


def set_meta(cur: Cursor, key: str, value: str) -> None:
    cur.execute("INSERT OR REPLACE INTO project_meta (key, value) VALUES (?, ?)", [key, value])


def read_meta(db: Database) -> dict[str, str]:
    return dict(db.query_all("SELECT key, value FROM project_meta ORDER BY key"))


def table_counts(db: Database) -> dict[str, int]:
    """Row count of every pipeline table, plus judgments split by source and status."""
    existing = {r[0] for r in db.query_all("SELECT table_name FROM information_schema.tables")}
    counts = {}
    for table in COUNTED_TABLES + EXTRA_COUNTED_TABLES:
        if table in existing:
            counts[table] = int(db.query_value(f'SELECT count(*) FROM "{table}"'))
    for source, status, n in db.query_all(
        "SELECT source, status, count(*) FROM judgments GROUP BY ALL ORDER BY ALL"
    ):
        counts[f"judgments.{source}.{status}"] = int(n)
    return counts


# Tables added by later migrations register here so status shows them.
EXTRA_COUNTED_TABLES: tuple[str, ...] = ("pools", "pool_pairs", "imports", "evaluations")
