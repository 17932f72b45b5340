"""``workbench harness`` end to end in a real subprocess, with a real system script."""

from __future__ import annotations

import json
import sys

import pandas as pd

from workbench.store.corpus import write_documents, write_queries
from workbench.store.database import Database
from workbench.store.runs import read_run_rows

SYSTEM = r'''
import json, sys
q = sys.argv[1]
if q.startswith("fail"):
    sys.exit("no index for " + q)
print(json.dumps({"doc_id": "d1", "score": len(q)}))
'''


def _project(db_path):
    with Database(db_path) as db, db.transaction() as tx:
        write_documents(tx, pd.DataFrame({"doc_id": ["d1"], "text": ["alpha"]}))
        write_queries(tx, pd.DataFrame({"query_id": ["q1", "q2"], "text": ["a; rm -rf / 'b\"", "fail me"]}))


def test_harness_cli_reports_failures_with_exit_6_and_stores_the_run(cli, db_path, tmp_path):
    _project(db_path)
    script = tmp_path / "sys.py"
    script.write_text(SYSTEM)
    out = cli("--db", str(db_path), "harness", "--command", f"{sys.executable} {script} {{query}}",
              "--name", "ext", "--format", "json")
    assert out.returncode == 6, out.stderr
    report = json.loads(out.stdout)
    assert report["answered"] == 1 and report["failed"][0]["query_id"] == "q2"
    assert "no index for fail me" in report["failed"][0]["error"]
    with Database(db_path) as db:
        rows = read_run_rows(db, "ext")
    assert rows["query_id"].tolist() == ["q1"] and rows["score"].tolist() == [len("a; rm -rf / 'b\"")]
    again = cli("--db", str(db_path), "harness", "--command", f"{sys.executable} {script} {{query}}",
                "--name", "ext")
    assert again.returncode == 4 and "already exists" in again.stderr and "Traceback" not in again.stderr


def test_harness_cli_bad_template_is_one_line(cli, db_path):
    _project(db_path)
    out = cli("--db", str(db_path), "harness", "--command", "prog 'unclosed {query}", "--name", "x")
    assert out.returncode == 3 and "quotes" in out.stderr and "Traceback" not in out.stderr
