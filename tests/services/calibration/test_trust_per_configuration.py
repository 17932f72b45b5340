"""Trust bound to the judge configuration that earned it (issue 32's scenario, replayed).

The demo's offline judge grades the pool, a sample is drawn on its grades and labelled as the
judge graded (the gate passes). Then a second judge, another model behind a real
OpenAI-compatible server on loopback (its grades a hash of the passage, unrelated to the SMEs'),
grades the same pool. It never faced the gate, so nothing it graded may move a trust figure.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.support.cli_runner import run_cli
from tests.support.openai_server import running_server
from tests.support.templates import demo_project
from workbench.services.calibration import verdicts
from workbench.services.calibration import workflow as calibration
from workbench.services.project.lifecycle import open_project
from workbench.store.calibration import judge_grades_for_sample, read_sample_items


@pytest.fixture(scope="module")
def gated(tmp_path_factory):
    """The demo judged offline, sample s1 labelled like the judge (the gate passes)."""
    path = tmp_path_factory.mktemp("trust") / "demo.duckdb"
    demo_project(path)
    assert run_cli("--db", str(path), "judge", "--pool", "demo", "--model", "offline-lexical").returncode == 0
    with open_project(path) as db:
        calibration.create_sample(db, "s1", "demo", size=200, seed=3, min_per_class=50)
        items = read_sample_items(db, "s1")
        judge = judge_grades_for_sample(db, "s1").set_index("position")["grade"]
        calibration.save_labels(db, "s1", "sme-a", {int(p): int(judge[p]) for p in items["position"]})
        assert calibration.gate(db, "s1")["gate"]["verdict"] == "pass"
    return path


def _ndcg(path) -> float:
    done = run_cli("--db", str(path), "eval", "--runs", "bm25", "--level", "doc", "-m", "ndcg@10", "--format", "json")
    assert done.returncode == 0, done.stderr
    return float(json.loads(done.stdout)["bm25"]["aggregate"]["ndcg@10"])


def _second_judge(path, server, *extra) -> None:
    done = run_cli("--db", str(path), "judge", "--pool", "demo", "--model", "other-model", "--base-url",
                   server.base_url, *extra, env={"OPENAI_API_KEY": "test-key"}, timeout=300)
    assert done.returncode == 0, done.stderr


def test_an_ungated_second_judge_moves_no_trust_figure(gated, tmp_path):
    path = tmp_path / "two-judges.duckdb"
    shutil.copy(gated, path)
    with open_project(path) as db:
        report_before = calibration.report(db, "s1")
        first = report_before["judge"]["key"]
    ndcg_before = _ndcg(path)
    with running_server() as server:
        _second_judge(path, server)
    with open_project(path) as db:
        states = {s.config.model: s for s in verdicts.states(db)}
        # the second configuration graded the same pairs but was never gated: not passed
        assert states["other-model"].state == "not gated" and states["offline-lexical"].state == "passed"
        assert verdicts.passed_configurations(db) == (first,)
        report_after = calibration.report(db, "s1")
        # the report is about the sample's own configuration, and its figures did not move
        assert report_after["judge"]["key"] == first
        assert report_after["corrected_prevalence"] == report_before["corrected_prevalence"]
        assert report_after["corrected_precision"] == report_before["corrected_precision"]
        assert report_after["agreement"]["kappa"] == report_before["agreement"]["kappa"]
    assert _ndcg(path) == ndcg_before
    exported = run_cli("--db", str(path), "eval", "--runs", "bm25", "--level", "doc", "-m", "ndcg@10")
    assert "other-model" in exported.stdout + exported.stderr and "(not gated)" in exported.stdout + exported.stderr


def test_gating_the_second_judge_judges_it_on_its_own_grades(gated, tmp_path):
    path = tmp_path / "gate-second.duckdb"
    shutil.copy(gated, path)
    with running_server() as server:
        _second_judge(path, server)
    ndcg_before = _ndcg(path)
    done = run_cli("--db", str(path), "calibrate", "gate", "--judge", "other-model", "--format", "json")
    body = json.loads(done.stdout)
    # its grades are a hash of the passage: far from the SMEs', so it fails (exit 1) on its own figures
    assert done.returncode == 1 and body["gate"]["verdict"] == "fail" and body["judge"]["model"] == "other-model"
    with open_project(path) as db:
        states = {s.config.model: s.state for s in verdicts.states(db)}
        assert states == {"offline-lexical": "passed", "other-model": "failed"}
        report = calibration.report(db, "s1", judge="other-model")
        own = calibration.report(db, "s1")
        assert report["judge"]["model"] == "other-model" and own["judge"]["model"] == "offline-lexical"
        # every figure of the report is the named configuration's own
        assert report["agreement"]["kappa"] < 0.3 < own["agreement"]["kappa"]
        assert report["corrected_prevalence"]["observed"] != own["corrected_prevalence"]["observed"]
    assert _ndcg(path) == ndcg_before


def test_a_configuration_that_graded_part_of_the_held_out_pairs_is_inconclusive(gated, tmp_path):
    path = tmp_path / "partial.duckdb"
    shutil.copy(gated, path)
    with running_server() as server:
        _second_judge(path, server, "--limit", "40")
    with open_project(path) as db:
        body = calibration.gate(db, "s1", judge="other-model")
        missing = body["not_graded_by_judge"]
        assert missing > 0 and body["gate"]["verdict"] == "inconclusive"
        assert body["gate"]["reasons"][0].startswith(f"{missing} holdout pairs not graded by other-model/")


def test_a_sample_drawn_after_two_judges_names_the_one_it_is_drawn_on(gated, tmp_path):
    path = tmp_path / "after.duckdb"
    shutil.copy(gated, path)
    with running_server() as server:
        _second_judge(path, server)
    refused = run_cli("--db", str(path), "calibrate", "sample", "--pool", "demo", "--name", "s2", "--seed", "4")
    assert refused.returncode == 3 and "2 judge configurations graded pool 'demo'" in refused.stderr
    assert "--judge CONFIG" in refused.stderr and "other-model/" in refused.stderr
    done = run_cli("--db", str(path), "calibrate", "sample", "--pool", "demo", "--name", "s2", "--seed", "4",
                   "--judge", "other-model", "--size", "100", "--format", "json")
    assert done.returncode == 0, done.stderr
    with open_project(path) as db:
        other = verdicts.find_configuration(db, "other-model").key
        assert json.loads(done.stdout)["judge"] == other == verdicts.sample_configuration(db, "s2")
        # the new sample gates its own configuration; the first sample still gates the first judge only
        assert verdicts.gated_configurations(db, "s2") == [other]
        assert other not in verdicts.gated_configurations(db, "s1")


def test_a_relabelled_held_out_part_makes_the_stored_verdict_stale(gated, tmp_path):
    path = tmp_path / "relabel.duckdb"
    shutil.copy(gated, path)
    with open_project(path) as db:
        assert verdicts.passed_configurations(db)
        items = read_sample_items(db, "s1")
        held = items[items["part"] == "holdout"]["position"].astype(int).tolist()
        judge = judge_grades_for_sample(db, "s1").set_index("position")["grade"]
        # the SME changes her mind on every held-out pair: the stored pass no longer holds
        calibration.save_labels(db, "s1", "sme-a", {p: 3 - int(judge[p]) for p in held})
        verdicts.forget()
        assert verdicts.passed_configurations(db) == ()
        assert {s.state for s in verdicts.states(db)} == {"failed"}


def test_a_failing_high_risk_slice_fails_the_gate(gated, tmp_path):
    """The SME disagrees with the judge on every pair of the queries tagged type=comparison only
    (3 of 44 queries). As a high-risk slice that tag fails the gate, naming the slice; as an
    ordinary tag it does not decide the verdict."""
    path = tmp_path / "risk.duckdb"
    shutil.copy(gated, path)
    with open_project(path) as db:
        items = read_sample_items(db, "s1")
        tags = dict(db.query_all("SELECT query_id, tags::VARCHAR FROM queries"))
        it = {q for q, t in tags.items() if t and json.loads(t).get("type") == "comparison"}
        judge = judge_grades_for_sample(db, "s1").set_index("position")["grade"]
        risky = items[items["query_id"].isin(it)]["position"].astype(int).tolist()
        assert 0 < len(risky) < len(items) / 10
        calibration.save_labels(db, "s1", "sme-a", {p: 3 - int(judge[p]) for p in risky})
        plain = calibration.gate(db, "s1")["gate"]
        strict = calibration.gate(db, "s1", options=calibration.ReportOptions(high_risk_tags=("type=comparison",)))["gate"]
        assert plain["verdict"] != "fail" and not any("type=comparison" in r for r in plain["reasons"])
        assert strict["verdict"] == "fail"
        assert any(r.startswith("high-risk slice 'type=comparison'") and "below 0.90" in r for r in strict["reasons"])
        # the qrels rule gates with the settings' high-risk tags the same way
        from workbench.config import load_settings

        settings = load_settings(overrides={"calibration": {"high_risk_tags": "type=comparison"}}, env={})
        assert verdicts.passed_configurations(db, settings) == ()


def test_a_sample_drawn_before_any_judge_gates_the_judge_that_comes_after(tmp_path):
    """Drawn on an ungraded pool (a simple random sample, weights N/n, no judge grade), labelled,
    then judged: the judge is not gated until someone gates it, and is then judged on its own
    grades of the held-out pairs."""
    path = tmp_path / "before.duckdb"
    demo_project(path)
    with open_project(path) as db:
        drawn = calibration.create_sample(db, "s0", "demo", size=300, seed=5)
        items = read_sample_items(db, "s0")
        pool_pairs = int(db.query_value("SELECT count(*) FROM pool_pairs WHERE pool = 'demo'"))
    assert drawn["judge"] is None and drawn["pool_judged"] == 0 and len(items) == 300
    assert items["judge_grade"].isna().all() and set(items["weight"]) == {pool_pairs / 300}
    assert any("before any judge" in n for n in drawn["notes"])
    assert run_cli("--db", str(path), "judge", "--pool", "demo", "--model", "offline-lexical").returncode == 0
    with open_project(path) as db:
        judge = judge_grades_for_sample(db, "s0").set_index("position")["grade"]
        assert len(judge) == 300  # the judge graded every pair the sample drew
        calibration.save_labels(db, "s0", "sme-a", {int(p): int(judge[p]) for p in items["position"]})
        assert [s.state for s in verdicts.states(db)] == ["not gated"]
        body = calibration.gate(db, "s0")
        assert body["judge"]["model"] == "offline-lexical" and body["gate"]["verdict"] in ("pass", "inconclusive")
        assert [s.state for s in verdicts.states(db)] == [{"pass": "passed"}.get(body["gate"]["verdict"],
                                                                                  "inconclusive")]
