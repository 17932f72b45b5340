"""``workbench eval`` builds only its own parser (issue 36): the same command line, help and
arguments as with every command registered, without importing the other commands' option
tables (the judge's configuration and prompts)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from tests.support.prerequisites import REPO
from workbench.cli import build_parser, command_word


@pytest.mark.parametrize(("argv", "word"), [
    (["eval", "q.txt", "r.txt"], "eval"),
    (["--db", "x.duckdb", "eval", "q.txt"], "eval"),
    (["--db=x.duckdb", "--config", "c.toml", "eval"], "eval"),
    (["--config=c.toml", "status"], "status"),
    (["--d", "x.duckdb", "eval"], None),  # an abbreviation: argparse would take it, so build everything
    (["--version"], None),
    (["-h"], None),
    ([], None),
    (["--db"], None),
])
def test_command_word_skips_the_global_options(argv, word):
    assert command_word(argv) == word


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices[name]


def test_eval_alone_parses_and_helps_as_with_every_command():
    argv = ["--db", "p.duckdb", "eval", "q.txt", "a.txt", "b.txt", "-m", "ndcg@10", "-m", "map", "--format", "json"]
    alone, full = build_parser(argv), build_parser()
    assert list(_subparser(full, "status")._actions)  # the full parser has the other commands
    with pytest.raises(KeyError):
        _subparser(alone, "status")
    assert _subparser(alone, "eval").format_help() == _subparser(full, "eval").format_help()
    got, want = vars(alone.parse_args(argv)), vars(full.parse_args(argv))
    assert got.pop("commands") == ("eval",) and len(want.pop("commands")) > 20
    assert got == want


PROBE = """
import json, sys
from workbench.cli import build_parser
build_parser(sys.argv[1:])
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("workbench.services.judge", "workbench.config",
                                                                 "workbench.services.retrieval")))))
"""


def test_eval_does_not_import_the_other_commands_options():
    def imported(*argv: str) -> list[str]:
        out = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, cwd=REPO,
                             check=True, timeout=120)
        return json.loads(out.stdout)

    assert imported("eval", "q.txt", "r.txt") == []
    assert "workbench.services.judge.request" in imported("status")  # the probe sees them otherwise
