"""Errors the user can act on.

Every expected failure raises a subclass of :class:`WorkbenchError`. The CLI prints its
message on one line and exits with ``exit_code``; the app shows it in an error box. The
message must say what was wrong, where (file, line, id) and how to fix it.
"""

from __future__ import annotations

#: Longest value (id, field, line) quoted in a message; longer ones are cut with an ellipsis.
MAX_SHOWN = 80


def clip(value: object, limit: int = MAX_SHOWN, *, quote: bool = True) -> str:
    """``value`` for an error message, cut to about ``limit`` characters.

    A message quotes what it refuses, but an id of 50 MB must not make a 50 MB line: the
    head of the value is kept, then ``...`` and the full length, e.g.
    ``'aaaaaaaa'... (52428800 characters)``. Strings are quoted as ``repr`` does (``quote=False``
    shows them as they are); other values are shown with ``str``.
    """
    text = value if isinstance(value, str) else str(value)
    show = repr if isinstance(value, str) and quote else str
    if len(text) <= limit:
        return show(text)
    return f"{show(text[:limit])}... ({len(text)} characters)"


class WorkbenchError(Exception):
    """Base class of every error meant for a user rather than a developer."""

    exit_code = 1


class ConfigError(WorkbenchError):
    """A configuration file, environment variable or flag has an invalid value."""

    exit_code = 2


class InputError(WorkbenchError):
    """An input file or argument is malformed; the message names file and line."""

    exit_code = 3

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)
        self.path = path
        self.line = line


class StoreError(WorkbenchError):
    """The project database cannot be used as asked."""

    exit_code = 4


class StoreLockedError(StoreError):
    """Another process holds the project database open for writing."""

    exit_code = 5
