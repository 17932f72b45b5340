"""The Label page's fast key presses in a real Streamlit server driven by Debian's chromium.

* After a grade key, the label is in the project file, readable by another process (this test
  process, opening the file read-write with no wait: the server does not hold it).
* While another process holds the project (a judge job writing a batch), the next pair is on
  screen anyway; the answer is stored once the file is free ("Saved grade ..." appears then).
* Undo (U), previous (←) and next (→) work with the keyboard; a reload loses nothing.
* The judge's output is never in the page's HTML before submission.
"""

from __future__ import annotations

import re

import pytest

from tests.support.calibration_project import build_project
from tests.support.holding import hold
from tests.support.live_app import (
    browser_page,
    label_as,
    script_idle,
    serve_shared,
    wait_for_pair,
    wait_pair_shown,
)
from workbench.services.calibration import workflow as cal
from workbench.store.database import Database

pytestmark = pytest.mark.browser

MARKER = "JUDGE-SAYS-"

def _project(path):
    db, _ = build_project(path)
    try:
        with db.transaction() as tx:
            tx.execute("UPDATE judgments SET reason = ? || grade WHERE source = 'llm'", [MARKER])
        cal.create_sample(db, "s", "p", seed=1)
    finally:
        db.close()


def _wait_idle(page) -> None:
    script_idle(page, 60_000)


def _sign_in(page, url: str) -> None:
    label_as(page, url, "sme1", 200, 60_000)


def _pair(page, n: int) -> None:
    wait_for_pair(page, n, 200, 60_000)


def _events(path) -> list[tuple]:
    db = Database(path)  # read-write, no wait: fails at once if the server still held the file
    try:
        return db.query_all("SELECT position, action, grade FROM label_events WHERE annotator = 'sme1' "
                            "ORDER BY event_id")
    finally:
        db.close()


def test_keys_store_at_once_and_a_busy_project_does_not_hold_the_next_pair_back(tmp_path):
    path = tmp_path / "project.duckdb"
    _project(path)
    with serve_shared(path) as url, browser_page() as page:
        _sign_in(page, url)
        _pair(page, 1)
        wait_pair_shown(page, 0.4)
        page.keyboard.press("1")
        _pair(page, 2)
        page.get_by_text("Saved grade 1 for pair 1.").wait_for(timeout=60_000)
        _wait_idle(page)
        assert _events(path) == [(0, "label", 1)]
        assert MARKER not in page.content()

        holder = hold(path)  # until released
        try:
            wait_pair_shown(page, 0.4)
            page.keyboard.press("0")
            _pair(page, 3)  # on screen while the other process still holds the file
            assert holder.poll() is None
            assert MARKER not in page.content()
        finally:
            holder.release()
        page.get_by_text("Saved grade 0 for pair 2.").wait_for(timeout=60_000)
        _wait_idle(page)
        assert _events(path) == [(0, "label", 1), (1, "label", 0)]

        page.keyboard.press("u")
        page.get_by_text("Undid your last action on pair 2.").wait_for(timeout=60_000)
        _pair(page, 2)
        _wait_idle(page)
        assert _events(path)[-1] == (1, "clear", None)
        page.keyboard.press("ArrowLeft")
        _pair(page, 1)
        page.get_by_text("You already answered this pair (your grade: 1)").wait_for(timeout=60_000)
        _wait_idle(page)
        page.keyboard.press("ArrowRight")
        _pair(page, 2)
        _wait_idle(page)
        wait_pair_shown(page, 0.4)  # a grade key counts once the pair has been on screen 300 ms
        page.keyboard.press("0")
        _pair(page, 3)
        page.get_by_text("Saved grade 0 for pair 2.").wait_for(timeout=60_000)
        _wait_idle(page)

        page.reload()
        _sign_in(page, url)
        _pair(page, 3)  # the first pair not labelled yet
        page.get_by_text(re.compile("2 labelled, 0 skipped")).wait_for(timeout=60_000)
        assert MARKER not in page.content()
    assert _events(path) == [(0, "label", 1), (1, "label", 0), (1, "clear", None), (1, "label", 0)]
