"""Span-anchored qrels survive re-chunking (property tests against a naive oracle).

Labels are made while looking at chunking A (judged spans = A's chunks, random grades, some
failed = NULL). Under any other chunking B:

* doc-level qrels rolled up from B's chunk qrels equal the doc-level qrels of the spans
  (needs min_overlap <= 0.5 and B covering the document — both hold here);
* B's chunk-level qrels equal a naive double loop over (chunk, span) written from the rule.
"""

from __future__ import annotations

import math

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.core.documents.chunking import ChunkingSpec, chunk_documents
from workbench.core.documents.spans import chunk_qrels, doc_qrels, rollup_doc_qrels

texts = st.lists(
    st.sampled_from(["lorem", "ipsum", " ", "\n\n", "# ", ". ", "?", "x", "\n"]), min_size=1, max_size=50
).map("".join)


def spec_strategy(name: str):
    return st.one_of(
        st.just(ChunkingSpec(name, "document")),
        st.integers(1, 25).flatmap(
            lambda size: st.builds(
                lambda ov, unit: ChunkingSpec(name, "fixed", {"size": size, "overlap": ov, "unit": unit}),
                st.integers(0, size - 1), st.sampled_from(["chars", "tokens"]),
            )
        ),
        st.integers(1, 30).map(lambda m: ChunkingSpec(name, "section", {"max_size": m})),
        st.integers(1, 3).map(lambda n: ChunkingSpec(name, "sentences", {"size": n})),
    )


def naive_chunk_qrels(chunks: pd.DataFrame, spans: pd.DataFrame, min_overlap: float) -> dict:
    """The rule, spelled out: grade = max grade of non-NULL spans overlapping the chunk by at
    least min_overlap of the shorter span (positive overlap required)."""
    out: dict[tuple[str, str], float] = {}
    span_rows = list(spans.itertuples())  # read once, not once per chunk
    for c in chunks.itertuples():
        for s in span_rows:
            if s.grade is None or (isinstance(s.grade, float) and math.isnan(s.grade)):
                continue
            if c.doc_id != s.doc_id:
                continue
            ov = min(c.end, s.end) - max(c.start, s.start)
            if ov <= 0:
                continue
            if ov / min(c.end - c.start, s.end - s.start) >= min_overlap:
                key = (s.query_id, c.chunk_id)
                out[key] = max(out.get(key, -math.inf), s.grade)
    return out


def naive_doc_qrels(spans: pd.DataFrame) -> dict:
    out: dict[tuple[str, str], float] = {}
    for s in spans.itertuples():
        if not (isinstance(s.grade, float) and math.isnan(s.grade)):
            key = (s.query_id, s.doc_id)
            out[key] = max(out.get(key, -math.inf), s.grade)
    return out


@st.composite
def scenario(draw):
    docs = draw(st.lists(texts, min_size=1, max_size=3))
    table = pd.DataFrame({"doc_id": [f"doc{i}" for i in range(len(docs))], "text": docs})
    spec_a = draw(spec_strategy("A"))
    spec_b = draw(spec_strategy("B"))
    chunks_a = chunk_documents(spec_a, table)
    # Each query judges a random subset of A's chunks; grades 0-3 or NULL (failed call).
    rows = []
    for q in ("q1", "q2"):
        for c in chunks_a.itertuples():
            if draw(st.booleans()):
                grade = draw(st.one_of(st.integers(0, 3).map(float), st.just(math.nan)))
                rows.append((q, c.doc_id, c.start, c.end, grade))
    spans = pd.DataFrame(rows, columns=["query_id", "doc_id", "start", "end", "grade"])
    spans = spans.astype({"start": "int64", "end": "int64", "grade": "float64"})
    return table, spans, chunk_documents(spec_b, table)


@given(scenario(), st.sampled_from([0.0, 0.25, 0.5]))
@settings(max_examples=150, deadline=None)
def test_doc_level_qrels_are_chunking_invariant(case, min_overlap):
    _, spans, chunks_b = case
    direct = doc_qrels(spans)
    rolled = rollup_doc_qrels(chunk_qrels(chunks_b, spans, min_overlap=min_overlap), chunks_b)
    pd.testing.assert_frame_equal(rolled, direct)
    assert dict(zip(zip(direct["query_id"], direct["doc_id"]), direct["grade"])) == naive_doc_qrels(spans)


@given(scenario(), st.sampled_from([0.0, 0.3, 0.5, 0.75, 1.0]))
@settings(max_examples=150, deadline=None)
def test_chunk_level_qrels_follow_the_rule(case, min_overlap):
    _, spans, chunks_b = case
    got = chunk_qrels(chunks_b, spans, min_overlap=min_overlap)
    as_dict = dict(zip(zip(got["query_id"], got["chunk_id"]), got["grade"]))
    assert as_dict == naive_chunk_qrels(chunks_b, spans, min_overlap)


@given(
    st.lists(
        st.tuples(st.sampled_from(["q1", "q2"]), st.sampled_from(["d1", "d2"]), st.integers(0, 60),
                  st.integers(0, 30), st.one_of(st.integers(0, 3).map(float), st.just(math.nan))),
        max_size=15,
    ),
    st.lists(st.tuples(st.sampled_from(["d1", "d2", "d3"]), st.integers(0, 60), st.integers(0, 30)), max_size=15),
    st.floats(0.0, 1.0),
)
@settings(max_examples=200, deadline=None)
def test_chunk_qrels_match_oracle_for_arbitrary_spans(span_rows, chunk_rows, min_overlap):
    spans = pd.DataFrame(
        [(q, d, s, s + n, g) for q, d, s, n, g in span_rows],
        columns=["query_id", "doc_id", "start", "end", "grade"],
    ).astype({"start": "int64", "end": "int64", "grade": "float64"})
    chunks = pd.DataFrame(
        [(f"c{i}", d, s, s + n) for i, (d, s, n) in enumerate(chunk_rows)],
        columns=["chunk_id", "doc_id", "start", "end"],
    ).astype({"start": "int64", "end": "int64"})
    got = chunk_qrels(chunks, spans, min_overlap=min_overlap)
    assert dict(zip(zip(got["query_id"], got["chunk_id"]), got["grade"])) == naive_chunk_qrels(
        chunks, spans, min_overlap
    )


def test_invariance_needs_min_overlap_at_most_half():
    """Why the doc-level guarantee stops at 0.5: a span straddling two chunks evenly."""
    docs = pd.DataFrame({"doc_id": ["d"], "text": ["abcdefghijkl"]})
    chunks_b = chunk_documents(ChunkingSpec("B", "fixed", {"size": 6}), docs)  # [0,6) [6,12)
    spans = pd.DataFrame({"query_id": ["q"], "doc_id": ["d"], "start": [3], "end": [9], "grade": [2.0]})
    at_half = rollup_doc_qrels(chunk_qrels(chunks_b, spans, min_overlap=0.5), chunks_b)
    pd.testing.assert_frame_equal(at_half, doc_qrels(spans))
    strict = rollup_doc_qrels(chunk_qrels(chunks_b, spans, min_overlap=0.6), chunks_b)
    assert strict.empty  # each chunk holds 3 of the 6 span chars: 0.5 < 0.6
