"""The settings an operation runs with, built one way for every front end (the CLI's
``settings_from_args``, the Python API's ``Project.settings``): defaults < configuration file <
environment < the project database and the caller's overrides."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workbench.config import Settings, load_settings


def project_settings(db: str | Path | None = None, config: str | Path | None = None,
                     overrides: Mapping[str, Any] | None = None) -> Settings:
    """Settings for one operation: ``config`` (None: ``$WORKBENCH_CONFIG`` or
    ``./config/workbench.toml``), then the environment, then ``db`` as ``[project] db`` and
    ``overrides`` as dotted keys (``{"judge.model": "x", "pool.depth": 30}``). A None value (an
    option not given) is ignored, so it never masks a lower layer."""
    layered: dict[str, dict[str, Any]] = {"project": {"db": None if db is None else str(db)}}
    for dotted, value in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        layered.setdefault(section, {})[key] = value
    return load_settings(config, layered)
