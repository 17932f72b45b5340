"""Detached worker processes a service starts (the Judge page's judge job, a page's background
job): one place that starts them, remembers them and tells whether a pid still runs.

:func:`spawn` starts ``argv`` in a session of its own (a page's reload or the app's Ctrl-C does
not reach it), its output in a new log file in the temporary folder, optionally writing
``stdin_data`` to its standard input (:func:`new_log` names a log file), and keeps its ``Popen`` so that its exit status is
collected (:func:`collect`; no zombies) and can be read (:func:`returncode`). :func:`pid_alive`
answers for any pid: from the kept ``Popen`` for one this process started, else by signal 0
(a pid of another user counts as alive).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path

_LAUNCHED: dict[int, subprocess.Popen] = {}  # pid -> Popen, so each exit status is collected


def new_log(prefix: str) -> Path:
    """A new log file name in the temporary folder: ``<prefix>-<pid>-<ns>.log``."""
    return Path(tempfile.gettempdir()) / f"{prefix}-{os.getpid()}-{time.time_ns()}.log"


def spawn(argv: list[str], *, log: Path, env: dict | None = None, stdin_data: bytes | None = None) -> int:
    """Start ``argv`` detached (module docstring), its output in ``log``; its pid."""
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                   stdin=subprocess.DEVNULL if stdin_data is None else subprocess.PIPE,
                                   start_new_session=True)
    if stdin_data is not None and process.stdin is not None:
        try:
            process.stdin.write(stdin_data)
            process.stdin.close()
        except OSError:
            pass  # the process ended before reading: its exit status and output say why
    _LAUNCHED[process.pid] = process
    return process.pid


def collect() -> None:
    """Collect the exit status of the processes this process started."""
    for process in list(_LAUNCHED.values()):
        process.poll()


def returncode(pid: int) -> int | None:
    """The exit status of process ``pid`` if this process started it and it has ended, else None."""
    process = _LAUNCHED.get(int(pid))
    return None if process is None else process.poll()


def wait(pid: int, timeout: float | None = None) -> int | None:
    """Wait for a process this process started to end (None: not one of ours)."""
    process = _LAUNCHED.get(int(pid))
    return None if process is None else process.wait(timeout=timeout)


def pid_alive(pid) -> bool:
    """Whether process ``pid`` runs (one this process started: not yet exited)."""
    if not pid:
        return False
    process = _LAUNCHED.get(int(pid))
    if process is not None:
        return process.poll() is None
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def log_tail(log: str | Path, lines: int = 3) -> str:
    """The last ``lines`` non-empty lines of a log, joined by spaces (progress-bar lines, which
    carry carriage returns, left out); "" when the log cannot be read."""
    try:
        text = Path(log).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " ".join([ln for ln in text if ln.strip() and "\r" not in ln][-lines:])
