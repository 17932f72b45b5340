"""``workbench agree`` and ``workbench calibrate`` as real subprocesses."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from tests.support.calibration_project import build_project, label_all
from tests.support.prerequisites import shared_path
from workbench.store.database import Database

AGREE_KEYS = {"n", "tpr", "tnr", "precision", "kappa", "kappa_graded", "kappa_linear", "kappa_quadratic",
              "confusion", "ci", "gate", "only_reference", "only_candidate"}


def _qrels(path, rows):
    path.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in rows))
    return path


def test_agree_json_matches_scikit_learn(cli, tmp_path):
    rng = np.random.default_rng(1)
    keys = [(f"q{i % 25}", f"d{i}") for i in range(600)]
    ref = rng.integers(0, 4, 600)
    cand = np.where(rng.random(600) < 0.6, ref, rng.integers(0, 4, 600))
    r = _qrels(tmp_path / "human.txt", [(q, d, g) for (q, d), g in zip(keys, ref)] + [("q0", "extra", 1)])
    c = tmp_path / "judge.jsonl"
    c.write_text("".join(json.dumps({"query_id": q, "doc_id": d, "grade": int(g)}) + "\n"
                         for (q, d), g in zip(keys, cand)))
    out = cli("agree", str(r), str(c), "--format", "json", "--seed", "3")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert AGREE_KEYS <= set(body)
    assert body["n"] == 600 and body["only_reference"] == 1 and body["only_candidate"] == 0
    assert body["confusion"] == confusion_matrix(ref, cand, labels=[0, 1, 2, 3]).tolist()
    assert body["kappa_graded"] == pytest.approx(cohen_kappa_score(ref, cand))
    assert body["kappa_linear"] == pytest.approx(cohen_kappa_score(ref, cand, weights="linear"))
    assert body["kappa_quadratic"] == pytest.approx(cohen_kappa_score(ref, cand, weights="quadratic"))
    assert body["kappa"] == pytest.approx(cohen_kappa_score(ref >= 2, cand >= 2))
    assert set(body["ci"]) >= {"tpr", "tnr", "precision", "kappa", "kappa_graded", "kappa_linear",
                               "kappa_quadratic"}
    assert all(lo <= body[k] <= hi for k, (lo, hi) in body["ci"].items())
    assert set(body["gate"]) == {"verdict", "reasons", "more_labels_needed"}
    assert body["gate"]["verdict"] in ("pass", "fail", "inconclusive")
    assert body["bootstrap"]["seed"] == 3 and body["scale"] == "0-3"
    again = cli("agree", str(r), str(c), "--format", "json", "--seed", "3")
    assert json.loads(again.stdout)["ci"] == body["ci"]
    table = cli("agree", str(r), str(c))
    assert table.returncode == 0 and "gate:" in table.stdout and "confusion" in table.stdout


def test_agree_on_llmjudge_refuses_out_of_range_with_line(cli):
    root = shared_path("datasets", "llmjudge")
    human = root / "data" / "llmjudge_test_qrel_idx.txt"
    run = root / "submissions" / "scores" / "RMITIR-llama70B.txt"
    out = cli("agree", str(human), str(run), "--format", "json")
    assert out.returncode == 3 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{run}:2449: grade 5 is outside the scale 0-3" in lines[0]
    clipped = cli("agree", str(human), str(run), "--format", "json", "--clip")
    assert clipped.returncode == 0, clipped.stderr
    body = json.loads(clipped.stdout)
    assert body["clipped"] == {"reference": 0, "candidate": 2}
    assert any("--clip lowered" in n for n in body["notes"])
    assert body["gate"]["verdict"] == "fail"  # TNR 0.67: its upper bound is far below 0.85


def test_agree_rag25_on_the_0_to_4_scale(cli):
    root = shared_path("datasets", "trec-rag-2025-umbrela")
    human, umbrela = root / "qrels.rag25.test.txt", root / "qrels.rag25.test-umbrela2.txt"
    refused = cli("agree", str(human), str(umbrela))
    assert refused.returncode == 3 and "use --scale 0-4" in refused.stderr
    out = cli("agree", str(human), str(umbrela), "--scale", "0-4", "--format", "json")
    body = json.loads(out.stdout)
    assert body["n"] == 10284 and body["scale"] == "0-4" and len(body["confusion"]) == 5
    # SOURCE.md: kappa 0.2333, linear 0.3729, quadratic 0.4918, binary (>= 2) 0.4310
    assert [round(body[k], 4) for k in ("kappa_graded", "kappa_linear", "kappa_quadratic", "kappa")] == \
        [0.2333, 0.3729, 0.4918, 0.4310]


def test_agree_bad_input_is_one_line(cli, tmp_path):
    good = _qrels(tmp_path / "a.txt", [("q", "d", 1)])
    out = cli("agree", str(good), str(tmp_path / "missing.txt"))
    assert out.returncode == 3 and "missing.txt: no such file" in out.stderr
    assert "Traceback" not in out.stderr
    other = _qrels(tmp_path / "b.txt", [("q", "zz", 1)])
    out = cli("agree", str(good), str(other))
    assert out.returncode == 3 and "share no (query_id, item) pair" in out.stderr
    out = cli("agree", str(good), str(good), "--threshold", "7")
    assert out.returncode == 3 and "--threshold 7" in out.stderr


def test_calibrate_sample_report_gate(cli, tmp_path):
    path = tmp_path / "project.duckdb"
    db, truth = build_project(path, judge_noise=0.02)
    db.close()
    out = cli("--db", str(path), "calibrate", "sample", "--pool", "p", "--size", "300", "--seed", "4",
              "--holdout-share", "1")
    assert out.returncode == 0, out.stderr
    assert "'p-seed4'" in out.stdout and "300 pairs" in out.stdout
    again = cli("--db", str(path), "calibrate", "sample", "--pool", "p", "--seed", "4")
    assert again.returncode == 3 and "exists already" in again.stderr
    gate = cli("--db", str(path), "calibrate", "gate")
    assert gate.returncode == 2 and gate.stdout.startswith("inconclusive")
    db = Database(path)
    try:
        label_all(db, "p-seed4", truth)
    finally:
        db.close()
    report = cli("--db", str(path), "calibrate", "report", "--format", "json")
    assert report.returncode == 0, report.stderr
    body = json.loads(report.stdout)
    assert body["sample"] == "p-seed4" and body["agreement"]["n"] == 300
    assert AGREE_KEYS - {"only_reference", "only_candidate"} <= set(body["agreement"])
    gate = cli("--db", str(path), "calibrate", "gate")
    assert gate.returncode == 0 and gate.stdout.startswith("pass"), gate.stdout
    strict = cli("--db", str(path), "calibrate", "gate", env={"WORKBENCH_CALIBRATION_MIN_KAPPA": "0.999"})
    assert strict.returncode == 1 and strict.stdout.startswith("fail")
    missing = cli("--db", str(path), "calibrate", "gate", "--sample", "nope")
    assert missing.returncode == 3 and "no calibration sample named 'nope'" in missing.stderr


def test_agree_reads_the_workbench_judgment_exports(cli, tmp_path):
    path = tmp_path / "project.duckdb"
    db, truth = build_project(path)
    try:
        from workbench.services.calibration import workflow as cal

        cal.create_sample(db, "s", "p", seed=2)
        label_all(db, "s", truth, flip=0.2)
        stored = db.query_df("""SELECT h.grade AS human, l.grade AS llm FROM judgments h
                                JOIN judgments l ON l.query_id = h.query_id AND l.doc_id = h.doc_id
                                WHERE h.source = 'human' AND l.source = 'llm' AND l.status = 'ok'""")
    finally:
        db.close()
    for source in ("human", "llm"):
        out = cli("--db", str(path), "export", "judgments", "--source", source, "--out", str(tmp_path / f"{source}.jsonl"))
        assert out.returncode == 0, out.stderr
    out = cli("agree", str(tmp_path / "human.jsonl"), str(tmp_path / "llm.jsonl"), "--format", "json")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert body["n"] == 200 == len(stored)
    assert body["only_candidate"] == 160 and body["not_labels"] == {"reference": 0, "candidate": 5}
    assert body["kappa_graded"] == pytest.approx(cohen_kappa_score(stored["human"], stored["llm"]))
