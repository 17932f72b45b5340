"""Fixtures the page tests share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def _pages_run_as_served():
    """AppTest runs pages as ``workbench app`` serves them: without usage statistics
    (``--browser.gatherUsageStats false``, cli.project.app_command). With them on, Streamlit
    inspects the arguments of every ``st.*`` call of a run (50-100 ms of CPU per run of the
    Retrieve page) for telemetry nobody reads.

    And the installed packages are scanned for Streamlit components once per process, as a
    server does at start-up: each ``AppTest`` scans them on its first run (every installed
    distribution's metadata read and parsed, ~0.3 s of CPU per ``AppTest`` for 151
    distributions); the packages do not change during a test run, so every ``AppTest`` is
    given the same manifests that scan found.

    And a test waits for its script run on the run's end event instead of polling for it:
    Streamlit's ``require_widgets_deltas`` wakes every millisecond and scans every event of the
    run so far (a thousand wake-ups a second taking the interpreter from the script thread,
    ~2 million event comparisons in test_ui_retrieve alone). Same timeout and error."""
    import threading

    from streamlit import config
    from streamlit.components.v2 import manifest_scanner
    from streamlit.runtime.scriptrunner import ScriptRunnerEvent
    from streamlit.testing.v1 import local_script_runner

    before = config.get_option("browser.gatherUsageStats")
    config.set_option("browser.gatherUsageStats", False)
    scan = manifest_scanner.scan_component_manifests
    found: list = []

    def scan_once(*args, **kwargs):
        if not found:
            found.append(scan(*args, **kwargs))
        return list(found[0])

    manifest_scanner.scan_component_manifests = scan_once

    poll = local_script_runner.require_widgets_deltas

    def wait_for_the_run(runner, timeout: float = 3) -> None:
        ended = threading.Event()

        def on_event(sender, event, **kwargs):
            if event == ScriptRunnerEvent.SHUTDOWN:
                ended.set()

        runner.on_event.connect(on_event, weak=False)
        try:
            if runner.script_stopped() or ended.wait(timeout):
                return
        finally:
            runner.on_event.disconnect(on_event)
        runner.request_stop()  # as Streamlit's wait: stop the script, then say it timed out
        runner.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")

    local_script_runner.require_widgets_deltas = wait_for_the_run
    yield
    local_script_runner.require_widgets_deltas = poll
    manifest_scanner.scan_component_manifests = scan
    config.set_option("browser.gatherUsageStats", before)


@pytest.fixture
def demo_db(demo_project, monkeypatch) -> Path:
    """A fresh demo project (a copy of the worker's ``init --demo`` template), and the app
    pointed at it (``WORKBENCH_DB``)."""
    monkeypatch.setenv("WORKBENCH_DB", str(demo_project))
    return demo_project
