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


def test_routing_says_which_guidelines_labels_were_given_under_and_assigns_whole_queries(cli, tmp_path):
    path = _project(tmp_path)
    db = ("--db", str(path))
    first, second = tmp_path / "v1.md", tmp_path / "v2.md"
    first.write_text("Grade 2: part of an answer.\n", encoding="utf-8")
    second.write_text("Grade 2: one sentence answers part.\n", encoding="utf-8")
    assert cli(*db, "calibrate", "guidelines", str(first), "--sample", "s").returncode == 0
    with Database(path) as handle:
        cal.save_label(handle, "s", "ann", 0, 1)
        cal.save_label(handle, "s", "bob", 1, 2)
    out = cli(*db, "calibrate", "routing", "--sample", "s")
    assert out.returncode == 0 and "changed mid-sample" not in out.stdout  # all under v1: nothing to say
    out = cli(*db, "calibrate", "guidelines", str(second), "--sample", "s")
    assert out.returncode == 0 and "version 2" in out.stdout
    with Database(path) as handle:
        cal.save_label(handle, "s", "bob", 2, 0)
        cal.create_sample(handle, "q", "p", design="queries", queries=3, seed=5)
    out = cli(*db, "calibrate", "routing", "--sample", "s")
    assert out.returncode == 0, out.stderr
    assert "the guidelines changed mid-sample" in out.stdout
    assert "labelled under guidelines v1: 2 labels (ann 1, bob 1)" in out.stdout
    assert "labelled under guidelines v2: 1 label (bob 1)" in out.stdout
    out = cli(*db, "calibrate", "assign", "q", "--annotators", "ann,bob", "--per-annotator", "24")
    # 3 queries of 12 pairs, one SME per pair, at most 24 pairs each. By hand: the 1st query to ann
    # (rotation 0), the 2nd to bob (fewer pairs), the 3rd to ann (both at 12; rotation 2 mod 2 = 0)
    assert out.returncode == 0, out.stderr
    assert "36 of 36 pairs assigned (in 3 of 3 whole queries" in out.stdout
    assert "ann: 24 pairs (2 whole queries)" in out.stdout and "bob: 12 pairs (1 whole query)" in out.stdout
