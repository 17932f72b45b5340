"""``workbench calibrate activate|assign|guidelines|routing`` as real subprocesses: what is
stored, what is printed, and one clear line with exit 3 for bad input (nothing stored)."""

from __future__ import annotations

import hashlib
import json

from tests.support.calibration_project import build_project
from workbench.services.calibration import workflow as cal
from workbench.store.database import Database


def _project(tmp_path):
    path = tmp_path / "p.duckdb"
    db, _ = build_project(path)
    cal.create_sample(db, "s", "p", seed=1)
    cal.create_sample(db, "t", "p", seed=2)
    db.close()
    return path


def _meta(path) -> dict:
    db = Database(path, read_only=True)
    try:
        return dict(db.query_all("SELECT key, value FROM project_meta WHERE starts_with(key, 'calibration_')"))
    finally:
        db.close()


def test_the_lead_routes_a_sample_from_the_command_line(cli, tmp_path):
    path = _project(tmp_path)
    db = ("--db", str(path))
    out = cli(*db, "calibrate", "activate", "s")
    assert out.returncode == 0 and "active sample: 's'" in out.stdout
    out = cli(*db, "calibrate", "assign", "s", "--annotators", "Ann, bob,cid", "--overlap", "2",
              "--per-annotator", "30", "--format", "json")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    # 3 SMEs x 30 pairs / 2 per pair = 45 pairs covered
    assert plan["covered"] == 45 and {a: len(p) for a, p in plan["assigned"].items()} == {"ann": 30, "bob": 30,
                                                                                         "cid": 30}
    guide = tmp_path / "guide.md"
    guide.write_text("# Rules\n\nGrade 2 needs *one* sentence.\n", encoding="utf-8")
    out = cli(*db, "calibrate", "guidelines", str(guide))  # the active sample by default
    assert out.returncode == 0 and "stored with sample 's'" in out.stdout
    meta = _meta(path)
    assert meta["calibration_active_sample"] == "s"
    stored = json.loads(meta["calibration_guidelines:s"])
    assert stored["sha256"] == hashlib.sha256(guide.read_bytes()).hexdigest()
    assert json.loads(meta["calibration_routing:s"])["assigned"] == plan["assigned"]
    out = cli(*db, "calibrate", "routing")
    assert out.returncode == 0
    assert "ann: 0 of 30 answered, 30 open" in out.stdout and stored["sha256"][:12] in out.stdout
    out = cli(*db, "calibrate", "assign", "s", "--none")
    assert out.returncode == 0 and "calibration_routing:s" not in _meta(path)


def test_bad_routing_input_is_one_line_and_stores_nothing(cli, tmp_path):
    path = _project(tmp_path)
    db = ("--db", str(path))
    for args, words in ((("calibrate", "assign", "s", "--annotators", "ann,ANN"), "listed twice"),
                        (("calibrate", "assign", "s", "--annotators", "ann", "--overlap", "2"), "between 1 and 1"),
                        (("calibrate", "assign", "nope", "--annotators", "ann"), "no calibration sample named 'nope'"),
                        (("calibrate", "activate", "nope"), "no calibration sample named 'nope'"),
                        (("calibrate", "guidelines", str(tmp_path / "missing.md")), "no such file"),
                        (("calibrate", "activate"), "give the SAMPLE")):
        out = cli(*db, *args)
        assert out.returncode in (2, 3), (args, out.returncode)
        assert out.stderr.count("\n") == 1 and words in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert _meta(path) == {}
