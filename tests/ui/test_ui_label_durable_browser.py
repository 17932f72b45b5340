"""Issue 37, answers lost silently: in a real Streamlit server driven by Debian's chromium, answers
given while another process holds the project (a real process holding the DuckDB file, as an
import, a judge job or a CLI command does) survive a reload of the tab and the tab's closing,
and each is stored exactly once when the file is free.

The old page kept those answers in the Streamlit session only: after a reload it showed the
first of them again and they were gone.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.support.calibration_project import build_project
from tests.support.holding import hold
from tests.support.live_app import (
    after_run,
    browser_page,
    label_as,
    script_idle,
    serve_shared,
    wait_for_pair,
    wait_pair_shown,
)
from workbench.errors import StoreError
from workbench.services.calibration import pending
from workbench.services.calibration import workflow as cal
from workbench.store.database import Database

pytestmark = pytest.mark.browser


def _project(path):
    db, _ = build_project(path)
    try:
        cal.create_sample(db, "s", "p", seed=1)
    finally:
        db.close()


def _wait_idle(page) -> None:
    script_idle(page, 90_000)


def _sign_in(page, url: str) -> None:
    label_as(page, url, "sme1", 200, 90_000)


def _pair(page, n: int) -> None:
    wait_for_pair(page, n, 200, 90_000)


def _events(path, timeout: float = 90) -> list[tuple]:
    """sme1's label events, read by this process (the server may be saving for a moment: retried)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            db = Database(path)
        except StoreError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
            continue
        try:
            return db.query_all("SELECT position, action, grade FROM label_events WHERE annotator = 'sme1' "
                                "ORDER BY event_id")
        finally:
            db.close()


def _answer(page, key: str, then: int) -> None:
    wait_pair_shown(page, 0.4)  # a grade key counts once the pair has been on screen 300 ms
    page.keyboard.press(key)
    _pair(page, then)


def _give_three_while_held(page, url: str, path) -> object:
    """The issue's steps: ``1`` stored, the file held by another process, ``0`` ``1`` ``0`` (the
    card moves from pair 2 to 5); returns the holder, still holding."""
    _sign_in(page, url)
    _pair(page, 1)
    _answer(page, "1", 2)
    page.get_by_text("Saved grade 1 for pair 1.").wait_for(timeout=90_000)
    _wait_idle(page)
    assert _events(path) == [(0, "label", 1)]
    holder = hold(path)  # until released
    try:
        _answer(page, "0", 3)
        _answer(page, "1", 4)
        _answer(page, "0", 5)
        # each answer is taken and kept on the server's disk; the page says they wait
        page.get_by_text("3 answers waiting to be saved").wait_for(timeout=90_000)
        assert holder.poll() is None
    except BaseException:
        holder.release()
        raise
    return holder


_STORED = [(0, "label", 1), (1, "label", 0), (2, "label", 1), (3, "label", 0)]


def test_answers_given_while_the_project_is_held_survive_a_reload(tmp_path):
    path = tmp_path / "project.duckdb"
    _project(path)
    with serve_shared(path) as url, browser_page() as page:
        holder = _give_three_while_held(page, url, path)
        try:
            page.reload()  # the session with the answers is gone
            time.sleep(1.0)  # the reloaded page waits for the file meanwhile
        finally:
            holder.release()
        _sign_in(page, url)
        _pair(page, 5)  # not pair 2 again: the three answers are in
        page.get_by_text(re.compile("4 labelled, 0 skipped")).wait_for(timeout=90_000)
        assert "waiting to be saved" not in page.content()
        _wait_idle(page)
    assert _events(path) == _STORED  # each exactly once
    assert pending.waiting(path) == []


def test_answers_given_while_the_project_is_held_are_saved_after_the_tab_closes(tmp_path):
    path = tmp_path / "project.duckdb"
    _project(path)
    with serve_shared(path) as url:
        with browser_page() as page:
            holder = _give_three_while_held(page, url, path)
            page.close()  # the tab is closed: no page of the server runs for it any more
        try:
            time.sleep(1.0)
        finally:
            holder.release()
        # the server's background thread saves them, with no page open
        deadline = time.monotonic() + 90
        while pending.waiting(path) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pending.waiting(path) == []
        assert _events(path) == _STORED
        with browser_page() as page:  # and a new tab carries on after them
            _sign_in(page, url)
            _pair(page, 5)
            _wait_idle(page)
    assert _events(path) == _STORED


