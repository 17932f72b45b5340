"""Annotator identity (trimmed, case-folded), the sample an SME was working on, labels per hour
of time on task (hand-worked), and the evidence field of ``export judgments``."""

from __future__ import annotations

import json

import pytest

from tests.support.calibration_project import build_project
from workbench.errors import InputError
from workbench.services.calibration import workflow as cal
from workbench.services.judge.export import KEYS, export_judgments


@pytest.fixture
def db(tmp_path):
    db, _ = build_project(tmp_path / "p.duckdb")
    cal.create_sample(db, "s", "p", seed=1)
    yield db
    db.close()


def test_an_annotator_id_is_one_person_whatever_its_case_and_spaces(db):
    assert cal.annotator_id("  SME-Anna ") == "sme-anna" == cal.annotator_id("sme-anna")
    cal.save_label(db, "s", "  SME-Anna ", 0, 1, seconds=2.0)
    cal.save_label(db, "s", "sme-ANNA", 1, 0, seconds=2.0)
    assert set(cal.my_states(db, "s", "Sme-Anna")) == {0, 1}
    assert db.query_all("SELECT DISTINCT assessor FROM judgments WHERE source = 'human'") == [("sme-anna",)]
    with pytest.raises(InputError):
        cal.save_label(db, "s", " Adjudication ", 2, 1)


def test_the_sample_an_sme_worked_on_is_the_one_they_labelled_last(db):
    cal.create_sample(db, "t", "p", seed=2)  # newer: listed first
    assert cal.list_samples(db)["name"].tolist()[0] == "t"
    assert cal.latest_sample(db, "ann") is None
    cal.save_label(db, "s", "ann", 3, 1)
    assert cal.latest_sample(db, "ANN") == "s"
    cal.skip(db, "t", "ann", 0)
    assert cal.latest_sample(db, "ann") == "t"


def test_labels_per_hour_of_time_on_task(db):
    for position, seconds in ((0, 2.0), (1, 4.0), (2, 6.0)):
        cal.save_label(db, "s", "ann", position, 1, seconds=seconds)
    cal.skip(db, "s", "ann", 3, seconds=3.0)
    cal.save_label(db, "s", "bob", 0, 0, seconds=10.0)
    cal.undo(db, "s", "ann")  # takes back the skip (its 3 s were spent); the undo itself is not time on task
    by = {t["annotator"]: t for t in cal.throughput(db, "s")}
    # ann: 3 labels, 2 + 4 + 6 + 3 = 15 s on task -> 3 / (15 / 3600) = 720 labels per hour
    assert by["ann"]["labels"] == 3 and by["ann"]["answers"] == 3  # the undone skip is no answer
    assert by["ann"]["hours"] == pytest.approx(15 / 3600)
    assert by["ann"]["labels_per_hour"] == pytest.approx(720.0)
    assert by["bob"]["labels_per_hour"] == pytest.approx(360.0)
    assert [t["annotator"] for t in cal.throughput(db, "s", "BOB")] == ["bob"]


def test_export_judgments_carries_the_evidence_spans(db, tmp_path):
    cal.save_label(db, "s", "ann", 0, 3, evidence=[[0, 5], [10, 20]])
    cal.save_label(db, "s", "ann", 1, 0)
    out = tmp_path / "j.jsonl"
    export_judgments(db, out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert "evidence" in KEYS and all(list(r) == list(KEYS) for r in rows)
    human = sorted((r["grade"], r["evidence"]) for r in rows if r["source"] == "human")
    assert human == [(0, []), (3, [[0, 5], [10, 20]])]
    assert {json.dumps(r["evidence"]) for r in rows if r["source"] == "llm"} == {"null"}
