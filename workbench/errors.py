"""Errors the user can act on.

Every expected failure raises a subclass of :class:`WorkbenchError`. The CLI prints its
message on one line and exits with ``exit_code``; the app shows it in an error box. The
message must say what was wrong, where (file, line, id) and how to fix it.

An error is data, not only text: ``what`` was wrong, the ``field`` it concerns (a stable key such as
``"name"``, ``"pool"``, ``"depth"``: the input the user can change) and a ``hint`` (how to fix it).
The text may name the field as ``{field}`` and the act of giving it as ``{set_field}``; each front
end renders them in its own words (:meth:`WorkbenchError.render`): the CLI as the field's flag
(:data:`workbench.cli.common.FIELD_FLAGS`), a page as the field's label
(:data:`workbench.ui.words.COMMON_FIELDS`). ``str()`` names the field as ``--`` + its key.
"""

from __future__ import annotations

from collections.abc import Callable

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


def field_flag(field: str) -> str:
    """A field key as the CLI names it by default: ``"base_url"`` -> ``"--base-url"``."""
    return "--" + field.replace("_", "-")


class WorkbenchError(Exception):
    """Base class of every error meant for a user rather than a developer (see the module doc
    for ``field`` and ``hint``)."""

    exit_code = 1

    def __init__(self, message: str = "", *args, field: str | None = None, hint: str | None = None):
        super().__init__(message, *args)
        self.what = message
        self.field = field
        self.hint = hint

    def render(self, name: Callable[[str], str] = field_flag, action: Callable[[str], str] | None = None) -> str:
        """The message with ``{field}`` as ``name(field)`` and ``{set_field}`` as ``action(field)``
        (default: ``pass`` and the name), the hint after ``"; "``."""
        text = f"{self.what}; {self.hint}" if self.hint else str(self.what)
        if self.field is None:
            return text
        shown = name(self.field)
        act = action(self.field) if action is not None else f"pass {shown}"
        return text.replace("{set_field}", act).replace("{field}", shown)

    def __str__(self) -> str:
        if self.field is None and self.hint is None:
            return super().__str__()
        return self.render()


class ConfigError(WorkbenchError):
    """A configuration file, environment variable or flag has an invalid value."""

    exit_code = 2


class InputError(WorkbenchError):
    """An input file or argument is malformed; the message names file and line."""

    exit_code = 3

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None, hint: str | None = None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message, field=field, hint=hint)
        self.path = path
        self.line = line


class StoreError(WorkbenchError):
    """The project database cannot be used as asked."""

    exit_code = 4


class StoreLockedError(StoreError):
    """Another process holds the project database open for writing."""

    exit_code = 5
