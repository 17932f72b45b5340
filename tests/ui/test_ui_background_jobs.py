"""Retrieve & Pool with background jobs (``[jobs] background_from = 0``): chunking and pooling
start a job, the page follows its row to the end (in a later script run, as after a reload),
and a job whose process died reads "interrupted" with a Restart that finishes it."""

from __future__ import annotations

import os
import signal

from streamlit.testing.v1 import AppTest

from tests.support.polling import wait_until
from workbench.services import jobs
from workbench.store.database import Database
from workbench.store.pools import read_pool_pairs


def _page():
    from workbench.ui.views import retrieve

    retrieve.render()


def _submit(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, at.exception
    return at


def _texts(at: AppTest) -> str:
    return " ".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [s.value for s in at.success]
                    + [i.value for i in at.info] + [w.value for w in at.warning])


def _ended(db, job_id: int) -> dict:
    return wait_until(lambda: (j := jobs.job(db, job_id))["state"] not in jobs.ACTIVE and j, timeout=180,
                      what=lambda: f"job {job_id} to end: {jobs.job(db, job_id)}")


def test_chunking_and_pooling_run_as_jobs_and_the_page_shows_what_they_stored(demo_db, monkeypatch):
    monkeypatch.setenv("WORKBENCH_JOBS_BACKGROUND_FROM", "0")
    at = AppTest.from_function(_page, default_timeout=60)
    at.run()
    at.text_input(key="chunk_name").input("bgfx")
    at.selectbox(key="chunk_strategy").select("fixed")
    at.number_input(key="chunk_size").set_value(400)
    _submit(at, "Create chunking")
    assert "Started in the background: chunking bgfx (fixed)" in _texts(at)
    chunk_job = jobs.jobs(demo_db, ("chunk",))[0]
    assert chunk_job["request"] == {"kind": "chunk", "name": "bgfx", "strategy": "fixed", "size": 400, "overlap": 0}
    _ended(demo_db, chunk_job["job_id"])
    at = AppTest.from_function(_page, default_timeout=60)  # a new session: a reload
    at.run()
    assert not at.exception, at.exception
    assert f"Job {chunk_job['job_id']}: chunking bgfx (fixed) — finished" in _texts(at)
    assert "bgfx" in at.selectbox(key="bm25_chunking").options  # the table and selectors read the project

    at.text_input(key="pool_name").input("bgpool")
    at.multiselect(key="pool_runs").select("bm25")
    at.number_input(key="pool_depth").set_value(3)
    _submit(at, "Build pool")
    pool_job = jobs.jobs(demo_db, ("pool",))[0]
    row = _ended(demo_db, pool_job["job_id"])
    assert row["state"] == "finished", row
    with Database(demo_db) as db:
        pairs = read_pool_pairs(db, "bgpool")
        top3 = db.query_value("SELECT count(DISTINCT (query_id, doc_id, chunk_id)) FROM run_rows "
                              "WHERE run = 'bm25' AND rank <= 3")
    assert len(pairs) == top3 == row["result"]["pairs_total"]


def test_an_interrupted_job_shows_so_and_restart_finishes_it(demo_db, monkeypatch):
    monkeypatch.setenv("WORKBENCH_JOBS_BACKGROUND_FROM", "0")
    launch = jobs.start(demo_db, jobs.ChunkRequest("cut", "sentences", 2))
    os.kill(launch.pid, signal.SIGKILL)
    wait_until(lambda: jobs.job(demo_db, launch.job_id)["state"] == "interrupted", timeout=30,
               what="the killed job to read interrupted")
    at = AppTest.from_function(_page, default_timeout=60)
    at.run()
    assert "interrupted (its process ended)" in _texts(at)
    assert "Restart runs it again from the beginning" in _texts(at)
    _submit(at, "Restart")
    row = _ended(demo_db, launch.job_id)
    assert row["state"] == "finished", row
    with Database(demo_db) as db:
        assert db.query_value("SELECT count(*) FROM chunkings WHERE name = 'cut'") == 1


def _experiments():
    from workbench.ui.views import experiments

    experiments.render()


def test_a_grid_runs_as_a_job_and_its_results_show_after_a_reload(demo_db, monkeypatch):
    from tests.ui.html_tables import html_tables

    monkeypatch.setenv("WORKBENCH_JOBS_BACKGROUND_FROM", "0")
    at = AppTest.from_function(_experiments, default_timeout=120)
    at.run()
    at.multiselect[0].set_value(["fixed:128", "fixed:512"])
    at.multiselect[1].set_value(["BM25"])
    at.multiselect[2].set_value(["ndcg@10"])
    at.text_input[0].set_value("1000,4000")
    at.button[0].click()
    at.run()
    assert not at.exception, at.exception
    job = jobs.jobs(demo_db, ("sweep",))[0]
    assert job["request"]["budgets"] == [1000, 4000]
    row = _ended(demo_db, job["job_id"])
    assert row["state"] == "finished", row
    at = AppTest.from_function(_experiments, default_timeout=120)  # a reload
    at.run()
    _submit(at, "Show the results")
    cells = html_tables(at)["experiments-cells"]
    stored = row["result"]["cells"]
    assert [r["configuration"] for r in cells] == [f"{c['chunking']} × {c['retriever']}" for c in stored]
    for shown, cell in zip(cells, stored):  # the page's evaluation of the stored runs is the job's
        assert shown["ndcg@10"] == f"{cell['aggregate']['ndcg@10']:.3f}"
        assert shown["coverage@4000"] == f"{cell['coverage']['4000']:.3f}"


