"""The app shell in Streamlit's AppTest (in-process) and in a real server driven by chromium."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.live_app import browser_page, serve
from tests.support.prerequisites import REPO
from workbench.services.project import init_project

APP = str(REPO / "workbench" / "ui" / "app.py")


@pytest.fixture
def demo_db(tmp_path) -> Path:
    path = tmp_path / "demo.duckdb"
    init_project(path, demo=True)
    return path


def _app(monkeypatch, db: Path) -> AppTest:
    monkeypatch.setenv("WORKBENCH_DB", str(db))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def test_overview_shows_counts_and_next_step(monkeypatch, demo_db):
    at = _app(monkeypatch, demo_db)
    metrics = {m.label: m.value for m in at.metric}
    from workbench.store.database import Database
    from workbench.store.meta import table_counts

    with Database(demo_db) as db:
        counts = table_counts(db)
    assert metrics["Documents"] == f"{counts['documents']:,}"
    assert metrics["Queries"] == f"{counts['queries']:,}"
    assert metrics["Labels"] == f"{counts['judgments']:,}"
    assert any("Next step" in i.value for i in at.info)


def test_sidebar_keeps_the_annotator(monkeypatch, demo_db):
    at = _app(monkeypatch, demo_db)
    box = at.sidebar.text_input(key="annotator")
    box.input("sme-ana").run()
    assert not at.exception
    assert at.session_state["annotator"] == "sme-ana"


def test_missing_database_shows_how_to_create_it(monkeypatch, tmp_path):
    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "none.duckdb"))
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception
    assert any("init" in e.value for e in at.error)


@pytest.mark.browser
def test_real_server_serves_the_overview(demo_db, tmp_path):
    with serve(demo_db) as url, browser_page() as page:
        page.goto(url)
        page.get_by_text("Pipeline").wait_for(timeout=30_000)
        page.get_by_text("Documents").first.wait_for()
        body = page.inner_text("body")
        assert "Relevance Workbench" in body
        assert "Next step" in body
        page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)
