"""Chunking strategies: invariants (hypothesis), hand-worked windows, spec validation."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.core.documents.chunking import (
    ChunkingError,
    ChunkingSpec,
    chunk_documents,
    chunk_text,
    make_chunk_id,
    parse_chunk_id,
    sentence_offsets,
    token_offsets,
)
from workbench.errors import WorkbenchError

# Texts with the structure the strategies react to: words, punctuation, blank lines, headings.
texts = st.lists(
    st.sampled_from(["word", "x", " ", "  ", "\n", "\n\n", "# ", "## ", ". ", "!", "?", "é", "\t", "-", "a.b"]),
    max_size=60,
).map("".join)

specs = st.one_of(
    st.just(ChunkingSpec("doc", "document")),
    st.integers(1, 30).flatmap(
        lambda size: st.builds(
            lambda ov, unit: ChunkingSpec("fx", "fixed", {"size": size, "overlap": ov, "unit": unit}),
            st.integers(0, size - 1),
            st.sampled_from(["chars", "tokens"]),
        )
    ),
    st.integers(1, 40).flatmap(
        lambda size: st.builds(
            lambda ov: ChunkingSpec("sec", "section", {"max_size": size, "overlap": ov}),
            st.integers(0, size - 1),
        )
    ),
    st.integers(1, 4).flatmap(
        lambda size: st.builds(
            lambda ov: ChunkingSpec("sent", "sentences", {"size": size, "overlap": ov}),
            st.integers(0, size - 1),
        )
    ),
)


@given(specs, texts)
@settings(max_examples=400)
def test_chunking_invariants(spec, text):
    spans = chunk_text(spec, text)
    if not text:
        assert spans == []
        return
    covered = [False] * len(text)
    previous = (-1, -1)
    for start, end in spans:
        assert 0 <= start < end <= len(text), "no empty or out-of-range chunk"
        assert start >= previous[0] and end >= previous[1], "chunks in document order"
        previous = (start, end)
        for p in range(start, end):
            covered[p] = True
    assert all(covered), "every character lies in some chunk"
    if spec.strategy == "fixed" and spec.params["unit"] == "chars":
        assert all(e - s <= spec.params["size"] for s, e in spans)
    if spec.strategy == "section":
        assert all(e - s <= spec.params["max_size"] for s, e in spans)


@given(specs, st.lists(texts, max_size=5))
@settings(max_examples=100)
def test_batch_chunking_equals_per_document_chunking_and_ids_are_deterministic(spec, docs):
    table = pd.DataFrame({"doc_id": [f"d:{i}" for i in range(len(docs))], "text": docs})
    got = chunk_documents(spec, table)
    assert list(got.columns) == ["chunk_id", "doc_id", "start", "end", "seq"]
    by_doc = _rows_by_doc(got)
    for i, text in enumerate(docs):
        rows = by_doc.get(f"d:{i}", [])
        assert [(s, e) for _, s, e, _ in rows] == chunk_text(spec, text)
        assert [q for *_, q in rows] == list(range(len(rows)))
        assert [c for c, *_ in rows] == [make_chunk_id(spec.name, f"d:{i}", q) for *_, q in rows]
    assert got["chunk_id"].is_unique
    pd.testing.assert_frame_equal(got, chunk_documents(spec, table))


def _rows_by_doc(got: pd.DataFrame) -> dict[str, list[tuple]]:
    """``{doc_id: [(chunk_id, start, end, seq), ...]}`` in frame order: the rows
    ``got.loc[got["doc_id"] == doc_id]`` selects, read once (a pandas filter per document cost
    more than the chunking under test)."""
    out: dict[str, list[tuple]] = {}
    for row in zip(got["chunk_id"].tolist(), got["doc_id"].tolist(), got["start"].tolist(),
                   got["end"].tolist(), got["seq"].tolist()):
        out.setdefault(row[1], []).append((row[0], row[2], row[3], row[4]))
    return out


def oracle_unit_windows(starts: list[int], length: int, size: int, overlap: int):
    """Windows of units written the slow, obvious way (the rule in the module docstring)."""
    if length == 0:
        return []
    if not starts:
        return [(0, length)]
    owned = [0, *starts[1:], length]  # unit u owns [owned[u], owned[u+1])
    out, first = [], 0
    while True:
        last = min(first + size, len(starts))
        out.append((owned[first], owned[last]))
        if last == len(starts):
            return out
        first += size - overlap


unicode_texts = st.lists(
    st.one_of(
        st.sampled_from([" ", "\n", "\n\n", "\n \t\n", ". ", "?\" ", "!)", "’", "#", "# ", "###### ",
                         "####### ", "\t", "\r", "\x0b", "\u2028", "\x00", "\u00a0", "\u3000", ".", "x"]),
        st.text(min_size=1, max_size=4),
    ),
    max_size=40,
).map("".join)


ascii_texts = st.lists(
    st.one_of(
        st.sampled_from([" ", "\n", "\n\n", "\n \t\n", ". ", "?\" ", "!)", "#", "# ", "###### ",
                         "####### ", "\t", "\r", "\x0b", "\x00", ".", "x"]),
        st.text(st.characters(max_codepoint=127), min_size=1, max_size=4),
    ),
    max_size=40,
).map("".join)


# ASCII batches take a bytes fast path, others a per-character table: test both.
@given(
    st.one_of(st.lists(unicode_texts, min_size=1, max_size=6), st.lists(ascii_texts, min_size=1, max_size=6)),
    st.integers(1, 5),
    st.data(),
)
@settings(max_examples=500)
def test_vectorised_token_and_sentence_windows_equal_per_text_regex(docs, size, data):
    overlap = data.draw(st.integers(0, size - 1))
    table = pd.DataFrame({"doc_id": [str(i) for i in range(len(docs))], "text": docs})
    for strategy, params, finder in [
        ("fixed", {"size": size, "overlap": overlap, "unit": "tokens"}, token_offsets),
        ("sentences", {"size": size, "overlap": overlap}, sentence_offsets),
    ]:
        by_doc = _rows_by_doc(chunk_documents(ChunkingSpec("v", strategy, params), table))
        for i, text in enumerate(docs):
            rows = by_doc.get(str(i), [])
            expected = oracle_unit_windows(finder(text).tolist(), len(text), size, overlap)
            assert [(s, e) for _, s, e, _ in rows] == expected, (strategy, text)


def test_batching_of_long_corpora_does_not_change_chunks(monkeypatch):
    import workbench.core.documents.chunking as chunking

    docs = [("a", "One two. Three four! " * 5), ("b", ""), ("c", "   "), ("d", "x. y. z.")]
    specs = [ChunkingSpec("t", "fixed", {"size": 3, "overlap": 1, "unit": "tokens"}),
             ChunkingSpec("s", "sentences", {"size": 2, "overlap": 1})]
    before = [chunk_documents(s, docs) for s in specs]
    monkeypatch.setattr(chunking, "_BATCH_CHARS", 10)  # forces one batch per document
    for spec, expected in zip(specs, before):
        pd.testing.assert_frame_equal(chunk_documents(spec, docs), expected)


def test_token_offsets_follow_the_regex():
    text = "Hé, wörld_1 — 3.5x!\n\tok"
    assert token_offsets(text).tolist() == [m.start() for m in re.finditer(r"\w+|[^\w\s]", text)]


def test_fixed_character_windows_by_hand():
    spec = ChunkingSpec("f", "fixed", {"size": 4, "overlap": 1})
    # step 3: [0,4) [3,7) [6,10); the window [6,10) reaches the end, so nothing follows.
    assert chunk_text(spec, "abcdefghij") == [(0, 4), (3, 7), (6, 10)]
    # one more char: a short last window [9, 11)
    assert chunk_text(spec, "abcdefghijk") == [(0, 4), (3, 7), (6, 10), (9, 11)]
    assert chunk_text(spec, "ab") == [(0, 2)]


def test_fixed_token_windows_own_trailing_whitespace():
    text = "  a bb, ccc  "
    assert token_offsets(text).tolist() == [2, 4, 6, 8]  # a, bb, ",", ccc
    spec = ChunkingSpec("t", "fixed", {"size": 2, "unit": "tokens"})
    spans = chunk_text(spec, text)
    assert spans == [(0, 6), (6, 13)]
    assert [text[s:e] for s, e in spans] == ["  a bb", ", ccc  "]
    assert chunk_text(spec, "   \n ") == [(0, 5)]  # no tokens: one chunk, coverage stays total


def test_sentence_windows_by_hand():
    text = "One. Two! Three? Four"
    assert sentence_offsets(text).tolist() == [0, 5, 10, 17]
    spec = ChunkingSpec("s", "sentences", {"size": 2, "overlap": 1})
    assert [text[s:e] for s, e in chunk_text(spec, text)] == [
        "One. Two! ", "Two! Three? ", "Three? Four",
    ]
    assert sentence_offsets("Intro\n\n# Head\nBody.").tolist() == [0, 7]


def test_section_chunking_by_hand():
    text = "\n\n# A\n\npara one.\n\npara two.\n## B\nshort\n\n" + "x" * 25
    spec = ChunkingSpec("sec", "section", {"max_size": 20})
    chunks = [text[s:e] for s, e in chunk_text(spec, text)]
    # Pieces: "\n\n" (whitespace, folds forward) + "# A\n\n" | "para one.\n\n" |
    # "para two.\n" | heading "## B\nshort\n\n" | 25 x. Greedy merge up to 20 chars within a
    # section, heading = hard break, oversize piece split by the fixed rule (20 + 5).
    assert chunks == [
        "\n\n# A\n\npara one.\n\n",
        "para two.\n",
        "## B\nshort\n\n",
        "x" * 20,
        "x" * 5,
    ]
    assert "".join(chunks) == text  # no overlap configured: chunks tile the text


def test_section_merges_paragraphs_within_max_size_but_not_across_headings():
    text = "# H\naa\n\nbb\n\ncc\n# I\ndd"
    spec = ChunkingSpec("sec", "section", {"max_size": 100})
    assert [text[s:e] for s, e in chunk_text(spec, text)] == ["# H\naa\n\nbb\n\ncc\n", "# I\ndd"]
    small = ChunkingSpec("sec", "section", {"max_size": 8})
    assert [text[s:e] for s, e in chunk_text(small, text)] == ["# H\naa\n\n", "bb\n\ncc\n", "# I\ndd"]


@pytest.mark.parametrize(
    "strategy,params,message",
    [
        ("fixed", {}, "needs parameter 'size'"),
        ("fixed", {"size": 0}, "positive integer"),
        ("fixed", {"size": 10, "overlap": 10}, "smaller than"),
        ("fixed", {"size": 10, "overlap": -1}, ">= 0"),
        ("fixed", {"size": 10, "unit": "words"}, "unit"),
        ("fixed", {"size": 10, "stride": 2}, "does not take"),
        ("section", {"max_size": 2.5}, "positive integer"),
        ("sentences", {"size": 3, "overlap": 3}, "smaller than"),
        ("document", {"size": 3}, "does not take"),
        ("semantic", {}, "unknown strategy"),
    ],
)
def test_spec_validation(strategy, params, message):
    with pytest.raises(ChunkingError, match=message) as err:
        ChunkingSpec("c", strategy, params)
    assert isinstance(err.value, ValueError) and isinstance(err.value, WorkbenchError)


def test_spec_name_rules_defaults_and_equality():
    with pytest.raises(ChunkingError, match="chunk id"):
        ChunkingSpec("a:b", "document")
    a = ChunkingSpec("f", "fixed", {"size": 5})
    assert a.params == {"size": 5, "overlap": 0, "unit": "chars"}
    assert a == ChunkingSpec("f", "fixed", {"size": 5, "overlap": 0, "unit": "chars"})
    assert hash(a) == hash(ChunkingSpec("f", "fixed", {"size": 5, "overlap": 0}))


def test_chunk_id_round_trip_with_colons_in_doc_id():
    cid = make_chunk_id("fx512", "wiki:Paris:2", 7)
    assert cid == "fx512:wiki:Paris:2:7"
    assert parse_chunk_id(cid) == ("fx512", "wiki:Paris:2", 7)
    for bad in ("nocolon", "a:b", "a::3", "a:b:x"):
        with pytest.raises(ChunkingError):
            parse_chunk_id(bad)


def test_document_input_errors():
    spec = ChunkingSpec("d", "document")
    with pytest.raises(ChunkingError, match="duplicate doc_id"):
        chunk_documents(spec, [("a", "x"), ("a", "y")])
    with pytest.raises(ChunkingError, match="lacks columns"):
        chunk_documents(spec, pd.DataFrame({"doc_id": ["a"]}))
    with pytest.raises(ChunkingError, match="no text"):
        chunk_documents(spec, pd.DataFrame({"doc_id": ["a"], "text": [None]}))
    empty = chunk_documents(spec, [("a", ""), ("b", "")])
    assert empty.empty and list(empty.columns) == ["chunk_id", "doc_id", "start", "end", "seq"]


def test_chunk_text_equals_slice_for_real_markdown():
    text = "# Guide\n\nInstall it. Then run it!\n\n## Notes\n" + "Long line " * 30
    for spec in [
        ChunkingSpec("a", "fixed", {"size": 50, "overlap": 10}),
        ChunkingSpec("b", "fixed", {"size": 8, "overlap": 2, "unit": "tokens"}),
        ChunkingSpec("c", "section", {"max_size": 60}),
        ChunkingSpec("d", "sentences", {"size": 2}),
    ]:
        spans = chunk_text(spec, text)
        assert spans and spans[0][0] == 0 and spans[-1][1] == len(text)
        assert all(re.search(r"\S", text[s:e]) for s, e in spans)
