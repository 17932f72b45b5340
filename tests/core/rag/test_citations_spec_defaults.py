"""Issue 32: the citation evaluator follows the specification by default.

Oracle: the specification's worked example (001, "Citation Evaluator"): an answer citing 3, 7
and 99 with context ``1 3 5 7 10`` has faithfulness 2/3 (99 is invalid) and coverage 2/5 (3
and 7 cited). Its ``bracket_number`` pattern ``\\[(\\d+)\\]`` compares each match with the
context ids, so the same answer written ``[3] [7] [99]`` gives the same 2/3 and 0.4. Read by
position instead, [3] is the document "5" and [7], [99] point past the five documents: 1/3
and 1/5. Its ``evaluate_citations`` returns ``1.0`` for an answer with no citation and its
harness averages that 1.0 in ``mean_citation_faithfulness``.
"""

from __future__ import annotations

import math

import pytest

from workbench.core.rag.citations import CitationPatternError, evaluate_batch, evaluate_citations

SPEC_CONTEXT = ["1", "3", "5", "7", "10"]
NUMERIC_ANSWER = """Based on the analysis in [3], the system uses
consistent hashing for partitioning. This is further explained in
[7] which describes virtual nodes. However, [99]
suggests an alternative approach."""


def test_numeric_resolves_by_id_by_default_as_the_spec():
    r = evaluate_citations(NUMERIC_ANSWER, SPEC_CONTEXT, "numeric")
    assert r.faithfulness == pytest.approx(2 / 3)
    assert r.coverage == pytest.approx(0.4)
    assert r.cited_docs == ["3", "7"] and r.invalid_refs == ["99"]


def test_numeric_by_position_keeps_the_old_reading():
    r = evaluate_citations(NUMERIC_ANSWER, SPEC_CONTEXT, "numeric", resolve="position")
    assert r.faithfulness == pytest.approx(1 / 3)
    assert r.coverage == pytest.approx(1 / 5)
    assert r.cited_docs == ["5"] and r.invalid_refs == ["7", "99"]


def test_uncited_answer_is_one_by_default_as_the_spec():
    r = evaluate_citations("An answer with no sources.", SPEC_CONTEXT, "numeric")
    assert r.no_citations and r.faithfulness == 1.0 and r.coverage == 0.0


def test_batch_mean_counts_uncited_as_one_by_default():
    records = [
        {"query_id": "q1", "answer": NUMERIC_ANSWER, "context_ids": SPEC_CONTEXT},
        {"query_id": "q2", "answer": "No sources here.", "context_ids": ["a", "b"]},
    ]
    agg = evaluate_batch(records, "numeric").aggregate
    # the spec's harness: mean([2/3, 1.0]) and mean([2/5, 0])
    assert agg["mean_faithfulness"] == pytest.approx((2 / 3 + 1.0) / 2)
    assert agg["mean_coverage"] == pytest.approx((0.4 + 0) / 2)
    assert agg["micro_faithfulness"] == pytest.approx(2 / 3)  # uncited answers add 0 / 0
    assert (agg["resolve"], agg["uncited"], agg["n_no_citations"]) == ("id", "one", 1)

    skipped = evaluate_batch(records, "numeric", uncited="skip").aggregate
    assert skipped["mean_faithfulness"] == pytest.approx(2 / 3)
    assert skipped["uncited"] == "skip" and skipped["n_no_citations"] == 1
    per_answer = evaluate_batch(records, "numeric", uncited="skip").per_answer
    assert math.isnan(per_answer.loc[1, "faithfulness"])


def test_unknown_uncited_convention_is_refused():
    with pytest.raises(CitationPatternError, match="uncited must be 'one' or 'skip'"):
        evaluate_batch([{"answer": "x", "context_ids": []}], uncited="zero")
