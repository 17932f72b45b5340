"""What every command shares: settings from the global flags, opening the project, progress
bars, list-valued options, the measure options, number and JSON output. Command modules import
from here, never from each other.

Building the parser must stay cheap (``workbench --help`` in well under 0.3 s): this module
imports only the standard library at the top; anything heavier is imported inside the function
that needs it, when a command runs.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from workbench import lazylibs
from workbench.cli import lazy
from workbench.errors import ERROR_FILE_ENV, InputError, WorkbenchError, error_data, field_flag, render_text

if TYPE_CHECKING:
    from workbench.config import Settings

#: Exit codes every command keeps (a CI script may rely on them); the values come from
#: :mod:`workbench.errors` and argparse.
EXIT_CODES = (
    (0, "success"),
    (1, "unexpected failure"),
    (2, "bad command line: unknown option, missing argument or invalid option value"),
    (3, "bad input: a file is missing, unreadable or malformed, or gives nothing to evaluate"),
    (4, "the project database cannot be used as asked"),
    (5, "the project database is locked by another process"),
    (130, "interrupted (Ctrl-C)"),
)


#: The flag of each field an error may concern (:class:`workbench.errors.WorkbenchError`): the one
#: place the CLI names a field. A field missing here is named ``--`` + its key (``_`` as ``-``).
FIELD_FLAGS: dict[str, str] = {
    "name": "--name", "k": "--k", "runs": "--runs", "chunking": "--chunking", "backend": "--backend",
    "device": "--device", "precision": "--precision", "size": "--size", "overlap": "--overlap",
    "out": "--out", "force": "--force", "pool": "--pool", "depth": "--depth", "model": "--model",
}


#: What "pass FLAG" shows after the flag, for fields whose value needs an example.
FIELD_EXAMPLES: dict[str, str] = {"runs": "A,B"}


def flag_of(field: str) -> str:
    return FIELD_FLAGS.get(field) or field_flag(field)


def _pass(field: str) -> str:
    return " ".join(["pass", flag_of(field), *([FIELD_EXAMPLES[field]] if field in FIELD_EXAMPLES else [])])


def _valued(kind: str, field: str, value: str) -> str:
    shown = flag_of(field) if value == "True" else f"{flag_of(field)} {value}"  # a switch is its flag alone
    return f"{'pass ' if kind == 'set_field' else ''}{shown}"


#: The CLI's words for the placeholders of :mod:`workbench.errors` (as ``render`` takes them).
CLI_WORDS = {"name": flag_of, "action": _pass, "valued": _valued}


def error_text(exc: WorkbenchError) -> str:
    """An error as the CLI says it: its field as the flag (``{set_field}``: ``pass --runs A,B``)."""
    return exc.render(**CLI_WORDS)


def keep_error_data(exc: WorkbenchError) -> None:
    """Write ``exc`` as data (:func:`workbench.errors.error_data`) to the file named by
    :data:`workbench.errors.ERROR_FILE_ENV`, when the process that launched this command set it
    (the Judge page words the error itself: labels, not flags). A file that cannot be written is
    skipped: the error is still printed."""


    path = os.environ.get(ERROR_FILE_ENV)
    if not path:
        return
    try:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(error_data(exc), out)
    except OSError:
        pass


def cli_text(text: str) -> str:
    """Text that is not an error (a job's status message, a note) in the CLI's words, as
    :func:`error_text` says an error: ``{field:budget}`` -> ``--budget``."""
    return render_text(text, **CLI_WORDS)


def wrapped(text: str) -> str:
    """A help description wrapped to 78 columns (the commands use a raw formatter so that their
    epilogs keep their layout, which also stops argparse from wrapping the description)."""

    return lazylibs.textwrap.fill(" ".join(text.split()), 78)


def exit_codes_epilog(extra: tuple[tuple[int, str], ...] = ()) -> str:
    """The exit codes as a help epilog paragraph; ``extra`` adds a command's own codes (or gives
    a common code the command's meaning)."""
    codes = dict(EXIT_CODES)
    codes.update(extra)
    return "exit status:\n" + "\n".join(f"  {code:<4} {text}" for code, text in sorted(codes.items()))


def settings_from_args(args: argparse.Namespace, **overrides) -> Settings:
    """Settings for a command: defaults < file < environment < the global flags and ``overrides``
    (:func:`workbench.services.settings.project_settings`, as the Python API builds them)."""

    return lazy.settings.project_settings(getattr(args, "db", None), getattr(args, "config", None), overrides)


def open_project_from_args(args: argparse.Namespace):
    """The project database named by ``--db`` (or the configuration), opened for one command."""

    return lazy.project_lifecycle.open_project(settings_from_args(args).db_path)


@contextmanager
def progress_bar(description: str, total: int | None = None, unit: str = "it", *,
                 disable: bool | None = None, leave: bool = False) -> Iterator:
    """The commands' :mod:`workbench.services.progress` factory: a tqdm bar on stderr with rate
    and ETA (results go to stdout). ``disable=None`` lets tqdm switch itself off when stderr is
    not a terminal (pipes, CI logs); ``disable=False`` forces it on."""

    bar = lazylibs.tqdm.tqdm(total=total, desc=description, unit=f" {unit}", unit_scale=True, file=sys.stderr,
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
        return lazy.progress.no_progress
    force = getattr(args, "progress", False)
    return functools.partial(progress_bar, disable=None if not force else False, leave=True)


def names_option(text: str | None, flag: str) -> list[str]:
    """A comma-separated list of names from a flag's value; an empty list is an error."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if not names:
        raise InputError(f"{flag} needs a comma-separated list of names, like {flag} bm25,dense")
    return names


_FORMAT_HELP = {
    "table": "aligned text for people",
    "tsv": "tab-separated rows for scripts",
    "json": "one JSON document on stdout",
}


def add_format_option(parser: argparse.ArgumentParser, choices: tuple[str, ...] = ("table", "json"),
                      default: str = "table") -> None:
    described = "; ".join(f"{c}: {_FORMAT_HELP[c]}" if c in _FORMAT_HELP else c for c in choices)
    parser.add_argument("--format", choices=choices, default=default,
                        help=f"output format ({described}; default: {default})")


def add_stored_run_options(parser: argparse.ArgumentParser, runs_help: str) -> None:
    """``--runs`` with ``--labels``, ``--level`` and ``--chunking``: score runs stored in the
    project against its qrels (the [qrels] policy) instead of files, as eval and compare take them."""
    project = parser.add_argument_group(
        "stored runs (instead of files): the project's qrels, stored as an evaluation")
    project.add_argument("--runs", dest="stored_runs", metavar="A,B", help=runs_help)
    project.add_argument("--labels", choices=("human", "llm", "merged", "corrected"), default="merged",
                         help="which labels make the qrels, by the [qrels] policy (default: merged); corrected: "
                              "the judge's labels corrected by the SME labels of a query-design calibration "
                              "sample (PPI++ estimates and intervals, not stored)")
    project.add_argument("--level", choices=("doc", "chunk"), default=None,
                         help="score documents or chunks (default: the runs' own level)")
    project.add_argument("--chunking", metavar="NAME", default=None,
                         help="the chunking of chunk-level qrels (default: the runs' chunking)")
    project.add_argument("--judge", metavar="CONFIG", default=None,
                         help="with --labels corrected: the judge configuration whose labels are corrected (key, key "
                              "prefix or model; default: the one configuration that passed the gate)")


def add_measure_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """``-m/--measure`` (repeatable) and ``--rel``, as eval, compare and stages take them."""
    parser.add_argument(
        "-m", "--measure", action="append", default=[], metavar="MEASURE",
        help="a measure, repeatable, e.g. ndcg@10, P@10, R(rel=2)@100, AP, RR@10, RBP(p=0.8), "
             "judged@10" + ("" if required else " (optional with --lift)"),
    )
    parser.add_argument(
        "--rel", type=int, default=1, metavar="N",
        help="relevance threshold: a document is relevant when its grade is >= N; a measure's "
             "own (rel=N) overrides it (default: 1)",
    )


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (argparse turns the ValueError into a usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def number(x: float | None, signed: bool = False, digits: int = 4) -> str:
    """A score for a table: fixed decimals, ``-`` when undefined (None or NaN)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def aligned(rows: list[list[str]], *, text_columns: int = 1) -> list[str]:
    """Rows of cells as aligned lines: the first ``text_columns`` left-aligned, numbers right."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) if i < text_columns else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in rows
    ]


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
