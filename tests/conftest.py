"""Shared fixtures: temporary project databases and a CLI runner (:mod:`tests.support.cli_runner`:
in this process by default, ``process=True`` for a real ``python -m workbench``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.cli_runner import run_cli  # noqa: F401 - test modules import it from here

# Property tests check results, not speed: a per-example deadline only turns a busy machine
# (2 shared cores, CI) into a false failure. Speed is the benchmarks' job.
settings.register_profile("workbench", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("workbench")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "project.duckdb"


@pytest.fixture
def cli():
    return run_cli
