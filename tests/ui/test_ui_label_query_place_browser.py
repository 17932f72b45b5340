"""The Label page on a query-design sample (``calibrate sample --design queries``), in a real
Streamlit server and Debian's chromium: the card says which query of how many the SME is on
("Pair 12 of 36 · query 1 of 3 · pair 12 of 12 of this query"), the pair the browser holds ahead
says it too when a key crosses into the next query, and the numbers are those of the service
(and so of ``calibrate report``)."""

from __future__ import annotations

import re

import pytest

from tests.support.calibration_project import build_project
from tests.support.live_app import browser_page, open_label_page_as, serve_shared, wait_pair_shown
from workbench.services.calibration import workflow as cal
from workbench.store import calibration as store

pytestmark = pytest.mark.browser

WAIT = 0.45  # seconds a pair is on screen (by the card's clock) before a key (the page refuses grades before 0.3 s)


def _header(page, text: str) -> None:
    page.locator("[data-testid='label-pair']", has_text=re.compile("^" + re.escape(text) + "$")).wait_for(
        timeout=60_000)


def test_query_sample_card_says_query_k_of_n(tmp_path):
    path = tmp_path / "p.duckdb"
    db, truth = build_project(path)
    cal.create_sample(db, "q", "p", design="queries", queries=3, seed=5)
    items = store.read_sample_items(db, "q")
    for row in items.head(11).itertuples(index=False):  # this SME did the first query but its last pair
        cal.save_label(db, "q", "sme-q", int(row.position), truth[(row.query_id, row.doc_id)])
    places = cal.query_places(db, "q")
    db.close()
    assert (places[11].query, places[11].pair, places[12].query, places[12].pair) == (1, 12, 2, 1)
    with serve_shared(path) as url, browser_page() as page:
        open_label_page_as(page, url, "sme-q")
        _header(page, f"Pair 12 of 36 · {places[11].words()}")
        assert places[11].words() == "query 1 of 3 · pair 12 of 12 of this query"
        page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60_000)
        wait_pair_shown(page, WAIT)
        page.keyboard.press("0")  # the next pair is the next query's first, drawn from what the browser holds
        _header(page, "Pair 13 of 36 · query 2 of 3 · pair 1 of 12 of this query")
        wait_pair_shown(page, WAIT)
        page.keyboard.press("1")
        _header(page, "Pair 14 of 36 · query 2 of 3 · pair 2 of 12 of this query")
        assert "Traceback" not in page.inner_text("body")
