"""Markdown written by a lead (labelling guidelines) as safe HTML.

CommonMark (``markdown-it-py``, what ``rich`` under Streamlit uses too) with raw HTML off: a
``<script>`` or ``<img onerror=...>`` in the file stays literal, escaped text, and link targets
outside http(s), mailto and relative ones (``javascript:``, ``vbscript:``, ``data:``) are not
made links. Not ``st.markdown``: it reads ``$...$`` as LaTeX and ``:red[...]`` as colour, so
``$5 to $10`` would not read as written.
"""

from __future__ import annotations

from markdown_it import MarkdownIt

_RENDERER = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})


def markdown_html(text: str) -> str:
    """``text`` (Markdown) rendered as HTML, raw HTML escaped."""
    return _RENDERER.render(text or "")
