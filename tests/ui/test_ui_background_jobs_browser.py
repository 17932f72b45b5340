"""A dense run started on Retrieve & Pool is a background job in a real ``workbench app`` and
Chromium: it goes on while the user is on another page, its progress comes back with the page,
it ends on its own (the runs table then shows it, with no click), it is still shown after a
reload, and Stop then Resume finish a second one."""

from __future__ import annotations

import re

import pytest

from tests.support.live_app import browser_page, open_in_app, serve, wait_idle
from workbench.services import jobs
from workbench.store.database import Database

pytestmark = pytest.mark.browser

LONG = 240_000


@pytest.fixture(scope="module")
def dense_model():
    try:
        from workbench.retrieval.dense import load_encoder

        return load_encoder()
    except Exception as exc:  # noqa: BLE001 - a missing optional dependency
        pytest.skip(f"the offline dense model cannot be loaded ({exc})")


def _start_dense(page, name: str) -> None:
    page.get_by_role("tab", name="Dense").click()
    form = page.locator("[data-testid='stForm']").filter(has=page.get_by_role("button", name="Run dense"))
    form.get_by_label("Run name", exact=True).fill(name)
    form.get_by_role("button", name="Run dense").click()
    page.get_by_text(re.compile(rf"Started in the background: dense run {name}")).wait_for(timeout=LONG)
    wait_idle(page, LONG, start_within=0)


def test_a_dense_job_survives_navigation_and_a_reload_and_stops_and_resumes(demo_project, dense_model):
    with serve(demo_project) as url, browser_page() as page:
        page.goto(url)
        open_in_app(page, "Retrieve & Pool", timeout=LONG)
        _start_dense(page, "dense-bg")
        open_in_app(page, "Overview", "Relevance Workbench", timeout=LONG)  # away while it works
        open_in_app(page, "Retrieve & Pool", timeout=LONG)
        page.get_by_text(re.compile(r"Job 1: dense run dense-bg on chunking \S+ — ")).first.wait_for(timeout=LONG)
        # it ends on its own; the page reruns and its runs table shows the new run
        page.get_by_text("Job 1: dense run dense-bg on chunking sections — finished").wait_for(timeout=LONG)
        page.locator("[data-table='runs']").get_by_text("dense-bg", exact=True).first.wait_for(timeout=LONG)
        page.reload()
        page.get_by_text("Job 1: dense run dense-bg on chunking sections — finished").wait_for(timeout=LONG)

        wait_idle(page, LONG, start_within=0)
        _start_dense(page, "dense-stop")
        stop = page.locator(".st-key-job_2_stop button")  # the job's own button (Streamlit has a Stop too)
        stop.wait_for(timeout=LONG)
        wait_idle(page, LONG, start_within=0)
        stop.click()
        page.get_by_text("Job 2: dense run dense-stop on chunking sections — stopped").wait_for(timeout=LONG)
        page.get_by_text(re.compile(r"stopped.*; resume it to continue")).first.wait_for(timeout=LONG)
        wait_idle(page, LONG, start_within=0)
        page.locator(".st-key-job_2_resume button").click()
        page.get_by_text("Job 2: dense run dense-stop on chunking sections — finished").wait_for(timeout=LONG)
        wait_idle(page, LONG, start_within=0)
    row = jobs.job(demo_project, 2)
    assert (row["state"], row["attempt"]) == ("finished", 2)
    with Database(demo_project) as db:
        queries = db.query_value("SELECT count(*) FROM queries")
        for run in ("dense-bg", "dense-stop"):
            assert db.query_value("SELECT count(DISTINCT query_id) FROM run_rows WHERE run = ?", [run]) == queries
