"""A labelled span shown in place inside its document, as safe HTML.

The text is cut into segments at the span's edges; every segment is escaped with
``html.escape`` on its own and only the span's segment is wrapped in ``<mark>``, so no character
of the corpus can open a tag (``<script>``, ``<img onerror=...>`` stay literal text).
Offsets are Python string offsets, ``end`` exclusive, as everywhere in the project.
"""

from __future__ import annotations

import html

GRADE_COLOURS = {3: "#b7e4c7", 2: "#d8f3dc", 1: "#fff3bf", 0: "#ffd6d6"}


def _before(text: str, start: int, window: int | None) -> tuple[str, bool]:
    if window is None or start <= window:
        return text[:start], False
    cut = text[start - window:start]
    space = cut.find(" ")
    if 0 <= space < window // 2:  # start at a word boundary
        cut = cut[space + 1:]
    return cut, True


def _after(text: str, end: int, window: int | None) -> tuple[str, bool]:
    if window is None or len(text) - end <= window:
        return text[end:], False
    cut = text[end:end + window]
    space = cut.rfind(" ")
    if space > window // 2:  # stop at a word boundary
        cut = cut[:space]
    return cut, True


def marked_span_html(text: str, start: int, end: int, *, grade: int | None = None,
                     window: int | None = 400) -> str:
    """``text`` with ``text[start:end]`` in ``<mark>``; ``window`` characters of context each side
    (None: the whole document), cut at word boundaries and marked with "…" where cut."""
    start = max(0, min(int(start), len(text)))
    end = max(start, min(int(end), len(text)))
    before, cut_before = _before(text, start, window)
    after, cut_after = _after(text, end, window)
    colour = GRADE_COLOURS.get(grade, "#fff3bf") if grade is not None else "#fff3bf"
    title = f' title="grade {int(grade)}"' if grade is not None else ""
    return (
        ("… " if cut_before else "")
        + html.escape(before)
        + f'<mark style="background: {colour}; padding: 0 1px"{title}>{html.escape(text[start:end])}</mark>'
        + html.escape(after)
        + (" …" if cut_after else "")
    )
