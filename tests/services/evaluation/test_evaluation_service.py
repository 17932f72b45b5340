"""services.evaluation: the run-naming rule, file-mode evaluation and its refusals."""

from __future__ import annotations

import pytest

from workbench.errors import ConfigError, InputError
from workbench.services.evaluation.evaluate import (
    compare_files,
    distributions,
    evaluate_files,
    run_names,
)


@pytest.mark.parametrize(
    "paths, names",
    [
        (["a/b.run", "c/d.run"], ["b", "d"]),
        # the case eval and compare named differently before (run, run#2 vs a, b)
        (["x/a/run.txt", "x/b/run.txt"], ["a/run", "b/run"]),
        (["runs/BM25/top100.txt", "runs/SPLADE/top100.txt"], ["BM25/top100", "SPLADE/top100"]),
        (["x.run", "x.run"], ["x", "x#2"]),
        (["a/x.run", "x.run"], ["a/x", "x"]),
        # only the colliding names grow
        (["p/q/r.run", "s/q/r.run", "bm25.run"], ["p/q/r", "s/q/r", "bm25"]),
        (["/abs/one/run.txt", "rel/two/run.txt"], ["one/run", "two/run"]),
    ],
)
def test_run_names(paths, names):
    assert run_names(paths) == names


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


QRELS = "q1 0 a 2\nq1 0 b 1\nq2 0 c 1\nq2 0 d 0\n"
RUN = "q1 Q0 b 1 3 r\nq1 Q0 a 2 2 r\nq2 Q0 c 1 3 r\nq2 Q0 d 2 2 r\n"


def test_evaluate_files_names_runs_and_scores(tmp_path):
    q = write(tmp_path, "q.txt", QRELS)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    r1, r2 = write(tmp_path / "a", "run.txt", RUN), write(tmp_path / "b", "run.txt", RUN)
    results = evaluate_files(q, [r1, r2], ["P@1"])
    assert list(results) == ["a/run", "b/run"]
    # P@1 by hand: q1 top doc b (grade 1) -> 1, q2 top doc c (grade 1) -> 1
    assert results["a/run"].aggregate["P@1"] == 1.0


def test_distributions_by_hand(tmp_path):
    q = write(tmp_path, "q.txt", QRELS)
    r = write(tmp_path, "r.run", RUN)
    res = evaluate_files(q, [r], ["P(rel=2)@1", "P@1"])["r"]
    # P(rel=2)@1: q1's top doc b has grade 1 -> 0; q2 has no grade-2 doc -> excluded (NaN)
    d = distributions(res)
    assert d["P(rel=2)@1"] == {"mean": 0.0, "median": 0.0, "p10": 0.0, "zeros": 1.0, "n": 1}
    assert d["P@1"]["n"] == 2


@pytest.mark.parametrize(
    "run_text, fragment",
    [
        ("", "the run has no result lines"),
        ("# only a comment\n", "the run has no result lines"),
        ("z1 Q0 a 1 1 r\nz2 Q0 b 1 1 r\n", "no query in common with the qrels"),
    ],
)
def test_refuses_runs_that_give_nothing_to_evaluate(tmp_path, run_text, fragment):
    q = write(tmp_path, "q.txt", QRELS)
    r = write(tmp_path, "r.run", run_text)
    with pytest.raises(InputError, match=fragment) as err:
        evaluate_files(q, [r], ["P@1"])
    assert err.value.exit_code == 3 and str(r) in str(err.value)


def test_refuses_a_threshold_that_excludes_every_query(tmp_path):
    q = write(tmp_path, "q.txt", QRELS)
    r = write(tmp_path, "r.run", RUN)
    with pytest.raises(InputError, match=r"grade >= 99\); the highest grade in the qrels is 2"):
        evaluate_files(q, [r], ["P@1"], rel=99)
    with pytest.raises(InputError, match="nothing to evaluate"):
        evaluate_files(q, [r], ["P(rel=5)@1"])
    # scoring queries without a relevant document is a valid (if odd) request
    assert evaluate_files(q, [r], ["P@1"], rel=99, include_no_relevant=True)["r"].n_queries == 2


def test_refuses_before_reading_on_a_bad_measure(tmp_path):
    with pytest.raises(InputError, match="unknown measure"):
        evaluate_files(tmp_path / "missing.txt", [tmp_path / "missing.run"], ["bogus@3"])
    with pytest.raises(ConfigError, match="at least one measure"):
        evaluate_files(tmp_path / "missing.txt", [tmp_path / "missing.run"], [])


def test_compare_files_names_runs_like_eval(tmp_path):
    q = write(tmp_path, "q.txt", QRELS)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    r1, r2 = write(tmp_path / "a", "run.txt", RUN), write(tmp_path / "b", "run.txt", RUN)
    report = compare_files(q, [r1, r2], ["P@1"], n_resamples=10)
    assert report.result.baseline == "a/run" and report.result.runs == ["a/run", "b/run"]
    assert report.run_files == {"a/run": str(r1), "b/run": str(r2)}
