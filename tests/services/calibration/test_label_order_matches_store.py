"""labelling_view's queue, worked out in Python from the annotator's answers, must be the order
store.next_open_positions gives by SQL: the same pairs in the same order after random label,
skip, can't judge and undo events of several annotators, with and without an overlap."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.calibration_project import build_project
from workbench.services.calibration import workflow as cal
from workbench.store import calibration as store


@pytest.fixture
def project(db_path):
    db, _ = build_project(db_path)
    cal.create_sample(db, "s", "p", size=100, seed=3)
    yield db
    db.close()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_queue_is_the_store_order(project, seed):
    db = project
    rng = np.random.default_rng(seed)
    total = store.count_items(db, "s")
    for _ in range(150):  # ann, bob and cy answer at random
        who = str(rng.choice(["ann", "bob", "cy"]))
        position = int(rng.integers(total))
        act = rng.random()
        if act < 0.45:
            cal.save_label(db, "s", who, position, int(rng.integers(2)))
        elif act < 0.65:
            cal.skip(db, "s", who, position)
        elif act < 0.8:
            cal.cant_judge(db, "s", who, position)
        else:
            cal.undo(db, "s", who)
    checked = 0
    for overlap in (None, 1, 2):
        for after in (-1, 0, 7, total - 1):
            expected = store.next_open_positions(db, "s", "ann", after=after, overlap=overlap, limit=total)
            view = cal.labelling_view(db, "s", "ann", after=after, overlap=overlap, depth=total)
            assert view["position"] == (expected[0] if expected else None)
            if view["position"] is not None:
                ahead = store.next_open_positions(db, "s", "ann", after=view["position"], overlap=overlap,
                                                  besides=view["position"], limit=total)
                assert view["ahead"] == ahead and view["next"] == (ahead[0] if ahead else None)
                checked += len(ahead)
    assert checked > 50  # the comparison covered real queues, not empty ones
