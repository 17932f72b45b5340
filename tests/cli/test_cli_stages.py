"""``python -m workbench stages`` in a real subprocess: stage means, reranker lift, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.trec_files import write_run

# 4 queries, binary grades; R = 2, 1, 2, 1 relevant docs (g is judged non-relevant).
QRELS = """\
q1 0 a 1
q1 0 b 1
q2 0 c 1
q3 0 d 1
q3 0 e 1
q4 0 f 1
q4 0 g 0
"""
# fusion (top 4) and reranker (top 2, reordered); x y z w are unjudged.
FUSION = {"q1": ["x", "a", "y", "b"], "q2": ["x", "y", "c", "z"], "q3": ["d", "x", "y", "z"],
          "q4": ["x", "y", "z", "w"]}  # fmt: skip
RERANKER = {"q1": ["a", "b"], "q2": ["c", "x"], "q3": ["x", "y"], "q4": ["x", "y"]}
# By hand:
#   fusion   recall@2:  q1 [x a] 1/2  q2 [x y] 0   q3 [d x] 1/2  q4 0  -> mean 1/4 = 0.25
#   fusion   recall@10: q1 {a b} 1    q2 {c} 1     q3 {d} 1/2    q4 0  -> mean 2.5/4 = 0.625
#   reranker recall@2:  q1 [a b] 1    q2 [c x] 1   q3 [x y] 0    q4 0  -> mean 2/4 = 0.5
#   reranker recall@10: the same lists -> 0.5
# lift (--lift recall@10,fusion,reranker,recall@2): pool = 0.625, pre = 0.25, post = 0.5
#   -> (0.5 - 0.25) / (0.625 - 0.25) = 0.25 / 0.375 = 2/3
# --lift recall@2,fusion,reranker,recall@2: pool = pre = 0.25 -> no gap, NaN.


@pytest.fixture
def files(tmp_path: Path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(QRELS)
    fusion = write_run(tmp_path / "fusion.run", FUSION, "fusion")
    reranker = write_run(tmp_path / "reranker.run", RERANKER, "rerank")
    return qrels, fusion, reranker


def stages(files, *extra: str):
    qrels, fusion, reranker = files
    return run_cli("stages", str(qrels), "--stage", f"fusion={fusion}",
                   "--stage", f"reranker={reranker}", *extra)  # fmt: skip


def test_json_stage_means_and_lift(files):
    proc = stages(files, "-m", "recall@2", "--lift", "recall@10,fusion,reranker,recall@2",
                  "--format", "json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["stages"] == ["fusion", "reranker"]
    # the lift's pool measure is evaluated although not given with -m
    assert out["measures"] == ["recall@2", "recall@10"]
    assert out["n_queries"] == 4
    assert out["table"]["fusion"] == pytest.approx({"recall@2": 0.25, "recall@10": 0.625})
    assert out["table"]["reranker"] == pytest.approx({"recall@2": 0.5, "recall@10": 0.5})
    lift = out["lift"]
    assert lift["value"] == pytest.approx(2 / 3)
    assert lift["reason"] is None
    assert lift["gap"] == pytest.approx(0.375)
    assert lift["pool"] == {"stage": "fusion", "measure": "recall@10", "value": 0.625}
    assert lift["pre"] == {"stage": "fusion", "measure": "recall@2", "value": 0.25}
    assert lift["post"] == {"stage": "reranker", "measure": "recall@2", "value": 0.5}


def test_json_without_lift_and_stage_order(files):
    qrels, fusion, reranker = files
    proc = run_cli("stages", str(qrels), "--stage", f"rerank={reranker}",
                   "--stage", f"fuse={fusion}", "-m", "recall@2", "--format", "json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["stages"] == ["rerank", "fuse"]  # the order given, not sorted
    assert list(out["table"]) == ["rerank", "fuse"]
    assert out["lift"] is None
    assert out["measures"] == ["recall@2"]


def test_table(files):
    proc = stages(files, "-m", "recall@2", "-m", "recall@10",
                  "--lift", "recall@10,fusion,reranker,recall@2")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("stages: 2   queries: 4")
    assert lines[2].split() == ["stage", "recall@2", "recall@10"]
    assert lines[3].split() == ["fusion", "0.2500", "0.6250"]
    assert lines[4].split() == ["reranker", "0.5000", "0.5000"]
    assert "lift: 0.6667" in proc.stdout
    assert "pool = recall@10 at fusion, pre = recall@2 at fusion, post = recall@2 at reranker" in proc.stdout


def test_undefined_lift_is_nan_with_reason(files):
    # pool = pre = recall@2 at fusion (0.25): no gap to recover
    proc = stages(files, "-m", "recall@2", "--lift", "recall@2,fusion,reranker,recall@2")
    assert proc.returncode == 0, proc.stderr
    assert "lift: NaN" in proc.stdout and "no gap" in proc.stdout
    proc = stages(files, "-m", "recall@2", "--lift", "recall@2,fusion,reranker,recall@2",
                  "--format", "json")  # fmt: skip
    lift = json.loads(proc.stdout)["lift"]
    assert lift["value"] is None and "no gap" in lift["reason"]


def test_measure_with_comma_in_lift(files):
    # A measure's parameters may hold commas; --lift splits only outside parentheses.
    # RBP(p=0.5): sum of 0.5 * 0.5^(rank-1) over relevant ranks, by hand:
    #   fusion   q1 ranks 2, 4 -> 0.25 + 0.0625 = 0.3125; q2 rank 3 -> 0.125; q3 rank 1 -> 0.5;
    #            q4 0 -> mean 0.9375 / 4 = 0.234375
    #   reranker q1 ranks 1, 2 -> 0.75; q2 rank 1 -> 0.5; q3, q4 0 -> mean 1.25 / 4 = 0.3125
    # pool = recall@10 at fusion = 0.625 -> (0.3125 - 0.234375) / (0.625 - 0.234375) = 0.2
    proc = stages(files, "--lift", "R(rel=1)@10,fusion,reranker,RBP(p=0.5,rel=1)", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    lift = json.loads(proc.stdout)["lift"]
    assert lift["pre"]["value"] == pytest.approx(0.234375)
    assert lift["post"]["value"] == pytest.approx(0.3125)
    assert lift["value"] == pytest.approx(0.2)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--stage", "fusion", "-m", "recall@2"], "expected NAME=RUNFILE"),
        (["--stage", "f=x.run", "--stage", "f=y.run", "-m", "recall@2"], "more than once"),
    ],
)
def test_bad_stage_syntax_is_one_line(files, extra, message):
    proc = run_cli("stages", str(files[0]), *extra)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr


@pytest.mark.parametrize(
    "lift, message",
    [
        ("recall@10,fusion,rerank,recall@2", "unknown post-rerank stage 'rerank'"),
        ("recall@10,fuse,reranker,recall@2", "unknown pre-rerank stage 'fuse'"),
        ("recall@10,fusion", "expected POOL_MEASURE,PRE_STAGE,POST_STAGE,MEASURE"),
    ],
)
def test_bad_lift_is_one_line(files, lift, message):
    proc = stages(files, "-m", "recall@2", "--lift", lift)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr


def test_missing_file_and_bad_measure(files, tmp_path):
    proc = run_cli("stages", str(files[0]), "--stage", f"a={tmp_path / 'nope.run'}", "-m", "recall@2")
    assert proc.returncode == 3 and "nope.run: file not found" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = stages(files, "-m", "recal@2")
    assert proc.returncode == 3 and "unknown measure" in proc.stderr
    assert "Traceback" not in proc.stderr
