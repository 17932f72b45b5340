"""The Label page's write-ahead store (services.calibration.pending): an accepted answer is on
disk before the card moves on, is stored exactly once whoever drains it and however often, in
the order given, and counts in the annotator's states (theirs only) while it waits. Pace
counts leave undone labels out."""

from __future__ import annotations

import json
import time

import pytest

from tests.support.calibration_project import build_project
from tests.support.holding import hold
from workbench.errors import InputError
from workbench.services.calibration import pending
from workbench.services.calibration import workflow as cal
from workbench.store.database import Database


@pytest.fixture
def project(tmp_path):
    path = tmp_path / "p.duckdb"
    db, _ = build_project(path)
    cal.create_sample(db, "s", "p", seed=1)
    db.close()
    return path


def _events(path) -> list[tuple]:
    db = Database(path, read_only=True)
    try:
        return db.query_all("SELECT position, annotator, action, grade, undoes IS NOT NULL FROM label_events "
                            "ORDER BY event_id")
    finally:
        db.close()


def _accept(path, action, position=None, grade=None, annotator="ann", **fields):
    return cal.keep_answer(path, sample="s", annotator=annotator, action=action, position=position, grade=grade,
                          **fields)


# -- pure parts --------------------------------------------------------------------------------

def test_an_answer_is_checked_before_it_is_kept():
    kw = {"sample": "s", "annotator": "ann", "seq": 1, "given_at": 0.0}
    ok = pending.new_answer(action="label", position=3, grade=2, evidence=[(4, 9)], **kw)
    assert ok["evidence"] == [[4, 9]] and ok["position"] == 3 and len(ok["id"]) == 32
    assert pending.decode(pending.encode(ok)) == ok
    assert pending.new_answer(action="undo", position=7, **kw)["position"] is None
    for bad in ({"action": "label", "position": 1, "grade": 4}, {"action": "label", "position": 1, "grade": True},
                {"action": "label", "position": 1, "grade": 2},  # 2-3 need evidence
                {"action": "label", "position": 1, "grade": 1, "evidence": [[5, 5]]},
                {"action": "label", "position": 1, "grade": 1, "evidence": [["a", 5]]},
                {"action": "skip", "position": -1}, {"action": "skip", "position": 1, "grade": 0},
                {"action": "clear", "position": 1}):
        with pytest.raises(InputError):
            pending.new_answer(**bad, **kw)


def test_file_names_sort_in_the_order_answers_were_given():
    names = [pending.file_name({"seq": seq, "id": i}) for seq, i in ((9, "z"), (10, "a"), (123456789012, "m"))]
    assert names == sorted(names)


def test_pending_answers_merge_over_the_stored_states_in_order():
    stored = {0: {"action": "label", "grade": 1}, 5: {"action": "skip", "grade": None}}
    answers = [{"action": "label", "position": 1, "grade": 0}, {"action": "label", "position": 0, "grade": 3},
               {"action": "skip", "position": 2}, {"action": "undo", "position": None},  # takes back the skip
               {"action": "undo", "position": None},  # takes back the grade 3: pair 1's grade 1 is back
               {"action": "cant_judge", "position": 4}]
    merged = pending.merge_states(stored, answers)
    assert {p: (s["action"], s.get("grade")) for p, s in merged.items()} == {
        0: ("label", 1), 1: ("label", 0), 4: ("cant_judge", None), 5: ("skip", None)}
    # an undo with no pending answer before it reverts a stored one: unknown here, nothing changes
    assert pending.merge_states(stored, [{"action": "undo", "position": None}]) == stored


# -- kept, drained, exactly once ----------------------------------------------------------------

def test_a_kept_answer_is_a_whole_file_next_to_the_project(project):
    answer = _accept(project, "label", 0, 1, comment="fine", seconds=2.5)
    files = list(pending.folder(project).iterdir())
    assert [f.name for f in files] == [pending.file_name(answer)]
    on_disk = json.loads(files[0].read_text())
    assert on_disk["annotator"] == "ann" and on_disk["grade"] == 1 and on_disk["comment"] == "fine"
    assert pending.waiting(project, annotator="ann") == [answer] and pending.waiting(project, annotator="bob") == []
    assert _events(project) == []  # the project itself is untouched until a drain


