"""The README's command-line walkthrough prints what the README says it prints.

Every ```` ```console ```` block of README.md is a list of ``$ COMMAND`` lines, each followed by
the output the command gives (stdout and stderr as a terminal shows them, in the order they are
written). This test runs the commands in order, in an empty folder, with the real ``workbench``
command and none of the user's ``WORKBENCH_*`` or ``OPENAI_API_KEY`` settings, and compares each
output with the README line by line. Only what must vary between runs is normalised, explicitly:
durations (``0.43s``, ``0.6 s``, ``0.20 ms``) and rates (``1,412.0/s``). A block line
``[exit status N]`` states a command's non-zero exit status; every other command must exit 0.
``$ export NAME=VALUE`` sets a variable for the commands after it.

When a command's output changes on purpose, rewrite the blocks with the real output:

    .venv/bin/python -m tests.docs.test_readme_loop --update
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.prerequisites import REPO

README = REPO / "README.md"
UPDATE = "python -m tests.docs.test_readme_loop --update"
BLOCK = re.compile(r"^```console\n(.*?)^```\n", re.S | re.M)
EXIT = re.compile(r"^\[exit status (\d+)\]$")

#: What must vary between runs, and nothing else: a duration in seconds or milliseconds, a rate.
VARYING = (
    (re.compile(r"\b\d[\d,]*(?:\.\d+)?(?=/s\b)"), "<rate>"),
    (re.compile(r"\b\d[\d,]*(?:\.\d+)?(?= ?(?:s|ms)\b)"), "<time>"),
)


@dataclass
class Step:
    command: str
    expected: list[str] = field(default_factory=list)
    exit_status: int = 0


def normalise(line: str) -> str:
    for pattern, placeholder in VARYING:
        line = pattern.sub(placeholder, line)
    return line.rstrip()


def parse_blocks(text: str) -> list[list[Step]]:
    blocks = []
    for match in BLOCK.finditer(text):
        steps: list[Step] = []
        for line in match.group(1).splitlines():
            if line.startswith("$ "):
                steps.append(Step(line[2:].strip()))
            elif not steps:
                raise ValueError(f"README console block starts with output, not a `$ ` command: {line!r}")
            elif (exit_match := EXIT.match(line)) is not None:
                steps[-1].exit_status = int(exit_match.group(1))
            else:
                steps[-1].expected.append(line)
        blocks.append(steps)
    return blocks


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("WORKBENCH_") and k not in {"OPENAI_API_KEY", "OPENAI_BASE_URL", "COLUMNS"}}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"  # stdout and stderr reach the pipe in the order they are written
    return env


def run_step(step: Step, cwd: Path, env: dict[str, str]) -> tuple[list[str], int]:
    words = shlex.split(step.command)
    if words[0] == "export":
        for assignment in words[1:]:
            name, _, value = assignment.partition("=")
            env[name] = value
        return [], 0
    assert words[0] == "workbench", f"README walkthrough runs only workbench commands: {step.command}"
    result = subprocess.run([sys.executable, "-m", "workbench", *words[1:]], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    return result.stdout.rstrip("\n").splitlines() if result.stdout.strip() else [], result.returncode


@pytest.mark.slow
def test_readme_console_blocks_print_what_they_say(tmp_path):
    blocks = parse_blocks(README.read_text(encoding="utf-8"))
    steps = [step for block in blocks for step in block]
    commands = [s.command for s in steps]
    # the loop: a project, the judge, calibration, a second run, evaluation, comparison, qrels
    for needed in ("init --demo", "judge", "calibrate sample", "calibrate gate", "eval --runs", "compare", "export qrels"):
        assert any(needed in c for c in commands), f"README walkthrough has no `workbench {needed}`"
    env = _environment()
    for step in steps:
        got, status = run_step(step, tmp_path, env)
        where = f"README `$ {step.command}`"
        assert status == step.exit_status, (f"{where} exited {status}, the README says {step.exit_status}:\n"
                                            + "\n".join(got) + f"\n(after a deliberate change: {UPDATE})")
        want = [normalise(line) for line in step.expected]
        have = [normalise(line) for line in got]
        assert have == want, (f"{where} printed something else than the README shows "
                              f"(after a deliberate change: {UPDATE}):\n" + "\n".join(got))


def test_normalising_keeps_everything_but_durations_and_rates():
    assert normalise("880 judgments in 0.6 s (1,412.0/s); 0 from the cache") == \
        "880 judgments in <time> s (<rate>/s); 0 from the cache"
    assert normalise("2,777 rows for 44 queries in 0.43s, p50 0.20 ms") == "2,777 rows for 44 queries in <time>s, p50 <time> ms"
    # counts, scores and ids are compared as written
    assert normalise("ndcg@10     0.8038") == "ndcg@10     0.8038"
    assert normalise("880 of 880 judged: 880 ok") == "880 of 880 judged: 880 ok"
    assert normalise("seed 0; 150 held out") == "seed 0; 150 held out"


def test_parse_blocks_reads_commands_output_and_exit_status():
    text = "x\n```console\n$ workbench a\none\ntwo\n$ workbench b\n[exit status 2]\n```\n"
    (a, b), = parse_blocks(text)
    assert (a.command, a.expected, a.exit_status) == ("workbench a", ["one", "two"], 0)
    assert (b.command, b.expected, b.exit_status) == ("workbench b", [], 2)


def update(path: Path = README) -> None:
    """Run every console block and write the real output into it."""
    import tempfile

    text = path.read_text(encoding="utf-8")
    env = _environment()
    with tempfile.TemporaryDirectory() as folder:
        def rewrite(match: re.Match) -> str:
            lines = []
            for block in parse_blocks(match.group(0)):
                for step in block:
                    got, status = run_step(step, Path(folder), env)
                    lines += [f"$ {step.command}", *got] + ([f"[exit status {status}]"] if status else [])
            return "```console\n" + "\n".join(lines) + "\n```\n"

        path.write_text(BLOCK.sub(rewrite, text), encoding="utf-8")
    print(f"rewrote the console blocks of {path}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(f"usage: {UPDATE}")
    update()
