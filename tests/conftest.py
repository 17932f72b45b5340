"""Shared fixtures: temporary project databases and a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support.prerequisites import REPO

# Property tests check results, not speed: a per-example deadline only turns a busy machine
# (2 shared cores, CI) into a false failure. Speed is the benchmarks' job.
settings.register_profile("workbench", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("workbench")


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "project.duckdb"


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120):
    """Run ``python -m workbench ARGS`` in a real subprocess; returns CompletedProcess."""
    full_env = dict(os.environ)
    full_env.pop("WORKBENCH_DB", None)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args],
        capture_output=True, text=True, cwd=cwd or REPO, env=full_env, timeout=timeout,
    )


@pytest.fixture
def cli():
    return run_cli
