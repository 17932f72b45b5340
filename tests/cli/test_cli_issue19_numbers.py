"""Numbers issue 19 found wrong against the spec, checked through the real CLI on the demo project
against independent counts (the pool's labelled pairs as exported, the evaluation's own query
set, the abstention report before any synthetic query existed).

The CLI runs in this process (``tests/support/cli_runner.py``: ``workbench.cli.main`` with fresh
streams, the given environment and directory): these are numbers, not process behaviour, and a
``python -m workbench`` per command cost 0.5-1.2 s of imports each."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli_runner import run_in_process
from tests.support.templates import demo_project


def _workbench(db: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "WORKBENCH_"))}
    done = run_in_process(("--db", str(db), *args), cwd=db.parent, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    # what `init --demo` builds: a copy of the worker's template
    return demo_project(tmp_path_factory.mktemp("demo") / "demo.duckdb")


@pytest.fixture
def project(demo, tmp_path) -> Path:
    db = tmp_path / "project.duckdb"
    shutil.copyfile(demo, db)
    return db


def _abstention(db: Path) -> dict:
    return json.loads(_workbench(db, "abstention", "--runs", "bm25", "--format", "json").stdout)["bm25"]


def test_abstention_leaves_synthetic_queries_out(project):
    before = _abstention(project)  # 44 queries, 4 of them unanswerable: no synthetic query yet
    assert before["counts"]["queries"] == 44 and before["counts"]["unanswerable"] == 4
    _workbench(project, "synth", "--chunking", "sections", "--per-chunk", "2", "--limit", "5")
    after = _abstention(project)
    # The 10 synthetic queries are not in run bm25: counted in, each would be "without results",
    # so "abstained" on an answerable query (the 881 queries and AUC 0.03 on a full synth).
    assert after["counts"]["synthetic_left_out"] == 10
    assert {k: after["counts"][k] for k in ("queries", "unanswerable", "answerable", "missing_from_run")} == \
        {k: before["counts"][k] for k in ("queries", "unanswerable", "answerable", "missing_from_run")}
    assert after["aggregate"] == pytest.approx(before["aggregate"])


def test_budget_candidates_leave_out_labelled_pairs(project):
    plan = json.loads(_workbench(project, "labels", "budget", "--pool", "demo", "--budget", "1000",
                                 "--format", "json").stdout)
    exported = project.parent / "human.qrels"
    _workbench(project, "export", "qrels", "--source", "human", "--level", "chunk", "--chunking", "sections",
               "--keep-unanswerable", "--out", str(exported))
    labelled = {tuple(line.split()[0:3:2]) for line in exported.read_text().splitlines()}
    status = _workbench(project, "status").stdout
    # status: "demo: 131 of 880 pairs labelled" (the human labels of the demo; no LLM label yet)
    assert "demo: 131 of 880 pairs labelled" in status
    assert plan["candidates"] == 880 - 131 == 749
    chosen = {(p["query_id"], p["chunk_id"]) for p in plan["pairs"]}
    assert len(chosen) == plan["selected"] > 0 and not chosen & labelled


def test_sweep_columns_share_one_query_set(project):
    out = json.loads(_workbench(project, "sweep", "--chunkings", "section", "--retrievers", "bm25",
                                "-m", "ndcg@10", "--labels", "human", "--format", "json", "--no-progress").stdout)
    cell = out["cells"][0]
    evaluation = json.loads(_workbench(project, "eval", "--runs", "sweep.sections.bm25", "-m", "ndcg@10",
                                       "--labels", "human", "--level", "chunk", "--chunking", "sections",
                                       "--format", "json").stdout)
    scored = next(iter(evaluation.values()))["per_query"]
    # 44 queries less the 4 unanswerable: nDCG, coverage and judged@10 all average over these 40.
    assert cell["queries"] == len(scored) == 40


def test_numeric_citations_say_how_they_resolve(tmp_path):
    # context [a, b, 3]: by id (the default, the spec's bracket_number) "1" is no context id:
    # 1 of 2 valid; by position [1] -> a and [3] -> "3" (2 of 2 valid, 2 of 3 cited).
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"answer": "See [1] and [3].", "context_ids": ["a", "b", "3"]}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "WORKBENCH_"))}

    def run(*extra):
        done = run_in_process(("citations", str(answers), "--pattern", "numeric", *extra), cwd=tmp_path, env=env,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    by_id = run()
    assert "resolve by id" in by_id and "--resolve position reads it as the n-th" in by_id
    agg = json.loads(run("--format", "json"))["aggregate"]
    assert (agg["resolve"], agg["micro_faithfulness"]) == ("id", 0.5)
    agg = json.loads(run("--resolve", "position", "--format", "json"))["aggregate"]
    assert (agg["resolve"], agg["micro_faithfulness"], agg["mean_coverage"]) == ("position", 1.0, pytest.approx(2 / 3))
    by_position = run("--resolve", "position")
    assert "resolve by position" in by_position and "not as the id 'n'" in by_position
