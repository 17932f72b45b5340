"""A mouse click on an evidence sentence of the Label card, in a real Streamlit server driven by
Debian's chromium: it toggles the same client-side state as ``Space`` (no script run at all,
the focus stays on the card so the next key acts), and the stored evidence is exactly what the
keyboard stores for the same sentence; a grade button clicked after it stores that evidence too.

Documents have a heading line, then the judged passage's three sentences; their document spans
are worked out by hand (``str.index``), not with the page's splitter.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.support.calibration_project import build_project
from tests.support.live_app import (
    browser_page,
    open_label_page_as,
    serve_shared,
    require_label_rows,
    wait_pair_shown,
)
from workbench.services.calibration import workflow as cal
from workbench.store.database import Database

pytestmark = pytest.mark.browser

WAIT = 0.45  # seconds a pair is on screen (by the card's clock) before a key (the page refuses grades before 0.3 s)
SENTENCES = ("First fact about {d}.", "Second fact, different!", "Third fact?")

# Counts the script runs the page starts from now on (the app's script state turning "running").
COUNT_RUNS = """() => {
  window.__runs = 0;
  const app = document.querySelector('[data-testid="stApp"]');
  new MutationObserver(() => {
    if (app.getAttribute('data-test-script-state') === 'running') window.__runs += 1;
  }).observe(app, { attributes: true, attributeFilter: ['data-test-script-state'] });
}"""


def _text(doc_id: str) -> str:
    return f"Heading for {doc_id}\n" + " ".join(s.format(d=doc_id) for s in SENTENCES)


def _span(doc_id: str, unit: int) -> list[int]:
    text, piece = _text(doc_id), SENTENCES[unit].format(d=doc_id)
    start = text.index(piece)
    return [start, start + len(piece)]


def _project(path) -> dict[int, str]:
    db, _ = build_project(path)
    try:
        with db.transaction() as tx:
            tx.execute("""UPDATE documents SET text = 'Heading for ' || doc_id || chr(10) || 'First fact about '
                          || doc_id || '. Second fact, different! Third fact?'""")
            tx.execute("""UPDATE judgments SET start = length('Heading for ' || doc_id) + 1,
                          "end" = length('Heading for ' || doc_id) + 1 + length('First fact about ' || doc_id
                          || '. Second fact, different! Third fact?')""")
        cal.create_sample(db, "s", "p", seed=1)
        return dict(db.query_all("SELECT position, doc_id FROM calibration_items WHERE sample = 's'"))
    finally:
        db.close()


def _pair(page, n: int) -> None:
    page.locator("[data-testid='label-pair']", has_text=re.compile(rf"^Pair {n} of 200$")).wait_for(timeout=60_000)


def _idle(page) -> None:
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60_000)


def _rows(path) -> list[tuple]:
    db = Database(path)  # no wait: fails while the server holds the file this instant
    try:
        return db.query_all("SELECT position, grade, evidence::VARCHAR FROM label_events "
                            "WHERE sample = 's' ORDER BY event_id")
    finally:
        db.close()


def _stored(path, n: int, page=None, timeout: float = 90) -> list[tuple]:
    rows = require_label_rows(path, n, _rows, page, timeout)
    return [(p, g, None if e is None else json.loads(e)) for p, g, e in rows]


def _focused_card(page) -> bool:
    return page.evaluate("() => !!document.activeElement && document.activeElement.classList.contains('wb-card')")


def test_a_click_toggles_evidence_like_space_without_a_script_run(tmp_path):
    path = tmp_path / "project.duckdb"
    doc = _project(path)
    with serve_shared(path) as url, browser_page() as page:
        open_label_page_as(page, url, "sme")
        _pair(page, 1)
        _idle(page)
        wait_pair_shown(page, WAIT)
        page.keyboard.press("ArrowDown")  # pair 1 by keyboard: the second sentence, Space, 2
        page.keyboard.press("Space")
        page.keyboard.press("2")
        _pair(page, 2)
        _stored(path, 1, page)
        _idle(page)
        # a fixed pause, as before (not wait_pair_shown): a run can still follow the stored grade,
        # with no sign of it on the page beforehand, and it must be over before runs are counted
        time.sleep(WAIT)

        page.evaluate(COUNT_RUNS)
        units = page.locator("[data-testid='label-card'] .wb-unit")
        units.nth(1).click()  # pair 2 by mouse: the second sentence ...
        units.nth(2).click()  # ... and the third, dropped again by a second click
        units.nth(2).click()
        page.wait_for_timeout(800)
        assert page.evaluate("() => window.__runs") == 0  # toggled in the browser only
        assert _focused_card(page)  # the keys after the click act on the card
        assert page.locator(".wb-unit.wb-chosen").all_inner_texts() == ["Second fact, different!"]
        assert page.locator(".wb-unit.wb-cursor").inner_text() == "Third fact?"  # the cursor follows the click
        assert page.locator("[data-testid='label-evidence'] li").all_inner_texts() == ["Second fact, different!"]
        page.keyboard.press("2")
        _pair(page, 3)
        _stored(path, 2, page)
        _idle(page)
        wait_pair_shown(page, WAIT)

        # pair 3: a clicked sentence, then the grade *button* clicked with the mouse
        page.locator("[data-testid='label-card'] .wb-unit").nth(0).click()
        page.get_by_role("button", name="3 · Fully answers").click()
        _pair(page, 4)
        stored = _stored(path, 3, page)

    assert stored == [(0, 2, [_span(doc[0], 1)]), (1, 2, [_span(doc[1], 1)]), (2, 3, [_span(doc[2], 0)])]
