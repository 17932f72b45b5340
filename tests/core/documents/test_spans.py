"""Span overlap rule, coverage and the vectorised span tables (workbench.core.documents.spans)."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.core.documents.spans import (
    Span,
    SpanError,
    as_span,
    chunk_is_relevant,
    chunk_qrels,
    doc_qrels,
    overlap,
    overlapping_pairs,
    rollup_doc_qrels,
    span_coverage,
    span_coverage_table,
)
from workbench.errors import WorkbenchError

# ----------------------------------------------------------------- the spec's worked example

GOLD = [{"doc_id": "it-handbook", "start": 0, "end": 3000}]
CHUNKS = [{"doc_id": "it-handbook", "start": i, "end": i + 1000} for i in (0, 1000, 2000)]


def test_spec_chunks_inside_long_gold_span_are_all_relevant():
    # 1000-char chunks cover only 1/3 of the gold span but 100 % of themselves.
    assert [chunk_is_relevant(c, GOLD) for c in CHUNKS] == [True, True, True]


def test_spec_coverage_of_two_chunks_is_two_thirds():
    assert span_coverage(CHUNKS[:2], GOLD) == 2 / 3


def test_spec_duplicate_chunks_do_not_inflate_coverage():
    assert span_coverage(CHUNKS + CHUNKS, GOLD) == 1.0


def test_spec_chunk_with_small_tail_overlap_is_not_relevant():
    assert not chunk_is_relevant({"doc_id": "it-handbook", "start": 2900, "end": 3900}, GOLD)


def test_spec_empty_gold_span_never_matches():
    empty = [{"doc_id": "it-handbook", "start": 5, "end": 5}]
    assert not chunk_is_relevant(CHUNKS[0], empty)
    assert not chunk_is_relevant(CHUNKS[0], empty, min_overlap=0.0)


# ----------------------------------------------------------------- Span and scalar rule


@pytest.mark.parametrize(
    "args",
    [("", 0, 1), (None, 0, 1), ("d", -1, 3), ("d", 5, 4), ("d", 0.0, 3), ("d", True, 3), ("d", 0, "7")],
)
def test_invalid_spans_raise_a_value_error_that_says_what(args):
    with pytest.raises(SpanError) as err:
        Span(*args)
    assert isinstance(err.value, ValueError) and isinstance(err.value, WorkbenchError)
    assert str(err.value)


def test_span_accepts_numpy_ints_and_normalises_them():
    s = Span("d", np.int64(2), np.int32(7))
    assert s == Span("d", 2, 7) and type(s.start) is int and s.length == 5


def test_as_span_reads_mappings_and_tuples_and_rejects_the_rest():
    assert as_span({"doc_id": "d", "start": 1, "end": 2}) == Span("d", 1, 2)
    assert as_span(("d", 1, 2)) == Span("d", 1, 2)
    with pytest.raises(SpanError, match="lacks keys"):
        as_span({"doc_id": "d", "start": 1})
    with pytest.raises(SpanError):
        as_span("d:1:2")


def test_overlap_is_end_exclusive_and_per_document():
    assert overlap(Span("d", 0, 10), Span("d", 10, 20)) == 0
    assert overlap(Span("d", 0, 10), Span("d", 9, 20)) == 1
    assert overlap(Span("d", 0, 10), Span("e", 0, 10)) == 0
    assert overlap(Span("d", 3, 8), Span("d", 0, 100)) == 5


def test_small_gold_span_inside_big_chunk_matches_because_shorter_span_counts():
    assert chunk_is_relevant(Span("d", 0, 5000), [Span("d", 100, 200)])


def test_min_overlap_boundaries():
    chunk = Span("d", 0, 10)
    half = [Span("d", 5, 30)]  # overlap 5 of the shorter (chunk, 10) = 0.5 exactly
    assert chunk_is_relevant(chunk, half, min_overlap=0.5)
    assert not chunk_is_relevant(chunk, half, min_overlap=0.51)
    assert chunk_is_relevant(chunk, [Span("d", 9, 30)], min_overlap=0.0)
    assert not chunk_is_relevant(chunk, [Span("d", 10, 30)], min_overlap=0.0)
    assert chunk_is_relevant(chunk, [Span("d", 0, 30)], min_overlap=1.0)
    for bad in (-0.1, 1.5, "0.5", True):
        with pytest.raises(SpanError, match="min_overlap"):
            chunk_is_relevant(chunk, half, min_overlap=bad)


def test_coverage_merges_overlapping_gold_and_handles_other_docs():
    gold = [Span("d", 0, 10), Span("d", 5, 20), Span("e", 0, 10)]  # 20 + 10 gold chars
    chunks = [Span("d", 15, 40), Span("x", 0, 100)]
    assert span_coverage(chunks, gold) == pytest.approx(5 / 30)
    assert span_coverage([], gold) == 0.0
    assert math.isnan(span_coverage(chunks, []))
    assert math.isnan(span_coverage(chunks, [Span("d", 3, 3)]))


# ----------------------------------------------------------------- properties vs brute force

spans_st = st.lists(
    st.tuples(st.sampled_from("ab"), st.integers(0, 40), st.integers(0, 15)).map(
        lambda t: Span(t[0], t[1], t[1] + t[2])
    ),
    max_size=12,
)


def _chars(spans):
    return {(s.doc_id, p) for s in spans for p in range(s.start, s.end)}


@given(spans_st, spans_st)
def test_coverage_equals_character_set_oracle(chunks, gold):
    g = _chars(gold)
    expected = len(_chars(chunks) & g) / len(g) if g else math.nan
    got = span_coverage(chunks, gold)
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


@given(spans_st, spans_st)
def test_coverage_table_matches_scalar_coverage(chunks, gold):
    def table(spans, q):
        return pd.DataFrame(
            {"query_id": [q] * len(spans), "doc_id": [s.doc_id for s in spans],
             "start": [s.start for s in spans], "end": [s.end for s in spans]},
        ).astype({"start": "int64", "end": "int64"})

    got = span_coverage_table(table(chunks, "q1"), table(gold, "q1"))
    expected = span_coverage(chunks, gold)
    if not chunks and not gold:
        assert got.empty
        return
    assert got["query_id"].tolist() == ["q1"]
    value = float(got["coverage"].iloc[0])
    assert (math.isnan(value) and math.isnan(expected)) or value == pytest.approx(expected)


@given(spans_st, spans_st)
def test_overlapping_pairs_equals_double_loop(left, right):
    i, j, ov = overlapping_pairs(
        np.array([s.doc_id for s in left], dtype=object), np.array([s.start for s in left]),
        np.array([s.end for s in left]), np.array([s.doc_id for s in right], dtype=object),
        np.array([s.start for s in right]), np.array([s.end for s in right]),
    )
    got = sorted(zip(i.tolist(), j.tolist(), ov.tolist()))
    expected = sorted(
        (a, b, overlap(x, y)) for a, x in enumerate(left) for b, y in enumerate(right) if overlap(x, y) > 0
    )
    assert got == expected


# ----------------------------------------------------------------- span-anchored qrels tables


def _chunks(rows):
    return pd.DataFrame(rows, columns=["chunk_id", "doc_id", "start", "end"])


def _judged(rows):
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "start", "end", "grade"])


def test_chunk_qrels_takes_max_grade_keeps_zero_and_ignores_null_grades():
    chunks = _chunks(
        [("c0", "d", 0, 100), ("c1", "d", 100, 200), ("c2", "d", 200, 300), ("c3", "e", 0, 50)]
    )
    judged = _judged(
        [
            ("q1", "d", 0, 150, 1),      # c0 fully; c1 by 50 of 100 = 0.5 -> matches
            ("q1", "d", 120, 200, 3),    # c1 by 80 of shorter 80 -> 1.0
            ("q1", "d", 290, 300, 0),    # c2 by 10 of shorter 10 -> judged, grade 0
            ("q1", "e", 0, 50, None),    # failed judgment: ignored
            ("q2", "d", 260, 400, 2),    # c2 by 40 of 100 = 0.4 -> no match
        ]
    )
    got = chunk_qrels(chunks, judged)
    assert got.to_dict("records") == [
        {"query_id": "q1", "chunk_id": "c0", "grade": 1},
        {"query_id": "q1", "chunk_id": "c1", "grade": 3},
        {"query_id": "q1", "chunk_id": "c2", "grade": 0},
    ]
    loose = chunk_qrels(chunks, judged, min_overlap=0.3)
    assert ("q2", "c2") in set(zip(loose["query_id"], loose["chunk_id"]))


def test_doc_qrels_and_rollup():
    judged = _judged(
        [("q1", "d", 0, 10, 1), ("q1", "d", 50, 60, 2), ("q1", "e", 0, 5, None), ("q2", "e", 3, 3, 0)]
    )
    got = doc_qrels(judged)
    assert got.to_dict("records") == [
        {"query_id": "q1", "doc_id": "d", "grade": 2},
        {"query_id": "q2", "doc_id": "e", "grade": 0},
    ]
    chunks = _chunks([("c0", "d", 0, 30), ("c1", "d", 30, 70)])
    cq = chunk_qrels(chunks, judged)
    assert rollup_doc_qrels(cq, chunks).to_dict("records") == [{"query_id": "q1", "doc_id": "d", "grade": 2}]


def test_chunk_qrels_errors_are_clear():
    chunks = _chunks([("c0", "d", 0, 10)])
    with pytest.raises(SpanError, match="lacks columns"):
        chunk_qrels(chunks.drop(columns="end"), _judged([]))
    with pytest.raises(SpanError, match="duplicate chunk_id"):
        chunk_qrels(pd.concat([chunks, chunks]), _judged([]))
    with pytest.raises(SpanError, match="start <= end"):
        chunk_qrels(_chunks([("c0", "d", 5, 1)]), _judged([]))
    with pytest.raises(SpanError, match="integer"):
        chunk_qrels(_chunks([("c0", "d", 0.5, 3)]), _judged([]))
    with pytest.raises(SpanError, match="grade"):
        chunk_qrels(chunks, _judged([("q", "d", 0, 3, "high")]))
    with pytest.raises(SpanError, match="not in chunks"):
        rollup_doc_qrels(pd.DataFrame({"query_id": ["q"], "chunk_id": ["zz"], "grade": [1]}), chunks)


def test_chunk_qrels_scales_to_100k_chunks_by_10k_spans():
    rng = np.random.default_rng(1)
    n_docs = 5000
    doc = np.repeat(np.arange(n_docs), 20)
    start = np.tile(np.arange(20) * 100, n_docs)
    chunks = pd.DataFrame(
        {"chunk_id": [f"c{i}" for i in range(len(doc))], "doc_id": doc.astype(str), "start": start, "end": start + 100}
    )
    s_doc = rng.integers(0, n_docs, 10_000)
    s_start = rng.integers(0, 1900, 10_000)
    judged = pd.DataFrame(
        {"query_id": rng.integers(0, 500, 10_000).astype(str), "doc_id": s_doc.astype(str),
         "start": s_start, "end": s_start + rng.integers(1, 400, 10_000), "grade": rng.integers(0, 4, 10_000)}
    )
    t0 = time.perf_counter()
    got = chunk_qrels(chunks, judged)
    assert time.perf_counter() - t0 < 10
    assert len(got) > 10_000


@given(
    st.lists(st.tuples(st.sampled_from(["q1", "q2", "q3"]), st.sampled_from("ab"), st.integers(0, 30), st.integers(0, 10)), max_size=12),
    st.lists(st.tuples(st.sampled_from(["q1", "q2", "q3"]), st.sampled_from("ab"), st.integers(0, 30), st.integers(0, 10)), max_size=12),
)
@settings(max_examples=100)
def test_coverage_table_keeps_queries_apart(retrieved, gold):
    def table(rows):
        return pd.DataFrame(
            [(q, d, s, s + n) for q, d, s, n in rows], columns=["query_id", "doc_id", "start", "end"]
        ).astype({"start": "int64", "end": "int64"})

    got = span_coverage_table(table(retrieved), table(gold))
    queries = sorted({r[0] for r in retrieved} | {g[0] for g in gold})
    assert got["query_id"].tolist() == queries
    for q, value in zip(got["query_id"], got["coverage"]):
        expected = span_coverage(
            [Span(d, s, s + n) for qq, d, s, n in retrieved if qq == q],
            [Span(d, s, s + n) for qq, d, s, n in gold if qq == q],
        )
        assert (math.isnan(value) and math.isnan(expected)) or value == pytest.approx(expected)
