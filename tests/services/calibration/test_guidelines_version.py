"""Each label event records the SHA-256 of the labelling guidelines in force (issue 34): every
label path (one label, skip / can't judge, a batch of grades, an adjudication, an undo, the
Label page's kept answers), shown as "labelled under guidelines v<n>" where the guidelines
changed mid-sample (routing summary, adjudication view) and exported with the judgments."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.support.calibration_project import build_project
from workbench.errors import InputError
from workbench.services.calibration import guidelines as guide
from workbench.services.calibration import pending
from workbench.services.calibration import workflow as cal
from workbench.services.judge.export import export_judgments
from workbench.store.database import Database

V1, V2 = "# Grading\n\nGrade 2: part of an answer.\n", "# Grading\n\nGrade 2: one sentence answers part.\n"
SHA1, SHA2 = (hashlib.sha256(t.encode()).hexdigest() for t in (V1, V2))


@pytest.fixture
def path(tmp_path):
    p = tmp_path / "p.duckdb"
    db, _ = build_project(p)
    cal.create_sample(db, "s", "p", seed=1)
    db.close()
    return p


def _events(db, annotator=None) -> list[tuple]:
    """(position, annotator, action, guidelines_sha256) of every event, in order."""
    rows = db.query_all("SELECT position, annotator, action, guidelines_sha256 FROM label_events ORDER BY event_id")
    return [r for r in rows if annotator is None or r[1] == annotator]


def test_every_label_path_records_the_guidelines_in_force(path):
    with Database(path) as db:
        cal.save_label(db, "s", "ann", 0, 1)  # before any guidelines
        guide.set_guidelines(db, "s", V1)
        cal.save_label(db, "s", "ann", 1, 0)
        cal.cant_judge(db, "s", "ann", 2)
        cal.skip(db, "s", "bob", 0)
        guide.set_guidelines(db, "s", V2)
        cal.save_labels(db, "s", "bob", {1: 3, 2: 0})  # a batch of grades (a label file, the API)
        cal.save_label(db, "s", "ann", 1, 3)  # ann re-grades pair 2 under v2 ...
        cal.undo(db, "s", "ann")  # ... and undoes it: her v1 label of it is back, with its version
        assert _events(db) == [
            (0, "ann", "label", None), (1, "ann", "label", SHA1), (2, "ann", "cant_judge", SHA1),
            (0, "bob", "skip", SHA1), (1, "bob", "label", SHA2), (2, "bob", "label", SHA2),
            (1, "ann", "label", SHA2), (1, "ann", "label", SHA1)]
        # pair 2: ann 0 (v1) against bob 3 (v2): a disagreement the lead resolves under v2
        cal.adjudicate(db, "s", 1, 2, lead="lea")
        assert _events(db, "adjudication") == [(1, "adjudication", "label", SHA2)]


def test_a_kept_answer_records_the_version_its_card_showed(path):
    with Database(path) as db:
        guide.set_guidelines(db, "s", V1)
    # The card showed v1; the lead sets v2 before the answer is stored: it was given under v1.
    shown = cal.keep_answer(path, sample="s", annotator="ann", action="label", position=0, grade=1,
                            guidelines_sha256=SHA1)
    older = cal.keep_answer(path, sample="s", annotator="ann", action="skip", position=1)  # no version kept
    none = cal.keep_answer(path, sample="s", annotator="ann", action="label", position=2, grade=0,
                           guidelines_sha256=None)  # the card showed no guidelines
    assert json.loads(pending.encode(shown))["guidelines_sha256"] == SHA1
    assert "guidelines_sha256" not in json.loads(pending.encode(older))
    assert json.loads(pending.encode(none))["guidelines_sha256"] is None  # kept as "none shown"
    with Database(path) as db:
        guide.set_guidelines(db, "s", V2)
        cal.drain_kept(db)
        assert _events(db) == [(0, "ann", "label", SHA1), (1, "ann", "skip", SHA2), (2, "ann", "label", None)]
    with pytest.raises(InputError, match="not a SHA-256"):
        cal.keep_answer(path, sample="s", annotator="ann", action="label", position=3, grade=1,
                        guidelines_sha256="v1")


def test_labels_under_two_versions_are_shown_as_such(path, tmp_path):
    with Database(path) as db:
        cal.save_label(db, "s", "ann", 0, 0)  # no guidelines yet
        under = guide.labelled_under(db, "s")
        assert not under["changed"] and under["by_version"][0]["words"] == "no guidelines"
        guide.set_guidelines(db, "s", V1)
        cal.save_label(db, "s", "bob", 0, 3)
        cal.save_label(db, "s", "ann", 1, 1)
        guide.set_guidelines(db, "s", V2)
        cal.save_label(db, "s", "bob", 1, 2)
        cal.save_label(db, "s", "cid", 1, 2)
        under = guide.labelled_under(db, "s")
        # current labels: ann p1 none, bob p1 v1, ann p2 v1, bob p2 v2, cid p2 v2
        assert under["changed"] and [v["version"] for v in under["versions"]] == [1, 2]
        assert [(g["words"], g["labels"], g["annotators"]) for g in under["by_version"]] == [
            ("no guidelines", 1, {"ann": 1}), ("v1", 2, {"ann": 1, "bob": 1}), ("v2", 2, {"bob": 1, "cid": 1})]
        found = {d["position"]: d for d in cal.sme_disagreements(db, "s")}
        assert found[0]["guidelines"] == {"ann": "no guidelines", "bob": "v1"}
        assert found[1]["guidelines"] == {"ann": "v1", "bob": "v2", "cid": "v2"}
        out = tmp_path / "j.jsonl"
        export_judgments(db, out, source="human")
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert sorted((r["assessor"], r["grade"], r["guidelines_sha256"]) for r in rows) == sorted([
            ("ann", 0, None), ("bob", 3, SHA1), ("ann", 1, SHA1), ("bob", 2, SHA2), ("cid", 2, SHA2)])


def test_labels_under_one_version_show_no_version(path):
    with Database(path) as db:
        guide.set_guidelines(db, "s", V1)
        cal.save_label(db, "s", "ann", 0, 0)
        cal.save_label(db, "s", "bob", 0, 3)
        guide.set_guidelines(db, "s", V2)  # changed, but no label was given under v2
        assert not guide.labelled_under(db, "s")["changed"]
        assert cal.sme_disagreements(db, "s")[0]["guidelines"] == {}
        assert guide.version_of(guide.guidelines(db, "s"), SHA1) == 1
