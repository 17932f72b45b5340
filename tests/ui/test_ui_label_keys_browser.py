"""The Label page at expert speed, keyboard only, in a real Streamlit server driven by Debian's
chromium: every key the issue names, then the stored labels, their evidence spans and the
assessor ids compared with the keys pressed.

Documents here have a heading line before the judged passage, three sentences and two table
rows inside it, so the evidence units (lines and sentences) and their document offsets are
worked out by hand (``str.index`` of each unit's text), not with the page's own splitter.
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
    server_log_tail,
    wait_label_rows,
    wait_pair_shown,
)
from workbench.services.calibration import pending
from workbench.services.calibration import workflow as cal
from workbench.services.judge.export import export_judgments
from workbench.store.database import Database

pytestmark = pytest.mark.browser

WAIT = 0.45  # seconds a pair is on screen (by the card's clock) before a key (the page refuses grades before 0.3 s)


def _text(doc_id: str) -> str:
    return (f"Heading for {doc_id}\nFirst fact about {doc_id}. Second fact, different! Third fact?\n"
            f"| a | b |\n| 1 | 2 |")


def _units(doc_id: str) -> list[list[int]]:
    """The judged passage's evidence units as document spans, by hand."""
    text = _text(doc_id)
    out, at = [], text.index("First fact")
    for piece in (f"First fact about {doc_id}.", "Second fact, different!", "Third fact?", "| a | b |", "| 1 | 2 |"):
        start = text.index(piece, at)
        out.append([start, start + len(piece)])
        at = start + len(piece)
    return out


def _project(path) -> None:
    db, _ = build_project(path)
    try:
        with db.transaction() as tx:
            tx.execute("""UPDATE documents SET text = 'Heading for ' || doc_id || chr(10) || 'First fact about '
                          || doc_id || '. Second fact, different! Third fact?' || chr(10) || '| a | b |' || chr(10)
                          || '| 1 | 2 |'""")
            # the judged passage starts after the heading line: offsets are document offsets
            tx.execute("""UPDATE judgments SET start = length('Heading for ' || doc_id) + 1,
                          "end" = length('Heading for ' || doc_id) + 1 + length('First fact about ' || doc_id
                          || '. Second fact, different! Third fact?') + 1 + 19""")
        cal.create_sample(db, "s", "p", seed=1)
    finally:
        db.close()


def _doc_ids(path) -> dict[int, str]:
    db = Database(path, read_only=True)
    try:
        return dict(db.query_all("SELECT position, doc_id FROM calibration_items WHERE sample = 's'"))
    finally:
        db.close()


def _pair(page, n: int) -> None:
    page.locator("[data-testid='label-pair']", has_text=re.compile(rf"^Pair {n} of 200$")).wait_for(timeout=60_000)


def _note(page, text: str) -> None:
    page.locator("[data-testid='label-key-note']", has_text=text).wait_for(timeout=30_000)


def _idle(page) -> None:
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60_000)


def _keys(page, *keys: str) -> None:
    for key in keys:
        page.keyboard.press(key)


def _keys_at_once(page, *keys: str) -> None:
    """Key presses that reach the page in one browser task, so no time passes between them on
    the card's clock however busy the machine is (each ``keyboard.press`` is a round trip of its
    own). Sent to the focused element, as the browser sends a key; the card listens on the
    document, so it sees them as it sees pressed keys."""
    page.evaluate("""(keys) => {
        const target = document.activeElement || document.body;
        for (const key of keys) {
            target.dispatchEvent(new KeyboardEvent("keydown", {key, bubbles: true, cancelable: true}));
            target.dispatchEvent(new KeyboardEvent("keyup", {key, bubbles: true, cancelable: true}));
        }
    }""", list(keys))


def _events(path) -> list[tuple]:
    db = Database(path, wait=30)  # read-write: waits while the app holds the file (a key press's save)
    try:
        return db.query_all("SELECT position, action, grade, evidence::VARCHAR, seconds, annotator FROM label_events "
                            "WHERE sample = 's' ORDER BY event_id")
    finally:
        db.close()


def _stored(path) -> list[tuple]:
    """(position, action, grade, evidence) per event, evidence as a list of spans or None."""
    return [(p, a, g, None if e is None else json.loads(e)) for p, a, g, e, _, _ in _events(path)]


def _wait_stored(path, n: int, page, timeout: float = 90, url: str | None = None) -> None:
    trace: dict = {}
    if len(wait_label_rows(path, n, _events, timeout, trace, page=page)) >= n:
        return
    # what the card, the page, the browser's outbox, the server's write-ahead folder and the
    # app's log said, so a failure under load tells which step held, refused or lost the press
    # (the card's state first: the reads after it may wake the page)
    card = page.evaluate("""() => { const W = window.__workbenchLabel; if (!W) return null;
        return {seq: W.seq, inflight: W.inflight, queued: W.queue.length,
                ms_since_sent: W.inflight ? Math.round(performance.now() - W.inflightAt) : null,
                root: Boolean(W.root), connected: Boolean(W.root && W.root.isConnected),
                can_send: Boolean(W.send), hidden: document.hidden}; }""")
    kept = [{k: a.get(k) for k in ("position", "action", "grade")} for a in pending.waiting(path)]
    said = page.evaluate("""() => Array.from(document.querySelectorAll(
        "[data-testid='label-key-note'], [data-testid='stAlert'], [data-testid='label-pair']"))
        .map((e) => e.innerText.trim()).filter(Boolean)""")
    outbox = page.evaluate("() => localStorage.getItem('wb-label-outbox')")
    log = server_log_tail(url) if url else ""
    raise AssertionError(f"fewer than {n} events stored: {_events(path)}; the card: {card}; the page says {said}; "
                         f"the wait: {trace}; kept on the server: {kept}; the browser's outbox: {outbox}; "
                         f"the app's log:\n{log}")


