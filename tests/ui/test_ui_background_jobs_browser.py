"""A dense run started on Retrieve & Pool is a background job in a real ``workbench app`` and
Chromium: it goes on while the user is on another page, its progress comes back with the page,
it ends on its own (the runs table then shows it, with no click), it is still shown after a
reload, and Stop then Resume finish a second one."""

from __future__ import annotations

import os
import re
import signal
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from tests.support.live_app import browser_page, open_in_app, serve, wait_idle
from tests.support.polling import wait_until
from workbench.errors import InputError
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


def _wait_shown(page, locator, timeout: float = LONG) -> None:
    """``locator.wait_for``; when it times out, the failure says what the page showed instead."""
    try:
        locator.wait_for(timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - Playwright's timeout error, reworded with the page
        try:
            body = page.inner_text("body", timeout=10_000)
        except Exception as again:  # noqa: BLE001 - the page itself is gone
            body = f"(the page could not be read: {again})"
        raise AssertionError(f"{exc}\n--- the page showed ---\n{body}") from exc


def _start_dense(page, name: str, *, then=None) -> None:
    """Start a dense run from the page's form; ``then()`` is called at once after the click."""
    page.get_by_role("tab", name="Dense").click()
    form = page.locator("[data-testid='stForm']").filter(has=page.get_by_role("button", name="Run dense"))
    form.get_by_label("Run name", exact=True).fill(name)
    form.get_by_role("button", name="Run dense").click()
    if then is not None:
        then()
    page.get_by_text(re.compile(rf"Started in the background: dense run {name}")).wait_for(timeout=LONG)
    wait_idle(page, LONG, start_within=0)


def _stopped_threads(pid: int) -> bool:
    """Whether every thread of process ``pid`` is stopped (state T in /proc)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        return all(Path(f"/proc/{pid}/task/{t}/stat").read_text().rsplit(")", 1)[1].split()[0] in "tT"
                   for t in tasks)
    except OSError:
        return True  # gone: nothing left to wait for


def _holds(pid: int, project: Path) -> bool:
    """Whether process ``pid`` has the project file (or its WAL) open."""
    names = {str(project.resolve()), str(project.resolve()) + ".wal"}
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    held = set()
    for fd in fds:
        try:
            held.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return bool(names & held)


@contextmanager
def _frozen(project: Path, job_id: int, timeout: float = LONG / 1000):
    """Hold job ``job_id``'s process still (SIGSTOP) inside the block, at a moment it does not
    have the project open (so the app reads and writes the project meanwhile), and let it go on
    (SIGCONT) after: the job cannot end before what the block does has landed. Yields the job's
    state when it was frozen (queued: its process was still starting; running)."""
    # looked for often: a job whose work is cached can end within a few tenths of a second of
    # its start on a quiet machine, before a slower poll first saw its process
    pid = wait_until(lambda: jobs.job(project, job_id)["pid"], timeout=timeout, interval=0.01,
                     tolerate=(InputError,), what=f"job {job_id} to have a process")

    def freeze() -> bool:
        os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: _stopped_threads(pid), timeout=timeout, interval=0.01, what=f"process {pid} to stop")
        if _holds(pid, project):  # inside a unit of work: let it finish the unit, then again
            os.kill(pid, signal.SIGCONT)
            return False
        return True

    try:
        wait_until(freeze, timeout=timeout, interval=0.05, what=f"job {job_id}'s process between two units of work")
        yield jobs.job(project, job_id)["state"]
    finally:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def test_a_dense_job_survives_navigation_and_a_reload_and_stops_and_resumes(demo_project, dense_model):
    states = []  # job 2's state when its process was held still
    with serve(demo_project) as url, browser_page() as page:
        page.goto(url)
        open_in_app(page, "Retrieve & Pool", timeout=LONG)
        _start_dense(page, "dense-bg")
        open_in_app(page, "Overview", "Relevance Workbench", timeout=LONG)  # away while it works
        open_in_app(page, "Retrieve & Pool", timeout=LONG)
        page.get_by_text(re.compile(r"Job 1: dense run dense-bg on chunking \S+ — ")).first.wait_for(timeout=LONG)
        # it ends on its own; the page reruns and its runs table shows the new run
        _wait_shown(page, page.get_by_text("Job 1: dense run dense-bg on chunking sections — finished"))
        page.locator("[data-table='runs']").get_by_text("dense-bg", exact=True).first.wait_for(timeout=LONG)
        page.reload()
        _wait_shown(page, page.get_by_text("Job 1: dense run dense-bg on chunking sections — finished"))

        wait_idle(page, LONG, start_within=0)
        # The second run reads the first one's embeddings from the cache: it can end in seconds,
        # before a Stop clicked on a busy machine lands. So its process is held still from just
        # after its start until the page shows the Stop has landed ("stopping"); most often it is
        # still starting then, which is what a Stop clicked at once meets (the process has no
        # SIGTERM handler yet: before the fix the signal killed it and the job read "interrupted").
        with ExitStack() as held:
            _start_dense(page, "dense-stop", then=lambda: states.append(held.enter_context(_frozen(demo_project, 2))))
            assert len(states) == 1 and states[0] in ("queued", "running"), states
            stop = page.locator(".st-key-job_2_stop button")  # the job's own button (Streamlit has a Stop too)
            _wait_shown(page, stop)
            wait_idle(page, LONG, start_within=0)
            stop.click()
            _wait_shown(page, page.get_by_text("Job 2: dense run dense-stop on chunking sections — stopping"))
        _wait_shown(page, page.get_by_text("Job 2: dense run dense-stop on chunking sections — stopped"))
        page.get_by_text(re.compile(r"stopped.*; resume it to continue")).first.wait_for(timeout=LONG)
        wait_idle(page, LONG, start_within=0)
        page.locator(".st-key-job_2_resume button").click()
        _wait_shown(page, page.get_by_text("Job 2: dense run dense-stop on chunking sections — finished"))
        wait_idle(page, LONG, start_within=0)
    row = jobs.job(demo_project, 2)
    assert (row["state"], row["attempt"]) == ("finished", 2)
    with Database(demo_project) as db:
        queries = db.query_value("SELECT count(*) FROM queries")
        for run in ("dense-bg", "dense-stop"):
            assert db.query_value("SELECT count(DISTINCT query_id) FROM run_rows WHERE run = ?", [run]) == queries