DATA_PAGE = "from workbench.ui.views.data import render\nrender()\n"


def test_a_large_upload_and_a_server_path_import_run_as_jobs_and_chunk_into_every_chunking(
        demo_db, tmp_path, monkeypatch):
    import json
    import tempfile
    from pathlib import Path

    from workbench.services.jobs.requests import UPLOAD_PREFIX

    monkeypatch.setenv("WORKBENCH_JOBS_BACKGROUND_FROM", "0")
    monkeypatch.setenv("WORKBENCH_APP_DATA_DIRS", str(tmp_path))
    docs = [{"_id": f"bg-{i}", "title": f"T{i}", "text": f"## Part\nBackground policy text number {i}."}
            for i in range(6)]
    at = AppTest.from_string(DATA_PAGE, default_timeout=60)
    at.run()
    at.file_uploader[0].upload("more.jsonl", "".join(json.dumps(d) + "\n" for d in docs).encode(),
                               "application/octet-stream")
    at.button(key="data_import").click().run()
    assert not at.exception, at.exception
    assert "Started in the background: import of more.jsonl (corpus)" in _texts(at)
    upload_job = jobs.jobs(demo_db, ("import",))[0]
    assert upload_job["request"]["upload"] is True
    row = _ended(demo_db, upload_job["job_id"])
    assert row["state"] == "finished" and row["result"]["rows"] == 6, row
    assert not Path(upload_job["request"]["path"]).parent.exists()  # the upload's copy is gone
    assert not list(Path(tempfile.gettempdir()).glob(f"{UPLOAD_PREFIX}*/more.jsonl"))
    with Database(demo_db) as db:  # in the project, and chunked into the existing chunking
        assert db.query_value("SELECT count(*) FROM documents WHERE doc_id LIKE 'bg-%'") == 6
        assert db.query_value("SELECT count(DISTINCT doc_id) FROM chunks WHERE chunking = 'sections' "
                              "AND doc_id LIKE 'bg-%'") == 6

    queries = tmp_path / "extra-queries.jsonl"
    queries.write_text("".join(json.dumps({"_id": f"bq{i}", "text": f"question {i}"}) + "\n" for i in range(3)))
    at = AppTest.from_string(DATA_PAGE, default_timeout=60)  # a reload: the finished job and its summary
    at.run()
    assert f"Job {row['job_id']}: import of more.jsonl (corpus) — finished" in _texts(at)
    assert "Imported 6 documents" in _texts(at)
    at.selectbox(key="data_kind").select("queries").run()
    at.radio(key="data_source").set_value("Path on the server").run()
    at.text_input(key="data_path").input(str(queries))
    at.button(key="data_import").click().run()
    server_job = jobs.jobs(demo_db, ("import",))[0]
    assert server_job["request"]["upload"] is False and server_job["request"]["path"] == str(queries)
    assert _ended(demo_db, server_job["job_id"])["state"] == "finished"
    with Database(demo_db) as db:
        assert db.query_value("SELECT count(*) FROM queries WHERE query_id LIKE 'bq%'") == 3


def _panel():
    from workbench.ui import jobs_panel

    jobs_panel.panel(("chunk",))


def test_the_jobs_panel_stays_on_the_page_while_the_project_is_held(demo_db, monkeypatch):
    """A page run that finds the project held by another process (a job writing its batch)
    still draws the jobs panel, saying so, in a fragment that looks again: the old panel
    vanished without a word and nothing brought it back until the user acted."""
    from tests.support.holding import hold

    monkeypatch.setenv("WORKBENCH_JOBS_BACKGROUND_FROM", "0")
    launch = jobs.start(demo_db, jobs.ChunkRequest("held", "sentences", 2))
    assert _ended(demo_db, launch.job_id)["state"] == "finished"
    holder = hold(demo_db)
    try:
        at = AppTest.from_function(_panel, default_timeout=120)
        at.run()
        assert not at.exception, at.exception
        assert "Background jobs" in _texts(at)
        assert "The project is in use by another process; the jobs are shown again in a moment." in _texts(at)
    finally:
        holder.release()
    at.run()  # the fragment's next look (the whole function here: AppTest runs no timers)
    assert not at.exception, at.exception
    assert f"Job {launch.job_id}: chunking held (sentences) — finished" in _texts(at)
