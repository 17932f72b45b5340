"""Locate the project's shared data (``../shared`` next to the checkout) from tests.

``shared_path("oracles", "trec_eval", "qrels.test")`` returns the path, or skips the test with
the reason when the data is absent - except on CI (env ``CI=true``), where absence fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        reason = f"shared test data not found: {path} (expected ../shared next to the checkout)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path
