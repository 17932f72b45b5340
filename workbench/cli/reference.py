"""The command-line reference (``docs/cli.md``), written from the parser itself.

    python -m workbench.cli.reference            # print the reference
    python -m workbench.cli.reference --write    # rewrite docs/cli.md (``make docs`` does this)
    python -m workbench.cli.reference --check    # exit 1 when docs/cli.md differs from the parser

Every command and sub-command of :func:`workbench.cli.build_parser` gets its description, its
usage line, a table of its arguments (flag, value, default, choices, help) and the exit-status
list of its epilog. The text depends only on the parser: usage lines are laid out for a fixed
width, whatever the terminal, so the file is the same on every machine.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from workbench.cli import build_parser

#: Where the reference lives in a checkout.
REFERENCE_PATH = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
REGENERATE = "python -m workbench.cli.reference --write"
WIDTH = 90

HEADER = f"""# Command-line reference

Every command, sub-command and flag of `workbench`, with its default, its choices and its exit
statuses, as the parser defines them. `workbench COMMAND --help` prints the same in a terminal.

This page is generated from the parser; do not edit it by hand. Regenerate it with
`{REGENERATE}` (`make docs` does too): `tests/docs/test_cli_reference.py` fails when it differs
from what the parser produces.
"""


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(path, parser, help) for every command below ``parser``, depth first in parser order."""
    sub = _subparsers(parser)
    if sub is None:
        return
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    seen: set[int] = set()
    for name, child in sub.choices.items():
        if id(child) in seen:  # an alias names the same parser again
            continue
        seen.add(id(child))
        yield (*path, name), child, helps.get(name)
        yield from _commands(child, (*path, name))


def _inline(text: str) -> str:
    """One table cell: whitespace folded, pipes and angle brackets escaped."""
    text = " ".join(str(text).split())
    parts = text.split("`")
    for i, part in enumerate(parts):
        if i % 2 == 0:
            part = part.replace("\\", "\\\\").replace("<", "&lt;").replace(">", "&gt;")
            part = re.sub(r"([*\[\]|])", r"\\\1", part)
        else:  # a pipe inside a code span: close the span around an escaped pipe (see _code)
            part = part.replace("|", "`\\|`")
        parts[i] = part
    if len(parts) % 2 == 0:  # an unmatched backtick: show it literally
        return "\\`".join(["`".join(parts[:-1]), parts[-1]])
    return "`".join(parts)


def _code(value: object) -> str:
    """A table cell's code span; a pipe is written between two spans, escaped (a pipe inside a
    code span would end the cell on GitHub, and an escaped one shows its backslash in mkdocs)."""
    pieces = [f"`` {piece} ``" if "`" in piece else f"`{piece}`" for piece in str(value).split("|")]
    return "\\|".join(pieces)


def _formatter(parser: argparse.ArgumentParser) -> argparse.HelpFormatter:
    return argparse.HelpFormatter(parser.prog, width=WIDTH)


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = _formatter(parser)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _default(action: argparse.Action) -> str:
    default = action.default
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction,
                           argparse._CountAction, argparse._StoreConstAction, argparse._AppendConstAction)):
        return ""
    if default is None or default is argparse.SUPPRESS or default == [] or default == "":
        return ""
    if isinstance(default, (list, tuple)):
        return ", ".join(_code(v) for v in default)
    return _code(default)


def _value(action: argparse.Action) -> str:
    """The flag's value as the usage line names it; blank for switches, positionals, and flags
    whose choices (their own column) are the value."""
    if action.nargs == 0 or not action.option_strings or (action.choices is not None and action.metavar is None):
        return ""
    formatter = argparse.HelpFormatter("workbench", width=WIDTH)
    return _code(formatter._format_args(action, action.dest.upper()))


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    try:
        text = _formatter(parser)._expand_help(action)
    except (KeyError, TypeError, ValueError):
        text = action.help
    return _inline(text)


def _choices(action: argparse.Action) -> str:
    if action.choices is None or isinstance(action, argparse._SubParsersAction):
        return ""
    return ", ".join(_code(c) for c in action.choices)


def _arguments_table(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            name = ", ".join(_code(s) for s in action.option_strings)
            value = _value(action)
            name += f" {value}" if value else ""
        else:
            name = _code(action.metavar or action.dest)
        if (action.required or not action.option_strings) and action.nargs not in ("?", "*"):
            name += " (required)"
        rows.append(f"| {name} | {_default(action)} | {_choices(action)} | {_help(parser, action)} |")
    if not rows:
        return []
    return ["| argument | default | choices | what it does |", "| --- | --- | --- | --- |", *rows]


def _epilog(parser: argparse.ArgumentParser) -> list[str]:
    if not parser.epilog:
        return []
    return ["```text", parser.epilog.strip("\n"), "```"]


def _anchor(path: tuple[str, ...]) -> str:
    return "workbench-" + "-".join(re.sub(r"[^a-z0-9]+", "-", p.lower()).strip("-") for p in path)


def _section(path: tuple[str, ...], parser: argparse.ArgumentParser, help_text: str | None) -> list[str]:
    level = "#" * (len(path) + 1)
    lines = [f"{level} workbench {' '.join(path)} {{#{_anchor(path)}}}", ""]
    description = parser.description or help_text
    if description:
        lines += [_inline(description), ""]
    lines += ["```text", _usage(parser), "```", ""]
    sub = _subparsers(parser)
    if sub is not None:
        helps = {choice.dest: choice.help for choice in sub._choices_actions}
        lines += ["| sub-command | what it does |", "| --- | --- |"]
        lines += [f"| [`{name}`](#{_anchor((*path, name))}) | {_inline(helps.get(name) or '')} |"
                  for name in sub.choices]
        lines.append("")
    table = _arguments_table(parser)
    if table:
        lines += [*table, ""]
    epilog = _epilog(parser)
    if epilog:
        lines += [*epilog, ""]
    return lines


def render(parser: argparse.ArgumentParser | None = None) -> str:
    """The whole reference as Markdown."""
    if parser is None:
        parser = build_parser()
    lines = [HEADER, "## Global options", "", "```text", _usage(parser), "```", "",
             *_arguments_table(parser), "", "## Commands", ""]
    commands = list(_commands(parser))
    lines += ["| command | what it does |", "| --- | --- |"]
    lines += [f"| [`workbench {' '.join(path)}`](#{_anchor(path)}) | {_inline(help_text or child.description or '')} |"
              for path, child, help_text in commands if len(path) == 1]
    lines.append("")
    for path, child, help_text in commands:
        lines += _section(path, child, help_text)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.cli.reference",
                                     description="Write or check docs/cli.md from the workbench parser.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"rewrite {REFERENCE_PATH.name} in place")
    mode.add_argument("--check", action="store_true", help="exit 1 when the file differs from the parser")
    parser.add_argument("--path", type=Path, default=REFERENCE_PATH, help="the reference file (default docs/cli.md)")
    args = parser.parse_args(argv)
    os.environ.setdefault("COLUMNS", str(WIDTH))
    text = render()
    if args.write:
        args.path.write_text(text, encoding="utf-8")
        print(f"wrote {args.path} ({len(text.splitlines())} lines)")
        return 0
    if args.check:
        current = args.path.read_text(encoding="utf-8") if args.path.exists() else ""
        if current != text:
            print(f"{args.path} differs from the parser; regenerate it with `{REGENERATE}`", file=sys.stderr)
            return 1
        print(f"{args.path} matches the parser")
        return 0
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
