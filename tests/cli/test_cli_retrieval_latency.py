"""``workbench retrieve list`` and the latency line of ``workbench retrieve``, in real subprocesses."""

from __future__ import annotations

import json

import numpy as np

from tests.support.templates import demo_project
from workbench.store.database import Database
from workbench.store.latencies import read_latencies


def test_retrieve_list_shows_measured_imported_and_missing_latencies(cli, db_path, tmp_path):
    db = str(db_path)
    demo_project(db_path)  # what `init --demo` builds: a copy of the worker's template
    # A document-level run imported without a latency sidecar.
    run_file = tmp_path / "ext.txt"
    run_file.write_text("q001 Q0 it-laptop-refresh 1 2.0 ext\nq002 Q0 it-hardware-standard-2022 1 1.5 ext\n")
    done = cli("--db", db, "import", "run", str(run_file), "--name", "ext")
    assert done.returncode == 0, done.stderr
    table = cli("--db", db, "retrieve", "list")
    assert table.returncode == 0, table.stderr
    lines = {line.split()[0]: line for line in table.stdout.splitlines()[1:]}
    with Database(db_path) as handle:
        values = read_latencies(handle, ["bm25"])["latency_ms"].to_numpy()
    assert f"{np.percentile(values, 50):.2f}" in lines["bm25"] and f"{np.percentile(values, 95):.2f}" in lines["bm25"]
    assert lines["ext"].count("not recorded") == 2
    # After a sidecar import the listing shows the imported values.
    sidecar = tmp_path / "ext.jsonl"
    sidecar.write_text('{"query_id": "q001", "latency_ms": 10}\n{"query_id": "q002", "latency_ms": 30}\n')
    assert cli("--db", db, "latency", "import", "--run", "ext", str(sidecar)).returncode == 0
    runs = {r["name"]: r for r in json.loads(cli("--db", db, "retrieve", "list", "--format", "json").stdout)["runs"]}
    assert runs["ext"]["latency_ms"] == {"p50": 20.0, "p95": 29.0} and runs["ext"]["timed_queries"] == 2
    assert runs["ext"]["level"] == "doc" and runs["ext"]["chunking"] is None
