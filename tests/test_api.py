"""The Python API (workbench.api) runs the whole loop on the demo, and its numbers are the CLI's.

The loop runs once per module through the API: the demo project, the offline judge, a calibration
sample labelled from the demo's reference SME labels, the report and the gate, a second BM25 run,
evaluate and compare. Each figure is then checked against an independent path: the ``workbench``
command in a subprocess (``eval --runs``, ``compare --runs``, ``calibrate report|gate`` JSON), the
CLI's file mode on the qrels and run the CLI exports, and the metric engine on the API's own
``qrels()`` and ``run()``.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

import workbench
from workbench.api import Project
from workbench.core.metrics.qrels_and_runs import Qrels
from workbench.errors import ConfigError, InputError, StoreError

MEASURES = ["ndcg@10", "P@5", "recall@100", "AP"]
SAMPLE = "demo-seed0"


@pytest.fixture(scope="module")
def loop(tmp_path_factory):
    """The demo project after the whole loop, run through the API only."""
    root = tmp_path_factory.mktemp("api")
    project = Project.create(root / "demo.duckdb", demo=True)
    seen = []
    judged = project.judge("demo", model="offline-lexical", progress=seen.append)
    sample = project.calibration_sample("demo", seed=0)
    items = project.calibration_items(sample.name)
    # The SME: the demo's reference labels (document level), 0 where they say nothing.
    reference = project.qrels(labels="human", keep_unanswerable=True).to_dict()
    grades = {int(i.position): int(reference.get(i.query_id, {}).get(i.doc_id, 0)) for i in items.itertuples()}
    stored = project.label(sample.name, grades, annotator="sme-a")
    second = project.retrieve("bm25", name="bm25-k1", chunking="sections", k1=0.9, b=0.4)
    return {"project": project, "root": root, "judged": judged, "progress": seen, "sample": sample,
            "items": items, "grades": grades, "stored": stored, "second": second}


def _same(a: float, b: float | None) -> bool:
    return (b is None and math.isnan(a)) or a == b


def test_judge_blocks_until_finished_and_reports_progress(loop):
    judged, seen = loop["judged"], loop["progress"]
    assert judged.finished and judged.offline and judged.model == "offline-lexical"
    assert judged.judged == judged.total == judged.ok == 880 and judged.failed == judged.invalid == 0
    assert seen, "the progress callback was never called"
    done = [p.done for p in seen]
    assert done == sorted(done) and done[-1] == seen[-1].total == 880
    frame = judged.to_pandas()
    assert frame.loc[0, "state"] == "finished" and frame.loc[0, "judged"] == 880
    # judging again sends nothing and judges nothing: the job is finished
    again = loop["project"].judge("demo", model="offline-lexical")
    assert again.job_id == judged.job_id and again.finished and again.judged == 880


def test_calibration_sample_items_hide_the_judge(loop):
    sample, items = loop["sample"], loop["items"]
    assert sample.name == SAMPLE and sample.size == len(items) == 200
    assert sample.holdout + sample.tuning == 200
    assert sum(sample.by_judge_grade.values()) == 200
    assert list(items["position"]) == list(range(200))
    assert not any("judge" in c or "grade" in c for c in items.columns)
    assert (items["passage"].str.len() > 0).all()
    assert loop["stored"] == 200


def test_report_and_gate_equal_the_cli(loop, cli):
    project = loop["project"]
    report = project.calibration_report(SAMPLE)
    out = cli("--db", str(project.path), "calibrate", "report", "--sample", SAMPLE, "--format", "json")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert report.labelled == body["labelled"] == 200
    assert report.labelled_in_part == body["labelled_in_part"] == loop["sample"].holdout
    for name, value in report.figures.items():
        assert _same(value, body["agreement"][name]), name
    for name, (lo, hi) in report.intervals.items():
        assert _same(lo, body["agreement"]["ci"][name][0]) and _same(hi, body["agreement"]["ci"][name][1]), name
    figures = report.to_pandas().set_index("figure")
    assert figures.loc["kappa", "value"] == report.figures["kappa"]
    # kappa by hand from the held-out labels and the judge's grades (relevant = grade >= 2),
    # unweighted so that it is the plain 2x2 Cohen's kappa
    plain = project.calibration_report(SAMPLE, weighted=False)
    rows = plain.body["agreement"]["confusion"]  # rows: SME grade, columns: judge grade
    n = sum(map(sum, rows))
    rel_ref = sum(sum(r) for r in rows[2:])
    rel_cand = sum(r[2] + r[3] for r in rows)
    both = sum(r[2] + r[3] for r in rows[2:])
    neither = sum(r[0] + r[1] for r in rows[:2])
    observed = (both + neither) / n
    chance = (rel_ref * rel_cand + (n - rel_ref) * (n - rel_cand)) / n**2
    assert plain.figures["kappa"] == pytest.approx((observed - chance) / (1 - chance), abs=1e-12)

    gate = project.gate(SAMPLE)
    assert gate.verdict == report.gate.verdict
    code = cli("--db", str(project.path), "calibrate", "gate", "--sample", SAMPLE, "--format", "json")
    assert code.returncode == {"pass": 0, "fail": 1, "inconclusive": 2}[gate.verdict], code.stderr
    assert json.loads(code.stdout)["gate"]["verdict"] == gate.verdict
    assert gate.passed is (gate.verdict == "pass") and gate.n == loop["sample"].holdout


def test_evaluate_equals_the_cli_json(loop, cli):
    project = loop["project"]
    result = project.evaluate(runs=["bm25", "bm25-k1"], measures=MEASURES)
    out = cli("--db", str(project.path), "eval", "--runs", "bm25,bm25-k1", *sum((["-m", m] for m in MEASURES), []),
              "--format", "json")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert set(body) == {"bm25", "bm25-k1"}
    for run, entry in body.items():
        assert result.aggregate[run] == entry["aggregate"], run
        per_query = result.per_query(run)
        assert sorted(per_query.index) == sorted(entry["per_query"])
        for qid, values in entry["per_query"].items():
            for m in MEASURES:
                assert _same(float(per_query.loc[qid, m]), values[m]), (run, qid, m)
        assert result.counts(run) == entry["counts"]
    table = result.to_pandas()
    assert list(table.index) == ["bm25", "bm25-k1"] and list(table.columns) == MEASURES
    assert table.loc["bm25", "ndcg@10"] == body["bm25"]["aggregate"]["ndcg@10"]
    assert result.evaluation_id is not None and "qrels policy" in result.qrels


def test_evaluate_equals_the_metric_engine_on_the_api_qrels(loop):
    project = loop["project"]
    result = project.evaluate(runs=["bm25"], measures=MEASURES, store=False)
    assert result.evaluation_id is None
    qrels = project.qrels(level="chunk", chunking="sections")
    assert isinstance(qrels, Qrels)
    direct = workbench.evaluate(qrels, project.run("bm25", level="chunk"), MEASURES)
    for m in MEASURES:
        assert direct.aggregate[m] == pytest.approx(result.aggregate["bm25"][m], abs=1e-15), m


def test_evaluate_equals_the_cli_on_exported_files(loop, cli, tmp_path):
    """`workbench export qrels|run` then `workbench eval QRELS RUN`: the file path of the engine."""
    project = loop["project"]
    db = str(project.path)
    qrels_file, run_file = tmp_path / "qrels.txt", tmp_path / "bm25.txt"
    out = cli("--db", db, "export", "qrels", "--level", "chunk", "--chunking", "sections", "--out", str(qrels_file))
    assert out.returncode == 0, out.stderr
    out = cli("--db", db, "export", "run", "bm25", "--out", str(run_file))
    assert out.returncode == 0, out.stderr
    out = cli("eval", str(qrels_file), str(run_file), *sum((["-m", m] for m in MEASURES), []), "--format", "json")
    assert out.returncode == 0, out.stderr
    files = json.loads(out.stdout)["bm25"]["aggregate"]
    api = project.evaluate(runs=["bm25"], measures=MEASURES, store=False).aggregate["bm25"]
    for m in MEASURES:
        assert api[m] == pytest.approx(files[m], abs=1e-12), m


def test_compare_equals_the_cli_json(loop, cli):
    project = loop["project"]
    comparison = project.compare(runs=["bm25", "bm25-k1"], measures=["ndcg@10"], n_resamples=500, seed=3)
    out = cli("--db", str(project.path), "compare", "--runs", "bm25,bm25-k1", "-m", "ndcg@10", "--resamples", "500",
              "--seed", "3", "--format", "json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["comparisons"]
    table = comparison.to_pandas()
    assert len(table) == len(rows) == 1
    for key, value in rows[0].items():
        got = table.iloc[0][key]
        assert _same(float(got), value) if isinstance(value, float) or value is None else got == value, key
    assert comparison.baseline == "bm25" and comparison.seed == 3


def test_retrieve_pool_and_chunk_results(loop):
    project, second = loop["project"], loop["second"]
    assert second.retriever == "bm25" and second.params["k1"] == 0.9 and second.rows > 0
    assert second.to_pandas().loc[0, "name"] == "bm25-k1"
    pool = project.pool("api-pool", ["bm25", "bm25-k1"], depth=5)
    assert pool.depth == 5 and pool.runs == ("bm25", "bm25-k1") and pool.pairs >= 5
    assert pool.to_pandas().loc[0, "pairs"] == pool.pairs
    runs = project.runs()
    assert {"bm25", "bm25-k1"} <= set(runs["name"])


def test_imports_a_small_project_all_or_nothing(tmp_path):
    project = Project.create(tmp_path / "p.duckdb")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "apples and pears"}\n{"_id": "d2", "text": "trains run late"}\n')
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\tapples\nq2\ttrains\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 2\nq2 0 d2 1\nq2 0 d1 0\n")
    run = tmp_path / "mine.txt"
    run.write_text("q1 Q0 d1 1 2.0 mine\nq1 Q0 d2 2 1.0 mine\nq2 Q0 d1 1 3.0 mine\nq2 Q0 d2 2 1.0 mine\n")
    assert project.import_corpus(corpus).rows == 2
    assert project.import_queries(queries).rows == 2
    assert project.import_qrels(qrels).rows == 3
    summary = project.import_run(run)
    assert summary.rows == 4 and summary.name == "mine" and summary.level == "doc"
    assert isinstance(summary.to_pandas(), pd.DataFrame)
    again = project.import_corpus(corpus)
    assert again.already_imported and again.rows == 0
    # ndcg@10 by hand: q1 ranks its one relevant doc first (1.0); q2 ranks d1 (grade 0) above
    # d2 (grade 1): DCG = 1/log2(3), ideal 1
    result = project.evaluate(runs=["mine"], measures=["ndcg@10"])
    assert result.aggregate["mine"]["ndcg@10"] == pytest.approx((1 + 1 / math.log2(3)) / 2, abs=1e-12)

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_id": "d3", "text": "fine"}\n{"_id": "d4", "text": \n')
    with pytest.raises(InputError, match=r"bad\.jsonl.*2"):
        project.import_corpus(bad)
    assert project.status()["documents"] == 2


def test_typed_errors(tmp_path, loop):
    with pytest.raises(StoreError, match="no project database"):
        Project.open(tmp_path / "missing.duckdb")
    project = loop["project"]
    with pytest.raises(InputError, match="no run named"):
        project.evaluate(runs=["nope"], measures=["ndcg@10"])
    with pytest.raises(InputError, match="no run named"):
        project.run("nope")
    with pytest.raises(ConfigError):
        project.evaluate(runs="bm25", measures=["ndcg@10"])
    with pytest.raises(ConfigError):
        project.retrieve("bm25", name="x")  # no chunking
    with pytest.raises(InputError):
        project.label(SAMPLE, {0: 7}, annotator="sme-a")
    with pytest.raises(InputError):
        project.calibration_items("no-such-sample")


def test_import_workbench_stays_cheap():
    import subprocess
    import sys

    code = ("import sys, workbench; heavy = [m for m in ('duckdb', 'pandas', 'numpy', 'workbench.api') "
            "if m in sys.modules]; print(heavy); from workbench import Project, evaluate; print(Project.__module__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "workbench.api"]
