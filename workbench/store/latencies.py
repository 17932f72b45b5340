"""Table ``run_latencies`` (migration 10): per-query latency in milliseconds of a run."""

from __future__ import annotations

import pandas as pd

from workbench.store.database import Cursor, Database, insert_frame


def write_latencies(cur: Cursor, run: str, frame: pd.DataFrame) -> int:
    """Replace run ``run``'s latencies by ``frame`` (``query_id, latency_ms``) in ``cur``'s transaction."""
    cur.execute("DELETE FROM run_latencies WHERE run = ?", [run])
    out = pd.DataFrame({"run": run, "query_id": frame["query_id"].astype(str),
                        "latency_ms": frame["latency_ms"].astype("float64")})
    return insert_frame(cur, "run_latencies", out) if len(out) else 0


def read_latencies(db: Database, runs: list[str] | None = None) -> pd.DataFrame:
    """``run, query_id, latency_ms`` of ``runs`` (all when None)."""
    where = "WHERE run IN (SELECT unnest(?::VARCHAR[]))" if runs is not None else ""
    return db.query_df(f"SELECT run, query_id, latency_ms FROM run_latencies {where} ORDER BY run, query_id",
                       [list(runs)] if runs is not None else None)
