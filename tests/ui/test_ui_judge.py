"""The Judge page in Streamlit's AppTest: choices, preview, estimate, a stored job and its failures."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.llm.judge_project import demo_project
from tests.support.openai_server import OUT_OF_RANGE_GRADE, running_server
from tests.support.polling import wait_until
from workbench.config import load_settings
from workbench.core.judging.offline import grade_pair
from workbench.services.browse import peek_pool
from workbench.services.judge.jobs import resolve_spec, run_job
from workbench.services.project.lifecycle import init_project
from workbench.store.database import Database
from workbench.store.pools import read_pool_pairs


def _page():
    from workbench.ui.views import judge

    judge.render()


@pytest.fixture
def demo_db(tmp_path, monkeypatch) -> Path:
    path = demo_project(tmp_path / "demo.duckdb")  # a copy of the demo project, built once
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # A job the page launches inherits this: it writes what it has and reads a Stop every 0.2 s
    # (2 s by default), so its progress and its end are seen without waiting seconds for them.
    monkeypatch.setenv("WORKBENCH_JUDGE_FLUSH_SECONDS", "0.2")
    return path


def _run() -> AppTest:
    at = AppTest.from_function(_page, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def _html(at: AppTest) -> str:
    return " ".join(h.proto.body for h in at.get("html"))


def _messages(at: AppTest) -> list[str]:
    return [m.value for kind in ("info", "success", "warning", "error", "caption") for m in getattr(at, kind)]


def _first_pair(db_path: Path) -> dict:
    with Database(db_path) as db:
        pairs = read_pool_pairs(db, "demo")
        query_id = str(pairs["query_id"].iloc[0])
        return peek_pool(db, "demo", query_id, limit=1)




def _start_llm_job(server, *, concurrency: int):
    """The page with the LLM judge on ``server`` chosen, after pressing Start."""
    at = _run()
    at.radio[0].set_value("LLM on an OpenAI-compatible server").run()
    # the three fields in one script run (a user's three edits end in the same state)
    at.text_input(key="judge_model").set_value("test-judge")
    at.text_input(key="judge_url").set_value(server.base_url)
    at.number_input(key="judge_concurrency").set_value(concurrency).run()
    next(b for b in at.button if b.label == "Start").click().run()
    assert not at.exception, at.exception
    return at

def _latest_job(db, predicate, timeout: float = 60.0) -> dict:
    """The pool's latest judge job once ``predicate`` holds for it (polled; fails after ``timeout``)."""
    from workbench.services.judge.jobs import list_jobs

    def latest():
        # a visit (~8 ms of CPU, not a DuckDB instance and a schema check): the poll must not
        # take the machine from the job process it waits for
        with Database(db, visit=True, migrate=False, wait=30.0) as project:
            jobs = list_jobs(project, "demo")
        return jobs[-1] if jobs and predicate(jobs[-1]) else None

    return wait_until(latest, timeout=timeout,
                      what=lambda: f"the job to reach the expected state: {list_jobs(db, 'demo')}")

def test_empty_project_names_the_page_that_builds_a_pool(tmp_path, monkeypatch):
    path = tmp_path / "empty.duckdb"
    init_project(path)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    at = _run()
    assert any("Retrieve & Pool page" in m for m in _messages(at))
    assert not at.button


def test_offline_judge_preview_and_estimate(demo_db):
    at = _run()
    assert at.radio[0].value.startswith("Offline baseline")
    metrics = {m.label: m.value for m in at.metric}
    with Database(demo_db) as db:
        pairs = len(read_pool_pairs(db, "demo"))
    assert metrics["Pairs"] == f"{pairs:,}"
    assert metrics["Requests to send"] == "0" and metrics["Estimated cost"] == "free"
    peek = _first_pair(demo_db)
    row = peek["pairs"].iloc[0]
    expected = grade_pair(peek["query"], str(row["text"]), description=peek["description"])
    shown = _html(at)
    assert html.escape(f"Grade {expected.grade}: {expected.reason}") in shown
    assert html.escape(str(row["text"])) in shown
    labels = [b.label for b in at.button]
    assert labels == ["Start", "Stop", "Retry failed"]
    assert not at.button[0].disabled and at.button[1].disabled and at.button[2].disabled
    assert any("No job for this pool" in m for m in _messages(at))
    assert not any("workbench " in m or " --" in m for m in _messages(at))


