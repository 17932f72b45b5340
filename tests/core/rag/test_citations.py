"""Citation evaluator: every pattern, the spec's worked example, no-citation answers, errors."""

from __future__ import annotations

import math

import pytest

from workbench.core.rag.citations import (
    CitationInputError,
    CitationPatternError,
    evaluate_batch,
    evaluate_citations,
    make_pattern,
    parse_citations,
)
from workbench.errors import WorkbenchError

SPEC_ANSWER = """Based on the analysis in [doc_id 3], the system uses
consistent hashing for partitioning. This is further explained in
[doc_id 7] which describes virtual nodes. However, [doc_id 99]
suggests an alternative approach."""
SPEC_CONTEXT = ["1", "3", "5", "7", "10"]


def test_spec_example():
    r = evaluate_citations(SPEC_ANSWER, SPEC_CONTEXT)
    assert r.faithfulness == pytest.approx(2 / 3)
    assert r.coverage == pytest.approx(2 / 5)
    assert (r.total_citations, r.valid_citations, r.invalid_citations) == (3, 2, 1)
    assert r.invalid_refs == ["99"]
    assert r.cited_docs == ["3", "7"]
    assert r.uncited_docs == ["1", "5", "10"]
    assert r.context_docs == 5
    assert r.no_citations is False


def test_doc_id_pattern_accepts_non_word_ids():
    tokens = parse_citations("see [doc_id it-handbook] and [doc_id  d7.2]", "doc_id")
    assert tokens == ["it-handbook", "d7.2"]


def test_numeric_by_position_is_one_based():
    context = ["d7", "d3", "d1"]
    r = evaluate_citations("A [1], B [3][3], C [4], D [0].", context, "numeric", resolve="position")
    # [1] -> d7, [3] -> d1 twice; [4] and [0] point outside the 3 context documents.
    assert r.cited_docs == ["d7", "d1"]
    assert r.invalid_refs == ["4", "0"]
    assert (r.total_citations, r.valid_citations) == (5, 3)
    assert r.faithfulness == pytest.approx(3 / 5)
    assert r.coverage == pytest.approx(2 / 3)
    assert r.uncited_docs == ["d3"]


def test_ref_pattern():
    r = evaluate_citations("x [[ref:a1]] y [[ref:zz]] [ref:a2]", ["a1", "a2"], "ref")
    # "[ref:a2]" lacks the double brackets and is not a citation.
    assert r.total_citations == 2 and r.invalid_refs == ["zz"]
    assert r.coverage == pytest.approx(1 / 2) and r.faithfulness == pytest.approx(1 / 2)


def test_footnote_by_id_and_by_position():
    by_id = evaluate_citations("x [fn:2] y [fn:9]", ["2", "5"], "footnote")
    assert by_id.cited_docs == ["2"] and by_id.invalid_refs == ["9"]
    by_pos = evaluate_citations("x [fn:2] y [fn:9]", ["a", "b"], "footnote", resolve="position")
    assert by_pos.cited_docs == ["b"] and by_pos.invalid_refs == ["9"]


def test_custom_regex():
    answer = "Per (Source: alpha) and (Source: beta)."
    r = evaluate_citations(answer, ["alpha", "gamma"], r"\(Source:\s*(\w+)\)")
    assert r.cited_docs == ["alpha"] and r.invalid_refs == ["beta"]
    # Non-capturing groups are fine; only capturing ones count.
    assert parse_citations("<<a>> <<b>>", r"(?:<<)(\w)(?:>>)") == ["a", "b"]


@pytest.mark.parametrize(
    "pattern, message",
    [
        (r"\[(\d+", "valid regex"),
        (r"\[\d+\]", "0 capturing groups"),
        (r"\[(\w+):(\d+)\]", "2 capturing groups"),
    ],
)
def test_invalid_patterns(pattern, message):
    with pytest.raises(CitationPatternError, match=message) as info:
        evaluate_citations("[1]", ["a"], pattern)
    assert isinstance(info.value, ValueError) and isinstance(info.value, WorkbenchError)


def test_bad_resolve():
    with pytest.raises(CitationPatternError, match="resolve"):
        make_pattern("numeric", "rank")


def test_no_citations_skipped_is_not_perfectly_faithful():
    r = evaluate_citations("An answer with no sources.", ["a", "b"], uncited="skip")
    assert r.no_citations is True
    assert math.isnan(r.faithfulness)
    assert r.coverage == 0.0
    assert r.uncited_docs == ["a", "b"]


def test_empty_context_and_duplicates():
    empty = evaluate_citations("[doc_id a]", [])
    assert math.isnan(empty.coverage) and empty.faithfulness == 0.0
    dup = evaluate_citations("[doc_id a] [doc_id b]", ["a", "b", "a"])
    assert dup.context_docs == 2 and dup.coverage == 1.0


def test_relevant_coverage():
    r = evaluate_citations("[doc_id a] [doc_id c]", ["a", "b", "c"], relevant_ids=["a", "b", "z"])
    # cited {a, c} ∩ relevant {a, b, z} = {a}
    assert r.relevant_coverage == pytest.approx(1 / 3)
    assert math.isnan(evaluate_citations("[doc_id a]", ["a"], relevant_ids=[]).relevant_coverage)
    assert math.isnan(evaluate_citations("[doc_id a]", ["a"]).relevant_coverage)


def test_batch_aggregates_by_hand():
    records = [
        {"query_id": "q1", "answer": SPEC_ANSWER, "context_ids": SPEC_CONTEXT},
        {"query_id": "q2", "answer": "No citations at all.", "context_ids": ["1", "2"]},
        {"query_id": "q3", "answer": "[doc_id x] [doc_id y]", "context_ids": ["x", "y"],
         "relevant_ids": ["x"]},
    ]  # fmt: skip
    batch = evaluate_batch(records, uncited="skip")
    agg = batch.aggregate
    assert agg["n_answers"] == 3
    assert agg["n_no_citations"] == 1
    assert agg["n_with_invalid"] == 1
    assert (agg["total_citations"], agg["valid_citations"], agg["invalid_citations"]) == (5, 4, 1)
    # faithfulness: q1 2/3, q3 1; q2 has no citations and is excluded
    assert agg["mean_faithfulness"] == pytest.approx((2 / 3 + 1) / 2)
    assert agg["micro_faithfulness"] == pytest.approx(4 / 5)
    # coverage: q1 2/5, q2 0, q3 1
    assert agg["mean_coverage"] == pytest.approx((0.4 + 0 + 1) / 3)
    assert agg["mean_relevant_coverage"] == pytest.approx(1.0)
    assert agg["pattern"] == "doc_id" and agg["resolve"] == "id" and agg["uncited"] == "skip"
    assert list(batch.per_answer["query_id"]) == ["q1", "q2", "q3"]
    assert batch.per_answer.loc[1, "no_citations"]


def test_batch_all_uncited_skipped_means_are_nan():
    batch = evaluate_batch([{"answer": "none", "context_ids": ["a"]}], uncited="skip")
    assert batch.aggregate["n_no_citations"] == 1
    assert math.isnan(batch.aggregate["mean_faithfulness"])
    assert math.isnan(batch.aggregate["micro_faithfulness"])
    assert batch.per_answer.loc[0, "query_id"] == "1"


@pytest.mark.parametrize(
    "record, message",
    [
        ({"context_ids": ["a"]}, "record 1: 'answer'"),
        ({"answer": "x", "context_ids": "a"}, "record 1: 'context_ids'"),
    ],
)
def test_batch_record_errors(record, message):
    with pytest.raises(CitationInputError, match=message):
        evaluate_batch([record])
