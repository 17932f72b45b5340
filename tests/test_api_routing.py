"""The Python API's routing calls (issue 34): active sample, assignment, guidelines; the same
rules as the CLI (label() refuses pairs not assigned to the annotator)."""

from __future__ import annotations

import pytest

from tests.support.calibration_project import build_project
from workbench.api import Project
from workbench.errors import InputError
from workbench.services.calibration import workflow as cal


def test_the_api_routes_a_sample(tmp_path):
    path = tmp_path / "p.duckdb"
    db, _ = build_project(path)
    cal.create_sample(db, "s", "p", seed=1)
    db.close()
    project = Project(path)
    assert project.activate_sample("s") == "s"
    assigned = project.assign("s", ["ann", "bob"], overlap=1, per_annotator=3, seed=5)
    assert {a: len(p) for a, p in assigned.items()} == {"ann": 3, "bob": 3}
    assert not set(assigned["ann"]) & set(assigned["bob"])
    assert project.label("s", {assigned["ann"][0]: 1}, annotator="ann") == 1
    with pytest.raises(InputError, match="not assigned to ann"):
        project.label("s", {assigned["bob"][0]: 1}, annotator="ann")
    with pytest.raises(Exception, match="annotators"):
        project.assign("s", "ann")  # a string, not a list of ids
    guide = tmp_path / "g.md"
    guide.write_text("Grade 2: one sentence answers part.\n", encoding="utf-8")
    import hashlib

    assert project.set_guidelines("s", guide) == hashlib.sha256(guide.read_bytes()).hexdigest()
