"""Writing a file the user named (``export ... --out FILE``) without destroying anything.

Rules, checked before anything is written:

* a DuckDB database (recognised by its magic bytes, whatever its name) is never overwritten:
  it may be this project or another one;
* nor is a name DuckDB keeps beside a database ``D``: ``D.wal`` (its write-ahead log, which the
  next write to ``D`` replays and deletes) and ``D.tmp`` (its folder for spilled data), whether
  or not that file exists yet: an export written there would vanish or break the next write;
* a path that is not a regular file is refused: a symbolic link (it would write somewhere
  else), a directory, a device, a FIFO or a socket; a symbolic link loop is reported as such;
* an existing regular file is replaced only when the caller passes ``force`` (the CLI's
  ``--force``), and the result says it was replaced.

The file is written next to its final place under a temporary name and renamed over it only
when complete, so a failure (disk full, Ctrl-C) never leaves half a file. Missing folders on
the way are created. Failures to write
(a read-only folder, a disk full) are one-line :class:`~workbench.errors.InputError`.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from workbench.errors import InputError
from workbench.store.database import is_duckdb_file

#: the names DuckDB keeps beside a database file D: D + suffix -> what it holds there and does with it
DATABASE_SIBLINGS = {".wal": ("write-ahead log", "its next write replays and deletes it"),
                     ".tmp": ("folder for data spilled to disk", "it may write there at any time")}


def _check_not_database_sibling(path: Path) -> None:
    """Refuse ``D.wal`` / ``D.tmp`` when ``D`` is a DuckDB database, as given and as the path
    resolves (``sub/../D.wal`` is ``D.wal`` once ``sub`` is created)."""
    for candidate in dict.fromkeys((path, Path(os.path.realpath(path)))):
        for suffix, (what, why) in DATABASE_SIBLINGS.items():
            if candidate.name.endswith(suffix) and len(candidate.name) > len(suffix):
                database = candidate.with_name(candidate.name[:-len(suffix)])
                if is_duckdb_file(database):
                    raise InputError(f"is where DuckDB keeps the {what} of the database {database.name} (a "
                                     f"workbench project?); {why}, so refusing to write there", path=str(path),
                                     field="out", hint="choose another {field}")


def check_output(path: str | Path, *, force: bool = False) -> bool:
    """Refuse what must not be written over; return whether ``path`` exists (and will be replaced)."""
    path = Path(path)
    label = str(path)
    _check_not_database_sibling(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise InputError(f"cannot check the output path: {exc.strerror}", path=label) from None
    if info is not None and stat.S_ISLNK(info.st_mode):
        try:
            path.stat()
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise InputError("is a symbolic link loop", path=label, field="out",
                                 hint="give {field} a plain file name") from None
        raise InputError("is a symbolic link; refusing to write through it (it points elsewhere)", path=label,
                         field="out", hint="give {field} a plain file name")
    if info is None:
        return False
    if stat.S_ISDIR(info.st_mode):
        raise InputError("is a directory", path=label, field="out", hint="{field} needs a file name such as run.trec")
    if not stat.S_ISREG(info.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(info.st_mode) else "a device" if stat.S_ISCHR(info.st_mode)
                or stat.S_ISBLK(info.st_mode) else "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file")
        raise InputError(f"is {kind}; refusing to write to it", path=label, field="out",
                         hint="give {field} a regular file name")
    if is_duckdb_file(path):
        raise InputError("is a DuckDB database (a workbench project?); refusing to overwrite it", path=label,
                         field="out", hint="choose another {field}")
    if not force:
        raise InputError("already exists; choose another {field:out}, or {set_field:force} to replace it", path=label)
    return True


def write_lines(path: str | Path, lines: Iterable[str], *, force: bool = False) -> bool:
    """Write ``lines`` to ``path`` all or nothing after :func:`check_output`; return whether an
    existing file was replaced."""
    path = Path(path)
    replaced = check_output(path, force=force)
    partial = path.with_name(f".{path.name}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # a new folder overwrites nothing
        with partial.open("x", encoding="utf-8", newline="\n") as handle:
            handle.writelines(lines)
        os.replace(partial, path)
    except FileExistsError:
        raise InputError(f"a temporary file {partial.name} is in the way (another export running?); "
                         f"remove it or wait", path=str(path)) from None
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise InputError(f"cannot write: {exc.strerror or exc}; nothing was written", path=str(path),
                         field="out", hint="choose a writable location for {field}") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return replaced
