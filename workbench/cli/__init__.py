"""The ``workbench`` command.

Thin over :mod:`workbench.services`: each sub-command parses its flags, calls one service and
prints the result. Expected failures (:class:`workbench.errors.WorkbenchError`) become one
line on stderr and a non-zero exit code, never a traceback.

Each command group registers its sub-commands in its own module of this package (listed in
``COMMAND_GROUPS`` in pipeline order).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence

from workbench.cli import lean
from workbench.cli.common import error_text, exit_codes_epilog, keep_error_data
from workbench.errors import WorkbenchError, clip, is_interrupt
from workbench.version import __version__

Handler = Callable[[argparse.Namespace], int]


# Command groups in pipeline order: modules of this package, each exposing register(subparsers)
# and setting `handler` on its parsers. The list is explicit: a module that fails to import is an
# error when the parser is built, never a command that silently disappears. They are imported when
# the parser is built (a command of ALONE imports its own group only).
COMMAND_GROUPS = (
    "project",     # init, status, app
    "data",        # import, export
    "retrieval",   # chunk, retrieve, pool, pool-stats
    "harness",     # harness (external retrievers: a run, like retrieve)
    "judge",       # judge
    "calibrate",   # agree, calibrate sample|report|gate
    "labels",      # synth, labels propagate|unpropagate|budget
    "evaluation",  # eval
    "compare",     # compare
    "ppi",         # ppi (judge-corrected intervals, PPI++)
    "stages",      # stages
    "citations",   # citations
    "query_kinds",  # abstention, rbac-check, multihop, answerability
    "rank_agreement",  # rank-agreement
    "sweep",       # sweep, latency import
    "jobs",        # jobs list|stop|resume (background jobs the pages started)
)


def command_group(name: str):
    """The module of command group ``name`` (one of :data:`COMMAND_GROUPS`)."""
    return importlib.import_module(f"{__name__}.{name}")


#: Exit codes some commands add to the common ones (:data:`workbench.cli.common.EXIT_CODES`).
EXTRA_EXIT_CODES: dict[str, tuple[tuple[int, str], ...]] = {
    "judge": ((6, "stopped early (budget reached, cancelled, batch still running): run it again to resume"),),
    "harness": ((6, "the run is stored, but some queries failed (each is recorded with its error)"),),
    "calibrate gate": ((0, "the gate passes"), (1, "the gate fails"),
                       (2, "the gate is inconclusive (argparse also exits 2 on a bad command line)")),
}


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, except that a text with line breaks (an exit-status list) keeps
    them; one-paragraph descriptions are still wrapped to the terminal."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def _exit_status_everywhere(parser: argparse.ArgumentParser, path: str = "") -> None:
    """Give every command's --help an exit-status section (commands may write their own)."""

    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for name, child in action.choices.items():
            full = f"{path} {name}".strip()
            # a command (it has a handler) may also have sub-commands: `judge` and `judge learn`
            command = child.get_default("handler") is not None
            if child.epilog is None and (command or not any(isinstance(a, argparse._SubParsersAction)
                                                            for a in child._actions)):
                child.epilog = exit_codes_epilog(EXTRA_EXIT_CODES.get(full, ()))
                if child.formatter_class is argparse.HelpFormatter:
                    child.formatter_class = _HelpFormatter
            _exit_status_everywhere(child, full)


def _register_commands(sub: argparse._SubParsersAction, groups=COMMAND_GROUPS) -> None:
    for name in groups:
        command_group(name).register(sub)


#: Commands whose group is registered alone when the command line names them. ``eval`` runs in
#: loops (a CI script scoring each run file): building every command's parser imports the judge's
#: and retrievers' option tables (configuration, prompts), several times the parse itself.
ALONE = {"eval": "evaluation"}
_GLOBAL_WITH_VALUE = ("--db", "--config")


