"""Start the real app (``workbench app``) on a free port and drive it with Debian's chromium."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.prerequisites import REPO, chromium_executable, require

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"app exited early with code {process.returncode}: {process.stdout.read()}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as response:
                if response.read().decode().strip() == "ok":
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer /_stcore/health within {timeout} s")


def _start(db_path: Path, env: dict, cwd: Path = REPO) -> tuple[subprocess.Popen, str]:
    """Start the app on a free port; a port taken between the probe and the bind is retried.

    Tests run in parallel workers (pytest-xdist), so another worker's server can take the port
    :func:`free_port` found before this one binds it; the app then exits at once.
    """
    for attempt in range(5):
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "workbench", "--db", str(db_path), "app", "--port", str(port)],
            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,  # its own process group, so cleanup reaches every child
        )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, process)
            return process, url
        except RuntimeError as exc:
            if attempt == 4 or "in use" not in str(exc).lower():
                raise
    raise AssertionError("unreachable")


def _stop(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=20)


@contextmanager
def serve(db_path: Path, extra_env: dict | None = None, cwd: Path | None = None) -> Iterator[str]:
    """Run ``python -m workbench --db DB app --port P`` (in ``cwd``, default the repository: the
    app reads ``.streamlit/secrets.toml`` and ``config/workbench.toml`` there); yield its base
    URL; stop it after."""
    env = dict(os.environ, **(extra_env or {}))
    process, url = _start(db_path, env, REPO if cwd is None else cwd)
    try:
        yield url
    finally:
        _stop(process)


#: a page's script run is finished: the app says so and nothing on the page is left stale from it
_FINISHED = ("() => { const app = document.querySelector('[data-testid=\"stApp\"]');"
             " return app && app.getAttribute('data-test-script-state') === 'notRunning'"
             " && !document.querySelector('[data-stale=\"true\"]')"
             " && !document.querySelector('[data-testid=\"stStatusWidget\"]')"
             " && !document.querySelector('[data-testid=\"stSkeleton\"]'); }")
_RUNNING = ("() => { const app = document.querySelector('[data-testid=\"stApp\"]');"
            " return app && app.getAttribute('data-test-script-state') === 'running'; }")


def wait_idle(page, timeout: float = 180_000, start_within: float = 400) -> None:
    """Until the script run an action started has finished (``timeout`` ms).

    A run can start a moment after the click or the upload that causes it, and a click made
    while a run is under way can be lost, so first wait up to ``start_within`` ms for the run to
    start (an action that starts no run costs that much), then for it to finish."""
    try:
        page.wait_for_function(_RUNNING, timeout=start_within)
    except Exception:  # noqa: BLE001 - playwright's timeout: the run was over already, or never started
        pass
    page.wait_for_function(_FINISHED, timeout=timeout)


def open_label_page_as(page, url: str, annotator: str) -> None:
    """Open the Label page and type ``annotator`` into its Annotator field, then Enter (which
    moves the focus to the card, so the keys a test presses next go to the card)."""
    page.goto(f"{url}/label")
    box = page.get_by_label("Annotator", exact=True).and_(page.locator("input"))
    box.wait_for(timeout=60_000)
    box.fill(annotator)
    box.press("Enter")


@contextmanager
def browser_page() -> Iterator[object]:
    """A Playwright page in Debian's chromium (never a downloaded browser)."""
    executable = chromium_executable()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "the playwright package is not installed (pip install -e '.[test]')")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            yield page
        finally:
            browser.close()
