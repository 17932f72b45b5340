"""Shared fixtures: temporary project databases and a CLI runner (:mod:`tests.support.cli_runner`:
in this process by default, ``process=True`` for a real ``python -m workbench``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support import templates
from tests.support.cli_runner import run_cli  # noqa: F401 - test modules import it from here

# Property tests check results, not speed: a per-example deadline only turns a busy machine
# (2 shared cores, CI) into a false failure. Speed is the benchmarks' job.
settings.register_profile("workbench", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("workbench")

# One intra-op thread per xdist worker (a worker per core): torch reads OMP_NUM_THREADS when it is
# first imported, the ONNX encoder when its session is made (workbench.retrieval.onnx_dense.threads),
# and both are imported after this file. Two threads per worker on as many cores only wait on each other.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session", autouse=True)
def onnx_model_cache(tmp_path_factory):
    """Every test's ONNX model cache (``WORKBENCH_ONNX_CACHE``) is the run's own folder, shared by
    the workers: the default model is exported once per run, from scratch, on a fresh clone too
    (``tests.support.retrieval_fixtures.shared_onnx_cache`` builds it under the run's lock), and no
    test reads or writes the user's ~/.cache."""
    folder = templates.session_folder(tmp_path_factory, "onnx-cache")[0]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WORKBENCH_ONNX_CACHE", str(folder))
        yield folder


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "project.duckdb"


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture(scope="session")
def demo_template() -> Path:
    """The demo project (``init_project(demo=True)``), built once per worker: copy it, never
    change it (:mod:`tests.support.templates`). A module may override the name."""
    return templates.demo_template()


@pytest.fixture
def demo_project(tmp_path: Path) -> Path:
    """A fresh demo project at ``tmp_path / "demo.duckdb"``: a 5 ms copy of the worker's
    template instead of a 0.7-1.2 s ``init --demo`` (tests of init itself still run init)."""
    return templates.demo_project(tmp_path / "demo.duckdb")


#: measured slow tests (``python -m tests.support.durations``); marked ``slow`` at collection
SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


def listed_slow() -> set[str]:
    if not SLOW_LIST.is_file():
        return set()
    return {line.strip() for line in SLOW_LIST.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")}


def pytest_collection_modifyitems(config, items):
    """Mark the tests of ``tests/slow_tests.txt`` slow (a listed id without ``[parameters]`` marks
    every parameter set), so ``make check`` (``-m "not browser and not slow"``) leaves them out."""
    listed = listed_slow()
    for item in items:
        if item.nodeid in listed or item.nodeid.split("[", 1)[0] in listed:
            item.add_marker(pytest.mark.slow)


def pytest_unconfigure(config):
    """Stop the app servers this process shared between its browser tests
    (:func:`tests.support.live_app.serve_shared`) when the session ends: a pytest-xdist worker
    can exit without running ``atexit`` handlers, and its servers then outlived the run."""
    live_app = sys.modules.get("tests.support.live_app")
    if live_app is not None:
        live_app.stop_shared_servers()
