"""The lead routes the work (issue 34): the active sample, per-sample assignments (which SMEs,
how many pairs each, how many SMEs per pair) served by the Label queue and enforced by the
services, the new-annotator check, and the pace counting pairs, not label events."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tests.support.calibration_project import build_project
from workbench.errors import InputError
from workbench.services import access
from workbench.services.calibration import guidelines as guide
from workbench.services.calibration import routing
from workbench.services.calibration import workflow as cal


@pytest.fixture
def db(tmp_path):
    db, _ = build_project(tmp_path / "p.duckdb")
    cal.create_sample(db, "s", "p", seed=1)
    cal.create_sample(db, "t", "p", seed=2)
    yield db
    db.close()


@pytest.fixture
def as_actor():
    holder = {}
    previous = access.set_actor_source(lambda: holder.get("who"))
    yield lambda name, role: holder.__setitem__("who", access.Actor(name, role))
    access.set_actor_source(previous)


def _walk(db, sample, annotator) -> list[int]:
    """Label every pair the queue serves ``annotator``, in the order served; the positions."""
    served = []
    while True:
        view = cal.labelling_view(db, sample, annotator)
        if view["position"] is None:
            return served
        served.append(view["position"])
        cal.save_label(db, sample, annotator, view["position"], 1)


def test_the_active_sample_is_set_by_a_lead_and_read_by_anyone(db, as_actor):
    assert routing.active_sample(db) is None
    assert routing.set_active(db, "t") == "t" and routing.active_sample(db) == "t"
    as_actor("ann", "annotator")
    assert routing.active_sample(db) == "t"
    with pytest.raises(access.PermissionDenied):
        routing.set_active(db, "s")
    as_actor("lea", "lead")
    with pytest.raises(InputError, match="no calibration sample named 'nope'"):
        routing.set_active(db, "nope")
    assert routing.active_sample(db) == "t"  # a refusal changes nothing
    routing.set_active(db, None)
    assert routing.active_sample(db) is None


def test_each_sme_is_served_only_their_pairs_and_each_pair_gets_overlap_smes(db):
    whole = routing.assign(db, "s", ["Ann", " bob ", "cid"], overlap=2, seed=7)
    assert whole["annotators"] == ["ann", "bob", "cid"] and whole["covered"] == whole["total"] == 200
    # 200 pairs x 2 SMEs over 3 SMEs: loads 134, 133, 133 (they differ by one at most)
    assert sorted(len(p) for p in whole["assigned"].values()) == [133, 133, 134]
    # capped at 12 pairs each: 36 labels, 2 per pair, cover 18 pairs
    plan = routing.assign(db, "s", ["ann", "bob", "cid"], overlap=2, per_annotator=12, seed=7)
    assert plan["covered"] == 18 and [len(plan["assigned"][a]) for a in ("ann", "bob", "cid")] == [12, 12, 12]
    for name in ("ann", "bob", "cid"):
        served = _walk(db, "s", name)
        assert sorted(served) == plan["assigned"][name]  # exactly theirs, each once
        progress = cal.labelling_view(db, "s", name)["progress"]
        assert (progress["total"], progress["labelled"], progress["open"]) == (12, 12, 0)
    per_pair = Counter(p for p, _ in db.query_all(
        "SELECT position, annotator FROM label_events WHERE sample = 's' AND action = 'label'"))
    assert set(per_pair.values()) == {2} and len(per_pair) == 18


def test_a_capped_assignment_covers_a_seeded_part_and_other_samples_keep_their_own(db):
    plan = routing.assign(db, "t", ["ann", "bob"], overlap=1, per_annotator=5, seed=3)
    again = routing.assignment(db, "t")
    assert plan["assigned"] == again["assigned"] and again["seed"] == 3
    assert [len(plan["assigned"][a]) for a in ("ann", "bob")] == [5, 5] and plan["covered"] == 10
    assert not set(plan["assigned"]["ann"]) & set(plan["assigned"]["bob"])
    # not the first ten positions: the pairs are handed out in a seeded random order
    assert sorted(plan["assigned"]["ann"] + plan["assigned"]["bob"]) != list(range(10))
    assert sorted(_walk(db, "t", "bob")) == plan["assigned"]["bob"]
    asked = plan["assigned"]["bob"][0]  # ann asks for bob's pair: served her first open pair instead
    assert cal.labelling_view(db, "t", "ann", position=asked)["position"] == plan["assigned"]["ann"][0]
    # cid is in no assignment of t: nothing is served, nothing may be stored
    view = cal.labelling_view(db, "t", "cid")
    assert view["position"] is None and view["assigned"] == [] and view["progress"]["total"] == 0
    assert cal.next_item(db, "t", "cid") is None
    with pytest.raises(InputError, match="not assigned to cid"):
        cal.save_label(db, "t", "cid", 0, 1)
    # sample s has no assignment: everyone labels any pair, as before
    assert cal.labelling_view(db, "s", "cid")["assigned"] is None
    cal.save_label(db, "s", "cid", 0, 1)
    assert cal.next_item(db, "s", "cid")["position"] == 1


def test_the_services_refuse_answers_to_pairs_not_assigned(db):
    plan = routing.assign(db, "s", ["ann", "bob"], overlap=1, seed=0)
    theirs = plan["assigned"]["bob"][0]
    mine = plan["assigned"]["ann"][0]
    for act in (lambda: cal.save_label(db, "s", "ann", theirs, 1), lambda: cal.skip(db, "s", "ann", theirs),
                lambda: cal.cant_judge(db, "s", "ann", theirs),
                lambda: cal.save_labels(db, "s", "ann", {mine: 1, theirs: 0})):
        with pytest.raises(InputError, match=f"pair {theirs + 1} of sample 's' is not assigned to ann"):
            act()
    # a Label page answer kept on disk is refused for good when stored (InputError: told, not retried)
    with pytest.raises(InputError, match="not assigned"):
        cal.store_accepted(db, {"id": "x1", "sample": "s", "annotator": "ann", "action": "label",
                                "position": theirs, "grade": 1, "evidence": None})
    assert db.query_value("SELECT count(*) FROM label_events") == 0  # nothing half-written
    cal.save_label(db, "s", "ann", mine, 1)
    assert cal.undo(db, "s", "ann") == mine  # undo is not an answer to a pair: allowed
    routing.clear_assignment(db, "s")
    cal.save_label(db, "s", "ann", theirs, 1)  # no assignment any more: every pair is open


def test_only_a_lead_assigns(db, as_actor):
    as_actor("ann", "annotator")
    with pytest.raises(access.PermissionDenied):
        routing.assign(db, "s", ["ann"])
    as_actor("lea", "lead")
    plan = routing.assign(db, "s", ["ann"])
    assert plan["set_by"] == "lea"
    with pytest.raises(InputError, match="reserved"):
        routing.assign(db, "s", ["Adjudication"])
    with pytest.raises(InputError, match="between 1 and 1"):
        routing.assign(db, "s", ["ann"], overlap=2)


def test_routing_progress_counts_assigned_pairs_answered(db):
    plan = routing.assign(db, "t", ["ann", "bob"], overlap=2, per_annotator=4, seed=1)
    first, second = plan["assigned"]["ann"][:2]
    cal.save_label(db, "t", "ann", first, 2, evidence=[[0, 3]])
    cal.cant_judge(db, "t", "ann", second)
    cal.skip(db, "t", "bob", first)  # a skip leaves the pair open
    assert routing.progress(db, "t") == [{"annotator": "ann", "assigned": 4, "answered": 2, "open": 2},
                                         {"annotator": "bob", "assigned": 4, "answered": 0, "open": 4}]


def test_a_new_annotator_id_is_one_with_no_label_and_no_assignment(db):
    assert routing.is_new_annotator(db, "s", "ann")
    assert not routing.needs_confirmation(db, "s", "ann")  # nobody labelled yet: no one to split with
    cal.save_label(db, "t", "ann", 0, 1)
    assert routing.needs_confirmation(db, "s", "anm") and not routing.needs_confirmation(db, "s", "ann")
    assert not routing.is_new_annotator(db, "s", " ANN ")  # labelled elsewhere: known
    assert routing.is_new_annotator(db, "s", "anm")  # the typo
    routing.assign(db, "t", ["bob"])
    assert not routing.is_new_annotator(db, "s", "Bob")  # assigned: known before any label
    assert not routing.is_new_annotator(db, "s", "  ")


def test_the_pace_counts_labels_stored_not_label_events(db):
    cal.save_label(db, "s", "ann", 0, 1, seconds=2.0)
    cal.save_label(db, "s", "ann", 0, 2, seconds=4.0, evidence=[[0, 3]])  # chosen again: replaces the first
    cal.skip(db, "s", "ann", 1, seconds=3.0)
    cal.save_label(db, "s", "ann", 1, 0, seconds=3.0)  # the skipped pair labelled
    [pace] = cal.throughput(db, "s", "ann")
    stored = db.query_value("SELECT count(*) FROM judgments WHERE source = 'human'")
    # 2 labels stored (the old count said 3 labels, 4 answers); all 12 s were spent
    assert (pace["labels"], pace["answers"], stored) == (2, 2, 2)
    assert pace["hours"] == pytest.approx(12 / 3600) and pace["labels_per_hour"] == pytest.approx(600.0)


def test_guidelines_are_stored_with_the_sample_and_versioned(db, tmp_path):
    first = tmp_path / "g.md"
    first.write_text("# Grading\n\nGrade **2** needs a *sentence*.\n", encoding="utf-8")
    done = guide.set_guidelines(db, "s", guide.read_file(first), source=str(first))
    import hashlib

    assert done["sha256"] == hashlib.sha256(first.read_bytes()).hexdigest() and done["history"] == []
    assert guide.guidelines(db, "t") is None  # another sample's are its own
    second = guide.set_guidelines(db, "s", "Be strict.")
    assert second["history"] == [{"sha256": done["sha256"], "set_at": done["set_at"]}]
    assert guide.guidelines(db, "s")["text"] == "Be strict."
    again = guide.set_guidelines(db, "s", "Be strict.")  # the same text: no new version
    assert again["history"] == second["history"]
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"ok\n\xff\xfe")
    with pytest.raises(InputError, match="not UTF-8"):
        guide.read_file(bad)
    with pytest.raises(InputError, match="no such file"):
        guide.read_file(tmp_path / "missing.md")
    with pytest.raises(InputError, match="empty"):
        guide.set_guidelines(db, "s", "  \n")
    assert guide.guidelines(db, "s")["text"] == "Be strict."


def test_a_query_design_sample_is_assigned_by_whole_queries(db):
    # 3 queries of 12 pairs, 3 SMEs, 2 per pair, at most 24 pairs (2 queries) each. Worked by
    # hand (core.calibration.routing.assign_queries): whatever the seeded order, the 1st query goes
    # to ann, bob (rotation 0); the 2nd to cid (fewest pairs), then ann (rotation 2 puts ann
    # before bob); the 3rd to bob, cid (ann is full): 24 pairs each, every pair covered twice.
    cal.create_sample(db, "qs", "p", design="queries", queries=3, seed=5)
    items = db.query_all("SELECT position, query_id FROM calibration_items WHERE sample = 'qs' ORDER BY position")
    query_of = {int(p): q for p, q in items}
    queries = list(dict.fromkeys(query_of.values()))
    assert len(queries) == 3 and len(items) == 36
    plan = routing.assign(db, "qs", ["ann", "bob", "cid"], overlap=2, per_annotator=24, seed=4)
    assert (plan["unit"], plan["covered"], plan["total"], plan["queries_covered"], plan["queries_total"]) == (
        "queries", 36, 36, 3, 3)
    handed = [queries[q] for q in np.random.default_rng(4).permutation(3)]  # the stored seed's order
    assert plan["assigned_queries"] == {"ann": sorted(handed[:2], key=queries.index),
                                        "bob": sorted([handed[0], handed[2]], key=queries.index),
                                        "cid": sorted(handed[1:], key=queries.index)}
    for name, positions in plan["assigned"].items():
        assert len(positions) == 24
        assert {query_of[p] for p in positions} == set(plan["assigned_queries"][name])
        # whole queries: every pair of each of their queries
        assert sorted(positions) == sorted(p for p, q in query_of.items() if q in plan["assigned_queries"][name])
    served = _walk(db, "qs", "ann")  # the queue serves a query's pairs together, one query after the other
    runs = [q for i, q in enumerate(query_of[p] for p in served) if i == 0 or query_of[served[i - 1]] != q]
    assert len(served) == 24 and len(runs) == 2
    assert routing.assignment(db, "qs")["seed"] == 4


def test_a_pair_design_sample_is_still_assigned_pair_by_pair(db):
    plan = routing.assign(db, "s", ["ann", "bob", "cid"], overlap=2, seed=7)
    assert plan["unit"] == "pairs" and "assigned_queries" not in plan
