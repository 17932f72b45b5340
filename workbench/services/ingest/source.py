"""Reading the file (or folder) to import and telling its format.

Every importer starts from a :class:`Source`: the bytes (or, for a folder, its text files), the
name messages and the ledger give it, and its sha256 (the ledger key).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.core.formats import IMPORT_FORMATS, IMPORT_KINDS
from workbench.core.formats import corpus as corpus_formats
from workbench.core.formats.lines import decode_utf8, split_lines
from workbench.errors import InputError
from workbench.services.access import PermissionDenied
from workbench.services.progress import ProgressFactory

if TYPE_CHECKING:  # not imported at run time: pandas is most of the CLI's start-up time
    import pandas as pd

KINDS = IMPORT_KINDS
FORMATS = IMPORT_FORMATS
# Names accepted on input that mean the same parser.
ALIASES = {
    ("corpus", "beir"): "jsonl", ("corpus", "cranfield"): "smart",
    ("queries", "beir"): "jsonl", ("qrels", "cranqrel"): "cranfield",
}
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")


@dataclass
class Source:
    path: Path
    label: str  # what messages and the ledger call the file
    data: bytes | None  # None for folders
    sha256: str
    files: list[tuple[str, bytes]] | None = None

    def text(self) -> str:
        return decode_utf8(self.data, self.label)


def _inside(resolved: Path, allowed: Sequence[Path]) -> bool:
    return any(resolved == folder or resolved.is_relative_to(folder) for folder in allowed)


def _outside(label: str) -> PermissionDenied:
    # The target is not named: the page must not map the server's file system.
    return PermissionDenied(f"{label} leads outside the folders this app may import from (links are "
                            f"followed); remove the link, or copy the file into the data folder")


def check_inside(path: Path, label: str, allowed: Sequence[Path] | None) -> None:
    """Refuse (one line) a file or folder that, links resolved, lies outside every folder of
    ``allowed`` (the app's ``[app] data_dirs``; None: no limit, as for the command line).

    A check of the *path* only: a link can be switched between this check and a read. Files are
    therefore read through :func:`open_checked`, which checks the file it has opened."""
    if allowed is None:
        return
    if not _inside(path.resolve(), allowed):
        raise _outside(label)


def _descriptor_path(fd: int) -> Path | None:
    """Where the open file ``fd`` is, as the kernel says (``/proc/self/fd``); None where the
    system does not tell."""
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return Path(target) if target.startswith("/") else None


def open_checked(path: Path, label: str, allowed: Sequence[Path] | None) -> int:
    """An open, read-only descriptor of the regular file at ``path`` whose *opened* file lies
    inside ``allowed`` (None: anywhere); the caller closes it.

    The check is made on the descriptor, after opening, so switching a link between a check and
    the read cannot bring in a file from elsewhere: the kernel's path of the descriptor
    (``/proc/self/fd/N``, links resolved at open) must lie inside an allowed folder; where the
    system does not tell it, the path resolved *after* the open must lie inside and name the same
    file (``st_dev``, ``st_ino``) as the descriptor. Opened with ``O_NONBLOCK`` so that a FIFO
    put in the file's place does not block the open; anything but a regular file is refused.
    Raises :class:`OSError` as ``os.open`` does, :class:`InputError` for a file that is not
    regular, :class:`PermissionDenied` for one outside.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            # Reading a FIFO or /dev/zero would wait or run forever.
            raise InputError("is not a regular file (a device, FIFO or socket); give a file", path=label)
        if allowed is not None:
            where = _descriptor_path(fd)
            if where is None:
                where = path.resolve()
                now = os.stat(where)
                if (now.st_dev, now.st_ino) != (info.st_dev, info.st_ino):
                    raise _outside(label)  # the path names another file than the one opened
            if not _inside(where, allowed):
                raise _outside(label)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_checked(path: Path, label: str, allowed: Sequence[Path] | None) -> bytes:
    """The bytes of the file at ``path``, read from a descriptor :func:`open_checked` checked."""
    fd = open_checked(path, label, allowed)
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


@contextmanager
def pinned(path: Path, label: str, allowed: Sequence[Path] | None) -> Iterator[Path | None]:
    """A path that names the file at ``path`` as :func:`open_checked` opened and checked it
    (``/proc/self/fd/N``, which reopens that very file whatever the link says by then), for
    readers that take a path (DuckDB's JSON reader); None where the system has no such path, or
    ``path`` cannot be opened (the caller then reads it another way, and reports the problem)."""
    try:
        fd = open_checked(path, label, allowed)
    except (OSError, InputError):
        yield None
        return
    try:
        pin = Path(f"/proc/self/fd/{fd}")
        yield pin if _descriptor_path(fd) is not None and pin.exists() else None
    finally:
        os.close(fd)


def read_source(path: Path, label: str, allowed: Sequence[Path] | None = None) -> Source:
    """The file or folder to import. ``allowed``: the folders it must lie in, every file of a
    folder checked with its links resolved (:func:`check_inside`); None: anywhere."""
    check_inside(path, label, allowed)
    if path.is_dir():
        files = []
        digest = hashlib.sha256()
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            rel = file.relative_to(path).as_posix()
            if file.suffix.lower() not in corpus_formats.TEXT_SUFFIXES or any(
                    part.startswith(".") for part in rel.split("/")):
                continue
            shown = f"{label.rstrip('/')}/{rel}"
            check_inside(file, shown, allowed)
            try:
                data = read_checked(file, shown, allowed)
            except OSError as exc:
                raise InputError(f"cannot read: {exc.strerror}", path=shown) from None
            digest.update(rel.encode() + b"\0" + data + b"\0")
            files.append((rel, data))
        return Source(path, label, None, digest.hexdigest(), files)
    try:
        info = path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError("is a symbolic link loop (it points back at itself); give the real file",
                             path=label) from None
        if exc.errno == errno.ENOENT:
            dangling = " (a symbolic link to a missing file)" if path.is_symlink() else ""
            raise InputError(f"file not found{dangling}; check the path (relative paths start at the current "
                             f"directory)", path=label) from None
        raise InputError(f"cannot read: {exc.strerror}", path=label) from None
    if not stat.S_ISREG(info.st_mode):
        # Reading a FIFO or /dev/zero would wait or run forever.
        raise InputError("is not a regular file (a device, FIFO or socket); give a file", path=label)
    try:
        data = read_checked(path, label, allowed)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=label) from None
    if not data.strip():
        raise InputError("is empty", path=label)
    return Source(path, label, data, hashlib.sha256(data).hexdigest())


