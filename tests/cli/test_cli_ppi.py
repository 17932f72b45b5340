"""``workbench ppi`` end to end, through ``python -m workbench``: the JSON contract as the issue
writes it, per-query values worked by hand (precision@2 on a six-query collection), run names
as ``eval`` gives them, differences against the first run, ``--plan``, and the refusals (one
line, exit 3)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import run_cli
from tests.support.trec_files import write_run
from workbench.core.metrics.ppi import plan_sample_size, ppi_mean, ppi_mean_difference

# The judge labelled all six queries; q6 has no relevant item (judge-side value 0).
JUDGE = """\
q1 0 d1 1
q1 0 d2 1
q2 0 d3 1
q3 0 d4 1
q3 0 d5 2
q4 0 d6 1
q5 0 d7 1
q6 0 d9 0
"""
# Humans labelled q1-q4 and disagree with the judge on q1/d2 and q4.
HUMAN = """\
q1 0 d1 1
q1 0 d2 0
q2 0 d3 1
q3 0 d4 1
q3 0 d5 1
q4 0 d6 0
q4 0 x1 1
"""
BASE_TOP = {"q1": ["d1", "x1"], "q2": ["x1", "x2"], "q3": ["d4", "d5"], "q4": ["x1", "d6"],
            "q5": ["d7", "x1"], "q6": ["d9", "x1"]}
NEW_TOP = {"q1": ["d1", "d2"], "q2": ["d3", "x1"], "q3": ["d4", "x1"], "q4": ["d6", "x1"],
           "q5": ["x1", "x2"]}  # q6 not answered: scores 0
# precision@2 per query, by hand (queries q1..q6; human values on q1..q4):
JUDGE_BASE = [0.5, 0.0, 1.0, 0.5, 0.5, 0.0]
JUDGE_NEW = [1.0, 0.5, 0.5, 0.5, 0.0, 0.0]
HUMAN_BASE = [0.5, 0.0, 1.0, 0.5]
HUMAN_NEW = [0.5, 0.5, 0.5, 0.5]
LABELLED = [0, 1, 2, 3]

RUN_KEYS = {"estimate", "ci", "human_only_ci", "judge_only", "lambda"}
DIFF_KEYS = {"vs", "estimate", "ci", "human_only_ci"}


@pytest.fixture
def files(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    judge = tmp_path / "judge.qrels"
    judge.write_text(JUDGE)
    human = tmp_path / "human.qrels"
    human.write_text(HUMAN)
    # the same file name in two folders: eval names them a/run and b/run
    base = write_run(tmp_path / "a" / "run.txt", BASE_TOP, "base")
    new = write_run(tmp_path / "b" / "run.txt", NEW_TOP, "new")
    return tmp_path, human, judge, base, new


def workbench(*argv, cwd):
    return run_cli(*map(str, argv), cwd=cwd)


def refused(proc, *words):
    assert proc.returncode == 3, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_json_contract_and_hand_worked_values(files):
    tmp, human, judge, base, new = files
    proc = workbench("ppi", human, judge, base, new, "-m", "P@2", "--confidence", "0.9", "--seed", "7",
                     "--format", "json", cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) == {"n_labelled", "n_unlabelled", "measures"}
    assert (out["n_labelled"], out["n_unlabelled"]) == (4, 2)
    assert set(out["measures"]) == {"P@2"}
    block = out["measures"]["P@2"]
    assert set(block) == {"runs", "differences"}
    assert list(block["runs"]) == ["a/run", "b/run"]
    assert list(block["differences"]) == ["b/run"]
    for row in block["runs"].values():
        assert set(row) == RUN_KEYS and len(row["ci"]) == 2 and len(row["human_only_ci"]) == 2
    diff = block["differences"]["b/run"]
    assert set(diff) == DIFF_KEYS and diff["vs"] == "a/run"

    for name, y, f in (("a/run", HUMAN_BASE, JUDGE_BASE), ("b/run", HUMAN_NEW, JUDGE_NEW)):
        want = ppi_mean(y, f, LABELLED, confidence=0.9)
        row = block["runs"][name]
        assert row["estimate"] == pytest.approx(want.ppi.estimate)
        assert row["ci"] == pytest.approx([want.ppi.low, want.ppi.high])
        assert row["human_only_ci"] == pytest.approx([want.human_only.low, want.human_only.high])
        assert row["judge_only"] == pytest.approx(np.mean(f))
        assert row["lambda"] == pytest.approx(want.lam)
    want = ppi_mean_difference(HUMAN_BASE, HUMAN_NEW, JUDGE_BASE, JUDGE_NEW, LABELLED, confidence=0.9)
    assert diff["estimate"] == pytest.approx(want.ppi.estimate)
    assert diff["ci"] == pytest.approx([want.ppi.low, want.ppi.high])
    assert diff["human_only_ci"] == pytest.approx([want.human_only.low, want.human_only.high])
    # human-only = the labelled queries' mean difference: (0 + .5 − .5 + 0)/4 = 0
    assert sum(diff["human_only_ci"]) / 2 == pytest.approx(0.0)
    assert "1 queries have no relevant item in the judge labels" in proc.stderr
    # the seed changes nothing: nothing is random
    again = workbench("ppi", human, judge, base, new, "-m", "P@2", "--confidence", "0.9", "--seed", "8",
                      "--format", "json", cwd=tmp)
    assert json.loads(again.stdout) == out


def test_human_labels_equal_to_the_judge_s(files):
    """Human labels on q1, q3, q5 copied from the judge: Y = f on the labelled queries, so
    λ = s²_L(f) / s²_all(f) (clipped) and the estimate is f̄_L + λ·(f̄ − f̄_L)."""
    tmp, _, judge, base, new = files
    human = tmp / "same.qrels"
    human.write_text("".join(line + "\n" for line in JUDGE.splitlines() if line.split()[0] in {"q1", "q3", "q5"}))
    proc = workbench("ppi", human, judge, base, new, "-m", "P@2", "--format", "json", cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["n_labelled"], out["n_unlabelled"]) == (3, 3)
    runs = out["measures"]["P@2"]["runs"]
    for name, f in (("a/run", JUDGE_BASE), ("b/run", JUDGE_NEW)):
        f = np.array(f)
        f_lab = f[[0, 2, 4]]
        lam = min(1.0, np.var(f_lab, ddof=1) / np.var(f, ddof=1))
        row = runs[name]
        assert row["lambda"] == pytest.approx(lam)
        assert row["estimate"] == pytest.approx(f_lab.mean() + lam * (f.mean() - f_lab.mean()))
        assert row["ci"][0] <= row["estimate"] <= row["ci"][1]


def test_table_output(files):
    tmp, human, judge, base, new = files
    proc = workbench("ppi", human, judge, base, new, "-m", "P@2", "-m", "ndcg@10", cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    assert "labelled queries: 4   unlabelled: 2" in proc.stdout
    assert "b/run" in proc.stdout and "run - a/run" in proc.stdout and "human-only 95% CI" in proc.stdout


def test_plan(files):
    tmp, _, judge, base, new = files
    judge_rows = JUDGE.splitlines()
    human = tmp / "pilot.qrels"  # five labelled queries: humans agree with the judge except on q1/d2
    human.write_text("".join(line.replace("q1 0 d2 1", "q1 0 d2 0") + "\n" for line in judge_rows
                             if line.split()[0] != "q6"))
    proc = workbench("ppi", "--plan", "--half-width", "0.2", human, judge, base, new, "-m", "P@2",
                     "--format", "json", cwd=tmp)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["n_pilot"], out["n_total"], out["half_width"]) == (5, 6, 0.2)
    y_base = [0.5, 0.0, 1.0, 0.5, 0.5]
    want = plan_sample_size(y_base, JUDGE_BASE, [0, 1, 2, 3, 4], 0.2)
    row = out["measures"]["P@2"]["runs"]["a/run"]
    assert (row["n_ppi"], row["n_human"]) == (want.n_ppi, want.n_human)
    assert row["n_ppi"] <= row["n_human"]
    assert out["measures"]["P@2"]["differences"]["b/run"]["vs"] == "a/run"
    table = workbench("ppi", "--plan", "--half-width", "0.2", human, judge, base, new, "-m", "P@2", cwd=tmp)
    assert table.returncode == 0 and "labelled (PPI++)" in table.stdout


def test_refusals(files):
    tmp, human, judge, base, new = files
    one = tmp / "one.qrels"
    one.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    refused(workbench("ppi", one, judge, base, "-m", "P@2", cwd=tmp), "1 labelled queries", "at least 2")
    stray = tmp / "stray.qrels"
    stray.write_text(HUMAN + "q7 0 d1 1\n")
    refused(workbench("ppi", stray, judge, base, "-m", "P@2", cwd=tmp), "not in the judge qrels", "'q7'")
    refused(workbench("ppi", human, judge, base, "-m", "nope@10", cwd=tmp), "unknown measure")
    refused(workbench("ppi", "--plan", "--half-width", "0.1", human, judge, base, "-m", "P@2", cwd=tmp),
            "pilot of at least 5")
    refused(workbench("ppi", human, judge, tmp / "missing.run", "-m", "P@2", cwd=tmp), "missing.run")
    for argv in (("--plan",), ("--half-width", "0.1"), ("--confidence", "1.5")):
        proc = workbench("ppi", human, judge, base, "-m", "P@2", *argv, cwd=tmp)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
