"""A folder nobody can write into, for tests of write failures.

As an ordinary user, mode 0o555 does it. As root (the development container), permissions do
not stop writes, so the folder gets the immutable attribute (``chattr +i``), which does.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def read_only_dir(path: Path) -> Iterator[Path]:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(path)], check=True)
        try:
            yield path
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=True)
    else:
        mode = path.stat().st_mode
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(mode)
