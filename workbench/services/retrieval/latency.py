"""Per-query latencies of stored runs: importing an external run's JSONL sidecar
(``{"query_id", "latency_ms"}`` lines) into ``run_latencies`` and the p50/p95 summary the
Retrieve and Evaluate pages, ``workbench latency`` and run listings show (numpy's
linear-interpolation percentiles, :func:`workbench.core.metrics.pareto.percentile_latency`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from workbench.core.formats.lines import decode_utf8, load_json_line, split_lines
from workbench.core.metrics.pareto import percentile_latency
from workbench.errors import InputError
from workbench.store.database import Database
from workbench.store.latencies import read_latencies, write_latencies
from workbench.store.runs import run_exists


def import_latencies(db: Database, run: str, path) -> int:
    """Read a JSONL sidecar of ``{"query_id", "latency_ms"}`` lines for stored run ``run`` (an
    external run) into ``run_latencies``. Refuses, naming file:line, a line that is not an object
    with a string/number ``query_id`` and a finite ``latency_ms >= 0``, or a query given twice."""


    if not run_exists(db, run):
        raise InputError(f"no run named {run!r} in the project; import the run first ({{command:import run FILE}})")
    path = Path(path)
    try:
        lines = split_lines(decode_utf8(path.read_bytes(), str(path)))
    except OSError as exc:
        raise InputError(f"cannot read the latency file: {exc.strerror}", path=str(path)) from None
    rows, seen = [], set()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{n}"
        obj = load_json_line(line, str(path), n)
        if not isinstance(obj, dict) or "query_id" not in obj or "latency_ms" not in obj:
            raise InputError(f"{where}: needs the keys query_id and latency_ms")
        value = obj["latency_ms"]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
            raise InputError(f"{where}: latency_ms must be a number >= 0, got {value!r}")
        qid = str(obj["query_id"])
        if qid in seen:
            raise InputError(f"{where}: query {qid!r} is given twice; keep one latency per query")
        seen.add(qid)
        rows.append((qid, float(value)))
    if not rows:
        raise InputError("the latency file has no lines", path=str(path))
    frame = pd.DataFrame(rows, columns=["query_id", "latency_ms"])
    with db.transaction() as tx:
        return write_latencies(tx, run, frame)


def latency_summary(db: Database, runs: list[str]) -> pd.DataFrame:
    """``run, queries, p50_ms, p95_ms`` of runs with stored per-query latencies."""

    lat = read_latencies(db, runs)
    rows = []
    for run, group in lat.groupby("run", sort=False):
        v = group["latency_ms"].to_numpy(dtype=float)
        rows.append({"run": run, "queries": len(v), "p50_ms": percentile_latency(v, 50),
                     "p95_ms": percentile_latency(v, 95)})
    return pd.DataFrame(rows, columns=["run", "queries", "p50_ms", "p95_ms"])
