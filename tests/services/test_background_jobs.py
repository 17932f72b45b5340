"""Background jobs (workbench/services/jobs): a page's long work in its own process, followed
through its row, stopped by a signal, resumed or restarted; the project is held only inside each
unit of work, so the app and other commands write while a job computes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.support.polling import wait_until
from workbench.errors import InputError, StoreError
from workbench.services import jobs
from workbench.store.brief import BriefDatabase
from workbench.store.database import Database


def _wait_done(db, job_id, timeout=180.0) -> dict:
    return wait_until(lambda: (j := jobs.job(db, job_id))["state"] not in jobs.ACTIVE and j,
                      timeout=timeout, what=lambda: f"job {job_id} to end: {jobs.job(db, job_id)}")


def test_requests_round_trip_as_json_and_unknown_kinds_are_refused():
    for request in (jobs.ChunkRequest("c", "fixed", 300, 0), jobs.DenseRequest("c", "d", 10, None),
                    jobs.HybridRequest("h", ("a", "b"), 10, 60.0, {"a": 1.0, "b": 0.5}),
                    jobs.PoolRequest("p", ("a",), 5), jobs.SweepRequest(("fixed:64",), ("bm25",), ("ndcg@10",))):
        assert jobs.request_from_data(jobs.request_data(request)) == request
    with pytest.raises(InputError, match="unknown background job kind"):
        jobs.request_from_data({"kind": "nope"})
    with pytest.raises(InputError, match="no field colour"):
        jobs.request_from_data({"kind": "chunk", "name": "x", "strategy": "fixed", "colour": 1})


def test_a_chunking_job_runs_in_its_own_process_and_stores_what_the_service_stores(demo_project):
    launch = jobs.start(demo_project, jobs.ChunkRequest("bg", "fixed", 300))
    assert launch.pid != os.getpid()
    row = _wait_done(demo_project, launch.job_id)
    assert row["state"] == "finished", row
    with Database(demo_project) as db:
        documents = db.query_value("SELECT count(*) FROM documents")
        chunks = db.query_value("SELECT count(*) FROM chunks WHERE chunking = 'bg'")
        # fixed windows of 300 characters without overlap: ceil(len / 300) per document
        expected = db.query_value("SELECT sum(ceil(length(text) / 300.0))::BIGINT FROM documents")
    assert chunks == expected == row["result"]["chunks"]
    assert (row["phase"], row["done"], row["total"], row["unit"]) == ("chunk bg", documents, documents, "doc")
    assert row["attempt"] == 1 and row["finished_at"] is not None and not row["alive"]


def test_a_failing_request_ends_failed_with_the_error_as_data(demo_project):
    first = jobs.start(demo_project, jobs.ChunkRequest("twice", "fixed", 300))
    assert _wait_done(demo_project, first.job_id)["state"] == "finished"
    again = jobs.start(demo_project, jobs.ChunkRequest("twice", "fixed", 500))
    row = _wait_done(demo_project, again.job_id)
    assert row["state"] == "failed"
    assert isinstance(row["error"], StoreError | InputError) and "twice" in str(row["error"])
    with Database(demo_project) as db:  # the first chunking is untouched
        assert db.query_value("SELECT params->>'size' FROM chunkings WHERE name = 'twice'") == "300"


def test_the_project_is_free_between_the_units_of_a_brief_database(demo_project):
    brief = BriefDatabase(demo_project, wait=5)
    assert brief.query_value("SELECT count(*) FROM documents") > 0
    cur = brief.cursor()
    cur.execute("SELECT 1").fetchall()
    cur.close()
    with brief.transaction() as tx:
        tx.execute("CREATE TABLE brief_probe (x INTEGER)")
    # Another process opens the file at once (wait 0): nothing is held between units.
    code = ("import sys; from workbench.store.database import Database\n"
            "with Database(sys.argv[1], wait=0) as db:\n"
            "    with db.transaction() as tx: tx.execute('INSERT INTO brief_probe VALUES (1)')\n")
    subprocess.run([sys.executable, "-c", code, str(demo_project)], check=True, timeout=60)
    assert brief.query_value("SELECT count(*) FROM brief_probe") == 1


def test_a_job_process_gone_reads_interrupted_and_stop_marks_it_stopped(demo_project):
    launch = jobs.start(demo_project, jobs.ChunkRequest("killed", "sentences", 1))
    os.kill(launch.pid, signal.SIGKILL)
    row = wait_until(lambda: (j := jobs.job(demo_project, launch.job_id))["state"] == "interrupted" and j,
                     timeout=30, what="the killed job to read interrupted")
    assert not row["alive"]
    assert jobs.stop(demo_project, launch.job_id)["state"] == "stopped"
    relaunch = jobs.resume(demo_project, launch.job_id)  # not resumable: it starts again and finishes
    row = _wait_done(demo_project, relaunch.job_id)
    # attempt 1 or 2: the kill may come before the first process marked the row running
    assert row["state"] == "finished" and row["attempt"] in (1, 2), row
    with pytest.raises(InputError, match="has finished"):
        jobs.resume(demo_project, launch.job_id)


@pytest.fixture(scope="module")
def dense_model():
    try:
        from workbench.retrieval.dense import load_encoder

        return load_encoder()
    except Exception as exc:  # noqa: BLE001 - a missing optional dependency
        pytest.skip(f"the offline dense model cannot be loaded ({exc})")


def test_a_dense_job_stops_on_a_signal_leaves_the_file_free_and_resumes(demo_project, dense_model):
    from workbench.services.chunking import create_chunking

    with Database(demo_project) as db:
        create_chunking(db, "small", "fixed", size=120)
        chunks = db.query_value("SELECT count(*) FROM chunks WHERE chunking = 'small'")
    launch = jobs.start(demo_project, jobs.DenseRequest("small", "dense-bg", 10))
    wait_until(lambda: (j := jobs.job(demo_project, launch.job_id))["phase"] == "encode small" and j["done"] > 0,
               timeout=180, what=lambda: f"the job to encode: {jobs.job(demo_project, launch.job_id)}")
    # While the job computes, another process writes to the project without waiting.
    code = ("import sys; from workbench.store.database import Database\n"
            "with Database(sys.argv[1], wait=3) as db:\n"
            "    with db.transaction() as tx: tx.execute('CREATE TABLE written_meanwhile (x INTEGER)')\n")
    subprocess.run([sys.executable, "-c", code, str(demo_project)], check=True, timeout=60)
    stopped = jobs.stop(demo_project, launch.job_id)
    assert stopped["state"] in ("stopping", "stopped")
    row = _wait_done(demo_project, launch.job_id, timeout=60)
    assert row["state"] == "stopped" and "resume" in row["message"], row
    with Database(demo_project) as db:
        assert db.query_value("SELECT count(*) FROM runs WHERE name = 'dense-bg'") == 0
    again = jobs.resume(demo_project, launch.job_id)
    row = _wait_done(demo_project, again.job_id)
    assert (row["state"], row["attempt"]) == ("finished", 2), row
    assert row["result"]["stats"]["chunks"] == chunks
    with Database(demo_project) as db:
        queries = db.query_value("SELECT count(*) FROM queries")
        assert db.query_value("SELECT count(DISTINCT query_id) FROM run_rows WHERE run = 'dense-bg'") == queries


def test_a_stop_while_the_job_process_starts_ends_it_stopped_and_restart_runs_it(demo_project):
    """Stop at once after the start: the job's process is still starting (importing, about 0.5 s
    on an idle machine, seconds on a busy one) and has no SIGTERM handler yet. Before the fix,
    stop sent SIGTERM anyway, its default action killed the process and the row, left
    ``stopping`` with no process, read ``interrupted`` instead of ``stopped`` (the jobs panel of
    the browser test then never said "stopped"). Now a queued job is only marked ``stopping`` and
    its process ends it ``stopped`` when it reads the row; a job that got as far as ``running``
    is signalled and ends ``stopped`` too, so either way the row ends ``stopped``, attempt 1."""
    launch = jobs.start(demo_project, jobs.ChunkRequest("early", "fixed", 300))
    assert jobs.stop(demo_project, launch.job_id)["state"] == "stopping"
    row = _wait_done(demo_project, launch.job_id)
    assert (row["state"], row["attempt"]) == ("stopped", 1), row
    assert row["message"].endswith("; restart it to run it again") and row["finished_at"] is not None, row
    with Database(demo_project) as db:  # nothing of the job was stored
        assert db.query_value("SELECT count(*) FROM chunkings WHERE name = 'early'") == 0
    again = jobs.resume(demo_project, launch.job_id)
    row = _wait_done(demo_project, again.job_id)
    assert (row["state"], row["attempt"], row["message"]) == ("finished", 2, None), row
    with Database(demo_project) as db:
        assert db.query_value("SELECT count(*) FROM chunks WHERE chunking = 'early'") == row["result"]["chunks"] > 0


def test_a_job_process_that_finds_its_row_stopping_ends_it_stopped_without_running(demo_project):
    """The process's side of a Stop made while the job was queued, with no timing involved: the
    row says ``stopping`` when the process reads it, so the process runs nothing and ends the
    attempt ``stopped`` (exit code 130)."""
    from workbench.services.jobs.launch import command
    from workbench.store import background_jobs as store

    with Database(demo_project) as db, db.transaction() as tx:
        job_id = store.create_job(tx, "chunk", jobs.request_data(jobs.ChunkRequest("held", "fixed", 300)))
        store.update_job(tx, job_id, state="stopping")
    done = subprocess.run(command(demo_project, job_id), capture_output=True, text=True, timeout=120)
    assert done.returncode == 130 and "stopped before it began" in done.stderr, done.stderr
    row = jobs.job(demo_project, job_id)
    assert (row["state"], row["attempt"], row["message"]) == \
        ("stopped", 1, "stopped before it began; restart it to run it again"), row
    assert row["started_at"] is not None and row["finished_at"] is not None
    with Database(demo_project) as db:
        assert db.query_value("SELECT count(*) FROM chunkings WHERE name = 'held'") == 0


def test_stop_signals_only_a_live_job_and_waits_for_nothing(demo_project):
    launch = jobs.start(demo_project, jobs.ChunkRequest("quick", "fixed", 300))
    _wait_done(demo_project, launch.job_id)
    started = time.monotonic()
    assert jobs.stop(demo_project, launch.job_id)["state"] == "finished"  # a finished job stays finished
    assert time.monotonic() - started < 10


def test_a_second_process_for_a_running_job_leaves_it_alone(demo_project):
    """Two Resumes at once start two processes for one row: the job runs once."""
    from workbench.services.jobs.launch import command

    launch = jobs.start(demo_project, jobs.ChunkRequest("once", "sentences", 1))
    wait_until(lambda: jobs.job(demo_project, launch.job_id)["state"] == "running", timeout=120,
               what="the job to run")
    second = subprocess.run(command(demo_project, launch.job_id), capture_output=True, text=True, timeout=120)
    # on a busy machine the first may finish before the second has started: then it says so
    assert second.returncode == 0 and (f"already runs in process {launch.pid}" in second.stderr
                                       or "has finished already" in second.stderr), second.stderr
    row = _wait_done(demo_project, launch.job_id)
    assert (row["state"], row["attempt"], row["error"]) == ("finished", 1, None)


def test_a_resume_after_the_job_finished_runs_nothing_again(demo_project):
    """A second Resume that comes once the job has finished leaves the finished row as it is (the
    old process ran the job again: a chunking that exists already, so the row ended failed)."""
    from workbench.services.jobs.launch import command

    launch = jobs.start(demo_project, jobs.ChunkRequest("late", "fixed", 300))
    assert _wait_done(demo_project, launch.job_id)["state"] == "finished"
    late = subprocess.run(command(demo_project, launch.job_id), capture_output=True, text=True, timeout=120)
    assert late.returncode == 0 and "has finished already" in late.stderr, late.stderr
    row = jobs.job(demo_project, launch.job_id)
    assert (row["state"], row["attempt"], row["error"]) == ("finished", 1, None)


def test_an_import_job_reads_only_the_data_folders_or_an_upload_folder(demo_project, tmp_path, monkeypatch):
    """The job's process is the local operator: it applies the page's rule on server paths again
    ([app] data_dirs), and an "upload" request reads only an upload folder the app made."""
    inside, outside = tmp_path / "data", tmp_path / "elsewhere"
    inside.mkdir()
    outside.mkdir()
    for folder in (inside, outside):
        (folder / "q.tsv").write_text("zq1\tfirst question\n")
    monkeypatch.setenv("WORKBENCH_APP_DATA_DIRS", str(inside))
    refused = jobs.start(demo_project, jobs.ImportRequest("queries", str(outside / "q.tsv"), "q.tsv"))
    forged = jobs.start(demo_project, jobs.ImportRequest("queries", str(outside / "q.tsv"), "q.tsv", upload=True))
    allowed = jobs.start(demo_project, jobs.ImportRequest("queries", str(inside / "q.tsv"), "q.tsv"))
    rows = {name: _wait_done(demo_project, launch.job_id)
            for name, launch in (("refused", refused), ("forged", forged), ("allowed", allowed))}
    assert rows["refused"]["state"] == "failed" and "outside the folders this app may import from" in str(rows["refused"]["error"]), rows["refused"]
    assert rows["forged"]["state"] == "failed" and "upload folder" in str(rows["forged"]["error"])
    assert rows["allowed"]["state"] == "finished" and rows["allowed"]["result"]["rows"] == 1
    assert (outside / "q.tsv").exists()  # a forged upload request removes nothing


def test_a_pooling_job_says_what_the_page_says_when_it_pools_itself(demo_project):
    """A pool built in the background ends with the same sentence as one built in the page's
    run ("Pool main: N pairs over Q queries"), for the jobs panel to show; the counts are the
    stored pool's."""
    with Database(demo_project) as db:
        runs = tuple(r[0] for r in db.query_all("SELECT name FROM runs ORDER BY name"))
    launch = jobs.start(demo_project, jobs.PoolRequest("bgpool", runs, 5))
    row = _wait_done(demo_project, launch.job_id)
    assert row["state"] == "finished", row
    with Database(demo_project) as db:
        pairs = db.query_value("SELECT count(*) FROM pool_pairs WHERE pool = 'bgpool'")
        queries = db.query_value("SELECT count(DISTINCT query_id) FROM pool_pairs WHERE pool = 'bgpool'")
    assert pairs > 0
    assert row["result"]["summary"] == f"pool bgpool: {pairs:,} pairs over {queries:,} queries"