class _Wire:
    """The page's websocket to the Streamlit server, routed through Playwright: while ``cut``,
    what the page sends is dropped (a key press that left the browser and never reached the
    server, as when the tab closes while it travels); what the server sends still arrives."""

    def __init__(self, page):
        self.cut = False
        page.route_web_socket(re.compile(r"/_stcore/stream"), self._route)

    def _route(self, ws) -> None:
        server = ws.connect_to_server()
        ws.on_message(lambda message: None if self.cut else server.send(message))


def _outbox(page) -> list:
    return page.evaluate("() => JSON.parse(localStorage.getItem('wb-label-outbox') || '[]')")


def _one_saved_one_cut_off(page, url: str) -> _Wire:
    """Sign in, grade pair 1 (saved, out of the outbox), then cut the wire and grade pair 2: the
    card moves on and the server never hears of the second press. Returns the (cut) wire."""
    wire = _Wire(page)
    _sign_in(page, url)
    _pair(page, 1)
    _answer(page, "1", 2)
    page.get_by_text("Saved grade 1 for pair 1.").wait_for(timeout=90_000)
    _wait_idle(page)
    assert _outbox(page) == []  # handled answers leave the outbox
    wire.cut = True
    _answer(page, "0", 3)
    return wire


def test_a_key_press_still_travelling_when_the_tab_closes_is_sent_again_and_stored_once(tmp_path):
    """Issue 37's last gap: the card moves on at the key press, before the server has the answer.
    The press that never reached the server (the wire cut, then the tab closed) is still in the
    browser's outbox; the Label page opened again in a new tab of that browser sends it again,
    and it is stored once. The old card kept it in the page's memory only: gone with the tab."""
    path = tmp_path / "project.duckdb"
    _project(path)
    with serve_shared(path) as url, browser_page() as first:
        context = first.context
        _one_saved_one_cut_off(first, url)
        waiting = _outbox(first)
        assert [(e["action"]["position"], e["action"]["grade"]) for e in waiting] == [(1, 0)]
        assert _events(path) == [(0, "label", 1)]
        first.close()  # run_before_unload is False: the tab goes without asking
        second = context.new_page()
        _sign_in(second, url)
        second.get_by_text("Saved grade 0 for pair 2.").wait_for(timeout=90_000)
        _pair(second, 3)  # the card carries on after it
        _wait_idle(second)
        assert _outbox(second) == []
        second.close()
    assert _events(path) == [(0, "label", 1), (1, "label", 0)]


def test_a_key_press_of_a_tab_that_closes_after_the_page_opened_again_is_sent_then(tmp_path):
    """The Label page opened again while the tab with the travelling press is still open (its
    heartbeat fresh) leaves that press to it; when that tab then closes, the open page sends it.
    The same holds for a tab closed a moment before the page opened whose heartbeat is still
    fresh (its pagehide did not run: a loaded machine, a killed renderer), the flake of
    ``test_a_key_press_still_travelling_when_the_tab_closes...``. The old card looked at the
    outbox once, as it opened, and never again: the press was left in the outbox, not stored."""
    path = tmp_path / "project.duckdb"
    _project(path)
    with serve_shared(path) as url, browser_page() as first:
        context = first.context
        _one_saved_one_cut_off(first, url)
        assert len(_outbox(first)) == 1
        second = context.new_page()
        _sign_in(second, url)  # the first tab is open: its press is left to it
        _pair(second, 2)
        _wait_idle(second)
        assert len(_outbox(second)) == 1
        assert _events(path) == [(0, "label", 1)]
        first.close()
        second.get_by_text("Saved grade 0 for pair 2.").wait_for(timeout=90_000)
        _pair(second, 3)
        _wait_idle(second)
        assert _outbox(second) == []
        second.close()
    assert _events(path) == [(0, "label", 1), (1, "label", 0)]


