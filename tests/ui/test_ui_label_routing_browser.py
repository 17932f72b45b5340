"""The lead routes the work, in a real Streamlit server and Debian's chromium (issue 34): an SME
opens the active sample at their first assigned pair, the evidence cursor starts on the first
sentence holding a query term (the heading holding one skipped), ``n`` / ``Shift+N`` jump
between such sentences, ``Shift+↓`` extends the chosen run, and the grade stores exactly those
spans; the guidelines panel shows the sample's Markdown with raw HTML inert; a mistyped
annotator id is asked about before anything can be labelled under it.

The document text is set by hand, so each unit's document span is found with ``str.index``,
not with the page's own splitter.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.support.calibration_project import EVIL, build_project
from tests.support.live_app import (
    browser_page,
    open_label_page_as,
    serve_shared,
    require_label_rows,
    wait_pair_shown,
)
from workbench.services.calibration import guidelines, routing
from workbench.services.calibration import workflow as cal
from workbench.store.database import Database

pytestmark = pytest.mark.browser

WAIT = 0.45  # seconds on screen before a grade key (the page refuses grades before 0.3 s)
UNITS = ("Notes on topic", "Nothing here.", "The topic appears first.", "Filler sentence.",
         "Another topic sentence.", "End.")


def _text() -> str:
    return f"{UNITS[0]}\n{UNITS[1]} {UNITS[2]} {UNITS[3]} {UNITS[4]}\n{UNITS[5]}"


def _span(unit: int) -> list[int]:
    start = _text().index(UNITS[unit])
    return [start, start + len(UNITS[unit])]


def _project(path) -> dict:
    db, _ = build_project(path)
    try:
        with db.transaction() as tx:  # every document: a heading holding the term, then sentences
            tx.execute("UPDATE documents SET text = ?", [_text()])
            tx.execute("UPDATE judgments SET start = 0, \"end\" = ?", [len(_text())])
        cal.create_sample(db, "s", "p", seed=1)
        cal.create_sample(db, "t", "p", seed=2)  # newer: listed first, but s is the active one
        routing.set_active(db, "s")
        plan = routing.assign(db, "s", ["ann", "bob"], overlap=1, per_annotator=3, seed=4)
        guidelines.set_guidelines(db, "s", f"# Grading rules\n\nGrade **2**: part of the answer.\n\n{EVIL}\n")
        return plan["assigned"]
    finally:
        db.close()


def _pair(page, n: int) -> None:
    page.locator("[data-testid='label-pair']", has_text=re.compile(rf"^Pair {n} of 200$")).wait_for(timeout=60_000)


def _idle(page) -> None:
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60_000)


def _cursor(page) -> str:
    return page.locator(".wb-unit.wb-cursor").inner_text()


def _events(path) -> list[tuple]:
    db = Database(path)
    try:
        return db.query_all("SELECT sample, position, annotator, action, grade, evidence::VARCHAR FROM label_events "
                            "ORDER BY event_id")
    finally:
        db.close()


def _wait_stored(path, n: int, page=None, timeout: float = 90) -> list[tuple]:
    return require_label_rows(path, n, _events, page, timeout)


def test_an_sme_opens_the_active_sample_and_labels_with_the_evidence_keys(tmp_path):
    path = tmp_path / "project.duckdb"
    assigned = _project(path)
    mine = assigned["ann"]
    with serve_shared(path) as url, browser_page() as page:
        open_label_page_as(page, url, "ann")
        _pair(page, mine[0] + 1)  # the active sample s (not the newest, t), at ann's first pair
        _idle(page)
        wait_pair_shown(page, WAIT)
        assert _cursor(page) == UNITS[2]  # the first sentence holding "topic"; the heading holding it skipped
        page.keyboard.press("n")
        assert _cursor(page) == UNITS[4]
        page.keyboard.press("n")  # no term sentence further down: stays
        assert _cursor(page) == UNITS[4]
        page.keyboard.press("Shift+N")
        assert _cursor(page) == UNITS[2]
        page.keyboard.press("Shift+ArrowDown")  # choose this sentence and the next
        assert page.locator("[data-testid='label-evidence'] li").all_inner_texts() == [UNITS[2], UNITS[3]]
        page.keyboard.press("2")
        _pair(page, mine[1] + 1)  # the next assigned pair, not simply the next position
        stored = _wait_stored(path, 1, page)
        assert [(s, p, a, act, g, json.loads(e)) for s, p, a, act, g, e in stored] == [
            ("s", mine[0], "ann", "label", 2, [_span(2), _span(3)])]

        # the guidelines: Markdown rendered, raw HTML shown as text and never run
        _idle(page)
        page.get_by_text("Labelling guidelines").click()
        panel = page.locator("[data-testid='label-guidelines']")
        panel.get_by_role("heading", name="Grading rules").wait_for(timeout=30_000)
        assert "<script>window.__pwned = 1</script>" in panel.inner_text()
        assert page.evaluate("() => window.__pwned === undefined")

        # a typo of a known id: asked about before any card is shown
        open_label_page_as(page, url, "anm")
        page.get_by_text('No labels are stored under the annotator id "anm" yet').wait_for(timeout=60_000)
        _idle(page)
        assert page.locator("[data-testid='label-card']").count() == 0
        page.get_by_role("button", name="Yes, start labelling as anm").click()
        # anm is in no assignment of s: confirmed, then told so, and still no pair to label
        page.get_by_text("No pair of this sample is assigned to you").wait_for(timeout=60_000)
        assert page.locator("[data-testid='label-pair']").count() == 0  # not ann's pair either
    assert len(_events(path)) == 1
