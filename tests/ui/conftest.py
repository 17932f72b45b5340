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
    given the same manifests that scan found."""
    from streamlit import config
    from streamlit.components.v2 import manifest_scanner

    before = config.get_option("browser.gatherUsageStats")
    config.set_option("browser.gatherUsageStats", False)
    scan = manifest_scanner.scan_component_manifests
    found: list = []

    def scan_once(*args, **kwargs):
        if not found:
            found.append(scan(*args, **kwargs))
        return list(found[0])

    manifest_scanner.scan_component_manifests = scan_once
    yield
    manifest_scanner.scan_component_manifests = scan
    config.set_option("browser.gatherUsageStats", before)


@pytest.fixture
def demo_db(demo_project, monkeypatch) -> Path:
    """A fresh demo project (a copy of the worker's ``init --demo`` template), and the app
    pointed at it (``WORKBENCH_DB``)."""
    monkeypatch.setenv("WORKBENCH_DB", str(demo_project))
    return demo_project
