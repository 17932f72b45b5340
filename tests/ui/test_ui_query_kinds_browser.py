"""The Query kinds page in a real Streamlit server driven by Debian's chromium: the three reports
(abstention, access control, multi-hop) on the demo project, the demo's role runs added with one
click, and a screenshot of the page (under ``WORKBENCH_SCREENSHOTS`` or the test's tmp dir)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.support.live_app import browser_page, serve_shared, wait_idle
from tests.support.templates import demo_project

pytestmark = pytest.mark.browser


def _wait_idle(page, timeout: float = 60_000) -> None:
    """Until the run that drew what the test waited for has finished: the app says
    ``notRunning``, nothing on the page is stale and no running indicator shows (with a warm
    server the indicator's absence alone came before the run had drawn the whole page)."""
    page.wait_for_selector("[data-testid='stApp']", timeout=timeout)
    wait_idle(page, timeout, start_within=0)


def _table_rows(page, key: str) -> list[list[str]]:
    return page.eval_on_selector_all(
        f"table[data-table='{key}'] tbody tr",
        "rows => rows.map(r => Array.from(r.querySelectorAll('td')).map(td => td.innerText))")


def test_the_three_reports_on_the_demo(tmp_path):
    db = tmp_path / "demo.duckdb"
    demo_project(db)  # a copy of the per-process demo project (init_project(db, demo=True))
    shots = Path(os.environ.get("WORKBENCH_SCREENSHOTS", tmp_path / "screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    with serve_shared(db) as url, browser_page() as page:
        page.set_viewport_size({"width": 1400, "height": 3200})
        page.goto(f"{url}/query-kinds")
        page.get_by_role("heading", name="Query kinds").first.wait_for(timeout=60_000)
        page.get_by_role("heading", name="Multi-hop trajectories").wait_for(timeout=60_000)
        page.wait_for_selector("table[data-table='trajectories']", timeout=60_000)
        _wait_idle(page)
        # abstention: the 4 unanswerable queries, both rates and balanced accuracy
        assert sorted(r[0] for r in _table_rows(page, "unanswerable")) == ["q022", "q027", "q041", "q042"]
        body = page.inner_text("body")
        for label in ("Abstains on unanswerable", "Abstains on answerable", "Balanced accuracy"):
            assert label in body
        # multi-hop: 7 trajectories scored
        assert len(_table_rows(page, "trajectories")) == 7
        # access control: add the demo's role runs, then the leak report
        assert len(_table_rows(page, "restricted")) == 4
        page.get_by_role("button", name="Add the demo's role runs").click()
        page.get_by_text(re.compile("reached a role that may not see them")).wait_for(timeout=60_000)
        page.wait_for_selector("table[data-table='rbac_roles']", timeout=60_000)
        _wait_idle(page)
        roles = {r[0]: r for r in _table_rows(page, "rbac_roles")}
        assert roles["security"][3] == "0" and int(roles["employee"][3]) > 0
        assert "Traceback" not in page.inner_text("body")
        page.screenshot(path=str(shots / "query-kinds.png"), full_page=True)
        assert (shots / "query-kinds.png").stat().st_size > 10_000
