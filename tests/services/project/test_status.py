"""The pipeline state rules of services.status, on real project databases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.services.ingest import import_file
from tests.support.templates import demo_project
from workbench.services.project.lifecycle import init_project, open_project, project_status
from workbench.services.qrels.rule import passed_judge_configurations
from workbench.store.calibration import judge_grades_for_sample
from workbench.store.chunks import read_chunks
from workbench.store.judgments import read_judgments
from workbench.store.pools import read_pool_pairs


def _states(status) -> dict[str, str]:
    return {s.key: s.state for s in status.steps}


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("status") / "demo.duckdb"
    demo_project(path)  # a copy of the worker's init --demo template
    return path


def test_empty_project(tmp_path):
    path = tmp_path / "empty.duckdb"
    init_project(path)
    with open_project(path) as db:
        status = project_status(db)
    assert _states(status) == {
        "corpus": "to do", "chunks": "to do", "runs": "to do", "pool": "to do", "judgments": "to do",
        "calibration": "to do", "qrels": "to do", "evaluation": "to do"}  # migration 9 stores evaluations
    assert status.next_step.key == "corpus"
    # A front end that offers no step for the corpus points further on, never at it.
    assert status.next_step_among({"runs"}).key == "runs"


def _labelled_pairs_by_hand(pairs, chunks, spans, min_overlap=0.5) -> int:
    """Oracle: a pool pair is labelled when one of its query's graded spans in the same document
    overlaps the chunk by >= min_overlap of the shorter of the two (plain loops)."""
    chunk_at = {c.chunk_id: (c.doc_id, int(c.start), int(c.end)) for c in chunks.itertuples(index=False)}
    by_query_doc: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for s in spans.itertuples(index=False):
        by_query_doc.setdefault((s.query_id, s.doc_id), []).append((int(s.start), int(s.end)))
    n = 0
    for p in pairs.itertuples(index=False):
        doc, c0, c1 = chunk_at[p.chunk_id]
        for s0, s1 in by_query_doc.get((p.query_id, doc), []):
            overlap = max(0, min(c1, s1) - max(c0, s0))
            shorter = min(c1 - c0, s1 - s0)
            if shorter > 0 and overlap >= min_overlap * shorter:
                n += 1
                break
    return n


def test_demo_states_and_qrels_count_against_a_hand_count(demo):
    with open_project(demo) as db:
        status = project_status(db)
        pairs = read_pool_pairs(db, "demo")
        chunks = read_chunks(db, "sections")
        spans = read_judgments(db, status="ok")
    states = _states(status)
    assert states["corpus"] == states["chunks"] == states["runs"] == states["pool"] == "done"
    assert states["judgments"] == "to do"  # no LLM label in the demo
    qrels = next(s for s in status.steps if s.key == "qrels")
    expected = _labelled_pairs_by_hand(pairs, chunks, spans)
    assert 0 < expected < len(pairs)
    assert qrels.count == expected and qrels.state == "partial"
    assert f"{expected:,} of {len(pairs):,} pairs labelled" in qrels.detail
    chunk_step = next(s for s in status.steps if s.key == "chunks")
    assert chunk_step.count == 1 and "279 chunks over 41 of 41 documents" in chunk_step.detail
    assert status.warnings == []


def test_imported_labels_alone_do_not_make_qrels_done(tmp_path):
    path = tmp_path / "p.duckdb"
    init_project(path)
    (tmp_path / "c.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": f"text {i}"}) + "\n" for i in range(3)))
    (tmp_path / "q.tsv").write_text("q1\tquery\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d0 2\nq1 0 d1 0\n")
    with open_project(path) as db:
        for kind, name in (("corpus", "c.jsonl"), ("queries", "q.tsv"), ("qrels", "qrels.txt")):
            import_file(db, kind, tmp_path / name)
        status = project_status(db)
    qrels = next(s for s in status.steps if s.key == "qrels")
    assert qrels.state == "to do" and "2 labels outside any pool" in qrels.detail
    assert _states(status)["corpus"] == "done"


def test_documents_imported_later_are_flagged_for_runs_made_before(demo, tmp_path):
    import shutil

    path = tmp_path / "later.duckdb"
    shutil.copy(demo, path)
    extra = tmp_path / "more.jsonl"
    extra.write_text("".join(json.dumps({"_id": f"new-{i}", "text": f"## New\nnew text {i}"}) + "\n" for i in range(4)))
    with open_project(path) as db:
        import_file(db, "corpus", extra)
        status = project_status(db)
        covered = int(read_chunks(db, "sections")["doc_id"].nunique())
    run = status.runs.set_index("name").loc["bm25"]
    assert int(run["documents"]) == 41 and int(run["total_documents"]) == 45 and not run["complete"]
    assert any("run bm25 covers 41 of 45 documents" in w for w in status.warnings)
    assert _states(status)["runs"] == "partial"
    chunking = status.chunkings.set_index("name").loc["sections"]
    assert int(chunking["documents"]) == covered  # whatever the import did, the count is the truth
    assert bool(chunking["complete"]) == (covered == 45)


def test_calibration_and_qrels_follow_the_sme_labelling_of_a_sample(demo, tmp_path, cli, monkeypatch):
    """Judge the demo pool offline, draw a calibration sample, label its held-out part."""
    import shutil

    from workbench.services.calibration import workflow as calibration
    from workbench.store.calibration import read_sample_items

    path = tmp_path / "calib.duckdb"
    shutil.copy(demo, path)
    judged = cli("--db", str(path), "judge", "--pool", "demo", "--model", "offline-lexical")
    assert judged.returncode == 0, judged.stderr
    with open_project(path) as db:
        states = _states(project_status(db))
        assert states["judgments"] == "done" and states["calibration"] == "to do"
        # LLM labels do not count for qrels before calibration.
        assert states["qrels"] == "partial"
        # large enough for the gate (≥ 100 held-out pairs, ≥ 30 per class)
        calibration.create_sample(db, "s1", "demo", size=200, seed=3, min_per_class=50)
        items = read_sample_items(db, "s1")
        assert _states(project_status(db))["calibration"] == "partial"
        holdout = items.loc[items["part"] == "holdout", "position"].tolist()
        # The SME grades every held-out pair as the judge did.
        judge = judge_grades_for_sample(db, "s1").set_index("position")["grade"]
        for position in holdout[:-1]:
            calibration.save_label(db, "s1", "sme-a", int(position), int(judge[position]))
        step = next(s for s in project_status(db).steps if s.key == "calibration")
        assert step.state == "partial" and f"{len(holdout) - 1} of {len(holdout)} held-out" in step.detail
        calibration.save_label(db, "s1", "sme-a", int(holdout[-1]), int(judge[holdout[-1]]))
        states = _states(project_status(db))
        assert states["calibration"] == "done"
        # Full agreement on a sample drawn with >= 50 pairs per class: the gate counts pairs (not
        # weighted shares), so both classes clear their minimum and the judge passes; its labels
        # now count for the qrels, and status says every pool pair has one.
        assert calibration.gate(db, "s1")["gate"]["verdict"] == "pass"
        assert len(passed_judge_configurations(db)) == 1
        qrels = next(s for s in project_status(db).steps if s.key == "qrels")
        assert qrels.state == "done" and "880 of 880" in qrels.detail
    # The user opts in to every judge's labels (the qrels policy): now every pool pair has one.
    monkeypatch.setenv("WORKBENCH_QRELS_LLM_LABELS", "all")
    with open_project(path) as db:
        assert _states(project_status(db))["qrels"] == "done"


def test_qrels_step_leaves_out_llm_labels_of_a_judge_that_failed_the_gate(demo, tmp_path, cli, monkeypatch):
    """Calibration done but the SME disagrees with the judge: the gate fails, so status counts
    LLM labels exactly as the qrels service does (not at all), and says why."""
    import shutil

    from workbench.services.calibration import workflow as calibration
    from workbench.store.calibration import read_sample_items

    path = tmp_path / "failed.duckdb"
    shutil.copy(demo, path)
    assert cli("--db", str(path), "judge", "--pool", "demo", "--model", "offline-lexical").returncode == 0
    with open_project(path) as db:
        before = next(s for s in project_status(db).steps if s.key == "qrels")
        calibration.create_sample(db, "s1", "demo", size=100, seed=3, min_per_class=10)
        items = read_sample_items(db, "s1")
        judge = judge_grades_for_sample(db, "s1").set_index("position")["grade"]
        for position in items.loc[items["part"] == "holdout", "position"]:
            calibration.save_label(db, "s1", "sme-a", int(position), 3 - int(judge[position]))  # the opposite
        status = project_status(db)
        assert _states(status)["calibration"] == "done"
        assert calibration.gate(db, "s1")["gate"]["verdict"] == "fail"
        assert passed_judge_configurations(db) == ()
        qrels = next(s for s in status.steps if s.key == "qrels")
        assert qrels.state == "partial" and qrels.count > before.count  # the SME's labels count...
        assert "LLM labels count once their judge passes the calibration gate" in qrels.detail
    with monkeypatch.context() as env:  # ...and only they: the same count as with no LLM labels at all
        env.setenv("WORKBENCH_QRELS_LLM_LABELS", "none")
        with open_project(path) as db:
            assert next(s for s in project_status(db).steps if s.key == "qrels").count == qrels.count
