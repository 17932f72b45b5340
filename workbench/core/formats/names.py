"""One rule for the names users give runs, pools and chunkings.

A name is written into chunk ids (``chunking:doc:seq``), TREC run tags and comma-separated
option lists (``--runs a,b``), so it may hold only letters, digits, ``_``, ``-`` and ``.``,
starts with a letter or digit and is at most :data:`MAX_LENGTH` characters. ``a,b`` or
``my run`` would be accepted once and then be unusable; they are refused where names are made
(import, retrieve, chunk, pool).
"""

from __future__ import annotations

import re

from workbench.errors import InputError, clip

MAX_LENGTH = 100
NAME_RULE = (f"letters, digits, '_', '-' and '.', starting with a letter or digit, at most {MAX_LENGTH} "
             f"characters")
_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.\-]{{0,{MAX_LENGTH - 1}}}")


def check_name(name: object, what: str, fix: str = "choose another name", *, field: str | None = None) -> str:
    """``name`` when it follows the rule, else an :class:`InputError` saying the rule and ``fix``
    (which may name ``field``, the input that holds the name, as ``{field}``)."""
    if isinstance(name, str) and _NAME.fullmatch(name):
        return name
    shown = clip(name) if isinstance(name, str) else repr(name)
    raise InputError(f"{what} name {shown} is not allowed: use {NAME_RULE}", field=field, hint=fix)
