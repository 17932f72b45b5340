"""workbench.ui.highlight.evidence_html on hand-worked examples: the evidence spans in <mark>,
overlapping spans merged, spans clipped to the document, every piece of text escaped."""

from __future__ import annotations

from workbench.ui.highlight import evidence_html

TEXT = "One. <b>Two</b>. Three."  # "One. " 0-5, "<b>Two</b>" 5-15, ". " 15-17, "Three." 17-23
PASSAGE = '<span class="wb-passage" style="background: rgba(49, 51, 63, 0.05)">'


def _mark(i: int, inner: str, colour: str = "#b7e4c7") -> str:
    return f'<mark data-evidence="{i}" style="background: {colour}; padding: 0 1px">{inner}</mark>'


def test_overlapping_spans_merge_and_spans_past_the_end_are_dropped():
    out = evidence_html(TEXT, 0, 23, [[10, 17], [5, 15], [100, 200]], grade=3, window=None)
    assert out == PASSAGE + "One. " + _mark(0, "&lt;b&gt;Two&lt;/b&gt;. ") + "Three.</span>"


def test_two_spans_and_context_outside_the_passage():
    # passage "<b>Two</b>" (5-15); evidence "One" (0-3) widens the shaded part to start at 0
    out = evidence_html(TEXT, 5, 15, [[17, 22], [0, 3]], window=None)
    assert out == (PASSAGE + _mark(0, "One", "#fff3bf") + ". &lt;b&gt;Two&lt;/b&gt;. "
                   + _mark(1, "Three", "#fff3bf") + "</span>.")


def test_no_evidence_shades_the_passage_without_marks():
    out = evidence_html(TEXT, 5, 15, None, grade=0, window=None)
    assert out == "One. " + PASSAGE + "&lt;b&gt;Two&lt;/b&gt;</span>. Three."
