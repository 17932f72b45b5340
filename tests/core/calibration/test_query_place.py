"""``query_places``: "query k of n · pair j of m of this query" from a sample's (position, query_id)
rows, checked on hand-worked layouts (contiguous as drawn, and interleaved)."""

from __future__ import annotations

import pytest

from workbench.core.calibration.query_place import QueryPlace, query_places


def test_contiguous_queries_as_drawn():
    rows = [(0, "qb"), (1, "qb"), (2, "qa"), (3, "qa"), (4, "qa"), (5, "qc")]
    places = query_places(rows)
    # qb comes first (position 0) although "qa" sorts before it: the drawn order, not the id order
    assert places[0] == QueryPlace("qb", 1, 3, 1, 2)
    assert places[1] == QueryPlace("qb", 1, 3, 2, 2)
    assert [places[p].pair for p in (2, 3, 4)] == [1, 2, 3] and {places[p].query for p in (2, 3, 4)} == {2}
    assert places[5] == QueryPlace("qc", 3, 3, 1, 1)
    assert places[4].words() == "query 2 of 3 · pair 3 of 3 of this query"


def test_interleaved_positions_still_number_consistently():
    rows = [(3, "x"), (0, "y"), (1, "x"), (2, "y")]  # unordered and interleaved
    places = query_places(rows)
    assert {p: (pl.query_id, pl.query, pl.pair, pl.pairs) for p, pl in places.items()} == {
        0: ("y", 1, 1, 2), 2: ("y", 1, 2, 2), 1: ("x", 2, 1, 2), 3: ("x", 2, 2, 2)}


def test_empty_and_duplicate_rows():
    assert query_places([]) == {}
    with pytest.raises(ValueError, match="position 1 appears twice"):
        query_places([(1, "a"), (1, "b")])
