"""Deleting a run or a pool leaves nothing a new item of the same name would inherit: a run's
latencies, a pool's judge jobs and calibration samples go with it (listed first, one
transaction); a pool whose calibration sample holds SME grades is refused, nothing deleted."""

from __future__ import annotations

import pytest

from tests.support.calibration_project import build_project
from tests.support.retrieval_fixtures import write_corpus
from workbench.errors import InputError
from workbench.services.calibration import workflow as cal
from workbench.services.chunking import create_chunking
from workbench.services.project.deletion import delete, plan_deletion
from workbench.services.ingest import import_file
from workbench.services.retrieval.runs import run_bm25
from workbench.services.retrieval.latency import import_latencies, latency_summary
from workbench.store.database import Database
from workbench.store.judging import create_job, find_job
from workbench.store.pools import create_pool


def _job(db, pool: str) -> int:
    with db.transaction() as tx:
        return create_job(tx, pool=pool, judge="offline", model="m1", base_url=None, prompt_id="p",
                          prompt_hash="h", params={}, samples=1, aggregate="majority", config_key="k",
                          budget_usd=None)


def test_a_deleted_runs_latencies_go_with_it_so_a_new_run_of_that_name_has_none(db_path, tmp_path):
    db = Database(db_path)
    write_corpus(db)
    create_chunking(db, "fixed", "fixed", size=20, overlap=5)
    run_bm25(db, "fixed", "bm25", k=10)
    sidecar = tmp_path / "lat.jsonl"
    sidecar.write_text('{"query_id": "q1", "latency_ms": 999}\n{"query_id": "q2", "latency_ms": 998}\n')
    import_latencies(db, "bm25", sidecar)
    plan = plan_deletion(db, "run", "bm25")
    assert plan.rows["run latencies"] == 2
    assert "  2 run latencies" in plan.lines()
    delete(db, "run", "bm25", expected=plan)
    assert db.query_value("SELECT count(*) FROM run_latencies WHERE run = 'bm25'") == 0
    # a run imported under the freed name carries no latency of the old one
    run = tmp_path / "bm25.run"
    run.write_text("q1 Q0 cats 1 2.0 x\n")
    import_file(db, "run", run)
    assert latency_summary(db, ["bm25"]).empty
    db.close()


@pytest.fixture
def judged(db_path):
    db, truth = build_project(db_path)
    yield db, truth
    db.close()


def test_deleting_a_pool_lists_and_removes_its_judge_jobs_and_unlabelled_samples(judged):
    db, _ = judged
    job = _job(db, "p")
    cal.create_sample(db, "p-seed0", "p", seed=0)
    items = db.query_value("SELECT count(*) FROM calibration_items WHERE sample = 'p-seed0'")
    answers = db.query_value("SELECT count(*) FROM judge_samples")
    labels = db.query_value("SELECT count(*) FROM judgments")
    plan = plan_deletion(db, "pool", "p")
    assert plan.judge_jobs == [job] and plan.calibration_samples == ["p-seed0"]
    lines = plan.lines()
    assert f"  judge job: {job}" in lines and "  calibration sample: p-seed0" in lines
    assert f"  {items:,} calibration items" in lines
    delete(db, "pool", "p", expected=plan)
    for table, where in (("judge_jobs", "pool = 'p'"), ("calibration_samples", "pool = 'p'"),
                         ("calibration_items", "sample = 'p-seed0'")):
        assert db.query_value(f"SELECT count(*) FROM {table} WHERE {where}") == 0, table
    assert db.query_value("SELECT count(*) FROM judgments") == labels
    assert db.query_value("SELECT count(*) FROM judge_samples") == answers
    # a new pool of the same name starts clean: no job to resume, the sample name is free
    with db.transaction() as tx:
        create_pool(tx, "p", level="doc", chunking=None, depth=5, runs=["r"])
    assert find_job(db, "p", "k") is None
    assert db.query_value("SELECT count(*) FROM calibration_samples WHERE name = 'p-seed0'") == 0


def test_a_pool_whose_sample_holds_sme_grades_is_refused_and_nothing_is_deleted(judged):
    db, truth = judged
    _job(db, "p")
    cal.create_sample(db, "p-seed0", "p", seed=0)
    item = db.query_df("SELECT position, query_id, doc_id FROM calibration_items WHERE sample = 'p-seed0' "
                       "ORDER BY position LIMIT 2")
    for row in item.itertuples():
        cal.save_label(db, "p-seed0", "ann", int(row.position), truth[(row.query_id, row.doc_id)], seconds=2.0)
    before = {t: db.query_value(f"SELECT count(*) FROM {t}") for t in
              ("pools", "pool_pairs", "judge_jobs", "calibration_samples", "calibration_items", "label_events")}
    plan = plan_deletion(db, "pool", "p")
    assert plan.labelled_samples == {"p-seed0": 2}
    with pytest.raises(InputError, match=r"calibration sample 'p-seed0' of pool p holds 2 SME grades.*"
                                         r"nothing was deleted"):
        delete(db, "pool", "p")
    assert {t: db.query_value(f"SELECT count(*) FROM {t}") for t in before} == before


def test_the_delete_command_refuses_a_pool_with_sme_grades_in_one_line(judged, db_path, cli):
    db, truth = judged
    cal.create_sample(db, "p-seed0", "p", seed=0)
    row = db.query_df("SELECT position, query_id, doc_id FROM calibration_items WHERE sample = 'p-seed0' LIMIT 1")
    cal.save_label(db, "p-seed0", "ann", int(row["position"][0]), truth[(row["query_id"][0], row["doc_id"][0])])
    db.close()
    out = cli("--db", str(db_path), "delete", "pool", "p", "--yes")
    assert out.returncode == 3
    assert "1 SME grades" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