def test_llm_choice_shows_the_rendered_prompt_escaped(demo_db):
    at = _run()
    at.radio[0].set_value("LLM on an OpenAI-compatible server").run()
    at.text_input(key="judge_model").set_value("test-judge")
    at.text_input(key="judge_url").set_value("http://127.0.0.1:9/v1").run()
    assert not at.exception, at.exception
    shown = _html(at)
    peek = _first_pair(demo_db)
    passage = str(peek["pairs"].iloc[0]["text"])
    spec = resolve_spec(load_settings(overrides={"judge": {"model": "test-judge",
                                                           "base_url": "http://127.0.0.1:9/v1"}}))
    system, user = spec.template.render(peek["query"], passage, peek["description"])
    assert html.escape(system["content"]) in shown
    assert html.escape(user["content"]) in shown
    assert "&lt;&lt;&lt;PASSAGE" in shown and "<<<PASSAGE" not in shown  # escaped, not parsed
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics["Requests to send"].replace(",", "")) > 0
    assert any("No API key is available" in m for m in _messages(at))
    # the configured prompt is the default; another one changes the preview
    prompt = at.selectbox(key="judge_prompt")
    assert prompt.value == load_settings().values["judge"]["prompt"]
    assert {"relevance_v1", "relevance_binary_v1", "relevance_token_v1"} <= set(prompt.options)
    prompt.set_value("relevance_token_v1").run()
    token = resolve_spec(load_settings(overrides={"judge": {"model": "test-judge", "base_url": "http://127.0.0.1:9/v1",
                                                            "prompt": "relevance_token_v1"}}))
    _, user = token.template.render(peek["query"], passage, peek["description"])
    assert html.escape(user["content"]) in _html(at) and token.prompt_hash[:12] in " ".join(_messages(at))


def test_finished_job_shows_counts_and_failures_with_raw_replies(demo_db):
    with running_server() as server:
        # every 4th passage answers out of range (invalid after the repair attempt), every 7th fails
        def fault(call):
            bucket = int(call.prompt_sha[:6], 16)
            if bucket % 7 == 0:
                return "500"
            return "out_of_range" if bucket % 4 == 0 else None

        server.control.fault_rule = fault
        overrides = {"model": "test-judge", "base_url": server.base_url, "max_attempts": 2,
                     "backoff_initial": 0.01, "backoff_max": 0.02, "timeout": 5.0}
        spec = resolve_spec(load_settings(overrides={"judge": overrides}), api_key="sk-test")
        report = run_job(demo_db, "demo", spec, limit=40)
    job = report.job
    assert job["judged"] == job["total"] > 0
    assert job["invalid"] > 0 and job["failed"] > 0  # the fault rule reached both outcomes

    at = _run()
    at.radio[0].set_value("LLM on an OpenAI-compatible server").run()
    at.text_input(key="judge_model").set_value("test-judge")
    at.text_input(key="judge_url").set_value(report.spec.base_url)
    at.number_input(key="judge_limit").set_value(40).run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Judged"] == f"{job['judged']:,} of {job['total']:,}"
    assert (metrics["OK"], metrics["Invalid"], metrics["Failed"]) == (
        f"{job['ok']:,}", f"{job['invalid']:,}", f"{job['failed']:,}")
    table = next(d.value for d in at.dataframe if "raw reply" in d.value.columns)
    assert len(table) == job["invalid"] + job["failed"]
    invalid = table[table["status"] == "invalid"]
    assert len(invalid) == job["invalid"]
    # the raw reply is kept as the server sent it (both attempts: the answer and the repair)
    assert all(f'"grade": {OUT_OF_RANGE_GRADE}' in raw for raw in invalid["raw reply"])
    assert (table.loc[table["status"] == "failed", "error"].str.len() > 0).all()
    buttons = {b.label: b for b in at.button}
    assert buttons["Retry failed"].disabled is False and buttons["Start"].disabled is True
    # with the offline judge chosen, the LLM job is listed among the pool's other jobs
    at.radio[0].set_value(at.radio[0].options[0]).run()
    others = next(d.value for d in at.dataframe if "prompt" in d.value.columns)
    assert others[["job", "model", "state"]].values.tolist() == [[job["job_id"], "test-judge", "finished"]]


@pytest.mark.browser
def test_browser_starts_the_offline_judge_and_sees_it_finish(tmp_path, monkeypatch):
    """A real app and chromium: Start on the demo pool, progress reaches done, the page stays live."""
    from playwright.sync_api import expect

    from tests.support.live_app import browser_page, serve
    from workbench.services.judge.jobs import list_jobs

    db = demo_project(tmp_path / "demo.duckdb")
    with Database(db) as handle:
        pairs = len(read_pool_pairs(handle, "demo"))
    env = {"OPENAI_API_KEY": ""}  # the offline judge, whatever the machine has set
    with serve(db, env) as url, browser_page() as page:
        page.goto(f"{url}/judge")
        page.get_by_text("What the judge sees").wait_for(timeout=60_000)
        page.get_by_role("button", name="Start").click()
        # the fragment refreshes on its own: no reload, no click, until the job is finished
        page.get_by_text(f"{pairs:,} of {pairs:,} judged").first.wait_for(timeout=120_000)
        # the job's end reruns the whole page: the buttons follow the stored state
        page.get_by_text("fully judged with this judge").wait_for(timeout=30_000)
        # The rerun replaces the page element by element: the progress line of the new run may
        # land a moment after the caption above, so wait for it rather than read it once.
        page.get_by_text("Job 1: finished").first.wait_for(timeout=30_000)
        expect(page.get_by_role("button", name="Start")).to_be_disabled(timeout=30_000)
        expect(page.get_by_role("button", name="Stop")).to_be_disabled(timeout=30_000)
        page.screenshot(path=str(tmp_path / "judge.png"), full_page=True)
    jobs = list_jobs(db, "demo")
    assert [(j["state"], j["judged"], j["ok"], j["model"]) for j in jobs] == [("finished", pairs, pairs, "offline-lexical")]


