"""The lead's assignment of a sample's pairs to annotators and the evidence cursor's start,
worked by hand (workbench/core/calibration/routing.py, evidence_cursor.py)."""

from __future__ import annotations

import pytest

from workbench.core.calibration.evidence_cursor import first_cursor, is_heading, term_units
from workbench.core.calibration.routing import assign, assign_queries
from workbench.errors import InputError


def test_without_a_cap_each_pair_goes_to_overlap_annotators_in_rotation():
    # pair i -> annotators 2i, 2i+1 (mod 3): 0 -> a b, 1 -> c a, 2 -> b c, 3 -> a b
    plan = assign(4, ["a", "b", "c"], overlap=2)
    assert plan.positions == {"a": [0, 1, 3], "b": [0, 2, 3], "c": [1, 2]}
    assert (plan.covered, plan.total, plan.overlap, plan.per_annotator) == (4, 4, 2, None)


def test_a_cap_stops_handing_out_once_too_few_annotators_have_room():
    # the module docstring's example: pair 0 -> a b; pair 1 -> c (most room) then a (rotation 2);
    # pair 2 -> b c; then nobody has room: pairs 3 and 4 stay unassigned
    plan = assign(5, ["a", "b", "c"], overlap=2, per_annotator=2)
    assert plan.positions == {"a": [0, 1], "b": [0, 2], "c": [1, 2]}
    assert plan.covered == 3


def test_the_order_decides_which_pairs_a_capped_assignment_covers():
    plan = assign(4, ["a", "b"], overlap=1, per_annotator=1, order=[3, 1, 0, 2])
    assert plan.positions == {"a": [3], "b": [1]} and plan.covered == 2


def test_overlap_one_splits_the_sample():
    plan = assign(5, ["a", "b"])
    assert plan.positions == {"a": [0, 2, 4], "b": [1, 3]}


@pytest.mark.parametrize("kwargs, words", [
    ({"annotators": []}, "at least one annotator"),
    ({"annotators": ["a", "a"]}, "listed twice"),
    ({"annotators": ["a", "b"], "overlap": 3}, "between 1 and 2"),
    ({"annotators": ["a"], "overlap": 0}, "between 1 and 1"),
    ({"annotators": ["a"], "per_annotator": 0}, "at least 1"),
])
def test_bad_assignments_are_refused(kwargs, words):
    with pytest.raises(InputError, match=words):
        assign(3, **kwargs)


def test_headings_are_whole_lines_that_do_not_end_like_a_sentence():
    text = "# Scope\nBackground\nThe scope is wide. More\n| a | b |\nNote:"
    assert is_heading(text, 0, 7) and is_heading(text, 8, 18)
    s = text.index("The scope")
    assert not is_heading(text, s, s + len("The scope is wide."))
    m = text.index("More")
    assert not is_heading(text, m, m + 4)  # the end of a line, not the whole line
    t = text.index("| a")
    assert not is_heading(text, t, t + 9) and not is_heading(text, len(text) - 5, len(text))


def test_the_cursor_starts_on_the_first_sentence_with_a_query_term_that_is_no_heading():
    units = ["Solar power", "Wind is cheap.", "Solar panels age.", "Other."]
    headings = [True, False, False, False]
    hits = term_units(units, ["solar"], headings)
    assert hits == [2]  # "Solar power" is a heading: skipped
    assert first_cursor(headings, hits) == 2
    assert first_cursor(headings, term_units(units, ["tidal"], headings)) == 1  # no term: first non-heading
    assert first_cursor([True], []) == 0
    assert term_units(["solarium."], ["solar"]) == []  # whole words only, as the marks


# -- the query design: whole queries per SME -------------------------------------------------

QUERY_GROUPS = [[0, 1, 2], [3, 4], [5], [6, 7, 8, 9], [10]]  # Q0 .. Q4


def test_a_query_design_sample_is_handed_out_by_whole_queries_worked_by_hand():
    # The module docstring's example, step by step (loads in pairs, cap 5, overlap 2):
    # Q0 (3 pairs): a, b, c all at 0 -> rotation 0 -> a, b                 loads a3 b3 c0
    # Q1 (2): all have room; c has the fewest pairs, then a before b by rotation 2 -> c, a
    #                                                                        loads a5 b3 c2
    # Q2 (1): a is full -> b, c                                              loads a5 b4 c3
    # Q3 (4): b has 1 left, c 2: nobody has room for 4 -> assigned to nobody, not split
    # Q4 (1): b, c                                                           loads a5 b5 c4
    plan = assign_queries(QUERY_GROUPS, ["a", "b", "c"], overlap=2, per_annotator=5)
    assert plan.queries == {"a": [0, 1], "b": [0, 2, 4], "c": [1, 2, 4]}
    assert plan.positions == {"a": [0, 1, 2, 3, 4], "b": [0, 1, 2, 5, 10], "c": [3, 4, 5, 10]}
    assert (plan.queries_covered, plan.queries_total, plan.covered, plan.total) == (4, 5, 7, 11)


def test_every_pair_of_a_query_goes_to_the_same_annotators():
    plan = assign_queries(QUERY_GROUPS, ["a", "b", "c", "d"], overlap=2, order=[4, 2, 0, 3, 1])
    for group in QUERY_GROUPS:
        holders = [{a for a, ps in plan.positions.items() if p in ps} for p in group]
        assert all(h == holders[0] for h in holders) and len(holders[0]) == 2
    # uncapped, by fewest pairs then rotation: Q4 -> a b; Q2 -> c d; Q0 -> a b (a,b,c,d at 1; rotation 0);
    # Q3 -> c d (a, b at 4, c, d at 1); Q1 -> a b (a, b at 4, c, d at 5)
    assert plan.queries == {"a": [0, 1, 4], "b": [0, 1, 4], "c": [2, 3], "d": [2, 3]}
    assert (plan.covered, plan.queries_covered) == (11, 5)


def test_a_query_assignment_refuses_what_a_pair_assignment_refuses():
    with pytest.raises(InputError, match="between 1 and 2"):
        assign_queries(QUERY_GROUPS, ["a", "b"], overlap=3)
    with pytest.raises(InputError, match="two queries"):
        assign_queries([[0, 1], [1, 2]], ["a"])
    with pytest.raises(InputError, match="each of the 5 queries once"):
        assign_queries(QUERY_GROUPS, ["a"], order=[0, 1, 2, 3])
