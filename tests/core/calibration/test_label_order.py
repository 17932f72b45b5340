"""The Label queue's order (core.calibration.label_order) worked out by hand on small cases."""

from __future__ import annotations

from workbench.core.calibration.label_order import open_in_order


def test_open_pairs_after_the_position_first_then_wrapping_around_then_the_skipped():
    actions = {0: "label", 2: "skip", 3: "cant_judge", 5: "skip"}  # 1, 4, 6, 7 never answered
    assert open_in_order(8, actions, after=4, limit=8) == [6, 7, 1, 4, 5, 2]
    assert open_in_order(8, actions, after=-1, limit=8) == [1, 4, 6, 7, 2, 5]
    assert open_in_order(8, actions, after=7, limit=2) == [1, 4]


def test_besides_full_and_limit():
    assert open_in_order(5, {}, after=1, besides=2, limit=3) == [3, 4, 0]
    assert open_in_order(5, {}, after=-1, full={0, 1}, limit=5) == [2, 3, 4]
    assert open_in_order(5, {}, limit=0) == []


def test_nothing_open_or_an_empty_sample():
    assert open_in_order(3, {0: "label", 1: "label", 2: "cant_judge"}, limit=3) == []
    assert open_in_order(0, {}, limit=3) == []
    assert open_in_order(1, {0: "skip"}, after=0, besides=0) == []  # the only open pair is on screen
