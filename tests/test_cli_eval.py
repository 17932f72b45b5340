"""``python -m workbench eval`` in a real subprocess: JSON shape, values, errors, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

QRELS = "q1 0 d1 3\nq1 0 d3 2\nq1 0 d5 2\nq1 0 d4 1\nq1 0 d7 0\nq1 0 d9 0\nq2 0 x 0\n"
# the specification's worked example: ranked [d7, d3, d1, d9, d4]
RUN = "q1 Q0 d7 1 0.9 a\nq1 Q0 d3 2 0.8 a\nq1 Q0 d1 3 0.7 a\nq1 Q0 d9 4 0.6 a\nq1 Q0 d4 5 0.5 a\nq3 Q0 d1 1 1 a\n"


@pytest.fixture
def files(tmp_path: Path):
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "system_a.run").write_text(RUN)
    (tmp_path / "system_b.run").write_text("q1 Q0 d1 1 2.0 b\nq1 Q0 d3 2 1.0 b\n")
    return tmp_path


def test_json_output(files):
    proc = run_cli("eval", str(files / "qrels.txt"), str(files / "system_a.run"), str(files / "system_b.run"),
                   "-m", "P@5", "-m", "nDCG@5", "-m", "RBP(p=0.8)", "--per-query", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert list(out) == ["system_a", "system_b"]
    a = out["system_a"]
    assert set(a["aggregate"]) == {"P@5", "nDCG@5", "RBP(p=0.8)", "RBP(p=0.8).residual"}
    assert a["aggregate"]["P@5"] == pytest.approx(0.60)
    assert round(a["aggregate"]["nDCG@5"], 2) == 0.55
    assert round(a["aggregate"]["RBP(p=0.8)"], 2) == 0.37
    assert list(a["per_query"]) == ["q1"]  # q2 has no relevant doc, q3 is only in the run
    assert a["per_query"]["q1"]["P@5"] == pytest.approx(0.60)
    assert a["counts"] == {"queries_evaluated": 1, "excluded_no_relevant": 1, "missing_from_run": 0,
                           "only_in_run": 1}
    # system_b: d1 (3), d3 (2) -> P@5 = 2/5
    assert out["system_b"]["aggregate"]["P@5"] == pytest.approx(0.4)


def test_json_always_has_per_query_and_honours_switches(files):
    proc = run_cli("eval", str(files / "qrels.txt"), str(files / "system_a.run"), "-m", "P@5",
                   "--include-no-relevant", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["system_a"]
    # The JSON shape is fixed: per_query is there without --per-query too.
    assert out["per_query"]["q1"]["P@5"] == pytest.approx(0.6)
    assert out["per_query"]["q2"]["P@5"] == 0.0
    # q1 0.6 and q2 (missing from the run, no relevant doc) 0
    assert out["aggregate"]["P@5"] == pytest.approx(0.3)
    assert out["counts"]["missing_from_run"] == 1


def test_rel_and_condensed_flags(files):
    proc = run_cli("eval", str(files / "qrels.txt"), str(files / "system_a.run"), "-m", "P@5", "-m", "RR",
                   "--rel", "2", "--format", "json")
    agg = json.loads(proc.stdout)["system_a"]["aggregate"]
    assert agg["P@5"] == pytest.approx(2 / 5) and agg["RR"] == pytest.approx(0.5)


def test_table_and_tsv(files):
    proc = run_cli("eval", str(files / "qrels.txt"), str(files / "system_a.run"), "-m", "P@5")
    assert proc.returncode == 0 and "system_a" in proc.stdout and "0.6000" in proc.stdout
    proc = run_cli("eval", str(files / "qrels.txt"), str(files / "system_a.run"), "-m", "P@5",
                   "--format", "tsv", "--per-query")
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "run\tmeasure\tquery_id\tvalue"
    assert "system_a\tP@5\tq1\t0.600000" in lines and "system_a\tP@5\tall\t0.600000" in lines


def test_same_stem_gets_a_suffix(files, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "system_a.run").write_text(RUN)
    proc = run_cli("eval", str(files / "qrels.txt"), str(files / "system_a.run"), str(other / "system_a.run"),
                   "-m", "P@5", "--format", "json")
    assert list(json.loads(proc.stdout)) == ["system_a", "system_a#2"]


def test_unknown_measure_is_a_clean_error(files):
    proc = run_cli("eval", str(files / "qrels.txt"), str(files / "system_a.run"), "-m", "nDGC@10")
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    assert "unknown measure 'nDGC@10'" in proc.stderr and "ndcg" in proc.stderr


def test_bad_run_line_names_file_and_line(files):
    bad = files / "bad.run"
    bad.write_text("q1 Q0 d1 1 0.5 a\nq1 Q0 d2 1\n")
    proc = run_cli("eval", str(files / "qrels.txt"), str(bad), "-m", "P@5")
    assert proc.returncode == 3
    assert f"{bad}:2:" in proc.stderr and "expected 6 fields" in proc.stderr


def test_duplicate_doc_and_keep_first(files):
    dup = files / "dup.run"
    dup.write_text("q1 Q0 d1 1 0.5 a\nq1 Q0 d1 2 0.4 a\n")
    proc = run_cli("eval", str(files / "qrels.txt"), str(dup), "-m", "P@1")
    assert proc.returncode == 3 and f"{dup}:2:" in proc.stderr and "'d1'" in proc.stderr
    proc = run_cli("eval", str(files / "qrels.txt"), str(dup), "-m", "P@1", "--keep-first-duplicate",
                   "--format", "json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["dup"]["aggregate"]["P@1"] == 1.0


def test_no_measure_is_a_config_error(files):
    proc = run_cli("eval", str(files / "qrels.txt"), str(files / "system_a.run"))
    assert proc.returncode == 2 and "at least one measure" in proc.stderr
