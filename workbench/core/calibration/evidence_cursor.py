"""Where the Label card's evidence cursor starts and which units hold a query term (pure).

Evidence units are the judged passage's lines and sentences (``workbench.ui.views.label.sentences``).
The cursor starts on the first unit holding a query term that is not a heading
(:func:`first_cursor`); the card's ``n`` / ``N`` keys jump between the units :func:`term_units`
lists, headings skipped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: What ends a sentence: a unit ending in one of these is never a heading.
_SENTENCE_END = ".!?:;"


def is_heading(text: str, start: int, end: int) -> bool:
    """Whether the evidence unit ``text[start:end]`` is a heading: it is a whole line of the
    document (only spaces between it and the line's ends), does not end like a sentence
    (``. ! ? : ;``) and is not a table row (``|`` first). ``"# Scope"`` and ``"Background"``
    on lines of their own are headings; ``"The scope is wide."`` and ``"| a | b |"`` are not."""
    unit = text[start:end].strip()
    if not unit or unit[-1] in _SENTENCE_END or unit.startswith("|"):
        return False
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    return not text[line_start:start].strip() and not text[end:line_end].strip()


def term_units(units: Sequence[str], terms: Sequence[str], headings: Sequence[bool] = ()) -> list[int]:
    """Indices of the units holding a query term (whole words, any case), in order; units
    flagged in ``headings`` left out."""
    if not terms:
        return []
    pattern = re.compile(r"\b(?:" + "|".join(re.escape(t) for t in terms) + r")\b", re.IGNORECASE)
    return [i for i, unit in enumerate(units)
            if pattern.search(unit) and not (i < len(headings) and headings[i])]


def first_cursor(headings: Sequence[bool], hits: Sequence[int]) -> int:
    """Where the evidence cursor starts: the first of ``hits`` (units holding a query term,
    :func:`term_units`) that is not a heading; else the first unit that is not a heading; else 0."""
    for i in hits:
        if not headings[i]:
            return i
    return next((i for i, h in enumerate(headings) if not h), 0)
