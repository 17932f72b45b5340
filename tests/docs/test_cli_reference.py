"""``docs/cli.md`` is what the parser produces: every command and sub-command, every flag with
its default and choices, and each command's exit statuses. When this fails, regenerate the page
with ``python -m workbench.cli.reference --write`` (``make docs`` does it too) and commit it."""

from __future__ import annotations

import argparse
import difflib
import subprocess
import sys

from tests.support.prerequisites import REPO
from workbench.cli import build_parser
from workbench.cli.reference import REFERENCE_PATH, REGENERATE, render


def test_committed_reference_matches_the_parser():
    committed = REFERENCE_PATH.read_text(encoding="utf-8")
    produced = render()
    if committed != produced:
        diff = "".join(list(difflib.unified_diff(committed.splitlines(True), produced.splitlines(True),
                                                 "docs/cli.md (committed)", "docs/cli.md (parser)"))[:60])
        raise AssertionError(f"docs/cli.md differs from the parser; regenerate it with `{REGENERATE}`\n{diff}")


def _walk(parser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield (*path, name), child
                yield from _walk(child, (*path, name))


def test_every_command_flag_default_and_exit_status_is_in_the_reference():
    """Read against the parser, not against render(): each command has its section, each of its
    flags is a table row with its default and choices, and its epilog's exit codes are listed."""
    text = render()
    commands = list(_walk(build_parser()))
    assert len(commands) >= 40
    for path, parser in commands:
        heading = f"workbench {' '.join(path)} {{#workbench-{'-'.join(path)}}}"
        start = text.index(heading)
        end = text.find("\n#", start + len(heading))
        section = text[start:end if end != -1 else None]
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            names = action.option_strings or [action.metavar or action.dest]
            row = next((line for line in section.splitlines() if line.startswith(f"| `{names[0]}`")), None)
            assert row is not None, f"{heading}: no row for {names[0]}"
            if action.option_strings and isinstance(action.default, (int, float, str)) and not isinstance(action.default, bool) \
                    and action.default not in ("", None) and action.nargs != 0:
                assert f"`{action.default}`" in row, f"{heading} {names[0]}: default {action.default!r} missing"
            for choice in action.choices or ():
                assert f"`{choice}`" in row, f"{heading} {names[0]}: choice {choice!r} missing"
        if parser.epilog and "exit status:" in parser.epilog:
            codes = [line.split()[0] for line in parser.epilog.split("exit status:", 1)[1].splitlines() if line.strip()]
            for code in codes:
                assert f"\n  {code} " in section, f"{heading}: exit status {code} missing"


def test_check_mode_reports_a_stale_file(tmp_path):
    stale = tmp_path / "cli.md"
    stale.write_text(render().replace("exit status:", "exit codes:", 1), encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "workbench.cli.reference", "--check", "--path", str(stale)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert REGENERATE in result.stderr
    result = subprocess.run([sys.executable, "-m", "workbench.cli.reference", "--write", "--path", str(stale)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and stale.read_text(encoding="utf-8") == render()
