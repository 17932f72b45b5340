"""Bytes to text and text to numbered lines, with errors that point at ``file:line``."""

from __future__ import annotations

import codecs
import json
import re
import sys
from collections.abc import Callable, Iterable
from typing import Literal, overload

from workbench.errors import InputError

Tick = Callable[[int], None]
_TICK_EVERY = 5_000


def decode_utf8(data: bytes, path: str) -> str:
    """Decode ``data`` as UTF-8 (a leading byte-order mark is dropped).

    A byte that is not UTF-8 is reported with its line, its byte offset within that line and
    within the file, so the user can find it with any hex editor.
    """
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        pos = exc.start
        line_start = data.rfind(b"\n", 0, pos) + 1
        line = data.count(b"\n", 0, pos) + 1
        raise InputError(
            f"not UTF-8: byte 0x{data[pos]:02x} at byte offset {pos - line_start} of the line "
            f"(byte {pos} of the file); re-save the file with UTF-8 encoding",
            path=path, line=line,
        ) from None


def split_lines(text: str) -> list[str]:
    """Lines split at ``\\n`` only (a trailing ``\\r`` is removed).

    ``str.splitlines`` would also split at U+2028, U+0085 and friends, which legitimately occur
    inside JSON strings and passage text, and would shift every later line number.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


# A JSON ``\\uD800``-``\\uDFFF`` escape: half of a UTF-16 surrogate pair. A pair decodes to one
# character; a half alone decodes to a lone surrogate, which is not text (UTF-8 cannot hold it).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")


# A run of digits with its sign: the first one longer than the limit is the integer named.
_LONG_INTEGER = re.compile(r"-?\d+")


def long_integer_error(exc: ValueError, line: str, path: str, number: int | None) -> InputError:
    """The :class:`InputError` for the ``ValueError`` that ``json.loads`` raises on an integer
    of more digits than ``sys.get_int_max_str_digits()`` (4,300 by default): it names the
    column of the first such integer. Any other ``ValueError`` is raised again unchanged."""

    limit = sys.get_int_max_str_digits() if hasattr(sys, "get_int_max_str_digits") else 0
    if "integer string conversion" not in str(exc) or not limit:
        raise exc
    found = next((m for m in _LONG_INTEGER.finditer(line) if len(m.group(0).lstrip("-")) > limit), None)
    where = f" at column {found.start() + 1}" if found is not None else ""
    digits = f"{len(found.group(0).lstrip('-')):,} digits" if found is not None else f"more than {limit:,} digits"
    return InputError(
        f"holds an integer of {digits}{where}, longer than the {limit:,} digits a number may have; "
        "write it as a string or shorten it",
        path=path, line=number,
    )


def load_json_line(line: str, path: str, number: int, *,
                   invalid: str = "not valid JSON ({msg} at column {column}); expected one JSON object per line"):
    """``json.loads(line)``, with every way a line can fail as an :class:`InputError` naming
    ``path:number``: broken JSON (the message ``invalid``, formatted with the parser's ``msg``
    and ``column``), nesting too deep for the parser, an integer longer than Python converts
    (:func:`long_integer_error`), and a lone surrogate escape (``"\\ud800"``), which JSON
    accepts but no UTF-8 file or database can store."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(invalid.format(msg=exc.msg, column=exc.colno), path=path, line=number) from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read; flatten the record", path=path, line=number) from None
    except ValueError as exc:
        raise long_integer_error(exc, line, path, number) from None
    found = _SURROGATE_ESCAPE.search(line) if "\\" in line else None
    if found is not None:
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except RecursionError:
            raise InputError("JSON nested too deeply to read; flatten the record", path=path, line=number) from None
        except UnicodeEncodeError:
            raise InputError(
                f"holds {found.group(0)[:6]} at column {found.start() + 1}, half of a UTF-16 surrogate pair "
                "without its other half, which is not a character; remove it or write the character itself",
                path=path, line=number,
            ) from None
    return value


def read_json_objects(text: str, path: str, *, tick: Tick | None = None) -> list[tuple[int, dict]]:
    """``(line, object)`` for every non-blank line of a JSONL text.

    Each line must hold one JSON object; anything else (an array, a number, broken JSON) is an
    :class:`InputError` naming the line.
    """
    out: list[tuple[int, dict]] = []
    number = 0
    for number, line in enumerate(split_lines(text), start=1):
        if tick is not None and number % _TICK_EVERY == 0:
            tick(_TICK_EVERY)
        if not line.strip():
            continue
        value = load_json_line(line, path, number)
        if not isinstance(value, dict):
            raise InputError(
                f"expected a JSON object per line, got a JSON {type(value).__name__}", path=path, line=number
            )
        out.append((number, value))
    if tick is not None:
        tick(number % _TICK_EVERY)
    if not out:
        raise InputError("holds no JSON objects; expected one JSON object per line", path=path)
    return out


@overload
def pick_field(records: list[tuple[int, dict]], explicit: str | None, candidates: Iterable[str],
               role: str, path: str, *, option: str | None = None, required: Literal[True] = True) -> str: ...
@overload
def pick_field(records: list[tuple[int, dict]], explicit: str | None, candidates: Iterable[str],
               role: str, path: str, *, option: str | None = None, required: bool) -> str | None: ...
def pick_field(records: list[tuple[int, dict]], explicit: str | None, candidates: Iterable[str],
               role: str, path: str, *, option: str | None = None, required: bool = True) -> str | None:
    """The field that holds ``role`` (e.g. the id) in a JSONL file.

    ``explicit`` (from ``--id-field`` and friends) wins. Otherwise the first of ``candidates``
    present in the first record is used for the whole file; when none is present and the field
    is required, the error lists the fields the record has and the option that sets one
    (``option``: the field's key, e.g. ``"id_field"``, named as ``{field:KEY}`` so that the CLI
    says ``--id-field`` and a page its label).
    """
    first_line, first = records[0]
    if explicit:
        if explicit not in first:
            raise InputError(
                f"has no field {explicit!r} for the {role}; the record has {sorted(first)}",
                path=path, line=first_line,
            )
        return explicit
    for name in candidates:
        if name in first:
            return name
    if not required:
        return None
    how = f" or name it with {{field:{option}}}" if option else ""
    raise InputError(
        f"cannot tell which field holds the {role}: expected one of {list(candidates)}{how}; "
        f"the record has {sorted(first)}",
        path=path, line=first_line,
    )


def string_value(value, *, field: str, path: str, line: int, allow_empty: bool = True,
                 allow_number: bool = False) -> str:
    """A string field's value; ids may be given as JSON integers (``"id": 7``)."""
    if isinstance(value, str):
        if not allow_empty and not value.strip():
            raise InputError(f"field {field!r} is empty; expected a non-empty string", path=path, line=line)
        return value
    if allow_number and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InputError(
        f"field {field!r} must be a string, got {json.dumps(value)[:40]} ({type(value).__name__})",
        path=path, line=line,
    )
