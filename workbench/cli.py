"""The ``workbench`` command.

Thin over :mod:`workbench.services`: each sub-command parses its flags, calls one service and
prints the result. Expected failures (:class:`workbench.errors.WorkbenchError`) become one
line on stderr and a non-zero exit code, never a traceback.

Each feature registers its sub-commands in its own ``cli_*`` module (listed in
``COMMAND_MODULES`` in pipeline order).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from workbench.errors import WorkbenchError

Handler = Callable[[argparse.Namespace], int]


# Sub-command modules in pipeline order; each exposes register(subparsers) and sets
# `handler` on its parsers. A module not built yet is skipped.
COMMAND_MODULES = (
    "workbench.cli_project",    # init, status, app
    "workbench.cli_corpus",     # import, export
    "workbench.cli_retrieval",  # chunk, retrieve, pool
    "workbench.cli_metrics",    # eval, compare
    "workbench.cli_stages",     # stages
)


def _register_commands(sub: argparse._SubParsersAction) -> None:
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Relevance Workbench: pool, judge, calibrate and evaluate retrieval.",
    )
    parser.add_argument(
        "--db",
        metavar="PATH",
        help="project database (DuckDB file); default from config/workbench.toml or WORKBENCH_DB",
    )
    parser.add_argument(
        "--config", metavar="PATH", help="configuration file (default: config/workbench.toml)"
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _register_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from workbench import __version__

        print(__version__)
        return 0
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args)
    except WorkbenchError as exc:
        print(f"workbench {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"workbench {args.command}: interrupted", file=sys.stderr)
        return 130
