"""``workbench compare`` and ``workbench citations`` end to end, through ``python -m workbench``."""

from __future__ import annotations

import json

import pytest
from scipy import stats

from tests.conftest import run_cli
from tests.support.trec_files import write_run

# Hand-made collection: 4 queries, binary grades.
QRELS = """\
q1 0 d1 1
q1 0 d2 1
q2 0 d3 1
q3 0 d4 1
q3 0 d5 2
q4 0 d6 1
q4 0 d9 0
"""
# Top-2 lists. precision@2 per query, worked by hand:
#   base: q1 [d1 x] .5  q2 [x y] 0   q3 [d4 d5] 1  q4 [x d6] .5  -> mean 0.5
#   new:  q1 [d1 d2] 1  q2 [d3 x] .5 q3 [d4 x] .5  q4 [d6 x] .5  -> mean 0.625
# recall@2: base .5 0 1 1 -> 0.625; new 1 1 .5 1 -> 0.875
BASE_TOP = {"q1": ["d1", "x1"], "q2": ["x1", "x2"], "q3": ["d4", "d5"], "q4": ["x1", "d6"]}
NEW_TOP = {"q1": ["d1", "d2"], "q2": ["d3", "x1"], "q3": ["d4", "x1"], "q4": ["d6", "x1"]}
BASE_P2 = [0.5, 0.0, 1.0, 0.5]
NEW_P2 = [1.0, 0.5, 0.5, 0.5]
BASE_R2 = [0.5, 0.0, 1.0, 1.0]
NEW_R2 = [1.0, 1.0, 0.5, 1.0]


@pytest.fixture
def files(tmp_path):
    qrels = tmp_path / "test.qrels"
    qrels.write_text(QRELS)
    base = write_run(tmp_path / "base.run", BASE_TOP, "base")
    new = write_run(tmp_path / "new.run", NEW_TOP, "new")
    return tmp_path, qrels, base, new


def workbench(*argv, cwd):
    return run_cli(*map(str, argv), cwd=cwd)


def by_run_measure(payload):
    return {(row["run"], row["measure"]): row for row in payload["comparisons"]}


