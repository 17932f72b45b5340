"""The Label page's fast key presses (AppTest on a real DuckDB file): the card moves on from what
the session read ahead and stores the answer right after drawing, so

* a label is in the project, readable by another process, as soon as the key press's run ends
  (the page never keeps the file open between presses);
* nothing from the judge is in the session's read-ahead or on the page before submission;
* undo, previous and next still work from the read-ahead;
* with an overlap, a pair other SMEs filled meanwhile is passed over;
* a project held by another process delays the answer (it is stored once the file is free);
  past the wait the answer is kept on disk, survives a reload and is stored exactly once when
  the file is free.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.calibration_project import build_project
from tests.support.holding import hold
from tests.support.prerequisites import REPO
from workbench.services.calibration import pending
from workbench.services.calibration import workflow as cal
from workbench.store.database import Database

MARKER = "JUDGE-SAYS-"


def _label_page():
    from workbench.ui.views import label

    label.render()


@pytest.fixture
def judged(tmp_path, monkeypatch):
    path = tmp_path / "p.duckdb"
    db, _ = build_project(path)
    with db.transaction() as tx:
        tx.execute("UPDATE judgments SET reason = ? || grade WHERE source = 'llm'", [MARKER])
    cal.create_sample(db, "s", "p", seed=1)
    db.close()
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path


def _page(annotator: str = "sme") -> AppTest:
    at = AppTest.from_function(_label_page, default_timeout=60)
    at.session_state["annotator"] = annotator
    at.run()
    assert not at.exception, at.exception
    return at


def _press(at: AppTest, key: str) -> AppTest:
    at.button(key=key).click().run()
    assert not at.exception, at.exception
    return at


def _card_data(at: AppTest) -> dict:
    """The data the Label card (a components.v2 element) was last sent."""
    found = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            proto = getattr(child, "proto", None)
            if getattr(proto, "component_name", None) == "workbench_label_card":
                found.append(json.loads(proto.json))
            walk(child)

    walk(at.main)
    assert len(found) <= 1, found
    return found[0] if found else {"pair": None}


def _texts(at: AppTest) -> str:
    pair = _card_data(at)["pair"]
    parts = [h.proto.body for h in at.get("html")] + ([pair["html"]] if pair else [])
    for kind in ("info", "success", "warning", "error", "caption", "markdown"):
        parts += [m.value for m in getattr(at, kind)]
    return "\n".join(parts)


def _pair(at: AppTest) -> str:
    import re

    found = re.findall(r"Pair (\d+) of 200", _texts(at))
    assert len(found) == 1, _texts(at)
    return found[0]


_READ = """
import json, sys
from workbench.store.database import Database
db = Database(sys.argv[1])  # read-write and no wait: fails at once if the app still held the file
try:
    rows = db.query_all("SELECT position, annotator, action, grade FROM label_events ORDER BY event_id")
    human = db.query_all("SELECT grade, assessor FROM judgments WHERE source = 'human' ORDER BY judgment_id")
finally:
    db.close()
