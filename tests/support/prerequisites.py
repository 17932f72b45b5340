"""Where the tests find things, and what a test may lack on a user's machine.

One rule for everything optional (the public collections in ``../shared``, Debian's chromium):
skip with the reason on a developer machine, fail in CI. CI is detected in one place,
:func:`in_ci` (``CI`` set to ``1``, ``true`` or ``yes``, any case).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def require(condition: bool, reason: str) -> None:
    """Skip with ``reason`` when ``condition`` is false; in CI fail instead of skipping."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"CI=true but a prerequisite is missing: {reason}")
    pytest.skip(reason, allow_module_level=True)


def shared_path(*parts: str) -> Path:
    """``../shared/<parts>`` next to the checkout, or skip (fail in CI) when it is absent."""
    path = SHARED.joinpath(*parts)
    require(path.exists(), f"shared test data not found: {path} (expected ../shared next to the checkout)")
    return path


def chromium_executable() -> str:
    path = os.environ.get("WORKBENCH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    require(path is not None, "Debian's chromium is not installed (apt-get install chromium); "
                              ".ci/run installs it")
    return path


def require_installed(*names: str) -> None:
    """Skip (fail in CI) unless every module in ``names`` is installed, without importing it.

    For a test module's top level: collection imports every test module in every worker, and
    importing sentence-transformers (with torch and transformers) there costs seconds of CPU in
    each, even when the run deselects the tests that use it (``make check``)."""
    import importlib.util

    for name in names:
        require(importlib.util.find_spec(name) is not None, f"{name} is not installed; `make test` installs it")


def require_module(name: str):
    """Import an optional test dependency (an oracle, an extra): skip without it on a developer
    machine, fail in CI, where `make test` installs every extra the tests use."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as exc:
        require(False, f"{name} is not installed ({exc}); `make test` installs it")
