"""The app shell in Streamlit's AppTest (in-process) and in a real server driven by chromium."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.live_app import browser_page, serve_shared
from tests.ui.html_tables import html_tables
from tests.support.prerequisites import REPO

APP = str(REPO / "workbench" / "ui" / "app.py")


@pytest.fixture
def demo_db(demo_project) -> Path:
    return demo_project  # a copy of the worker's init --demo template


def _app(monkeypatch, db: Path) -> AppTest:
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def test_overview_shows_counts_states_and_coverage(monkeypatch, demo_db):
    at = _app(monkeypatch, demo_db)
    metrics = {m.label: m.value for m in at.metric}
    from workbench.store.database import Database
    from workbench.store.meta import table_counts

    with Database(demo_db) as db:
        counts = table_counts(db)
    assert metrics["Documents"] == f"{counts['documents']:,}"
    assert metrics["Queries"] == f"{counts['queries']:,}"
    assert metrics["Labels"] == f"{counts['judgments.human.ok']:,}" == "209"
    assert metrics["Chunkings"] == "1" and "Chunks" not in metrics  # never summed over chunkings
    tables = html_tables(at)
    pipeline = tables["pipeline"]
    states = {row["step"]: row["state"] for row in pipeline}
    assert states["Corpus"] == states["Chunks"] == states["Pool"] == "done"
    assert states["Qrels"].startswith("partial") and states["Calibration"] == "to do"
    # Every page named in the pipeline table exists in the app.
    from workbench.ui.pages import PAGES

    titles = {p.title for p in PAGES}
    assert {row["page"] for row in pipeline} - {""} <= titles
    # ...and every step has its page: none is "not in the app yet" now that all of them are.
    assert all(row["page"] and "not in the app yet" not in row["state"] for row in pipeline), pipeline
    assert {row["step"]: row["page"] for row in pipeline}["Qrels"] == "Qrels"
    chunkings = {row["chunking"]: row for row in tables["chunkings"]}
    assert chunkings["sections"]["documents"] == "41 of 41" and chunkings["sections"]["chunks"] == "279"
    assert {row["run"]: row["documents"] for row in tables["runs"]} == {"bm25": "41 of 41"}
    # No CLI words on the page.
    texts = [m.value for kind in ("info", "success", "warning", "error") for m in getattr(at, kind)]
    assert texts and not any("workbench " in t or "--" in t for t in texts), texts


def test_overview_names_a_page_for_the_next_step(monkeypatch, tmp_path):
    from workbench.services.project.lifecycle import init_project

    path = tmp_path / "empty.duckdb"
    init_project(path)
    at = _app(monkeypatch, path)
    info = [i.value for i in at.info]
    assert any("Next step: Corpus" in i and "Data page" in i for i in info), info
    assert not any("workbench " in i or "--" in i for i in info)


def test_sidebar_keeps_the_annotator(monkeypatch, demo_db):
    at = _app(monkeypatch, demo_db)
    # the project by its name, never its path on the server
    assert demo_db.stem in [t.value for t in at.sidebar.text]
    assert str(demo_db.parent) not in repr([e.value for e in at.sidebar if hasattr(e, "value")])
    box = at.sidebar.text_input(key="annotator")
    box.input("sme-ana").run()
    assert not at.exception
    assert at.session_state["annotator"] == "sme-ana"


def test_missing_database_offers_to_create_it_in_the_app(monkeypatch, tmp_path):
    path = tmp_path / "none.duckdb"
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    assert any("No project database" in e.value for e in at.error)
    assert not any("workbench " in e.value or "--" in e.value for e in at.error)  # no CLI words
    assert not path.exists()
    next(b for b in at.button if b.label == "Create the demo project").click().run()
    assert not at.exception, at.exception
    assert path.is_file()
    assert {m.label: m.value for m in at.metric}["Documents"] == "41"


@pytest.mark.browser
def test_real_server_serves_the_overview(demo_db, tmp_path):
    with serve_shared(demo_db) as url, browser_page() as page:
        page.goto(url)
        page.get_by_text("Pipeline").wait_for(timeout=30_000)
        page.get_by_text("Documents").first.wait_for()
        body = page.inner_text("body")
        assert "Relevance Workbench" in body
        assert "Next step" in body
        page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)


def test_overview_sends_a_half_labelled_sample_to_the_label_page(monkeypatch, demo_db, cli):
    from workbench.services.calibration import workflow as calibration
    from workbench.services.project.lifecycle import open_project

    judged = cli("--db", str(demo_db), "judge", "--pool", "demo", "--model", "offline-lexical")
    assert judged.returncode == 0, judged.stderr
    at = _app(monkeypatch, demo_db)
    info = [i.value for i in at.info]
    assert any("Next step: Calibration" in i and "Calibration page" in i for i in info), info
    with open_project(demo_db) as db:
        calibration.create_sample(db, "s1", "demo", size=100, seed=1, min_per_class=10)
    at = _app(monkeypatch, demo_db)
    info = [i.value for i in at.info]
    assert any("Next step: Calibration" in i and "Label page" in i for i in info), info
    # one page per act, each named once: label on the Label page, read the verdict on Calibration
    assert ("Next step: Calibration. Label the calibration sample's pairs (blind to the judge) on the Label "
            "page, then read the verdict on the Calibration page.") in info, info
    states = {row["step"]: row["state"] for row in html_tables(at)["pipeline"]}
    assert states["LLM judgments"] == "done" and states["Calibration"] == "next"


def test_every_next_step_names_its_page_once_where_the_act_is():
    """Each action of the Overview's "Next step" sentence, on its page: the page is named once,
    right after what is done there, never after an explanation or another page."""
    from workbench.ui.views.overview import ACTIONS, REPAIR, next_step_sentence

    for action in [*ACTIONS.values(), *REPAIR.values()]:
        sentence = next_step_sentence("Step", action, "Somewhere")
        assert sentence.count("on the Somewhere page") == 1, sentence
        assert "page on the" not in sentence, sentence  # never a second place after the page
    assert next_step_sentence("Chunks", REPAIR["chunks"], "Retrieve & Pool") == (
        "Next step: Chunks. Create a chunking that covers every document (section 1, Chunk) on the Retrieve & Pool "
        "page: a chunking made before documents were imported misses them.")
