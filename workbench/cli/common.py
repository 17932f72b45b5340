"""What every command shares: settings from the global flags, opening the project, progress
bars, list-valued options and JSON output. Command modules import from here, never from each
other.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from workbench.config import Settings, load_settings
from workbench.errors import InputError


def settings_from_args(args: argparse.Namespace, **overrides) -> Settings:
    """Settings for a command: defaults < file < environment < the global flags and ``overrides``."""
    layered: dict[str, dict] = {"project": {"db": getattr(args, "db", None)}}
    for dotted, value in overrides.items():
        section, key = dotted.split(".", 1)
        layered.setdefault(section, {})[key] = value
    return load_settings(getattr(args, "config", None), layered)


def open_project_from_args(args: argparse.Namespace):
    """The project database named by ``--db`` (or the configuration), opened for one command."""
    from workbench.services.project import open_project

    return open_project(settings_from_args(args).db_path)


@contextmanager
def progress_bar(description: str, total: int | None = None, unit: str = "it", *,
                 disable: bool | None = None, leave: bool = False) -> Iterator:
    """The commands' :mod:`workbench.services.progress` factory: a tqdm bar on stderr with rate
    and ETA (results go to stdout). ``disable=None`` lets tqdm switch itself off when stderr is
    not a terminal (pipes, CI logs); ``disable=False`` forces it on."""
    from tqdm import tqdm

    bar = tqdm(total=total, desc=description, unit=f" {unit}", unit_scale=True, file=sys.stderr,
               disable=disable, leave=leave, mininterval=0.5, dynamic_ncols=True)
    try:
        yield bar.update
    finally:
        bar.close()


def add_progress_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--progress", action="store_true",
                        help="show a progress bar even when stderr is not a terminal "
                             "(by default it shows only on a terminal)")
    parser.add_argument("--no-progress", action="store_true", help="never show a progress bar")


def progress_from_args(args: argparse.Namespace):
    """A progress factory: a bar on a terminal (or with ``--progress``), silence otherwise."""
    if getattr(args, "no_progress", False):
        from workbench.services.progress import no_progress

        return no_progress
    force = getattr(args, "progress", False)
    return functools.partial(progress_bar, disable=None if not force else False, leave=True)


def names_option(text: str | None, flag: str) -> list[str]:
    """A comma-separated list of names from a flag's value; an empty list is an error."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if not names:
        raise InputError(f"{flag} needs a comma-separated list of names, like {flag} bm25,dense")
    return names


def add_format_option(parser: argparse.ArgumentParser, choices: tuple[str, ...] = ("table", "json"),
                      default: str = "table") -> None:
    parser.add_argument("--format", choices=choices, default=default,
                        help=f"output format: {', '.join(choices)} (default: {default})")


def jsonable(value: Any) -> Any:
    """Plain JSON values: NaN and infinities become null, numpy scalars become numbers."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def print_json(value: Any) -> None:
    print(json.dumps(jsonable(value), indent=2, ensure_ascii=False))
