"""The Evaluate page's "Judge, corrected by SME labels" in Streamlit's AppTest: the empty states
name the next step, the corrected and human-only intervals stand side by side with the number
of labelled queries, and an annotator is not offered it. The numbers are checked against
``workbench eval --labels corrected`` run as a separate process on the same project."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from tests.support.actors import acting_as
from tests.conftest import run_cli
from tests.support.ppi_project import build_ppi_project, label_queries
from tests.ui.html_tables import html_tables
from workbench.services import access
from workbench.services.calibration import workflow as cal

CORRECTED = "Judge, corrected by SME labels"


def _evaluate_page():
    from workbench.ui.views import evaluate

    evaluate.render()


def _page(choose_corrected: bool = True) -> AppTest:
    at = AppTest.from_function(_evaluate_page, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    at.multiselect(key="evaluate_runs").set_value(["ra", "rb"]).run()
    at.multiselect(key="evaluate_measures").set_value(["nDCG"]).run()
    if choose_corrected:
        at.selectbox(key="evaluate_source").set_value(CORRECTED).run()
    assert not at.exception, at.exception
    return at


def test_corrected_empty_states_then_intervals(tmp_path, monkeypatch):
    path = tmp_path / "p.duckdb"
    db, truth = build_ppi_project(path)
    db.close()
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    at = _page()
    info = " ".join(i.value for i in at.info)
    assert "No query sample yet" in info and "Whole queries" in info and "workbench " not in info

    db = cal.open_for_labelling(path)
    cal.create_sample(db, "qs", "p", design="queries", queries=8, seed=2)
    label_queries(db, "qs", truth, 1)
    db.close()
    at = _page()
    assert "1 of its 8 queries are fully labelled" in " ".join(i.value for i in at.info)

    db = cal.open_for_labelling(path)
    label_queries(db, "qs", truth, 5)
    db.close()
    at = _page()
    assert [m.value for m in at.metric if m.label == "Labelled queries it rests on"] == ["5 of 30"]
    rows = {r["run"]: r for r in html_tables(at)["evaluate-corrected"]}
    proc = run_cli("--db", str(path), "eval", "--runs", "ra,rb", "--labels", "corrected", "-m", "ndcg@10",
                   "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    cli = json.loads(proc.stdout)["measures"]["ndcg@10"]
    for run in ("ra", "rb"):
        e = cli["runs"][run]
        assert rows[run]["corrected"] == f"{e['estimate']:.3f}"
        assert rows[run]["corrected 95% interval"] == f"{e['ci'][0]:.3f} – {e['ci'][1]:.3f}"
        assert rows[run]["human-only 95% interval"] == f"{e['human_only_ci'][0]:.3f} – {e['human_only_ci'][1]:.3f}"
    diff = html_tables(at)["evaluate-corrected-differences"][0]
    d = cli["differences"]["rb"]
    assert diff["run"] == "rb" and diff["corrected 95% interval"] == f"{d['ci'][0]:+.3f} – {d['ci'][1]:+.3f}"


def test_annotator_is_not_offered_corrected(tmp_path, monkeypatch):
    path = tmp_path / "p.duckdb"
    db, _ = build_ppi_project(path)
    db.close()
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    with acting_as(access.Actor("anna", "annotator")):
        at = _page(choose_corrected=False)
        assert CORRECTED not in at.selectbox(key="evaluate_source").options


def _calibration_page():
    from workbench.ui.views import calibration

    calibration.render()


def test_calibration_page_draws_a_query_sample(tmp_path, monkeypatch):
    from workbench.store import calibration as store
    from workbench.store.database import Database

    path = tmp_path / "p.duckdb"
    db, _ = build_ppi_project(path)
    db.close()
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    at = AppTest.from_function(_calibration_page, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    at.selectbox(key="calibration_design").set_value("Whole queries (for corrected scores)")
    at.number_input(key="calibration_queries").set_value(6)
    next(b for b in at.button if b.label == "Draw sample").click().run()
    assert not at.exception, at.exception
    with Database(path) as d:
        info = store.read_sample(d, "p-queries-seed0")
        items = store.read_sample_items(d, "p-queries-seed0")
    assert info["spec"]["design"] == "queries" and items["query_id"].nunique() == 6 and len(items) == 72


def test_calibration_page_labels_needed_box(tmp_path, monkeypatch):
    """The box's numbers equal ``workbench ppi --plan`` (a separate process) on the labels and runs
    exported from the same project."""
    from tests.support.ppi_project import export_files

    path = tmp_path / "p.duckdb"
    db, truth = build_ppi_project(path)
    cal.create_sample(db, "qs", "p", design="queries", queries=10, seed=2)
    label_queries(db, "qs", truth, 3)
    db.close()
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    at = AppTest.from_function(_calibration_page, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    assert "at least 5 of them" in " ".join(c.value for c in at.caption)
    db = cal.open_for_labelling(path)
    labelled = label_queries(db, "qs", truth, 7)
    db.close()
    at.run()
    assert not at.exception, at.exception
    rows = {r["target"]: r for r in html_tables(at)["calibration-labels-needed"]}
    human, judge, runs = export_files(path, tmp_path, labelled)
    proc = run_cli("ppi", str(human), str(judge), *map(str, runs), "-m", "ndcg@10", "--plan", "--half-width",
                   "0.05", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)["measures"]["ndcg@10"]
    for run in ("ra", "rb"):
        assert rows[f"{run} (mean)"]["labelled queries, judge corrected"] == str(plan["runs"][run]["n_ppi"])
        assert rows[f"{run} (mean)"]["labelled queries, SME labels only"] == str(plan["runs"][run]["n_human"])
    assert rows["rb − ra"]["labelled queries, judge corrected"] == str(plan["differences"]["rb"]["n_ppi"])
    assert rows["rb − ra"]["labelled queries, SME labels only"] == str(plan["differences"]["rb"]["n_human"])
