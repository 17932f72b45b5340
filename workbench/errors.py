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

A message that concerns several fields names each as ``{field:KEY}`` (``{set_field:KEY}`` for the
act of giving it); ``{field:KEY VALUE}`` adds a value (``--level doc``; an upper-case metavariable
such as ``NAME`` is for the CLI only). ``field`` may be a tuple; the keys named in the text are
added to :attr:`WorkbenchError.fields`. A CLI command the user can run is ``{command:WORDS}`` (the
words after ``workbench``) or ``{command}`` with ``command=`` (for words built at run time); the CLI
shows it in backticks, a page names the page that does the same. No front end rewrites text.

Text that is not an error but reaches a page too (a job's stored status message, a note, a
result's summary) uses the same placeholders; a front end renders it with :func:`render_text` and
its own words. An error that ends another process (the Judge page's job process) crosses as
data: :func:`error_data` writes it, :func:`error_from_data` rebuilds it for the launcher to word.
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
    #: The words of the front end that re-raised it (:meth:`render`'s keyword arguments); None:
    #: the CLI's. The Python API sets them, so that ``str(exc)`` names keyword arguments.
    words: dict | None = None

    def __init__(self, message: str = "", *args, field: str | tuple[str, ...] | None = None,
                 hint: str | None = None, command: str | None = None):
        super().__init__(message, *args)
        self.what = message
        self.hint = hint
        self.command = command
        declared = (field,) if isinstance(field, str) else tuple(field or ())
        named = [part.key for part in placeholders(f"{message} {hint or ''}") if part.kind != "command"]
        self.fields: tuple[str, ...] = tuple(dict.fromkeys([*declared, *named]))
        self.field = self.fields[0] if self.fields else None

    @property
    def structured(self) -> bool:
        """Whether the text has anything for a front end to render (a field, a hint or a command)."""
        return bool(self.fields or self.hint or self.command or placeholders(str(self.what)))

    def render(self, name: Callable[[str], str] = field_flag, action: Callable[[str], str] | None = None,
               command: Callable[[str], str] | None = None, valued: Callable[[str, str, str], str] | None = None) -> str:
        """The message in one front end's words: ``{field}`` / ``{field:KEY}`` as ``name(key)``,
        ``{set_field}`` / ``{set_field:KEY}`` as ``action(key)`` (default: ``pass`` and the name),
        ``{field:KEY VALUE}`` as ``valued(kind, key, value)`` (default: the name, a space and the
        value), ``{command}`` / ``{command:WORDS}`` as ``command(words)`` (default: in backticks
        after ``workbench``); the hint after ``"; "``."""
        act = action or (lambda key: f"pass {name(key)}")
        say = command or (lambda words: f"`workbench {words}`")
        with_value = valued or (lambda kind, key, value: f"{(act if kind == 'set_field' else name)(key)} {value}")
        text = f"{self.what}; {self.hint}" if self.hint else str(self.what)
        out, at = [], 0
        for part in placeholders(text):
            out.append(text[at:part.start])
            at = part.end
            if part.kind == "command":
                words = part.key if part.key else self.command
                out.append(say(words) if words else text[part.start:part.end])
                continue
            key = part.key or self.field
            if key is None:
                out.append(text[part.start:part.end])
            elif part.value:
                out.append(with_value(part.kind, key, part.value))
            else:
                out.append(act(key) if part.kind == "set_field" else name(key))
        out.append(text[at:])
        return "".join(out)

    def __str__(self) -> str:
        if not self.structured:
            return super().__str__()
        return self.render(**(self.words or {}))


def render_text(text: str, **words) -> str:
    """Text that is not an error (a summary, a note) with its placeholders in one front end's words
    (``words`` as :meth:`WorkbenchError.render` takes them; none: as the CLI says them)."""
    return WorkbenchError(text).render(**words)


class Placeholder:
    """One ``{field}``, ``{set_field}`` or ``{command}`` in a message (see the module doc)."""

    __slots__ = ("kind", "key", "value", "start", "end")

    def __init__(self, kind: str, key: str, value: str, start: int, end: int):
        self.kind, self.key, self.value, self.start, self.end = kind, key, value, start, end


PLACEHOLDER_KINDS = ("set_field", "field", "command")


def placeholders(text: str) -> list[Placeholder]:
    """The placeholders of ``text`` in order: ``{KIND}`` or ``{KIND:KEY}`` / ``{KIND:KEY VALUE}``
    (for ``command`` the words after the colon); other braces are text."""
    found, at = [], 0
    while (start := text.find("{", at)) >= 0:
        at = start + 1
        for kind in PLACEHOLDER_KINDS:
            head = "{" + kind
            if not text.startswith(head, start):
                continue
            after = start + len(head)
            if text.startswith("}", after):
                found.append(Placeholder(kind, "", "", start, after + 1))
            elif text.startswith(":", after) and (end := text.find("}", after)) > after + 1:
                inner = text[after + 1:end]
                key, _, value = (inner, "", "") if kind == "command" else inner.partition(" ")
                found.append(Placeholder(kind, key, value, start, end + 1))
            else:
                continue
            at = found[-1].end
            break
    return found


class ConfigError(WorkbenchError):
    """A configuration file, environment variable or flag has an invalid value."""

    exit_code = 2


class InputError(WorkbenchError):
    """An input file or argument is malformed; the message names file and line."""

    exit_code = 3

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | tuple[str, ...] | None = None, hint: str | None = None, command: str | None = None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message, field=field, hint=hint, command=command)
        self.path = path
        self.line = line


class StoreError(WorkbenchError):
    """The project database cannot be used as asked."""

    exit_code = 4


class StoreLockedError(StoreError):
    """Another process holds the project database open for writing."""

    exit_code = 5


#: The error kinds :func:`error_from_data` rebuilds (a subclass elsewhere, e.g. a refused permission,
#: comes back as the nearest of them: the same exit code and words).
ERROR_KINDS: dict[str, type[WorkbenchError]] = {
    cls.__name__: cls for cls in (WorkbenchError, ConfigError, InputError, StoreError, StoreLockedError)}

#: The environment variable that asks a ``workbench`` command to write its error as data
#: (:func:`error_data`, JSON) to the file it names: a process that launched the command (the Judge
#: page's job) reads it back with :func:`error_from_data` and words it itself.
ERROR_FILE_ENV = "WORKBENCH_ERROR_FILE"


def error_data(exc: WorkbenchError) -> dict:
    """``exc`` as JSON-ready data: its kind, its text with the placeholders unrendered, its
    fields, hint and command."""
    kind = next(cls.__name__ for cls in type(exc).__mro__ if ERROR_KINDS.get(cls.__name__) is cls)
    return {"kind": kind, "what": str(exc.what), "fields": list(exc.fields), "hint": exc.hint,
            "command": exc.command}


def error_from_data(data: dict) -> WorkbenchError:
    """The error :func:`error_data` describes (an unknown kind: a :class:`WorkbenchError`)."""
    cls = ERROR_KINDS.get(str(data.get("kind")), WorkbenchError)
    return cls(str(data.get("what") or ""), field=tuple(data.get("fields") or ()), hint=data.get("hint"),
               command=data.get("command"))


def is_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is the user's Ctrl-C: a KeyboardInterrupt, or the
    ``RuntimeError("Query interrupted")`` DuckDB raises instead when SIGINT stops a statement it
    is running (the interrupt is then consumed: no KeyboardInterrupt follows)."""
    return isinstance(exc, KeyboardInterrupt) or (
        isinstance(exc, RuntimeError) and "interrupted" in str(exc).lower())