def command_word(argv: Sequence[str]) -> str | None:
    """The command named on a command line (the first word after the global options), or None
    when the line has none or a global option this cannot skip for certain (an abbreviation)."""
    words = iter(argv)
    for word in words:
        if word in _GLOBAL_WITH_VALUE:
            next(words, None)
        elif word.startswith(tuple(f"{o}=" for o in _GLOBAL_WITH_VALUE)):
            continue
        elif word.startswith("-"):
            return None
        else:
            return word
    return None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``workbench`` parser: every command, or only the group of a command of :data:`ALONE`
    when ``argv`` names one (the same parser for that command, built in a fraction of the time)."""
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
    # ``group``, not ``command``: a command may have its own --command option (harness).
    sub = parser.add_subparsers(dest="group", metavar="COMMAND")
    alone = ALONE.get(command_word(argv)) if argv is not None else None
    _register_commands(sub, (alone,) if alone is not None else COMMAND_GROUPS)
    # the registered command names, for handlers that point at other commands (``status``)
    parser.set_defaults(commands=tuple(sub.choices))
    _exit_status_everywhere(parser)
    return parser


def _undecodable_argument(argv: Sequence[str]) -> str | None:
    """The first argument holding bytes that are not UTF-8 (Python keeps them as lone
    surrogates, which no file name, id or database value can hold), shown as bytes."""
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            return clip(str(arg.encode("utf-8", "surrogateescape"))[1:], quote=False)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # a lean command runs without the cyclic garbage collector: its imports (numpy, pyarrow)
    # make hundreds of thousands of objects, and the collections they set off find nothing
    pause_gc = command_word(argv) in lean.LEAN_COMMANDS and gc.isenabled()
    if pause_gc:
        gc.disable()
    try:
        return _main(argv)
    finally:
        if pause_gc:  # callers of main() in their own process get their collector back
            gc.enable()


def _main(argv: list[str]) -> int:
    bad = _undecodable_argument(argv)
    if bad is not None:
        print(f"workbench: error: argument {bad} is not UTF-8 text; pass names, ids and paths as UTF-8",
              file=sys.stderr)
        return 2
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if args.version:
        print(__version__)
        return 0
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    huge_pages_off = lean.set_up(args) if args.group in lean.LEAN_COMMANDS else False
    try:
        code = handler(args)
        sys.stdout.flush()  # a closed pipe shows up here, inside the handler below
        return code
    except WorkbenchError as exc:
        keep_error_data(exc)
        print(f"workbench {args.group}: error: {error_text(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"workbench {args.group}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`workbench status | head -1`): stop quietly, as Unix tools do,
        # and keep the interpreter's final flush from raising again on the dead pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # killed by SIGPIPE, the exit status a shell expects
    except Exception as exc:
        if not caused_by_ctrl_c(exc):
            raise
        print(f"workbench {args.group}: interrupted", file=sys.stderr)
        return 130
    finally:
        if huge_pages_off:  # callers of main() in their own process get their huge pages back
            lean.restore_huge_pages()


def caused_by_ctrl_c(exc: BaseException) -> bool:
    """Whether a KeyboardInterrupt (or DuckDB's ``RuntimeError("Query interrupted")``,
    :func:`workbench.errors.is_interrupt`) stands anywhere in ``exc``'s chain (``__cause__`` or
    ``__context__``). A Ctrl-C while a C extension initialises (duckdb's, imported when a command
    first opens the project) comes out as ``ImportError: Encountered an error while initializing
    the extension`` raised from the KeyboardInterrupt: still the user's interrupt, so still one
    line and exit 130 (seen under load: the judge interrupted 0.3 of the way through its run, which
    was still in start-up). The chain is walked once per exception, so a cycle cannot loop."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if is_interrupt(current):  # DuckDB's "Query interrupted" too: a read stopped by Ctrl-C
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def run() -> None:
    """The ``workbench`` program (its console script and ``python -m workbench``): :func:`main`
    with the process's arguments, then exit with its code.

    Once ``main`` has returned, the command's outcome is decided and reported, so from then on
    Ctrl-C is ignored: a SIGINT that lands while the interpreter shuts down would otherwise raise
    inside an exit handler (tqdm's monitor thread, a thread join) and print its traceback after
    the command's last line (seen once in 8 interrupts of a 100,000-document import that had just
    finished). One that lands in the few instructions before it is ignored exits 130 quietly.
    ``main`` itself leaves the handlers alone, so in-process callers keep their Ctrl-C."""
    try:
        code = main()
    except KeyboardInterrupt:  # between main's own handler and the line below
        code = 130
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if command_word(sys.argv[1:]) in lean.LEAN_COMMANDS and lean.nothing_left_to_tear_down():
        os._exit(code)
    raise SystemExit(code)

