"""Project files built once per test process and copied per test.

Building the demo project (``init_project(path, demo=True)``: load, chunk, index, run, pool and
the query-kinds extras) costs 0.7 s warm and 1-3 s cold; a copy of the closed DuckDB file costs
about 5 ms and is the same project, so a test that only needs *a* fresh demo project gets a copy
(:func:`demo_project`, or the ``demo_template`` / ``demo_project`` fixtures of
``tests/conftest.py``). Tests whose subject is ``init`` itself keep calling it.

Each template is built the first time a test asks for it, under settings pinned to the
repository's ``config/workbench.toml`` without environment overrides (what a test run from the
repository root sees), so a test that has set ``WORKBENCH_*`` or changed directory cannot change
the template other tests copy. The file is closed (checkpointed) before it is copied: there is no
``.wal`` beside it. Copies are the caller's to change; the template is never handed out.

What is dearer still (an ONNX export, a swept public collection) is built once per test *run*
instead, for every xdist worker: :func:`shared_once` builds a folder under :func:`session_lock`,
an exclusive file lock beside the workers' base temporary folders.
"""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.prerequisites import REPO

_LOCK = threading.RLock()  # re-entrant: a template may be built from another (ppi_project from calibration_project)
_ROOT: Path | None = None
_BUILT: dict[Hashable, tuple[Path, Any]] = {}


def _root() -> Path:
    global _ROOT
    if _ROOT is None:
        _ROOT = Path(tempfile.mkdtemp(prefix="workbench-templates-"))
        atexit.register(shutil.rmtree, _ROOT, True)
    return _ROOT


def template(key: Hashable, build: Callable[[Path], Any]) -> tuple[Path, Any]:
    """``(path, result)`` of ``build(path)``, run once per process for ``key``; ``build`` must
    leave a closed project file at ``path``. Do not change the file: copy it (:func:`copy_of`)."""
    with _LOCK:
        if key not in _BUILT:
            # a folder of its own: a build may build another template first (nested, same thread)
            path = Path(tempfile.mkdtemp(prefix="t", dir=_root())) / "project.duckdb"
            result = build(path)
            wal = path.with_name(path.name + ".wal")
            if wal.exists():  # a template must be one self-contained file
                raise RuntimeError(f"template {key!r} left {wal} behind; close its database")
            _BUILT[key] = (path, result)
        return _BUILT[key]


def copy_of(key: Hashable, build: Callable[[Path], Any], dest: str | Path) -> Any:
    """Copy the template ``key`` (built by ``build`` on first use) to ``dest``; returns what
    ``build`` returned. ``dest`` must not exist yet (a copy never replaces a project)."""
    source, result = template(key, build)
    dest = Path(dest)
    if dest.exists() or dest.with_name(dest.name + ".wal").exists():
        raise FileExistsError(f"{dest} exists already; a template is copied to a new path only")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)
    return result


def _build_demo(path: Path) -> None:
    from workbench.config import load_settings
    from workbench.services.project.lifecycle import init_project

    settings = load_settings(REPO / "config" / "workbench.toml", env={})
    init_project(path, demo=True, settings=settings)


def demo_template() -> Path:
    """The per-process demo project (``init_project(demo=True)``): read it, never change it."""
    return template("demo", _build_demo)[0]


def demo_project(dest: str | Path) -> Path:
    """A fresh demo project at ``dest``: a copy of :func:`demo_template`."""
    copy_of("demo", _build_demo, dest)
    return Path(dest)


def _build_empty(path: Path) -> None:
    from workbench.store.database import Database

    Database(path).close()  # every migration applied, nothing else


def empty_project(dest: str | Path) -> Path:
    """A new, empty project at ``dest`` (every migration applied): a copy instead of running the
    migrations again (0.1-0.3 s per file), for tests whose subject is what goes into it."""
    copy_of("empty", _build_empty, dest)
    return Path(dest)


def session_folder(tmp_path_factory, name: str) -> tuple[Path, Path]:
    """``(folder, lock file)`` for ``name``, one per test session: under xdist the parent of the
    worker's base temp (``pytest-N``, shared by the workers of this run), else the base temp."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return base / f"shared-{name}", base / f"shared-{name}.lock"


@contextmanager
def session_lock(tmp_path_factory, name: str) -> Iterator[Path]:
    """Hold the run's exclusive lock for ``name`` (other workers asking wait); yields the run's
    folder for it (:func:`session_folder`, not created)."""
    folder, lock_path = session_folder(tmp_path_factory, name)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield folder
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def shared_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """A folder holding what ``build(folder)`` wrote, built once per test session across the
    xdist workers (an exclusive file lock; a worker that asks while another builds waits for it).
    A build that raised is retried by the next caller (the half-written folder is removed).
    The folder is shared: read it, or copy from it; never change it."""
    with session_lock(tmp_path_factory, name) as folder:
        if not (folder / ".built").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            build(folder)
            (folder / ".built").write_text("ok\n")
    return folder
