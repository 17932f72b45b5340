"""Another process holding a project file, as a judge job or a second app does: the tests of
waiting for the file's lock (the service waits, the page says so) start one with :func:`hold`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.prerequisites import REPO

# Opens the project (taking DuckDB's lock), says "holding", then keeps it for argv[2] seconds or,
# without that argument, until a line arrives on stdin; says "released" once closed.
_HOLDER = """
import sys, time
from workbench.store.database import Database
db = Database(sys.argv[1])
print("holding", flush=True)
if len(sys.argv) > 2:
    time.sleep(float(sys.argv[2]))
else:
    sys.stdin.readline()
db.close()
print("released", flush=True)
"""


class Holder:
    """A running holder process: :meth:`release` lets go of the file (a holder started with a
    time limit lets go by itself; :meth:`wait` waits for that)."""

    def __init__(self, process: subprocess.Popen):
        self.process = process

    def poll(self) -> int | None:
        return self.process.poll()

    def release(self, timeout: float = 60) -> None:
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        if self.process.stdout.readline().strip() != "released":
            raise AssertionError("the holder did not release the project file")
        self.process.wait(timeout=timeout)

    def wait(self, timeout: float | None = None) -> int:
        return self.process.wait(timeout=timeout)


def hold(path: str | Path, seconds: float | None = None) -> Holder:
    """Start a process that holds ``path`` (for ``seconds``, else until :meth:`Holder.release`);
    returns once it holds the file."""
    args = [sys.executable, "-c", _HOLDER, str(path)] + ([] if seconds is None else [str(seconds)])
    process = subprocess.Popen(args, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    if process.stdout.readline().strip() != "holding":
        process.kill()
        raise AssertionError(f"the holder process could not open {path}")
    return Holder(process)
