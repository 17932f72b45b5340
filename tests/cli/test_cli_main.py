"""What every command shares: the error prefix names the command, a closed pipe is quiet."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import run_cli
from tests.support.prerequisites import REPO


def test_a_reader_that_goes_away_gets_no_traceback(tmp_path):
    """`workbench --help | head -1`-style use: the pipe's reader closes before the command
    writes. The command stops quietly with the shell's SIGPIPE status (141), no traceback."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes anything
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_DB"}
    try:
        proc = subprocess.run([sys.executable, "-m", "workbench", "--db", str(tmp_path / "p.duckdb"),
                               "init"], stdout=write, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
                              timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == 141, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr


def test_a_ctrl_c_while_the_interpreter_shuts_down_prints_nothing(tmp_path):
    """The command has finished and said so; a Ctrl-C that lands in an exit handler (as one did in
    tqdm's, after a whole import) must not print a traceback under its last line, nor change its
    exit code. An exit handler registered before the program runs interrupts itself with a real
    SIGINT and then gives Python the moment to deliver it."""
    code = ("import atexit, os, signal, time\n"
            "atexit.register(lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(0.5)))\n"
            "from workbench.cli import run\n"
            "run()\n")
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_DB"}
    proc = subprocess.run([sys.executable, "-c", code, "--db", str(tmp_path / "p.duckdb"), "init"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
    assert proc.stdout.startswith("project database ready: "), proc.stdout


def _status_with_duckdb_failing(tmp_path, raise_line: str) -> subprocess.CompletedProcess:
    """``workbench status`` in a real process whose first ``import duckdb`` fails as ``raise_line``."""
    code = ("import importlib.abc, sys\n"
            "class Fail(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'duckdb':\n"
            f"            {raise_line}\n"
            "sys.meta_path.insert(0, Fail())\n"
            "from workbench.cli import run\n"
            "run()\n")
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_DB"}
    return subprocess.run([sys.executable, "-c", code, "--db", str(tmp_path / "p.duckdb"), "status"],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=120)


def test_a_ctrl_c_while_duckdb_initialises_is_an_interrupt_not_a_traceback(tmp_path):
    """A Ctrl-C that lands while duckdb's C extension initialises reaches the program as an
    ImportError raised from the KeyboardInterrupt (as it did under load when the judge was
    interrupted in start-up): the same one line and exit 130 as any Ctrl-C. An ImportError with no
    interrupt behind it is not reported as one."""
    interrupted = _status_with_duckdb_failing(
        tmp_path, "raise ImportError('Encountered an error while initializing the extension.') "
                  "from KeyboardInterrupt()")
    assert (interrupted.returncode, interrupted.stderr) == (130, "workbench status: interrupted\n"), interrupted.stderr
    broken = _status_with_duckdb_failing(tmp_path, "raise ImportError('no duckdb here')")
    assert broken.returncode not in (0, 130) and "interrupted" not in broken.stderr, broken.stderr
    assert "no duckdb here" in broken.stderr


def test_an_error_names_the_command_even_when_it_has_a_command_option(tmp_path):
    """`harness --command` must not take over the command's name in its error line."""
    proc = run_cli("--db", str(tmp_path / "p.duckdb"), "harness", "--command", "false", "--name", "h",
                   "--queries", str(tmp_path / "missing.txt"))
    assert proc.returncode != 0
    assert proc.stderr.startswith("workbench harness: error: "), proc.stderr


def test_app_refuses_a_bad_or_taken_port_before_saying_it_serves(tmp_path):
    import socket

    db = tmp_path / "p.duckdb"
    assert run_cli("--db", str(db), "init").returncode == 0
    proc = run_cli("--db", str(db), "app", "--port", "99999")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == ("workbench app: error: port 99999 is not a port number; pass --port "
                                   "between 1 and 65535 (or set [app] port)")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        proc = run_cli("--db", str(db), "app", "--port", str(taken), timeout=60)
    assert proc.returncode == 2 and "serving" not in proc.stdout, proc.stdout
    assert f"cannot serve at 127.0.0.1:{taken}" in proc.stderr and "pass another --port" in proc.stderr
    assert proc.stderr.count("\n") == 1


def _leaf_parsers(parser, path=()):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                if any(isinstance(a, argparse._SubParsersAction) for a in child._actions):
                    if child.get_default("handler") is not None:  # a command with sub-commands (judge learn)
                        yield (*path, name), child
                    yield from _leaf_parsers(child, (*path, name))
                else:
                    yield (*path, name), child


def test_every_command_help_lists_its_exit_status():
    from workbench.cli import build_parser

    leaves = dict(_leaf_parsers(build_parser()))
    assert len(leaves) > 30  # every command, sub-commands included
    missing = [" ".join(p) for p, child in leaves.items() if "exit status:" not in child.format_help()]
    assert missing == []
    judge = leaves[("judge",)].format_help()
    assert "  6    stopped early" in judge and "  3    bad input" in judge  # the extra code, the list kept
    assert "  2    the gate is inconclusive" in leaves[("calibrate", "gate")].format_help()


def test_duckdbs_query_interrupted_is_the_users_ctrl_c():
    """DuckDB stops a running statement on SIGINT and raises ``RuntimeError("Query interrupted")``
    instead of KeyboardInterrupt (a whole ``make test`` caught the judge interrupted in
    ``count_pending_units``, which printed a traceback): it is reported as any Ctrl-C, also
    when another error was raised while handling it; another RuntimeError is not."""
    from workbench.cli import caused_by_ctrl_c

    assert caused_by_ctrl_c(RuntimeError("Query interrupted"))
    try:
        try:
            raise RuntimeError("Query interrupted")
        except RuntimeError as inner:
            raise ValueError("while cleaning up") from inner
    except ValueError as exc:
        assert caused_by_ctrl_c(exc)
    assert not caused_by_ctrl_c(RuntimeError("dictionary changed size during iteration"))
