"""``python -m workbench eval`` in a real subprocess: JSON shape, values, errors, exit codes."""

from __future__ import annotations

import json
import os
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
    assert set(a["aggregate"]) == {"P@5", "nDCG@5", "RBP(p=0.8)", "RBP(p=0.8).residual",
                                   "RBP(p=0.8).residual_unjudged"}
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
    # the shortest distinguishing path suffix, as compare and stages name runs
    assert list(json.loads(proc.stdout)) == [f"{files.name}/system_a", "other/system_a"]
    same = run_cli("eval", str(files / "qrels.txt"), str(files / "system_a.run"), str(files / "system_a.run"),
                   "-m", "P@5", "--format", "json")
    assert list(json.loads(same.stdout)) == ["system_a", "system_a#2"]


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


# --distribution: 4 queries, one relevant doc each except q4 (two); top-2 lists.
DIST_QRELS = "q1 0 a 1\nq2 0 b 1\nq3 0 c 1\nq4 0 d 1\nq4 0 e 1\n"
# P@2 by hand: q1 [a x] 0.5, q2 [x y] 0, q3 [c x] 0.5, q4 [d e] 1.0
#   mean 2/4 = 0.5; sorted [0, 0.5, 0.5, 1] -> median (0.5 + 0.5) / 2 = 0.5;
#   p10: position 0.1 * (4 - 1) = 0.3 between 0 and 0.5 -> 0.15; zeros 1/4 = 0.25; n 4
# RR by hand: q1 1, q2 0, q3 1, q4 1 -> mean 0.75, median 1, p10 0.3 * 1 = 0.3, zeros 0.25
DIST_RUN = ("q1 Q0 a 1 2 r\nq1 Q0 x 2 1 r\nq2 Q0 x 1 2 r\nq2 Q0 y 2 1 r\n"
            "q3 Q0 c 1 2 r\nq3 Q0 x 2 1 r\nq4 Q0 d 1 2 r\nq4 Q0 e 2 1 r\n")  # fmt: skip


