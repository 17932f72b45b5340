"""Fixtures the page tests share."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.services.project.lifecycle import init_project


@pytest.fixture
def demo_db(tmp_path, monkeypatch) -> Path:
    """A fresh demo project, and the app pointed at it (``WORKBENCH_DB``)."""
    path = tmp_path / "demo.duckdb"
    init_project(path, demo=True)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path
