"""The ``workbench`` command.

Thin over :mod:`workbench.services`: each sub-command parses its flags, calls one service and
prints the result. Expected failures (:class:`workbench.errors.WorkbenchError`) become one
line on stderr and a non-zero exit code, never a traceback.

Each feature registers its sub-commands in its own ``_add_*`` function below, so the
parser reads top to bottom in pipeline order.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from workbench.errors import WorkbenchError

Handler = Callable[[argparse.Namespace], int]


# --- project: init, status, app -------------------------------------------------------
def _add_project_commands(sub: argparse._SubParsersAction) -> None:
    from workbench import cli_project

    cli_project.register(sub)


# --- metric engine: eval, compare ------------------------------------------------------
def _add_metric_commands(sub: argparse._SubParsersAction) -> None:
    try:
        from workbench import cli_metrics
    except ImportError:  # pragma: no cover - while the engine is being built
        return
    cli_metrics.register(sub)


# --- corpus: import, chunk, retrieve, pool, export -------------------------------------
def _add_corpus_commands(sub: argparse._SubParsersAction) -> None:
    try:
        from workbench import cli_corpus
    except ImportError:  # pragma: no cover - while ingest is being built
        return
    cli_corpus.register(sub)


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
    _add_project_commands(sub)
    _add_corpus_commands(sub)
    _add_metric_commands(sub)
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