print(json.dumps({"events": rows, "human": human}))
"""


def _read_in_another_process(path) -> dict:
    done = subprocess.run([sys.executable, "-c", _READ, str(path)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_label_is_readable_by_another_process_right_after_the_key_press(judged):
    at = _page()
    assert _pair(at) == "1"
    _press(at, "label_grade_s_1")
    seen = _read_in_another_process(judged)
    assert seen == {"events": [[0, "sme", "label", 1]], "human": [[1, "sme"]]}
    assert _pair(at) == "2" and "Saved grade 1 for pair 1." in _texts(at)
    _press(at, "label_grade_s_0")
    _press(at, "label_skip_s")
    seen = _read_in_another_process(judged)
    assert seen["events"] == [[0, "sme", "label", 1], [1, "sme", "label", 0], [2, "sme", "skip", None]]
    assert _pair(at) == "4"
    assert "2 labelled, 1 skipped, 0 can't judge of 200 pairs" in [p.proto.text for p in at.get("progress")][0]


def _strings(value) -> str:
    """Every string reachable from a session-state value, as one text."""
    if isinstance(value, dict):
        return " ".join(_strings(k) + " " + _strings(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return " ".join(_strings(v) for v in value)
    return str(value)


def test_the_read_ahead_and_the_page_stay_blind_until_submission(judged):
    at = _page()
    view = at.session_state["_label_view"]
    assert set(view["items"]) == {0, 1, 2, 3, 4}  # the pair and the four after it are held already
    assert MARKER not in _strings(at.session_state.to_dict()) and MARKER not in _texts(at)
    for _ in range(3):
        _press(at, "label_grade_s_0")
        assert MARKER not in _strings(at.session_state.to_dict()) and MARKER not in _texts(at)
    # with "show after I submit": the judge's reason appears only after the label is stored, for
    # the pair just labelled, and the next pair's read-ahead still holds nothing of the judge
    at.checkbox(key="label_reveal").check().run()
    assert MARKER not in _texts(at)
    _press(at, "label_grade_s_1")
    texts = _texts(at)
    judge = Database(judged, read_only=True)
    try:
        expected = judge.query_value("SELECT j.reason FROM calibration_items i JOIN judgments j "
                                     "ON j.judgment_id = i.judge_judgment_id WHERE i.sample = 's' AND i.position = 3")
    finally:
        judge.close()
    assert "Saved grade 1 for pair 4. The judge said" in texts and expected in texts
    assert _pair(at) == "5"
    view = at.session_state["_label_view"]
    assert MARKER not in _strings(view)


def test_undo_previous_and_next_work_from_the_read_ahead(judged):
    at = _page()
    _press(at, "label_grade_s_0")
    _press(at, "label_grade_s_1")
    assert _pair(at) == "3"
    _press(at, "label_undo_s")
    assert _pair(at) == "2" and "Undid your last action on pair 2." in _texts(at)
    seen = _read_in_another_process(judged)
    assert seen["events"][-1] == [1, "sme", "clear", None] and seen["human"] == [[0, "sme"]]
    _press(at, "label_prev_s")
    assert _pair(at) == "1" and "You already answered this pair (your grade: 0)" in _texts(at)
    _press(at, "label_next_s")
    _press(at, "label_next_s")
    assert _pair(at) == "3"
    _press(at, "label_prev_s")
    assert _pair(at) == "2" and "You already answered" not in _texts(at)
    _press(at, "label_grade_s_1")
    # pair 3 is the next open one after pair 2
    assert _pair(at) == "3"
    assert _read_in_another_process(judged)["human"] == [[0, "sme"], [1, "sme"]]
    assert "2 labelled" in at.get("progress")[0].proto.text


def test_with_an_overlap_a_pair_filled_meanwhile_is_passed_over(judged, monkeypatch):
    from workbench.ui.views import label

    monkeypatch.setattr(label, "_settings", lambda: (1, 300))
    at = _page("ann")
    assert _pair(at) == "1" and at.session_state["_label_view"]["next"] == {0: 1, 1: 2, 2: 3, 3: 4}
    db = Database(judged)
    try:
        cal.save_label(db, "s", "bob", 1, 3, evidence=[[0, 5]])  # bob fills pair 2 while ann reads pair 1
    finally:
        db.close()
    _press(at, "label_grade_s_0")
    assert _pair(at) == "3"  # not pair 2: with an overlap of 1, bob's answer filled it
    assert _read_in_another_process(judged)["events"] == [[1, "bob", "label", 3], [0, "ann", "label", 0]]


def test_a_key_press_waits_for_a_project_another_process_holds_briefly(judged, monkeypatch):
    from workbench.ui.views import label

    monkeypatch.setattr(label, "OPEN_WAIT", 60.0)
    at = _page()
    holder = hold(judged, 1.0)  # a judge job writing a batch, say
    try:
        _press(at, "label_grade_s_1")
    finally:
        holder.wait(timeout=60)
    assert "Saved grade 1 for pair 1." in _texts(at) and _pair(at) == "2"
    assert _read_in_another_process(judged)["events"] == [[0, "sme", "label", 1]]


def test_an_answer_given_while_another_process_holds_the_project_survives_a_reload(judged, monkeypatch):
    from workbench.ui.views import label

    monkeypatch.setattr(label, "OPEN_WAIT", 0.2)
    monkeypatch.setattr(label, "PRESS_WAIT", 0.2)
    at = _page()
    _press(at, "label_grade_s_0")
    holder = hold(judged)  # a real process holding the DuckDB file, past every wait of the page
    try:
        _press(at, "label_grade_s_1")  # taken: kept on disk, though the project cannot be written
        texts = _texts(at)
        assert "in use by process" in texts and "1 answer waiting to be saved" in texts, texts
        # the tab is reloaded (a new session) while the file is still held: the answer is not lost
        again = _page()
        assert "1 answer waiting to be saved" in _texts(again)
        # another SME's session counts only its own answers (none)
        other = _page("bob")
        assert "waiting to be saved" not in _texts(other)
    finally:
        holder.release()
    again.run()  # the file is free: the reloaded page (or the app's background thread) stores it, once
    assert not again.exception, again.exception
    assert _pair(again) == "3" and "waiting to be saved" not in _texts(again)
    assert "2 labelled" in again.get("progress")[0].proto.text
    at.run()  # the first tab runs again: it stores nothing twice and says its answer was saved
    assert not at.exception, at.exception
    assert "Saved grade 1 for pair 2." in _texts(at) and _pair(at) == "3"
    _press(at, "label_grade_s_1")
    assert _read_in_another_process(judged)["events"] == [[0, "sme", "label", 0], [1, "sme", "label", 1],
                                                          [2, "sme", "label", 1]]
    assert pending.waiting(judged) == []


def test_a_key_from_a_card_no_longer_on_screen_stores_nothing(judged):
    at = _page()
    assert _pair(at) == "1"
    # the session moved to another pair (a correction, a redraw) before the old card's grade
    # button was drawn again: its key must not answer a pair the SME no longer sees
    at.session_state["label_position_s_sme"] = 5
    _press(at, "label_grade_s_0")
    assert "nothing was stored" in _texts(at)
    assert _read_in_another_process(judged)["events"] == []
    assert _pair(at) == "6"
    _press(at, "label_grade_s_0")  # the card for pair 6 is drawn now: its key answers pair 6
    assert _read_in_another_process(judged)["events"] == [[5, "sme", "label", 0]]
    _press(at, "label_prev_s")
    assert _pair(at) == "6"  # previous from pair 7 (where the card moved), not from pair 6's buttons


def test_an_answer_the_project_refuses_later_brings_its_pair_back_with_the_reason(judged):
    # kept while the project was busy, then refused when stored (no such pair any more, as
    # after a sample was redrawn): the annotator is told, not left guessing
    cal.keep_answer(judged, sample="s", annotator="sme", action="label", position=250, grade=1)
    at = _page()
    texts = _texts(at)
    assert "Your answer to pair 251 of s could not be stored" in texts and "no item at position 250" in texts
    assert pending.refused(judged, "sme") == [] and pending.waiting(judged) == []  # told once
    assert _read_in_another_process(judged)["events"] == []


def test_the_pace_leaves_undone_labels_out(judged):
    at = _page()
    _press(at, "label_grade_s_0")
    _press(at, "label_grade_s_1")
    _press(at, "label_undo_s")
    at.run()  # a whole-page run: the pace line is read afresh
    captions = " ".join(c.value for c in at.caption)
    assert "(1 label in" in captions, captions  # not 2: the undone label is not counted
