"""``workbench compare --per-query``: every query sorted by the difference from the baseline, both
runs' top results side by side, unjudged ones marked; through ``python -m workbench``. The
project's stored runs: :mod:`tests.cli.test_cli_compare_per_query_project`."""

from __future__ import annotations

import json

from tests.conftest import run_cli
from tests.support.trec_files import write_run

QRELS = """\
q1 0 d1 1
q1 0 d2 1
q2 0 d3 1
q3 0 d4 1
q3 0 d5 2
q4 0 d6 1
q4 0 d9 0
q4 0 d8 -1
"""
# precision@2 by hand: base q1 .5 q2 0 q3 1 q4 .5; new q1 1 q2 .5 q3 .5 q4 .5
BASE_TOP = {"q1": ["d1", "x1"], "q2": ["x1", "x2"], "q3": ["d4", "d5"], "q4": ["d8", "d6"]}
NEW_TOP = {"q1": ["d1", "d2"], "q2": ["d3", "x1"], "q3": ["d4", "x1"], "q4": ["d6", "x1"]}


def files(tmp_path):
    qrels = tmp_path / "t.qrels"
    qrels.write_text(QRELS)
    return qrels, write_run(tmp_path / "base.run", BASE_TOP, "base"), write_run(tmp_path / "new.run", NEW_TOP, "new")


def test_per_query_json_sorted_by_delta_with_grades(tmp_path):
    qrels, base, new = files(tmp_path)
    proc = run_cli("compare", str(qrels), str(base), str(new), "-m", "P@2", "--per-query", "--top", "2",
                   "--test", "ttest", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["per_query"]
    assert [(r["query_id"], r["delta"]) for r in rows] == [("q3", -0.5), ("q4", 0.0), ("q1", 0.5), ("q2", 0.5)]
    q3 = rows[0]
    assert (q3["measure"], q3["baseline"], q3["run"]) == ("P@2", "base", "new")
    assert (q3["baseline_value"], q3["run_value"]) == (1.0, 0.5)
    assert q3["baseline_top"] == [{"id": "d4", "grade": 1}, {"id": "d5", "grade": 2}]
    assert q3["run_top"] == [{"id": "d4", "grade": 1}, {"id": "x1", "grade": None}]
    # a label below 0 means pooled but not judged: shown as unjudged
    q4 = rows[1]
    assert q4["baseline_top"] == [{"id": "d8", "grade": None}, {"id": "d6", "grade": 1}]


def test_per_query_table_and_tie_order(tmp_path):
    qrels, base, _ = files(tmp_path)
    tied = tmp_path / "tied.run"
    # equal scores: trec_eval's order is id descending, byte-wise ("d2" before "d1", "x1b" before "x1")
    tied.write_text("q1 Q0 d1 1 5 t\nq1 Q0 d2 2 5 t\nq2 Q0 x1 1 3 t\nq2 Q0 x1b 2 3 t\nq2 Q0 d3 3 1 t\n")
    proc = run_cli("compare", str(qrels), str(base), str(tied), "-m", "P@2", "--per-query", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "per query: P@2, tied - base (sorted by delta; (?) = unjudged)" in proc.stdout
    line_q2 = next(line for line in proc.stdout.splitlines() if line.startswith("q2 "))
    assert line_q2.endswith("x1(?) x2(?)  x1b(?) x1(?) d3(1)")
    line_q1 = next(line for line in proc.stdout.splitlines() if line.startswith("q1 "))
    assert line_q1.endswith("d2(1) d1(1)")
    # q3 and q4 are not in the tied run: value 0, empty top list
    line_q3 = next(line for line in proc.stdout.splitlines() if line.startswith("q3 "))
    assert line_q3.split()[1:4] == ["1.0000", "0.0000", "-1.0000"] and line_q3.endswith(" -")
