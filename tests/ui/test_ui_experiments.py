"""The Experiments page in Streamlit's AppTest on the demo project: the grid runs from the page
and shows what ``workbench sweep`` computes (the same service, checked against the CLI's JSON)."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from tests.conftest import run_cli
from tests.ui.html_tables import html_tables
from workbench.services.project.lifecycle import init_project


def _page():
    from workbench.ui.views import experiments

    experiments.render()


def test_grid_runs_from_the_page_and_matches_the_cli(demo_db):
    at = AppTest.from_function(_page, default_timeout=300)
    at.run()
    assert not at.exception, at.exception
    assert any("run the grid" in i.value for i in at.info)
    at.multiselect[0].set_value(["fixed:128", "fixed:512"])
    at.multiselect[1].set_value(["BM25"])
    at.multiselect[2].set_value(["ndcg@10"])
    at.text_input[0].set_value("1000,4000")
    at.button[0].click()
    at.run()
    assert not at.exception, at.exception
    tables = html_tables(at)
    cells = tables["experiments-cells"]
    assert [r["configuration"] for r in cells] == ["fixed:128 × bm25", "fixed:512 × bm25"]
    done = run_cli("--db", str(demo_db), "sweep", "--chunkings", "fixed:128,fixed:512", "--retrievers", "bm25",
                   "-m", "ndcg@10", "--budgets", "1000,4000", "--format", "json", "--no-progress", timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("reusing run") == 2  # the page's runs are the CLI's runs
    out = json.loads(done.stdout)
    for row, cell in zip(cells, out["cells"]):
        assert row["ndcg@10"] == f"{cell['aggregate']['ndcg@10']:.3f}"
        assert row["coverage@4000"] == f"{cell['coverage']['4000']:.3f}"
    winners = {int(r["budget (tokens)"]): r["winner"] for r in tables["experiments-winners"]}
    assert winners == {int(b): f"{w['chunking']} × {w['retriever']}" for b, w in out["winner_by_budget"].items()}
    assert "experiments-slices" in tables
    assert len(at.get("arrow_vega_lite_chart")) >= 1 or len(at.get("vega_lite_chart")) >= 1


def test_empty_project_names_the_next_step(tmp_path, monkeypatch):
    path = tmp_path / "empty.duckdb"
    init_project(path)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    at = AppTest.from_function(_page, default_timeout=120)
    at.run()
    assert not at.exception
    assert any("Data page" in i.value for i in at.info)
