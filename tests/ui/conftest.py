"""Fixtures the page tests share."""

from __future__ import annotations

from pathlib import Path

import pytest



@pytest.fixture
def demo_db(demo_project, monkeypatch) -> Path:
    """A fresh demo project (a copy of the worker's ``init --demo`` template), and the app
    pointed at it (``WORKBENCH_DB``)."""
    monkeypatch.setenv("WORKBENCH_DB", str(demo_project))
    return demo_project
