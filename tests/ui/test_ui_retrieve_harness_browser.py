"""Retrieve & Pool's "Run your own retriever" in a real Streamlit server driven by Debian's
chromium, against a real loopback HTTP retriever (the one of the AppTest module): the run is
stored as answered, the failing query is listed with its error, the runs table gains the run
with its latency; a screenshot under ``WORKBENCH_SCREENSHOTS`` (else the test's tmp dir)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from tests.support.live_app import browser_page, serve_shared
from tests.support.templates import demo_project
from tests.ui.test_ui_retrieve_harness import FAILING, Retriever
from workbench.store.chunks import read_chunks
from workbench.store.database import Database
from workbench.store.latencies import read_latencies
from workbench.store.runs import read_run_rows

pytestmark = pytest.mark.browser


def _rows(page, key: str) -> list[list[str]]:
    return page.eval_on_selector_all(
        f"table[data-table='{key}'] tbody tr",
        "rows => rows.map(r => Array.from(r.querySelectorAll('td')).map(td => td.innerText))")


def test_run_your_own_retriever_in_the_browser(tmp_path):
    db = tmp_path / "demo.duckdb"
    demo_project(db)  # a copy of the per-process demo project (init_project(db, demo=True))
    with Database(db) as handle:
        chunk_ids = read_chunks(handle, "sections")["chunk_id"].astype(str).tolist()
    shots = Path(os.environ.get("WORKBENCH_SCREENSHOTS", tmp_path / "screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    with Retriever(chunk_ids) as retriever, serve_shared(db) as url, browser_page() as page:
        page.set_viewport_size({"width": 1400, "height": 2400})
        page.goto(f"{url}/retrieve")
        page.get_by_role("tab", name="Run your own retriever").click(timeout=60_000)
        page.get_by_label("Address of your retriever").fill(retriever.url)
        page.get_by_label("Run name").last.fill("mine")
        page.get_by_role("button", name="Start").click()
        page.get_by_text(re.compile(r"Run mine: 43 of 44 queries answered")).wait_for(timeout=120_000)
        page.get_by_role("tab", name="Run your own retriever").click()
        page.wait_for_selector("table[data-table='harness_failures']", timeout=60_000)
        failures = _rows(page, "harness_failures")
        assert [r[:2] for r in failures] == [[FAILING, "HTTP 500: index offline for maintenance"]]
        runs = {r[0]: r for r in _rows(page, "runs")}
        body = page.inner_text("body")
        assert "Traceback" not in body and "--url" not in body
        page.screenshot(path=str(shots / "retrieve-own-retriever.png"), full_page=True)
    # Read what the app stored once the page's runs are over (browser_page waits for that).
    with Database(db) as handle:
        values = read_latencies(handle, ["mine"])["latency_ms"].to_numpy()
        stored = read_run_rows(handle, "mine")
    assert runs["mine"][-1] == f"{np.percentile(values, 95):,.1f} ms"
    assert set(stored["query_id"]) == set(retriever.answers) and len(retriever.answers) == 43
