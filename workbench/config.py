"""Configuration: documented defaults, overridable by file, environment and flags.

Precedence, lowest first:

1. the built-in defaults below (``DEFAULTS``; ``config/workbench.toml`` documents the same values
   and a test keeps the two equal);
2. a TOML file: ``--config PATH``, else ``$WORKBENCH_CONFIG``, else ``./config/workbench.toml`` if it
   exists in the working directory;
3. environment variables ``WORKBENCH_<SECTION>_<KEY>`` (``WORKBENCH_JUDGE_MODEL=...``), plus the
   shortcut ``WORKBENCH_DB`` for ``project.db``;
4. explicit overrides (command-line flags), passed to :func:`load_settings`.

Secrets are not settings: the judge's API key is read from ``OPENAI_API_KEY`` (or Streamlit
secrets in the app) at the moment a client is built, and is never stored.
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError

DEFAULTS: dict[str, dict[str, Any]] = {
    "project": {"db": "var/demo.duckdb"},
    "judge": {
        "base_url": "https://api.openai.com/v1",
        "allowed_hosts": "",
        "model": "gpt-4o-mini",
        "prompt": "relevance_v1",
        "concurrency": 4,
        "temperature": 0.0,
        "max_tokens": 200,
        "response_format": "auto",
        "max_attempts": 4,
        "timeout": 60.0,
        "backoff_initial": 0.5,
        "backoff_max": 60.0,
        "requests_per_minute": 0,
        "tokens_per_minute": 0,
        "samples": 1,
        "aggregate": "majority",
        "budget_usd": 0.0,
        "batch_size": 200,
        "flush_seconds": 2.0,
        "db_wait": 30.0,
        "poll_seconds": 10.0,
        "batch_discount": 0.5,
        "estimate_completion_tokens": 60,
        # model -> [USD per 1M input tokens, USD per 1M output tokens]
        "prices": {
            "gpt-4o-mini": [0.15, 0.6],
            "gpt-4o": [2.5, 10.0],
            "gpt-4.1": [2.0, 8.0],
            "gpt-4.1-mini": [0.4, 1.6],
            "gpt-4.1-nano": [0.1, 0.4],
            "offline-lexical": [0.0, 0.0],
        },
    },
    "pool": {"depth": 20},
    "jobs": {"background_from": 5000},
    "evaluation": {"relevance_threshold": 1, "min_overlap": 0.5},
    "calibration": {
        "relevant_min_grade": 2,
        "min_tpr": 0.85,
        "min_tnr": 0.85,
        "min_kappa": 0.60,
        "sample_size": 200,
        "holdout_share": 0.75,
        "bootstrap_resamples": 2000,
        "high_risk_tags": "",
        "high_risk_min_rate": 0.90,
        "overlap": 0,
        "min_visible_ms": 300,
        "guidelines": "",
    },
    "qrels": {
        "order": "adjudicated,sme,imported,llm",
        "sme_rule": "majority",
        "ties": "higher",
        "llm_labels": "passed_gate",
        "propagated": False,
        "synthetic": "exclude",
    },
    "app": {"host": "127.0.0.1", "port": 8501, "auth": "none", "data_dirs": "data",
            "allow_public_without_auth": False, "allowed_hosts": "127.0.0.1, localhost",
            "session_hours": 12.0},
}

ENV_PREFIX = "WORKBENCH_"


@dataclass(frozen=True)
class Settings:
    """Resolved settings. ``values[section][key]``; ``sources`` says where each value came from."""

    values: Mapping[str, Mapping[str, Any]]
    sources: Mapping[str, str]

    def get(self, section: str, key: str) -> Any:
        return self.values[section][key]

    @property
    def db_path(self) -> Path:
        return Path(self.values["project"]["db"])

    def with_overrides(self, overrides: Mapping[str, Mapping[str, Any]]) -> Settings:
        """These settings with ``overrides`` (``{"section": {"key": value}}``, None values
        ignored) on top, as :func:`load_settings` layers command-line values."""
        values = copy.deepcopy({s: dict(e) for s, e in self.values.items()})
        sources = dict(self.sources)
        cleaned = {s: {k: v for k, v in e.items() if v is not None} for s, e in overrides.items()}
        _merge(values, {s: e for s, e in cleaned.items() if e}, "command line", sources)
        return Settings(values=values, sources=sources)


def _coerce(value: Any, default: Any, where: str) -> Any:
    """Convert ``value`` to the type of ``default``; strings from the environment are parsed."""
    kind = type(default)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            if kind is bool:
                lowered = value.strip().lower()
                if lowered in {"1", "true", "yes", "on"}:
                    return True
                if lowered in {"0", "false", "no", "off"}:
                    return False
                raise ValueError(value)
            return kind(value)
        except ValueError:
            pass
    raise ConfigError(
        f"{where}: expected a {kind.__name__} (like {default!r}), got {value!r}"
    )


def _merge(values: dict, overrides: Mapping[str, Mapping[str, Any]], where: str, sources: dict) -> None:
    for section, entries in overrides.items():
        if section not in values:
            raise ConfigError(
                f"{where}: unknown section [{section}]; known sections: {', '.join(values)}"
            )
        if not isinstance(entries, Mapping):
            raise ConfigError(f"{where}: [{section}] must be a table of settings")
        for key, value in entries.items():
            if key not in values[section]:
                known = ", ".join(values[section])
                raise ConfigError(f"{where}: unknown setting {section}.{key}; known: {known}")
            values[section][key] = _coerce(value, DEFAULTS[section][key], f"{where}: {section}.{key}")
            sources[f"{section}.{key}"] = where


def _config_file(explicit: str | os.PathLike | None, env: Mapping[str, str]) -> Path | None:
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist; pass an existing TOML file")
        return path
    if env.get(ENV_PREFIX + "CONFIG"):
        path = Path(env[ENV_PREFIX + "CONFIG"])
        if not path.is_file():
            raise ConfigError(f"WORKBENCH_CONFIG points to {path}, which does not exist")
        return path
    local = Path("config/workbench.toml")
    return local if local.is_file() else None


def load_settings(
    config_file: str | os.PathLike | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Resolve settings by the precedence in the module docstring.

    ``overrides`` holds command-line values as ``{"section": {"key": value}}``; ``None`` values are
    ignored so that unset flags do not mask lower layers.
    """
    env = os.environ if env is None else env
    values = copy.deepcopy(DEFAULTS)
    sources = {f"{s}.{k}": "default" for s, entries in DEFAULTS.items() for k in entries}

    path = _config_file(config_file, env)
    if path is not None:
        try:
            parsed = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at byte {exc.start}); "
                              "re-save the configuration file with UTF-8 encoding") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the configuration file: {exc.strerror or exc}") from None
        except RecursionError:
            raise ConfigError(f"{path}: TOML nested too deeply to read") from None
        except ValueError:  # an integer over Python's 4,300-digit limit
            raise ConfigError(f"{path}: an integer has more than 4,300 digits; use a shorter number") from None
        _merge(values, parsed, str(path), sources)

    from_env: dict[str, dict[str, Any]] = {}
    for section, entries in DEFAULTS.items():
        for key in entries:
            name = f"{ENV_PREFIX}{section}_{key}".upper()
            if name in env:
                from_env.setdefault(section, {})[key] = env[name]
    if ENV_PREFIX + "DB" in env:
        from_env.setdefault("project", {})["db"] = env[ENV_PREFIX + "DB"]
    for section, entries in from_env.items():
        _merge(values, {section: entries}, "environment", sources)

    if overrides:
        cleaned = {
            s: {k: v for k, v in entries.items() if v is not None} for s, entries in overrides.items()
        }
        _merge(values, {s: e for s, e in cleaned.items() if e}, "command line", sources)
    return Settings(values=values, sources=sources)
