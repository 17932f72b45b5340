"""``workbench abstention``, ``rbac-check``, ``multihop`` and ``answerability`` as real processes
on a demo project: output shapes, exit codes, one-line errors."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import run_cli
from workbench.resources import DEMO_DIR


@pytest.fixture(scope="module")
def demo_template(tmp_path_factory):
    from tests.support.templates import demo_project
    from workbench.services.project.lifecycle import open_project
    from workbench.services.evaluation.query_kinds import add_demo_role_runs

    path = demo_project(tmp_path_factory.mktemp("demo") / "demo.duckdb")  # a copy of the worker's template
    with open_project(path) as db:
        add_demo_role_runs(db)
    return path


@pytest.fixture
def demo(demo_template, tmp_path):
    path = tmp_path / "demo.duckdb"
    shutil.copy(demo_template, path)
    return str(path)


def test_rbac_check_exit_codes_and_json(demo):
    leak = run_cli("--db", demo, "rbac-check", "--runs", "employee=bm25-employee,security=bm25-security",
                   "--format", "json")
    assert leak.returncode == 1, leak.stderr
    out = json.loads(leak.stdout)
    assert set(out) == {"leaks", "roles"} and set(out["roles"]) == {"employee", "security"}
    assert set(out["roles"]["employee"]) == {"leaks", "rate", "examples"}
    assert out["leaks"] == out["roles"]["employee"]["leaks"] > 0 and out["roles"]["security"]["leaks"] == 0
    example = out["roles"]["employee"]["examples"][0]
    assert set(example) == {"query_id", "doc_id", "chunk_id", "rank"}
    assert example["doc_id"] == "eng-production-access"
    clean = run_cli("--db", demo, "rbac-check", "--runs", "security=bm25-security")
    assert clean.returncode == 0 and "OK: no leak" in clean.stdout
    for bad in (["--runs", "security"], ["--runs", "security=nope"], ["--runs", "a=b", "--field", "roles"]):
        r = run_cli("--db", demo, "rbac-check", *bad)
        assert r.returncode == 2, (bad, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_rbac_check_table_lists_leaks_per_query(demo):
    r = run_cli("--db", demo, "rbac-check", "--runs", "employee=bm25-employee", "--k", "10")
    assert r.returncode == 1
    assert "role employee (run bm25-employee)" in r.stdout and "query q014" in r.stdout
    assert "FAIL" in r.stdout.splitlines()[-1]


def test_abstention_json_like_eval(demo):
    r = run_cli("--db", demo, "abstention", "--runs", "bm25", "--threshold", "4",
                "--answers", str(DEMO_DIR / "answers.jsonl"), "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {"bm25", "answers"}
    run = out["bm25"]
    assert {"aggregate", "per_query", "counts", "threshold", "curve"} <= set(run)
    assert set(run["aggregate"]) == {"abstention_rate", "false_abstention_rate", "balanced_accuracy", "auc"}
    assert len(run["per_query"]) == 44 and run["threshold"] == 4.0
    assert out["answers"]["aggregate"]["abstention_rate"] == 0.75
    tsv = run_cli("--db", demo, "abstention", "--stored-answers", "demo-answers", "--format", "tsv", "--per-query")
    lines = tsv.stdout.splitlines()
    assert lines[0] == "run\tmeasure\tquery_id\tvalue"
    assert "demo-answers\tabstention_rate\tall\t0.750000" in lines
    assert "demo-answers\tabstained\tq041\t1" in lines


def test_abstention_errors_are_one_line(demo, tmp_path):
    bad = tmp_path / "a.jsonl"
    bad.write_text('{"query_id": "q001", "abstained": "maybe"}\n')
    r = run_cli("--db", demo, "abstention", "--answers", str(bad))
    assert r.returncode == 3 and f"{bad}:1: 'abstained' must be true or false" in r.stderr
    r = run_cli("--db", demo, "abstention", "--runs", "nope")
    assert r.returncode == 3 and "no run 'nope'" in r.stderr
    r = run_cli("--db", demo, "abstention", "--runs", "bm25", "--threshold", "nan")
    assert r.returncode == 2
    r = run_cli("--db", demo, "abstention")
    assert r.returncode == 2 and "--runs" in r.stderr


def test_multihop_file_and_stored(demo):
    r = run_cli("--db", demo, "multihop", str(DEMO_DIR / "trajectories.jsonl"), "--stored", "demo-agent",
                "--format", "json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {"trajectories", "demo-agent"}
    assert out["trajectories"]["aggregate"] == out["demo-agent"]["aggregate"]
    assert out["demo-agent"]["counts"]["with_chain"] == 7
    assert set(out["demo-agent"]["per_query"]["q012"]["hop_recall"]) == {"1", "2"}
    table = run_cli("--db", demo, "multihop", "--stored", "demo-agent", "--per-query", "-k", "3")
    assert "completeness" in table.stdout and "q038" in table.stdout


def test_multihop_with_a_chain_file_needs_no_project(tmp_path):
    r = run_cli("--db", str(tmp_path / "none.duckdb"), "multihop", str(DEMO_DIR / "trajectories.jsonl"),
                "--chains", str(DEMO_DIR / "chains.jsonl"), "--format", "tsv")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "trajectories\tmeasure\tquery_id\tvalue"


def test_answerability_records_a_decision(demo):
    r = run_cli("--db", demo, "answerability", "q001", "unanswerable", "--annotator", "sme1")
    assert r.returncode == 0, r.stderr
    out = json.loads(run_cli("--db", demo, "answerability", "--format", "json").stdout)
    assert out["q001"] == {"unanswerable": True, "decided_by": "sme"}
    assert out["q022"] == {"unanswerable": True, "decided_by": "tag"}
    r = run_cli("--db", demo, "answerability", "q001", "unanswerable")
    assert r.returncode == 2 and "annotator" in r.stderr


def test_abstention_reports_ranking_over_answerable_queries(demo):
    r = run_cli("--db", demo, "abstention", "--runs", "bm25", "--ranking-measures", "recall@10,mrr",
                "--format", "json")
    assert r.returncode == 0, r.stderr
    ranking = json.loads(r.stdout)["bm25"]["ranking_answerable"]
    assert ranking["excluded_unanswerable"] == ["q022", "q027", "q041", "q042"]
    assert ranking["counts"]["queries_evaluated"] + ranking["counts"]["excluded_no_relevant"] == 40
    assert set(ranking["aggregate"]) == {"recall@10", "mrr"}


def test_files_are_stored_in_the_project_under_new_names(demo):
    traj = str(DEMO_DIR / "trajectories.jsonl")
    r = run_cli("--db", demo, "multihop", traj, "--store", "agent-2", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert "stored the trajectories" in r.stderr
    again = run_cli("--db", demo, "multihop", traj, "--store", "agent-2")
    assert again.returncode == 3 and "already exist" in again.stderr
    stored = run_cli("--db", demo, "multihop", "--stored", "agent-2", "--format", "json")
    assert json.loads(stored.stdout)["agent-2"]["aggregate"] == json.loads(r.stdout)["trajectories"]["aggregate"]
    chains = str(DEMO_DIR / "chains.jsonl")
    r = run_cli("--db", demo, "multihop", traj, "--chains", chains, "--store-chains")
    assert r.returncode == 3 and "already have an evidence chain" in r.stderr
    r = run_cli("--db", demo, "multihop", traj, "--chains", chains, "--store-chains", "--replace-chains")
    assert r.returncode == 0 and "stored 20 evidence spans" in r.stderr
    r = run_cli("--db", demo, "abstention", "--answers", str(DEMO_DIR / "answers.jsonl"), "--store", "rag-v2",
                "--format", "json")
    assert r.returncode == 0 and set(json.loads(r.stdout)) == {"rag-v2"}
    listed = run_cli("--db", demo, "abstention", "--stored-answers", "rag-v2,demo-answers", "--format", "json")
    out = json.loads(listed.stdout)
    assert out["rag-v2"]["aggregate"] == out["demo-answers"]["aggregate"]
