"""``Project.judge_learn``: the learned judge from the Python API (``workbench judge learn``)."""

from __future__ import annotations

import pytest

from tests.support.calibration_project import build_project, label_all
from workbench.api import LearnedJudge, Project
from workbench.errors import ConfigError
from workbench.services.calibration import workflow as cal


def test_judge_learn_returns_the_operating_point_and_can_be_gated(tmp_path):
    path = tmp_path / "p.duckdb"
    db, truth = build_project(path, seed=3)
    cal.create_sample(db, "s", "p", size=200, seed=1, min_per_class=50)
    label_all(db, "s", truth, flip=0.1, seed=2)
    db.close()
    project = Project.open(path)
    learned = project.judge_learn("s", sources=["m1"], seed=2, dense=False)
    assert isinstance(learned, LearnedJudge) and learned.created
    assert learned.tuning == 50 and learned.graded == 360 and sum(learned.grade_counts.values()) == 360
    assert learned.rule in ("targets", "kappa") and 0 < learned.threshold < 1
    assert learned.seed == 2 and not any(f.startswith("cosine") for f in learned.features)
    assert learned.to_pandas().loc[0, "config"] == learned.config
    gate = project.gate("s", judge=learned.config)
    assert gate.judge == learned.config and gate.n == 150
    again = project.judge_learn("s", sources=["m1"], seed=2, dense=False)
    assert again.config == learned.config and not again.created
    with pytest.raises(ConfigError, match=r"sources=\['m1'\]"):
        project.judge_learn("s", sources="m1")
