"""``calibrate sample --design queries`` and ``eval/compare --runs A,B --labels corrected`` as
real processes (``python -m workbench``): the contract, the refusals and their exit codes."""

from __future__ import annotations

import json

from tests.conftest import run_cli
from tests.support.ppi_project import build_ppi_project, label_queries
from workbench.store.database import Database


def _project(tmp_path):
    path = tmp_path / "p.duckdb"
    db, truth = build_ppi_project(path)
    db.close()
    return path, truth


def test_query_sample_then_corrected_eval_and_compare(tmp_path):
    path, truth = _project(tmp_path)
    db = ["--db", str(path)]
    proc = run_cli(*db, "calibrate", "sample", "--pool", "p", "--design", "queries", "--queries", "6",
                   "--seed", "4", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    body = json.loads(proc.stdout)
    assert (body["design"], body["queries"], body["size"], body["seed"]) == ("queries", 6, 72, 4)
    name = body["name"]
    assert name == "p-queries-seed4"

    # nothing labelled yet: one line, exit 3
    proc = run_cli(*db, "eval", "--runs", "ra,rb", "--labels", "corrected", "-m", "ndcg@10", cwd=tmp_path)
    assert proc.returncode == 3 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "0 of its 6 queries are fully labelled" in proc.stderr

    d = Database(path)
    label_queries(d, name, truth, 1)
    d.close()
    proc = run_cli(*db, "eval", "--runs", "ra,rb", "--labels", "corrected", "-m", "ndcg@10", cwd=tmp_path)
    assert proc.returncode == 3 and "1 of its 6 queries" in proc.stderr and "Traceback" not in proc.stderr

    d = Database(path)
    label_queries(d, name, truth, 4)
    d.close()
    proc = run_cli(*db, "eval", "--runs", "ra,rb", "--labels", "corrected", "-m", "ndcg@10", "-m", "P@5",
                   "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["labels"], out["sample"], out["n_labelled"], out["n_unlabelled"], out["queries_drawn"]) == \
        ("corrected", name, 4, 26, 6)
    for m in ("ndcg@10", "P@5"):
        for r in ("ra", "rb"):
            e = out["measures"][m]["runs"][r]
            assert set(e) == {"estimate", "ci", "human_only_ci", "judge_only", "lambda"}
            assert e["ci"][0] <= e["estimate"] <= e["ci"][1] and 0 <= e["lambda"] <= 1
        assert out["measures"][m]["differences"]["rb"]["vs"] == "ra"
    assert "4 labelled queries of 6 drawn" in proc.stderr

    proc = run_cli(*db, "compare", "--runs", "ra,rb", "--labels", "corrected", "-m", "ndcg@10", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "4 labelled queries" in proc.stdout and "run - ra" in proc.stdout and "human-only 95% CI" in proc.stdout
    proc = run_cli(*db, "compare", "--runs", "ra", "--labels", "corrected", "-m", "ndcg@10", cwd=tmp_path)
    assert proc.returncode == 2 and "at least two runs" in proc.stderr


def test_refusals(tmp_path):
    path, _ = _project(tmp_path)
    db = ["--db", str(path)]
    proc = run_cli(*db, "eval", "--runs", "ra", "--labels", "corrected", "-m", "ndcg@10", cwd=tmp_path)
    assert proc.returncode == 3 and "no query-design calibration sample" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = run_cli(*db, "calibrate", "sample", "--pool", "p", "--design", "queries", cwd=tmp_path)
    assert proc.returncode == 2 and "--queries N" in proc.stderr
    proc = run_cli(*db, "calibrate", "sample", "--pool", "p", "--queries", "3", cwd=tmp_path)
    assert proc.returncode == 2 and "--design queries" in proc.stderr
    proc = run_cli(*db, "calibrate", "sample", "--pool", "p", "--design", "queries", "--queries", "40", cwd=tmp_path)
    assert proc.returncode == 3 and "only 30 queries" in proc.stderr
    proc = run_cli(*db, "eval", "--runs", "ra", "--labels", "corrected", "-m", "ndcg@10", "--format", "tsv",
                   cwd=tmp_path)
    assert proc.returncode == 2 and "table or JSON" in proc.stderr
    proc = run_cli(*db, "eval", "--runs", "ra", "--labels", "corrected", "-m", "ndcg@10", "--condensed", cwd=tmp_path)
    assert proc.returncode == 2 and "--condensed does not apply" in proc.stderr