def test_an_answer_sent_again_that_had_arrived_is_stored_once(tmp_path):
    """The other half of "stored once": the server did get the press (it is stored) but the tab
    reloaded before the browser heard back; the outbox entry (put back here by hand, as the
    browser would have kept it) is sent again after the reload, and nothing is stored twice. The
    page asks before leaving while an answer travels (beforeunload)."""
    path = tmp_path / "project.duckdb"
    _project(path)
    with serve_shared(path) as url, browser_page() as page:
        _sign_in(page, url)
        _pair(page, 1)
        _answer(page, "1", 2)
        page.get_by_text("Saved grade 1 for pair 1.").wait_for(timeout=90_000)
        _wait_idle(page)
        aid = page.evaluate("() => Object.keys(window.__workbenchLabel.sentAids).length")
        assert aid == 0
        asked = []
        page.on("dialog", lambda dialog: (asked.append(dialog.type), dialog.accept()))
        wire = _Wire(page)
        page.reload()  # the new websocket goes through the wire
        _sign_in(page, url)
        _pair(page, 2)
        # the card sends an unanswered press again after a few seconds; here it must still be
        # travelling when the tab reloads, however slow the machine
        page.evaluate("() => { window.__workbenchLabel.resendMs = 1e9; }")
        wire.cut = True
        _answer(page, "0", 3)
        entry = _outbox(page)
        assert len(entry) == 1
        wire.cut = False
        page.reload()  # while it travels (never handled): the page asks first
        assert asked == ["beforeunload"]
        _sign_in(page, url)
        page.get_by_text("Saved grade 0 for pair 2.").wait_for(timeout=90_000)
        _wait_idle(page)
        # now send the very same entry once more, as a second tab of the same browser would
        page.evaluate("e => localStorage.setItem('wb-label-outbox', JSON.stringify(e))", entry)
        page.reload()
        _sign_in(page, url)
        _pair(page, 3)
        _wait_idle(page)
        assert _outbox(page) == []
    assert _events(path) == [(0, "label", 1), (1, "label", 0)]


def test_a_copy_of_an_action_handled_already_leaves_the_message_shown(tmp_path):
    """The card sends an action again when the server's ack is late (more than a few seconds on
    a loaded machine); the server ignores a copy of one it handled, and the page stays as it was:
    "Saved grade ..." is still shown after the run the copy starts. The old page drew that run
    with nothing above the card, so the confirmation could be gone before anyone saw it."""
    path = tmp_path / "project.duckdb"
    _project(path)
    with serve_shared(path) as url, browser_page() as page:
        from playwright.sync_api import expect

        _sign_in(page, url)
        _pair(page, 1)
        _answer(page, "1", 2)
        saved = page.get_by_text("Saved grade 1 for pair 1.")
        saved.wait_for(timeout=90_000)
        _wait_idle(page)
        # what the card's resendLate sends: the last action again, under its number (seq)
        copy = ("() => { const W = window.__workbenchLabel;"
                " W.send({kind: 'label', grade: 1, position: 0, units: [], visible_ms: 1000, seq: W.seq}); }")
        after_run(page, lambda: page.evaluate(copy), "a copy of the last key press", timeout=90_000)
        expect(saved).to_be_visible(timeout=10_000)
        _pair(page, 2)
        assert _outbox(page) == []
    assert _events(path) == [(0, "label", 1)]


def test_a_key_press_lost_on_the_way_is_sent_again_and_stored_once(tmp_path):
    """A press that left the browser and never reached the server (a message or a run lost on a
    busy machine), with the tab left open: the card sends it again a few seconds later and it
    is stored once, with no reload. The old card waited for the server's answer forever, and
    every later key press queued behind it."""
    path = tmp_path / "project.duckdb"
    _project(path)
    with serve_shared(path) as url, browser_page() as page:
        wire = _one_saved_one_cut_off(page, url)  # the card moves on; the server never hears of pair 2
        assert len(_outbox(page)) == 1
        time.sleep(1.0)
        assert _events(path) == [(0, "label", 1)]
        wire.cut = False
        page.get_by_text("Saved grade 0 for pair 2.").wait_for(timeout=90_000)
        _pair(page, 3)
        _wait_idle(page)
        assert _outbox(page) == []
    assert _events(path) == [(0, "label", 1), (1, "label", 0)]