@contextmanager
def named_as_label(source: Source) -> Iterator[None]:
    """Errors of the file readers name the path they were given; for an upload that is a
    temporary copy, so the message is rewritten to name the file as the user knows it."""
    try:
        yield
    except InputError as exc:
        if source.label != str(source.path) and str(source.path) in str(exc):
            raise InputError(str(exc).replace(str(source.path), source.label)) from None
        raise


def first_line(data: bytes) -> str:
    head = data[:8192].decode("utf-8", errors="replace")
    return next((line for line in split_lines(head) if line.strip()), "")


def detect_format(kind: str, path: Path, data: bytes | None) -> str:
    """Guess the format of ``path`` for ``kind`` from its name and first line; error if unsure."""
    name = path.name.lower()
    if kind == "corpus" and data is None:
        return "folder"
    if data is None:
        raise InputError("is a directory; only a corpus can be imported from a folder", path=str(path))
    first = first_line(data)
    stripped = first.lstrip()
    looks_json = path.suffix.lower() in JSONL_SUFFIXES or stripped.startswith("{")
    smart = stripped.startswith(".I ")
    if kind == "run":
        return "trec"
    if kind == "corpus":
        if looks_json:
            return "jsonl"
        if smart:
            return "smart"
    elif kind == "queries":
        if looks_json:
            return "jsonl"
        if smart:
            return "cranfield" if name.startswith("cran") else "smart"
        if "\t" in first:
            return "tsv"
    elif kind == "qrels":
        if looks_json:
            return "spans" if '"start"' in first else "jsonl"
        if name.startswith("cranqrel"):
            return "cranfield"
        if first.lower().startswith("query-id") or ("\t" in first and len(first.split("\t")) == 3):
            return "beir"
        if len(first.split()) == 4:
            return "trec"
    raise InputError(
        f"cannot tell the {kind} format from the file; {{set_field:format}} (one of {', '.join(FORMATS[kind])})",
        path=str(path),
    )


def resolve_format(kind: str, fmt: str | None, source: Source) -> str:
    if kind not in KINDS:
        raise InputError(f"unknown import kind {kind!r}; expected one of {', '.join(KINDS)}")
    if fmt is None:
        return detect_format(kind, source.path, source.data)
    fmt = ALIASES.get((kind, fmt), fmt)
    if fmt not in FORMATS[kind]:
        raise InputError(f"unknown {kind} format {fmt!r}; expected one of {', '.join(FORMATS[kind])}")
    if (fmt == "folder") != (source.data is None):
        raise InputError("the folder format needs a directory" if fmt == "folder" else
                         f"is a directory; pass a file for format {fmt!r}", path=source.label)
    return fmt


def parse_with_bar(progress: ProgressFactory, source: Source, parse: Callable) -> pd.DataFrame:
    text = source.text()
    with progress(f"reading {source.path.name}", text.count("\n") + 1, "lines") as advance:
        return parse(text, advance)