def test_start_stop_and_resume_a_job_in_its_own_process(demo_db):
    """Start launches `workbench judge` in another process; Stop cancels it through the project;
    the page then offers Resume, and resuming continues the same job."""
    import os

    from workbench.services.judge import launch

    def wait_for(predicate, timeout=60.0):
        return _latest_job(demo_db, predicate, timeout)

    with running_server(latency=0.2) as server:
        at = _start_llm_job(server, concurrency=1)
        job = wait_for(lambda j: j["state"] == "running" and j["judged"] >= 1)
        at.run()
        buttons = {b.label: b for b in at.button}
        assert buttons["Stop"].disabled is False and buttons["Start"].disabled is True
        buttons["Stop"].click().run()
        stopped = wait_for(lambda j: j["state"] == "cancelled", timeout=30)
        assert stopped["job_id"] == job["job_id"] and 0 < stopped["judged"] < stopped["total"]
        sent_at_stop = server.control.count("/v1/chat/completions")
        at.run()
        buttons = {b.label: b for b in at.button}
        assert "Resume" in buttons and buttons["Resume"].disabled is False

        def exited() -> bool:
            launch.collect()  # the page's job process, reaped once it has ended
            try:
                os.kill(int(stopped["pid"]), 0)
            except ProcessLookupError:
                return True
            return False

        # Until the stopped job's process is gone (so nothing of it can send any more), not a
        # fixed second: nothing runs after Stop.
        wait_until(exited, timeout=30, interval=0.05, what="the stopped job's process to exit")
        assert server.control.count("/v1/chat/completions") == sent_at_stop  # nothing runs after Stop
        # resume, then stop again: the same job continues from where it stopped
        buttons["Resume"].click().run()
        resumed = wait_for(lambda j: j["state"] == "running" and j["judged"] > stopped["judged"])
        assert resumed["job_id"] == job["job_id"]
        at.run()
        next(b for b in at.button if b.label == "Stop").click().run()
        wait_for(lambda j: j["state"] == "cancelled", timeout=30)
    attempts = server.control.attempts_by_prompt()
    assert max(attempts.values()) == 1  # no pair was sent twice across stop and resume


def test_retry_failed_judges_only_the_failed_and_invalid_pairs_again(demo_db):
    with running_server() as server:
        server.control.fault_rule = lambda call: "500" if int(call.prompt_sha[:6], 16) % 5 == 0 else None
        overrides = {"model": "test-judge", "base_url": server.base_url, "max_attempts": 1}
        spec = resolve_spec(load_settings(overrides={"judge": overrides}), api_key="sk-test")
        first = run_job(demo_db, "demo", spec, limit=30).job
        assert first["failed"] > 0 and first["ok"] + first["failed"] == 30
        server.control.fault_rule = None
        sent_before = server.control.count("/v1/chat/completions")

        at = _run()
        at.radio[0].set_value("LLM on an OpenAI-compatible server").run()
        at.text_input(key="judge_model").set_value("test-judge")
        at.text_input(key="judge_url").set_value(server.base_url)
        at.number_input(key="judge_limit").set_value(30).run()
        next(b for b in at.button if b.label == "Retry failed").click().run()
        assert not at.exception, at.exception
        job = _latest_job(demo_db, lambda j: j["state"] == "finished" and j["failed"] == 0, 60)
        assert (job["job_id"], job["ok"], job["failed"], job["invalid"]) == (first["job_id"], 30, 0, 0)
        # only the failed pairs were sent again, once each
        assert server.control.count("/v1/chat/completions") - sent_before == first["failed"]
        at.run()
        assert any("fully judged" in m for m in _messages(at))


def test_a_killed_job_shows_as_interrupted_and_resumes(demo_db):
    import os
    import signal

    from workbench.services.judge.jobs import list_jobs

    def latest(predicate, timeout=60.0):
        return _latest_job(demo_db, predicate, timeout)

    with running_server(latency=0.2) as server:
        at = _start_llm_job(server, concurrency=2)
        running = latest(lambda j: j["state"] == "running" and j["judged"] >= 2)
        os.kill(int(running["pid"]), signal.SIGKILL)
        def collected():
            at.run()  # the page collects its dead job process; the job then reads as interrupted
            return any("Press Resume" in m for m in _messages(at))

        wait_until(collected, timeout=20, interval=0.3, what="the page to offer Resume")
        assert list_jobs(demo_db, "demo")[-1]["state"] == "interrupted"
        resume = next(b for b in at.button if b.label == "Resume")
        assert resume.disabled is False
        resume.click().run()
        again = latest(lambda j: j["state"] == "running" and j["judged"] > running["judged"])
        assert again["job_id"] == running["job_id"] and again["pid"] != running["pid"]
        at.run()
        next(b for b in at.button if b.label == "Stop").click().run()
        latest(lambda j: j["state"] == "cancelled", timeout=30)