def test_answers_given_while_another_process_holds_the_project_are_stored_once_it_is_free(project):
    holder = hold(project)  # a real process holding the DuckDB file
    try:
        with pytest.raises(Exception):
            cal.open_for_labelling(project, wait=0)
        given = [_accept(project, "label", 0, 1), _accept(project, "skip", 1),
                 _accept(project, "label", 2, 3, evidence=[[0, 8]]), _accept(project, "undo"),
                 _accept(project, "label", 3, 0, annotator="bob")]
    finally:
        holder.release()
    db = cal.open_for_labelling(project, wait=30, migrate=True)  # drains on opening
    try:
        assert pending.waiting(project) == []
        assert [pending.outcome(a["id"])["status"] for a in given] == ["stored"] * 5
        assert pending.outcome(given[3]["id"])["position"] == 2  # the undo took back pair 3's grade
        again = [dict(a, seq=a["seq"]) for a in given]
    finally:
        db.close()
    assert _events(project) == [(0, "ann", "label", 1, False), (1, "ann", "skip", None, False),
                                (2, "ann", "label", 3, False), (2, "ann", "clear", None, True),
                                (3, "bob", "label", 0, False)]
    # a replay of every answer (a drain stopped after its commits, before removing the files)
    # stores nothing again
    where = pending.folder(project)
    for answer in again:
        (where / pending.file_name(answer)).write_bytes(pending.encode(answer))
    db = cal.open_for_labelling(project, wait=30)
    db.close()
    assert pending.waiting(project) == [] and len(_events(project)) == 5


def test_the_annotator_sees_their_pending_answers_and_no_one_elses(project):
    _accept(project, "label", 0, 2, evidence=[[0, 5]])
    _accept(project, "skip", 1)
    _accept(project, "label", 4, 0, annotator="bob")
    db = Database(project)  # not an open for labelling: nothing is drained
    try:
        mine = cal.my_states(db, "s", "ann")
        assert {p: (s["action"], s["grade"]) for p, s in mine.items()} == {0: ("label", 2), 1: ("skip", None)}
        view = cal.labelling_view(db, "s", "ANN ")
        assert view["position"] == 2 and view["progress"]["labelled"] == 1 and view["progress"]["skipped"] == 1
        assert set(cal.my_states(db, "s", "bob")) == {4}
    finally:
        db.close()


def test_an_answer_the_project_refuses_is_kept_aside_with_the_reason(project):
    bad = _accept(project, "label", 999, 1)  # no such pair
    good = _accept(project, "label", 0, 1)
    db = cal.open_for_labelling(project, wait=30)
    db.close()
    assert pending.outcome(bad["id"])["status"] == "refused" and pending.outcome(good["id"])["status"] == "stored"
    [kept] = pending.refused(project, "ann")
    assert kept["id"] == bad["id"] and "no item at position 999" in kept["reason"]
    assert pending.refused(project, "bob") == []
    pending.dismiss(project, [kept])
    assert pending.refused(project, "ann") == [] and _events(project) == [(0, "ann", "label", 1, False)]


def test_the_background_drainer_stores_answers_once_the_project_is_free(project):
    holder = hold(project)
    try:
        answer = _accept(project, "label", 5, 0)
        cal.drain_in_background(project, wait=0.2, every=0.05)
        time.sleep(0.5)
        assert pending.waiting(project) != []  # still held: kept, not lost
    finally:
        holder.release()
    deadline = time.monotonic() + 90  # a loaded machine: each attempt opens the file
    while pending.waiting(project) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pending.waiting(project) == [] and pending.outcome(answer["id"])["status"] == "stored"
    assert _events(project) == [(5, "ann", "label", 0, False)]


# -- pace ----------------------------------------------------------------------------------------

def test_pace_counts_leave_undone_labels_out(project):
    db = Database(project)
    try:
        for position, seconds in ((0, 2.0), (1, 4.0), (2, 6.0)):
            cal.save_label(db, "s", "ann", position, 1, seconds=seconds)
        cal.undo(db, "s", "ann")  # pair 3's label is taken back: 2 labels stand
        [pace] = cal.throughput(db, "s", "ann")
        # 2 labels; the undone label's 6 s were spent all the same: 2 / (12 / 3600) = 600 per hour
        assert (pace["labels"], pace["answers"]) == (2, 2)
        assert pace["hours"] == pytest.approx(12 / 3600) and pace["labels_per_hour"] == pytest.approx(600.0)
    finally:
        db.close()


def test_an_answer_id_given_by_the_browser_is_kept_and_checked(tmp_path):
    """The Label card names its answers (so one sent again after a reload is stored once): a
    given id is kept as it is; anything but 32 lowercase hex digits is refused, since the id
    names the answer's file in the write-ahead folder."""
    from workbench.errors import InputError
    from workbench.services.calibration import pending as kept

    project = tmp_path / "p.duckdb"
    project.write_bytes(b"")
    answer = kept.keep(project, sample="s", annotator="a", action="skip", position=0, answer_id="ab" * 16)
    assert answer["id"] == "ab" * 16
    assert [a["id"] for a in kept.waiting(project)] == ["ab" * 16]
    for bad in ("../../etc/passwd", "AB" * 16, "ab" * 15, "a/" * 16, 7):
        with pytest.raises(InputError, match="32 hexadecimal"):
            kept.keep(project, sample="s", annotator="a", action="skip", position=0, answer_id=bad)
    assert len(kept.waiting(project)) == 1
