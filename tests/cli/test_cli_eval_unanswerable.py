"""Exported qrels and project evaluation agree on the demo (issue 13's unanswerable queries):
``eval --runs`` counts the unanswerable queries it leaves out under their own name (not as
``only_in_run``), and ``export qrels`` leaves them out by default, so file-mode ``eval`` of the
exported qrels and run gives the same mean over the same queries and the same qrels fingerprint."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import run_cli
from workbench.services.qrels.answerability import unanswerable_ids, without_unanswerable
from workbench.services.project.lifecycle import open_project
from workbench.services.qrels.rule import project_qrels

UNANSWERABLE = ["q022", "q027", "q041", "q042"]  # the demo's (issue 13)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from tests.support.templates import demo_project

    # what `init --demo` builds: a copy of the worker's template
    return demo_project(tmp_path_factory.mktemp("unanswerable") / "demo.duckdb")


def _fingerprint(text: str) -> str:
    return re.search(r"qrels (?:fingerprint )?([0-9a-f]{16})", text).group(1)


def test_project_eval_counts_unanswerable_queries_apart_and_the_export_matches_it(demo, tmp_path):
    db = ["--db", str(demo)]
    project = run_cli(*db, "eval", "--runs", "bm25", "--labels", "merged", "-m", "ndcg@10", "-m", "recall@10",
                      "--format", "json")
    assert project.returncode == 0, project.stderr
    stored = json.loads(project.stdout)["bm25"]
    assert stored["counts"]["only_in_run"] == 0
    assert stored["counts"]["excluded_unanswerable"] == 4
    assert "4 unanswerable queries left out of ranking measures (q022, q027, q041, q042)" in project.stderr
    assert not set(UNANSWERABLE) & set(stored["per_query"])

    qrels, run = tmp_path / "q.txt", tmp_path / "bm25.txt"
    exported = run_cli(*db, "export", "qrels", "--level", "chunk", "--chunking", "sections", "--out", str(qrels))
    assert exported.returncode == 0, exported.stderr
    assert "left out 4 unanswerable queries (q022, q027, q041, q042)" in exported.stdout
    assert "--keep-unanswerable" in exported.stdout
    assert _fingerprint(exported.stdout) == _fingerprint(project.stderr)
    assert not {line.split()[0] for line in qrels.read_text().splitlines()} & set(UNANSWERABLE)
    assert run_cli(*db, "export", "run", "bm25", "--out", str(run)).returncode == 0
    files = run_cli("eval", str(qrels), str(run), "-m", "ndcg@10", "-m", "recall@10", "--format", "json")
    assert files.returncode == 0, files.stderr
    scored = json.loads(files.stdout)["bm25"]
    assert scored["counts"]["queries_evaluated"] == stored["counts"]["queries_evaluated"] == 40
    assert "excluded_unanswerable" not in scored["counts"]  # file mode's JSON shape is unchanged
    for m in ("ndcg@10", "recall@10"):
        assert scored["aggregate"][m] == pytest.approx(stored["aggregate"][m], abs=1e-12), m
    flat = {(q, m): v for q, row in stored["per_query"].items() for m, v in row.items()}
    assert {(q, m): v for q, row in scored["per_query"].items() for m, v in row.items()} == pytest.approx(flat)


def test_keep_unanswerable_writes_them(demo, tmp_path):
    out = tmp_path / "all.txt"
    done = run_cli("--db", str(demo), "export", "qrels", "--out", str(out), "--keep-unanswerable")
    assert done.returncode == 0, done.stderr
    assert "left out" not in done.stdout
    assert set(UNANSWERABLE) <= {line.split()[0] for line in out.read_text().splitlines()}


def test_without_unanswerable_drops_exactly_the_marked_queries(demo):
    with open_project(demo) as db:
        qrels = project_qrels(db, level="doc")
        kept, left_out = without_unanswerable(db, qrels)
        marked = set(unanswerable_ids(db))
    assert left_out == UNANSWERABLE and marked == set(UNANSWERABLE)
    assert len(kept.table) == int((~qrels.table["query_id"].isin(marked)).sum())
    assert not set(kept.table["query_id"]) & marked
