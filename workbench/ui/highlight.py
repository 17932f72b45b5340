"""Corpus text shown with marks, as safe HTML: the one highlighter of the app.

Every piece of corpus text is escaped with ``html.escape`` on its own and only our own tags
(``<mark>``, ``<span>``) are put around the escaped pieces, so no character of the corpus can
open a tag (``<script>``, ``<img onerror=...>`` stay literal text). Offsets are Python string
offsets, ``end`` exclusive, as everywhere in the project.

- :func:`marked_span_html`: a labelled span in place inside its document (the Browse page).
- :func:`evidence_html`: a labelled passage in its document with the SME's evidence spans in
  ``<mark>`` (the Calibration page's disagreements, the Browse page's SME labels).
- :func:`marked_terms`: text with the query's terms in ``<mark>`` (the Label page).
- :func:`units_html`: the judged passage inside its document, each evidence unit (line or
  sentence) a ``<span data-unit="i">`` the Label page's keys move over and choose.
"""

from __future__ import annotations

import html
import re

GRADE_COLOURS = {3: "#b7e4c7", 2: "#d8f3dc", 1: "#fff3bf", 0: "#ffd6d6"}


def context_before(text: str, start: int, window: int | None) -> tuple[str, bool]:
    """Up to ``window`` characters before ``start`` (cut at a word boundary); whether it was cut."""
    if window is None or start <= window:
        return text[:start], False
    cut = text[start - window:start]
    space = cut.find(" ")
    if 0 <= space < window // 2:  # start at a word boundary
        cut = cut[space + 1:]
    return cut, True


def context_after(text: str, end: int, window: int | None) -> tuple[str, bool]:
    """Up to ``window`` characters after ``end`` (cut at a word boundary); whether it was cut."""
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
    before, cut_before = context_before(text, start, window)
    after, cut_after = context_after(text, end, window)
    colour = GRADE_COLOURS.get(grade, "#fff3bf") if grade is not None else "#fff3bf"
    title = f' title="grade {int(grade)}"' if grade is not None else ""
    return (
        ("… " if cut_before else "")
        + html.escape(before)
        + f'<mark style="background: {colour}; padding: 0 1px"{title}>{html.escape(text[start:end])}</mark>'
        + html.escape(after)
        + (" …" if cut_after else "")
    )


def evidence_html(text: str, start: int, end: int, evidence, *, grade: int | None = None,
                  window: int | None = 400) -> str:
    """The passage ``text[start:end]`` inside its document (shaded, ``window`` characters of
    context each side as in :func:`marked_span_html`) with each evidence span (document offsets
    ``[[s, e], ...]``, end exclusive) in ``<mark data-evidence="i">``: the sentences an SME chose,
    not the whole passage. Spans are clipped to the document, sorted and overlapping ones merged;
    a span reaching outside the passage widens the shaded part to include it. Every piece of
    text is escaped on its own."""
    n = len(text)
    start = max(0, min(int(start), n))
    end = max(start, min(int(end), n))
    spans = sorted((max(0, min(int(s), n)), max(0, min(int(e), n))) for s, e in (evidence or []))
    merged: list[list[int]] = []
    for s, e in spans:
        if e <= s:
            continue
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    lo = min([start] + [s for s, _ in merged])
    hi = max([end] + [e for _, e in merged])
    before, cut_before = context_before(text, lo, window)
    after, cut_after = context_after(text, hi, window)
    colour = GRADE_COLOURS.get(grade, "#fff3bf") if grade is not None else "#fff3bf"
    parts, at = [], lo
    for i, (s, e) in enumerate(merged):
        parts.append(html.escape(text[at:s]))
        parts.append(f'<mark data-evidence="{i}" style="background: {colour}; padding: 0 1px">'
                     f"{html.escape(text[s:e])}</mark>")
        at = e
    parts.append(html.escape(text[at:hi]))
    return (
        ("… " if cut_before else "")
        + html.escape(before)
        + '<span class="wb-passage" style="background: rgba(49, 51, 63, 0.05)">' + "".join(parts) + "</span>"
        + html.escape(after)
        + (" …" if cut_after else "")
    )


def marked_terms(text: str, terms: list[str]) -> str:
    """``text`` as safe HTML with the query terms in ``<mark>``: the text is split on the terms
    first and each piece escaped on its own, so a term can never match inside an HTML entity."""
    if not terms:
        return html.escape(text)
    pattern = re.compile(r"\b(" + "|".join(re.escape(t) for t in terms) + r")\b", re.IGNORECASE)
    out, last = [], 0
    for m in pattern.finditer(text):
        out.append(html.escape(text[last:m.start()]))
        out.append(f"<mark>{html.escape(m.group(0))}</mark>")
        last = m.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def units_html(text: str, start: int, end: int, units: list[tuple[int, int]], terms: list[str], *,
               window: int | None = 600) -> str:
    """The document around ``text[start:end]`` (``window`` characters each side, muted), the
    passage highlighted, each of ``units`` (document spans inside the passage, in order, not
    overlapping) wrapped in ``<span class="wb-unit" data-unit="i">``; query terms marked."""
    start = max(0, min(int(start), len(text)))
    end = max(start, min(int(end), len(text)))
    before, cut_before = context_before(text, start, window)
    after, cut_after = context_after(text, end, window)
    parts, at = [], start
    for i, (s, e) in enumerate(units):
        parts.append(marked_terms(text[at:s], terms))
        parts.append(f'<span class="wb-unit" data-unit="{i}">{marked_terms(text[s:e], terms)}</span>')
        at = e
    parts.append(marked_terms(text[at:end], terms))
    muted = 'style="color: rgba(49,51,63,0.6)"'
    return (
        '<div data-testid="label-document" class="wb-document">'
        f'<span {muted}>{"… " if cut_before else ""}{marked_terms(before, terms)}</span>'
        f'<span data-testid="label-passage" class="wb-passage">{"".join(parts)}</span>'
        f'<span {muted}>{marked_terms(after, terms)}{" …" if cut_after else ""}</span></div>'
    )
