"""Run the CLI for a test: in this process by default, or as a real ``python -m workbench`` process.

Why in process: a CLI process costs 0.5–1.2 s of CPU before it does anything (the interpreter, then
duckdb, numpy, pandas and pyarrow imported again), and the suite runs the CLI about a thousand times
on 2 cores. In process, the same ``workbench.cli.main(argv)`` runs (the code ``python -m workbench``
runs: ``workbench/__main__.py`` is ``cli.run()``, which exits with ``main()``'s code and then ignores
Ctrl-C while the interpreter shuts down), with what makes a process observable reproduced around it:

- ``sys.stdout`` / ``sys.stderr`` are fresh UTF-8 streams (stderr with ``backslashreplace``, as
  CPython's); their text is decoded with universal newlines, as ``subprocess.run(text=True)`` does;
- ``sys.stdin`` is empty (``subprocess.run`` without ``input`` gives the child the test's stdin,
  which pytest has closed);
- ``env`` is applied to ``os.environ`` and ``cwd`` to the working directory, both restored after;
  ``WORKBENCH_DB`` is removed first, as :func:`tests.conftest.run_cli` always did;
- ``SystemExit`` gives the exit code; any other exception is printed as the interpreter would
  (a traceback on stderr, exit code 1), so a test that checks "never a traceback" still can fail;
- signal handlers are restored after (a command may install its own for SIGINT or SIGTERM);
- ``timeout`` is enforced with ``SIGALRM``: a hang raises :class:`subprocess.TimeoutExpired`,
  as it would for a process.

What a process has and this does not (start-up imports, exit by signal, a pipe closed by the
reader, arguments that are not UTF-8, a server that keeps running): those tests pass
``process=True``, and ``app`` always runs as a process.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path

from tests.support.prerequisites import REPO

#: commands that only make sense as a process of their own (a server that runs until stopped)
PROCESS_COMMANDS = frozenset({"app"})


def _command_word(args: tuple[str, ...]) -> str | None:
    """The first word that is not a global option or its value (``--db X``, ``--config Y``)."""
    takes_value = {"--db", "--config"}
    skip = False
    for word in args:
        if skip:
            skip = False
            continue
        if word in takes_value:
            skip = True
            continue
        if word.startswith("-"):
            continue
        return word
    return None


def run_process(args: tuple[str, ...], *, cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    """``python -m workbench ARGS`` as a real child process."""
    return subprocess.run([sys.executable, "-m", "workbench", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)


class _Alarm(BaseException):
    """Raised in the main thread by SIGALRM when an in-process command outlives its timeout (a
    BaseException, so that no ``except Exception`` in the command turns it into an error message)."""


def _decoded(buffer: io.BytesIO, errors: str) -> str:
    """The bytes written, decoded as ``subprocess.run(text=True)`` decodes a pipe (universal newlines)."""
    return io.TextIOWrapper(io.BytesIO(buffer.getvalue()), encoding="utf-8", errors=errors, newline=None).read()


def run_in_process(args: tuple[str, ...], *, cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    """``workbench.cli.main(ARGS)`` in this process, observed as a process (module docstring)."""
    from workbench.cli import main

    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", errors="backslashreplace", write_through=True)
    saved_streams = sys.stdout, sys.stderr, sys.stdin
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_signals = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)}

    def alarm(signum, frame):
        raise _Alarm

    code = 0
    try:
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        sys.stdout, sys.stderr, sys.stdin = out, err, io.StringIO("")
        signal.signal(signal.SIGALRM, alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            code = main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=err)
        except _Alarm:
            raise subprocess.TimeoutExpired(["workbench", *args], timeout) from None
        except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught exception
            traceback.print_exc(file=err)
            code = 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        for signum, handler in saved_signals.items():
            signal.signal(signum, handler)
    out.flush()
    err.flush()
    return subprocess.CompletedProcess(["workbench", *args], int(code or 0), _decoded(out_bytes, "strict"),
                                       _decoded(err_bytes, "backslashreplace"))


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120,
            process: bool = False) -> subprocess.CompletedProcess:
    """Run the CLI with ``ARGS``; returns a CompletedProcess (returncode, stdout, stderr as text).

    In this process unless ``process=True`` or the command is one of :data:`PROCESS_COMMANDS`."""
    full_env = dict(os.environ)
    full_env.pop("WORKBENCH_DB", None)
    full_env.update(env or {})
    args = tuple(str(a) for a in args)
    where = cwd or REPO
    if process or _command_word(args) in PROCESS_COMMANDS:
        return run_process(args, cwd=where, env=full_env, timeout=timeout)
    return run_in_process(args, cwd=where, env=full_env, timeout=timeout)