def test_compare_json_matches_hand_means(files):
    tmp, qrels, base, new = files
    proc = workbench(
        "compare", qrels, base, new, "-m", "precision@2", "-m", "recall@2",
        "--test", "ttest", "--seed", "17", "--resamples", "2000", "--format", "json", cwd=tmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    meta = payload["metadata"]
    assert meta["seed"] == 17 and meta["test"] == "ttest" and meta["n_resamples"] == 2000
    assert meta["baseline"] == "base" and meta["runs"] == ["base", "new"]
    assert meta["n_common_queries"] == 4
    rows = payload["comparisons"]
    assert len(rows) == 2
    p2, r2 = rows  # in -m order
    for row, base_scores, new_scores in ((p2, BASE_P2, NEW_P2), (r2, BASE_R2, NEW_R2)):
        base_mean = sum(base_scores) / 4
        new_mean = sum(new_scores) / 4
        assert row["baseline_mean"] == pytest.approx(base_mean)
        assert row["run_mean"] == pytest.approx(new_mean)
        assert row["delta"] == pytest.approx(new_mean - base_mean)
        assert row["p_value"] == pytest.approx(stats.ttest_rel(new_scores, base_scores).pvalue)
        assert row["ci_low"] <= row["delta"] <= row["ci_high"]
    assert (p2["wins"], p2["ties"], p2["losses"]) == (2, 1, 1)
    assert (r2["wins"], r2["ties"], r2["losses"]) == (2, 1, 1)
    adjusted = stats.false_discovery_control([p2["p_value"], r2["p_value"]])
    assert [p2["p_adjusted"], r2["p_adjusted"]] == pytest.approx(list(adjusted))


def test_compare_three_runs_query_missing_from_a_run_scores_zero(files):
    tmp, qrels, base, new = files
    partial = write_run(tmp / "partial.run", {k: v for k, v in NEW_TOP.items() if k != "q4"}, "p")
    proc = workbench(
        "compare", qrels, base, new, partial, "-m", "precision@2", "--resamples", "500",
        "--format", "json", cwd=tmp,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    meta = payload["metadata"]
    # The engine scores a query missing from a run as 0 (trec_eval -c) and reports it.
    assert meta["n_common_queries"] == 4
    assert meta["missing_from_run"] == {"base": [], "new": [], "partial": ["q4"]}
    assert meta["test"] == "randomization" and meta["seed"] == 0
    rows = by_run_measure(payload)
    assert set(rows) == {("new", "precision@2"), ("partial", "precision@2")}
    # partial: 1 .5 .5 0 -> 0.5 vs base .5 0 1 .5 -> 0.5
    row = rows[("partial", "precision@2")]
    assert row["delta"] == pytest.approx(0.0)
    assert (row["wins"], row["ties"], row["losses"]) == (2, 0, 2)
    assert rows[("new", "precision@2")]["delta"] == pytest.approx(0.125)
    adjusted = stats.false_discovery_control([r["p_value"] for r in payload["comparisons"]])
    assert [r["p_adjusted"] for r in payload["comparisons"]] == pytest.approx(list(adjusted))


def test_compare_table_output(files):
    tmp, qrels, base, new = files
    proc = workbench(
        "compare", qrels, base, new, "-m", "recall@2", "--seed", "5", "--resamples", "300", cwd=tmp
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "baseline: base" in out and "seed: 5" in out and "randomization" in out
    assert "+0.2500" in out  # delta 0.875 - 0.625
    assert "2/1/1" in out


@pytest.mark.parametrize(
    "extra, code, message",
    [
        (["missing.run"], 3, "missing.run: file not found"),
        (["--resamples", "0"], 2, "--resamples"),
    ],
)
def test_compare_errors(files, extra, code, message):
    tmp, qrels, base, new = files
    argv = ["compare", qrels, base, new, "-m", "recall@2"]
    if extra[0].endswith(".run"):
        argv.insert(4, tmp / extra[0])
    else:
        argv += extra
    proc = workbench(*argv, cwd=tmp)
    assert proc.returncode == code
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_compare_needs_two_runs(files):
    tmp, qrels, base, _ = files
    proc = workbench("compare", qrels, base, "-m", "recall@2", cwd=tmp)
    assert proc.returncode == 2 and "at least two run files" in proc.stderr


def test_compare_unknown_measure_is_a_clean_error(files):
    tmp, qrels, base, new = files
    proc = workbench("compare", qrels, base, new, "-m", "bogus@3", cwd=tmp)
    assert proc.returncode != 0
    assert "bogus" in proc.stderr and "Traceback" not in proc.stderr


ANSWERS = [
    {"query_id": "q1", "answer": "See [doc_id 3] and [doc_id 7]; also [doc_id 99].",
     "context_ids": ["1", "3", "5", "7", "10"]},
    {"query_id": "q2", "answer": "No sources here.", "context_ids": ["a"]},
]  # fmt: skip


def test_citations_json(tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_text("\n".join(json.dumps(a) for a in ANSWERS) + "\n")
    proc = workbench("citations", path, "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    payload = json.loads(proc.stdout)
    agg = payload["aggregate"]
    assert agg["n_answers"] == 2 and agg["n_no_citations"] == 1
    # q2 cites nothing: faithfulness 1.0, counted in the mean (the spec's harness)
    assert agg["mean_faithfulness"] == pytest.approx((2 / 3 + 1) / 2)
    assert agg["mean_coverage"] == pytest.approx((2 / 5 + 0) / 2)
    assert payload["answers"][1]["faithfulness"] == 1.0
    assert payload["answers"][0]["invalid_refs"] == ["99"]


def test_citations_table_and_errors(tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps(ANSWERS[0]) + "\n{not json\n")
    proc = workbench("citations", path, cwd=tmp_path)
    assert proc.returncode == 3 and "answers.jsonl:2" in proc.stderr
    path.write_text(json.dumps(ANSWERS[0]) + "\n")
    proc = workbench("citations", path, "--pattern", r"\[\d+\]", cwd=tmp_path)
    assert proc.returncode == 2 and "capturing group" in proc.stderr
    proc = workbench("citations", path, "--pattern", "numeric", cwd=tmp_path)
    assert proc.returncode == 0 and "no citation matched" in proc.stdout
    proc = workbench("citations", path, cwd=tmp_path)
    assert proc.returncode == 0 and "0.6667" in proc.stdout


@pytest.mark.shared
def test_compare_dl19_ttest_matches_scipy(tmp_path):
    from tests.support.prerequisites import shared_path
    from workbench.core.metrics.evaluation import evaluate

    dl19 = shared_path("datasets", "trec-dl-2019-passage")
    qrels = dl19 / "qrels.dl19-passage.txt"
    runs = [dl19 / "runs" / name / "trec_results_dl19_top100.txt" for name in ("BM25", "BM25_RM3")]
    proc = workbench(
        "compare", qrels, *runs, "-m", "ndcg@10", "--test", "ttest", "--format", "json",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["comparisons"][0]
    base = evaluate(qrels, runs[0], ["ndcg@10"]).per_query["ndcg@10"]
    new = evaluate(qrels, runs[1], ["ndcg@10"]).per_query["ndcg@10"].loc[base.index]
    # same file name in two folders: named by the shortest distinguishing path suffix
    assert row["run"] == "BM25_RM3/trec_results_dl19_top100"
    assert row["baseline"] == "BM25/trec_results_dl19_top100"
    assert row["delta"] == pytest.approx(new.mean() - base.mean())
    assert row["p_value"] == pytest.approx(stats.ttest_rel(new, base).pvalue)
