"""The Label page's reads (services.calibration.labelling_view and friends) on a real DuckDB file:
what comes next, what is read ahead, nothing from the judge, and opening the project while
another process holds it."""

from __future__ import annotations

import time

import pytest

from tests.support.calibration_project import build_project
from tests.support.holding import hold
from workbench.errors import InputError, StoreLockedError
from workbench.services.calibration import workflow as cal
from workbench.store import calibration as store
from workbench.store.database import Database

MARKER = "JUDGE-SAYS-"


@pytest.fixture
def project(db_path):
    db, _ = build_project(db_path)
    with db.transaction() as tx:
        tx.execute("UPDATE judgments SET reason = ? || grade WHERE source = 'llm'", [MARKER])
    cal.create_sample(db, "s", "p", seed=1)
    yield db
    db.close()


def test_the_view_says_which_pair_comes_next_and_reads_it_ahead(project):
    db = project
    view = cal.labelling_view(db, "s", "ann")
    assert view["position"] == 0 and view["next"] == 1 and view["then"] == 2 and view["total"] == 200
    assert set(view["items"]) == {0, 1, 2}  # the pair, the two after it (no pair before 0)
    assert view["progress"] == {"total": 200, "labelled": 0, "skipped": 0, "cant_judge": 0, "open": 200}
    # items equal what item() gives, one by one
    for position, item in view["items"].items():
        assert item == cal.item(db, "s", position)
    # positions the caller holds are not read again
    again = cal.labelling_view(db, "s", "ann", position=5, have={4, 5})
    assert again["position"] == 5 and again["next"] == 6 and set(again["items"]) == {6, 7}

    cal.save_label(db, "s", "ann", 0, 1)
    cal.skip(db, "s", "ann", 1)
    cal.cant_judge(db, "s", "ann", 2)
    view = cal.labelling_view(db, "s", "ann", after=2)
    assert view["position"] == 3 and view["next"] == 4 and view["then"] == 5
    assert view["states"][0]["grade"] == 1 and view["states"][1]["action"] == "skip"
    assert view["progress"] == {"total": 200, "labelled": 1, "skipped": 1, "cant_judge": 1, "open": 197}
    full = cal.progress(db, "s", "ann")
    assert {k: full[k] for k in view["progress"]} == view["progress"]
    assert view["states"] == {p: cal.my_state(db, "s", "ann", p) for p in (0, 1, 2)}
    # the view agrees with next_item on every open pair
    for after in (-1, 0, 3, 150, 199):
        expected = cal.next_item(db, "s", "ann", after=after)
        assert cal.labelling_view(db, "s", "ann", after=after)["position"] == expected["position"]


def test_the_pair_on_screen_is_never_its_own_next(project):
    db = project
    for position in range(199):
        cal.save_label(db, "s", "ann", position, 0)
    # 199 is the last open pair: nothing comes after it once answered
    view = cal.labelling_view(db, "s", "ann")
    assert view["position"] == 199 and view["next"] is None
    # a skipped pair comes back when nothing else is open
    cal.skip(db, "s", "ann", 199)
    assert cal.labelling_view(db, "s", "ann")["position"] == 199
    cal.save_label(db, "s", "ann", 199, 2, evidence=[[0, 5]])
    done = cal.labelling_view(db, "s", "ann")
    assert done["position"] is None and done["next"] is None and done["items"] == {}
    assert done["progress"]["open"] == 0 and done["progress"]["labelled"] == 200


def test_besides_leaves_out_one_position(project):
    db = project
    assert store.next_open_position(db, "s", "ann", after=4) == 5
    assert store.next_open_position(db, "s", "ann", after=4, besides=5) == 6
    cal.skip(db, "s", "ann", 7)
    for position in range(200):
        if position not in (3, 7):
            cal.cant_judge(db, "s", "ann", position)
    # open: 3; skipped: 7 (comes back last)
    assert store.next_open_position(db, "s", "ann", after=3) == 3
    assert store.next_open_position(db, "s", "ann", after=3, besides=3) == 7
    assert store.next_open_position(db, "s", "ann", after=3, besides=7) == 3


def test_read_ahead_holds_nothing_from_the_judge(project):
    db = project
    view = cal.labelling_view(db, "s", "ann", position=10)
    assert set(view["items"]) == {9, 10, 11, 12}
    for item in view["items"].values():
        assert set(item) == {"position", "query_id", "doc_id", "chunk_id", "start", "end", "part", "query",
                             "description", "tags", "title", "text"}
    assert MARKER not in repr(view)
    cal.save_label(db, "s", "ann", 10, 1)
    # even once labelled: the judge's output comes only from judge_output
    assert MARKER not in repr(cal.labelling_view(db, "s", "ann", position=10))
    assert cal.judge_output(db, "s", "ann", 10)["reason"].startswith(MARKER)


def test_bad_positions_and_overlap_are_refused(project):
    db = project
    with pytest.raises(InputError, match="no item at position 200"):
        cal.labelling_view(db, "s", "ann", position=200)
    with pytest.raises(InputError, match="overlap"):
        cal.labelling_view(db, "s", "ann", overlap=-1)
    with pytest.raises(InputError, match="annotator id"):
        cal.labelling_view(db, "s", " ")
    assert store.read_items(db, "s", []) == {}
    assert store.read_items(db, "s", [3, 3, 999]) == {3: store.read_item(db, "s", 3)}


def test_the_overlap_hands_out_pairs_others_have_not_filled(project):
    db = project
    cal.save_label(db, "s", "bob", 1, 0)
    view = cal.labelling_view(db, "s", "ann", overlap=1)
    assert view["position"] == 0 and view["next"] == 2  # bob's answer fills pair 1


def test_opening_waits_while_another_process_holds_the_file(db_path):
    db, _ = build_project(db_path)
    cal.create_sample(db, "s", "p", seed=1)
    db.close()
    holder = hold(db_path, 1.5)
    try:
        with pytest.raises(StoreLockedError, match="in use by process"):
            cal.open_for_labelling(db_path, wait=0)
        started = time.monotonic()
        opened = cal.open_for_labelling(db_path, wait=30)
        waited = time.monotonic() - started
        try:
            cal.save_label(opened, "s", "ann", 0, 1)
        finally:
            opened.close()
    finally:
        holder.wait(timeout=30)
    assert waited > 0.2  # it did wait for the holder
    check = Database(db_path, read_only=True)
    try:
        assert check.query_all("SELECT position, grade FROM label_events") == [(0, 1)]
    finally:
        check.close()


def test_opening_a_missing_project_is_an_error(tmp_path):
    from workbench.errors import StoreError

    with pytest.raises(StoreError, match="no project database"):
        cal.open_for_labelling(tmp_path / "none.duckdb")
    assert not (tmp_path / "none.duckdb").exists()