def test_distribution_flag(tmp_path):
    (tmp_path / "qrels.txt").write_text(DIST_QRELS)
    (tmp_path / "dist.run").write_text(DIST_RUN)
    base = ("eval", str(tmp_path / "qrels.txt"), str(tmp_path / "dist.run"), "-m", "P@2", "-m", "RR")
    proc = run_cli(*base, "--distribution", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["dist"]
    assert list(out) == ["aggregate", "per_query", "counts", "distribution"]
    assert out["distribution"]["P@2"] == pytest.approx(
        {"mean": 0.5, "median": 0.5, "p10": 0.15, "zeros": 0.25, "n": 4})
    assert out["distribution"]["RR"] == pytest.approx(
        {"mean": 0.75, "median": 1.0, "p10": 0.3, "zeros": 0.25, "n": 4})
    # without the flag the JSON keeps exactly the contract's keys
    plain = json.loads(run_cli(*base, "--format", "json").stdout)["dist"]
    assert list(plain) == ["aggregate", "per_query", "counts"]

    lines = run_cli(*base, "--distribution", "--format", "tsv").stdout.strip().splitlines()
    assert "dist\tP@2\tall\t0.500000" in lines
    assert "dist\tP@2:median\tall\t0.500000" in lines
    assert "dist\tP@2:p10\tall\t0.150000" in lines
    assert "dist\tP@2:zeros\tall\t0.250000" in lines
    assert "dist\tP@2:n\tall\t4" in lines
    assert "dist\tRR:p10\tall\t0.300000" in lines
    assert not any(":" in line.split("\t")[1] for line in run_cli(*base, "--format", "tsv").stdout.splitlines())

    table = run_cli(*base, "--distribution").stdout.splitlines()
    assert table[-3].split() == ["distribution", "mean", "median", "p10", "zeros", "n"]
    assert table[-2].split() == ["P@2", "0.5000", "0.5000", "0.1500", "0.2500", "4"]
    assert table[-1].split() == ["RR", "0.7500", "1.0000", "0.3000", "0.2500", "4"]


# --- issue 8: bad input is refused with one line and exit status 3 (documented in --help) ----
@pytest.mark.parametrize(
    "qrels_text, run_text, extra, fragment",
    [
        (QRELS, "", [], "the run has no result lines"),
        (QRELS, "z1 Q0 d1 1 1.0 r\n", [], "no query in common with the qrels"),
        (QRELS, RUN, ["--rel", "99"], "nothing to evaluate"),
        (QRELS, "q1 Q0 d1\nq1 Q0 d3\n", [], "three fields"),
        ("q1 Q0 7\nq1 Q0 8\n", RUN, [], "3 tab-separated fields"),
        ("q1 0 d1 99999999999999999999999\n", RUN, [], "too large"),
        (QRELS, "q1 Q0 d1 1 inf r\n", [], "must be a finite number, got 'inf'"),
        (QRELS, "q1 Q0 d1 1 2.0 r\nq1 Q0 d3 2 1e400 r\n", [], "qrels_or_run:2:"),
    ],
)
def test_bad_input_exits_3_with_one_line(tmp_path, qrels_text, run_text, extra, fragment):
    (tmp_path / "qrels.txt").write_text(qrels_text)
    (tmp_path / "r.run").write_text(run_text)
    proc = run_cli("eval", str(tmp_path / "qrels.txt"), str(tmp_path / "r.run"), "-m", "P@5", *extra)
    assert proc.returncode == 3, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert fragment.replace("qrels_or_run", "r.run") in lines[0] or fragment in lines[0], lines[0]
    assert proc.stdout == ""


def test_a_device_or_fifo_is_refused_at_once(files, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for qrels, run in ((str(files / "qrels.txt"), "/dev/zero"), (str(fifo), str(files / "system_a.run"))):
        proc = run_cli("eval", qrels, run, "-m", "P@5", timeout=30)  # it used to hang at full CPU
        assert proc.returncode == 3 and "expected a regular file" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_a_bom_is_ignored(files, tmp_path):
    (tmp_path / "bom.txt").write_text("\ufeff" + QRELS)
    (tmp_path / "bom.run").write_text("\ufeff" + RUN)
    plain = json.loads(run_cli("eval", str(files / "qrels.txt"), str(files / "system_a.run"), "-m", "P@5",
                               "--format", "json").stdout)["system_a"]
    bom = run_cli("eval", str(tmp_path / "bom.txt"), str(tmp_path / "bom.run"), "-m", "P@5", "--format", "json")
    assert bom.returncode == 0, bom.stderr
    assert json.loads(bom.stdout)["bom"]["per_query"] == plain["per_query"]


def test_a_50mb_id_gives_a_short_message(tmp_path):
    (tmp_path / "q.txt").write_text("q1 0 d1 1\n")
    (tmp_path / "r.run").write_text(f"q1 Q0 {'x' * 50_000_000} 1 1.0\n")
    proc = run_cli("eval", str(tmp_path / "q.txt"), str(tmp_path / "r.run"), "-m", "P@5")
    assert proc.returncode == 3 and len(proc.stderr) < 500


def test_measure_rel_and_flag_rel_agree_end_to_end(tmp_path):
    # the example: q1 has a grade-2 document, q2 only grade 1 (0.5 against 1.0 before)
    (tmp_path / "q.txt").write_text("q1 0 a 2\nq2 0 b 1\n")
    (tmp_path / "r.run").write_text("q1 Q0 a 1 2.0 r\nq2 Q0 b 1 2.0 r\n")
    own = json.loads(run_cli("eval", str(tmp_path / "q.txt"), str(tmp_path / "r.run"), "-m", "AP(rel=2)",
                             "--format", "json").stdout)["r"]
    flag = json.loads(run_cli("eval", str(tmp_path / "q.txt"), str(tmp_path / "r.run"), "--rel", "2", "-m", "AP",
                              "--format", "json").stdout)["r"]
    assert own["aggregate"]["AP(rel=2)"] == flag["aggregate"]["AP"] == 1.0
    assert own["counts"] == flag["counts"] and own["counts"]["excluded_no_relevant"] == 1
    assert list(own) == ["aggregate", "per_query", "counts"]  # one threshold: the contract's keys
    mixed = json.loads(run_cli("eval", str(tmp_path / "q.txt"), str(tmp_path / "r.run"), "-m", "AP(rel=2)",
                               "-m", "AP", "--format", "json").stdout)["r"]
    assert mixed["per_query"]["q2"] == {"AP(rel=2)": None, "AP": 1.0}
    assert mixed["counts_by_measure"]["AP(rel=2)"]["excluded_no_relevant"] == 1


def test_eval_loads_only_what_it_needs(files):
    # pandas, scipy and pyarrow.compute's wrappers cost 0.1-1 s per process: eval needs none.
    # Only the eval command is registered here: what other command groups import while the
    # parser is built is checked per group in test_cli_startup.py.
    code = (
        "import argparse, sys\nfrom workbench.cli import evaluation\n"
        "parser = argparse.ArgumentParser(); evaluation.register(parser.add_subparsers())\n"
        f"args = parser.parse_args(['eval', {str(files / 'qrels.txt')!r}, {str(files / 'system_a.run')!r},"
        " '-m', 'P@5', '-m', 'ndcg@10', '--format', 'json'])\n"
        "rc = args.handler(args)\n"
        "heavy = ['pandas', 'scipy', 'pyarrow.compute', 'sklearn']\n"
        "print(rc, sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert proc.stderr.strip().splitlines()[-1] == "0 []", proc.stderr
    assert json.loads(proc.stdout)["system_a"]["aggregate"]["P@5"] == 0.6
