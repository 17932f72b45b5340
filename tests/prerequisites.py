"""Prerequisites that a test may lack on a user's machine: skip there, fail in CI (CI=true)."""

from __future__ import annotations

import os
import shutil

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def require(condition: bool, reason: str) -> None:
    """Skip with ``reason`` when ``condition`` is false; in CI fail instead of skipping."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"CI=true but a prerequisite is missing: {reason}")
    pytest.skip(reason)


def chromium_executable() -> str:
    path = os.environ.get("WORKBENCH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    require(path is not None, "Debian's chromium is not installed (apt-get install chromium); "
                              ".ci/run installs it")
    return path