def test_keys_only_labelling_stores_exactly_what_was_pressed(tmp_path):
    path = tmp_path / "project.duckdb"
    _project(path)
    doc = _doc_ids(path)
    with serve_shared(path) as url, browser_page() as page:
        open_label_page_as(page, url, "  SME-Anna ")
        _pair(page, 1)
        _idle(page)
        wait_pair_shown(page, WAIT)
        # the evidence cursor starts on the first sentence of the judged passage, not on the heading
        assert page.locator(".wb-unit.wb-cursor").inner_text() == f"First fact about {doc[0]}."

        _keys(page, "Space", "2")  # grade 2 with one sentence: two key presses
        _pair(page, 2)
        wait_pair_shown(page, WAIT)
        _keys(page, "3")  # no evidence: refused, said so, the pair still open
        _note(page, "Grade 3 refused: grades 2 and 3 need evidence")
        _keys(page, "Space", "ArrowDown", "Space")
        assert page.locator("[data-testid='label-evidence'] li").all_inner_texts() == [
            f"First fact about {doc[1]}.", "Second fact, different!"]
        assert page.locator(".wb-unit.wb-chosen").count() == 2
        _keys(page, "3")
        _pair(page, 3)
        wait_pair_shown(page, WAIT)
        _keys(page, "0")
        _pair(page, 4)
        _wait_stored(path, 3, page, url=url)
        _idle(page)
        wait_pair_shown(page, WAIT)
        # keys typed in the comment box stay there; Escape gives them back to the card
        # the comment box of this pair only (the page's last run may still be replacing the
        # boxes of the pairs before it)
        page.wait_for_function("() => document.querySelectorAll("
                               "'input[aria-label=\"Comment (optional)\"]').length === 1", timeout=60_000)
        comment = page.get_by_label("Comment (optional)", exact=True)
        comment.click()
        comment.type("3 is too much")
        comment.press("Escape")
        _idle(page)
        _keys(page, "1")
        _pair(page, 5)
        _wait_stored(path, 4, page, url=url)
        _idle(page)
        box = page.get_by_label("Annotator", exact=True).and_(page.locator("input"))
        assert box.input_value() == "SME-Anna"  # what was typed, trimmed

        # a lead draws a newer sample; the reload still opens the one this SME works on
        db = Database(path)
        try:
            cal.create_sample(db, "t", "p", seed=2)
        finally:
            db.close()
        page.reload()
        _pair(page, 5)  # the id survived the reload (nothing typed again), first open pair
        _idle(page)
        assert page.get_by_label("Annotator", exact=True).and_(page.locator("input")).input_value() == "SME-Anna"
        page.get_by_role("heading", name="Label").click()
        wait_pair_shown(page, WAIT)
        _keys(page, "j", "j", "j", "Space", "k", "Space")  # a table row and the sentence before it
        # 2, then 1 in the same browser task, on the next pair: too early, ignored and said so
        # (two separate presses are each a round trip to the browser, which on a loaded
        # machine can outlast the card's 300 ms)
        _keys_at_once(page, "2", "1")
        _pair(page, 6)
        _note(page, "Too early")
        wait_pair_shown(page, WAIT)
        _keys_at_once(page, "0", "0")  # a double press labels pair 6 only
        _pair(page, 7)
        _wait_stored(path, 6, page, url=url)
        _idle(page)
        time.sleep(1.0)

        # a new tab keeps the annotator id (cookie) and opens the same sample at the same pair
        # (a new context holding the same cookies: what a new tab of the same browser sends)
        tab = page.context.browser.new_context()
        try:
            tab.add_cookies(page.context.cookies())
            other = tab.new_page()
            other.goto(f"{url}/label")  # no ?annotator= in this address
            _pair(other, 7)
            assert other.get_by_label("Annotator", exact=True).and_(other.locator("input")).input_value() == \
                "SME-Anna"
        finally:
            tab.close()

    expected = [
        (0, "label", 2, [_units(doc[0])[0]]),
        (1, "label", 3, _units(doc[1])[:2]),
        (2, "label", 0, None),
        (3, "label", 1, None),
        (4, "label", 2, _units(doc[4])[2:4]),
        (5, "label", 0, None),
    ]
    assert _stored(path) == expected
    events = _events(path)
    assert {e[5] for e in events} == {"sme-anna"}
    assert all(e[4] is not None and e[4] >= 0.3 for e in events)  # time on task, from the browser
    db = Database(path, read_only=True)
    try:
        human = db.query_all("SELECT doc_id, grade, assessor, reason FROM judgments WHERE source = 'human' "
                             "ORDER BY judgment_id")
    finally:
        db.close()
    assert human == [(doc[0], 2, "sme-anna", None), (doc[1], 3, "sme-anna", None), (doc[2], 0, "sme-anna", None),
                     (doc[3], 1, "sme-anna", "3 is too much"), (doc[4], 2, "sme-anna", None),
                     (doc[5], 0, "sme-anna", None)]
    db = Database(path)
    try:
        export_judgments(db, tmp_path / "j.jsonl", source="human")
    finally:
        db.close()
    rows = [json.loads(line) for line in (tmp_path / "j.jsonl").read_text().splitlines()]
    by_doc = {r["doc_id"]: r["evidence"] for r in rows}
    assert by_doc == {doc[0]: [_units(doc[0])[0]], doc[1]: _units(doc[1])[:2], doc[2]: [], doc[3]: [],
                      doc[4]: _units(doc[4])[2:4], doc[5]: []}
