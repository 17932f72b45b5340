"""One metric, one answer: a measure's own ``(rel=N)`` equals the measure under ``rel=N``.

Which queries count as having no relevant document (and so are excluded from a measure's
mean) follows each measure's threshold, not the evaluation's ``rel`` (issue 7).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import evaluate
from workbench.errors import InputError

# binary measures: relevance is grade >= threshold, so both spellings must agree exactly
BINARY = ["P@3", "R@5", "AP", "AP@3", "RR", "RR@3", "hit@2", "f1@3", "Rprec", "bpref", "RBP(p=0.8)"]


def with_rel(measure: str, n: int) -> str:
    """``P@3`` -> ``P(rel=n)@3``; ``RBP(p=0.8)`` -> ``RBP(p=0.8,rel=n)``."""
    name, at, cutoff = measure.partition("@")
    if name.endswith(")"):
        name = name[:-1] + f",rel={n})"
    else:
        name = f"{name}(rel={n})"
    return name + at + cutoff


def test_hand_example_from_the_issue():
    # q1 has a grade-2 document, q2 only a grade-1 one; both rank their labelled doc first.
    qrels = {"q1": {"a": 2, "x": 0}, "q2": {"b": 1, "y": 0}}
    run = {"q1": {"a": 2.0, "x": 1.0}, "q2": {"b": 2.0, "y": 1.0}}
    own = evaluate(qrels, run, ["AP(rel=2)"])  # evaluation rel stays 1
    flag = evaluate(qrels, run, ["AP"], rel=2)
    # AP at threshold 2: q1 = 1.0; q2 has no relevant doc at 2 -> excluded. Before the fix the
    # measure-level spelling kept q2 (relevant at the evaluation's rel 1) and scored it 0: 0.5.
    assert own.aggregate["AP(rel=2)"] == flag.aggregate["AP"] == 1.0
    assert own.excluded_no_relevant == flag.excluded_no_relevant == ("q2",)
    assert own.counts() == flag.counts() == {"queries_evaluated": 1, "excluded_no_relevant": 1,
                                             "missing_from_run": 0, "only_in_run": 0}
    # next to a measure at the evaluation's threshold, q2 is a row with no AP(rel=2) value
    both = evaluate(qrels, run, ["AP(rel=2)", "AP"])
    assert both.aggregate == {"AP(rel=2)": 1.0, "AP": 1.0}
    assert math.isnan(both.per_query.loc["q2", "AP(rel=2)"])
    assert both.counts_by_measure() == {
        "AP(rel=2)": {"rel": 2, "queries_evaluated": 1, "excluded_no_relevant": 1, "missing_from_run": 0},
        "AP": {"rel": 1, "queries_evaluated": 2, "excluded_no_relevant": 0, "missing_from_run": 0},
    }
    assert both.counts()["excluded_no_relevant"] == 0 and both.n_queries == 2


DOCS = [f"d{i}" for i in range(10)]


@st.composite
def collections(draw):
    qrels = {}
    for q in draw(st.lists(st.sampled_from(["q1", "q2", "q3", "q4", "q5"]), min_size=1, max_size=5, unique=True)):
        docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=6, unique=True))
        qrels[q] = {d: draw(st.integers(-1, 3)) for d in docs}
    run = {}
    for q in draw(st.lists(st.sampled_from(["q1", "q2", "q3", "q4", "q6"]), min_size=1, max_size=5, unique=True)):
        docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=8, unique=True))
        run[q] = {d: draw(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])) for d in docs}
    return qrels, run


def same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(collections(), st.integers(1, 3), st.sampled_from(BINARY), st.booleans(), st.booleans())
def test_measure_rel_equals_evaluation_rel(data, n, measure, include_no_relevant, missing_as_zero):
    qrels, run = data
    options = {"include_no_relevant": include_no_relevant, "missing_as_zero": missing_as_zero}
    own_label = with_rel(measure, n)
    try:
        flag = evaluate(qrels, run, [measure], rel=n, **options)
    except InputError as exc:  # nothing to compare only when both spellings refuse alike
        with pytest.raises(type(exc)):
            evaluate(qrels, run, [own_label], **options)
        return
    own = evaluate(qrels, run, [own_label], **options)
    assert own.per_query.index.tolist() == flag.per_query.index.tolist()
    assert same(own.scores[own_label], flag.scores[measure])
    assert own.aggregate[own_label] == flag.aggregate[measure] or (
        math.isnan(own.aggregate[own_label]) and math.isnan(flag.aggregate[measure]))
    assert own.counts() == flag.counts()
    # next to a measure at another threshold: the same values on the rows it scores
    mixed = evaluate(qrels, run, [own_label, "P@2"], rel=1 if n != 1 else 2, **options)
    rows = mixed.per_query[own_label].dropna()
    assert rows.index.tolist() == flag.per_query.index.tolist()
    assert rows.to_numpy().tolist() == flag.scores[measure].tolist()
    assert mixed.aggregate[own_label] == flag.aggregate[measure] or math.isnan(flag.aggregate[measure])
    assert mixed.counts_by_measure()[own_label] == {"rel": n, **{k: v for k, v in flag.counts().items()
                                                                 if k != "only_in_run"}}


@settings(max_examples=80, deadline=None)
@given(collections(), st.integers(2, 3))
def test_graded_measures_exclude_like_their_binary_threshold(data, n):
    # nDCG(rel=n) zeroes grades below n while nDCG under rel=n uses the raw grades (trec_eval's
    # ndcg ignores -l): the values may differ by design, but the queries scored are the same.
    qrels, run = data
    try:
        flag = evaluate(qrels, run, ["nDCG@5"], rel=n)
    except InputError:
        return
    own = evaluate(qrels, run, [f"nDCG(rel={n})@5"])
    assert own.per_query.index.tolist() == flag.per_query.index.tolist()
    assert own.excluded_no_relevant == flag.excluded_no_relevant
