"""Multi-hop trajectories: hand-worked per-hop recall, chain completeness, search decisions and
steps; the property that retrieving every gold span completes the chain; file errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.core.documents.spans import Span
from workbench.core.rag.trajectories import (
    ChainSpan, Hop, Result, Trajectory, evaluate_trajectories, flat_per_query, parse_chains, parse_trajectories,
)
from workbench.errors import InputError

A, B, C, D = Span("d1", 0, 100), Span("d2", 0, 100), Span("d3", 0, 100), Span("d4", 0, 100)
CHAINS = {
    "q1": [ChainSpan(1, A), ChainSpan(2, B), ChainSpan(2, C)],
    "q2": [ChainSpan(1, D)],
    "q4": [ChainSpan(1, A)],  # no trajectory
}
TRAJECTORIES = [
    Trajectory("q1", (
        # d1 50..150 overlaps A by 50 = half of the shorter (100): found; d2 0..10 lies inside B: found
        Hop(True, "first", (Result("d1", 50, 150), Result("d2", 0, 10))),
        # d9 finds nothing; the whole document d3 finds C
        Hop(True, "second", (Result("d9", 0, 100), Result("d3"))),
    )),
    Trajectory("q2", (Hop(False, None, ()),)),  # answered without searching
    Trajectory("q3", (Hop(False, None, ()),)),  # no chain: skipping is right
]


def test_hand_worked_k2():
    r = evaluate_trajectories(TRAJECTORIES, CHAINS, k=2)
    q1 = r.per_query["q1"]
    # hop 1 gold {A}, found by hop 1's top 2 -> 1; hop 2 gold {B, C}: hop 2's top 2 finds C only -> 1/2
    assert q1["hop_recall"] == {1: 1.0, 2: 0.5}
    # after hop 1: {A, B}; hop 2 adds C -> complete at hop 2
    assert q1["complete"] is True and q1["completed_at"] == 2 and q1["chain_found"] == 1.0
    assert (q1["steps"], q1["searches"], q1["decision_correct"]) == (2, 2, True)
    q2 = r.per_query["q2"]
    assert q2["hop_recall"] == {1: 0.0} and q2["complete"] is False and q2["decision_correct"] is False
    q3 = r.per_query["q3"]
    assert q3["needs_search"] is False and q3["decision_correct"] is True and q3["complete"] is None
    q4 = r.per_query["q4"]
    assert (q4["steps"], q4["searched"], q4["complete"]) == (0, False, False)
    agg = r.aggregate
    assert agg["hop1_recall@2"] == pytest.approx((1 + 0 + 0) / 3)  # q1, q2, q4 have a hop 1
    assert agg["hop2_recall@2"] == pytest.approx(0.5)  # only q1 has a hop 2
    assert agg["completeness"] == pytest.approx(1 / 3)
    assert agg["completed_at_mean"] == 2.0
    assert agg["chain_found"] == pytest.approx((1 + 0 + 0) / 3)
    # decisions: q1 right, q2 wrong, q3 right, q4 wrong (needed, did not search)
    assert agg["decision_accuracy"] == pytest.approx(2 / 4)
    assert agg["searched_when_needed"] == pytest.approx(1 / 3)
    assert agg["skipped_when_not_needed"] == 1.0
    assert agg["steps_mean"] == pytest.approx((2 + 1 + 1 + 0) / 4)
    assert agg["searches_mean"] == pytest.approx((2 + 0 + 0 + 0) / 4)
    assert r.counts == {"queries": 4, "with_chain": 3, "without_chain": 1, "missing_from_trajectories": 1,
                        "complete": 1}


def test_hand_worked_k1():
    r = evaluate_trajectories(TRAJECTORIES, CHAINS, k=1)
    q1 = r.per_query["q1"]
    # hop 1's top 1 finds A only; hop 2's top 1 (d9) finds nothing
    assert q1["hop_recall"] == {1: 1.0, 2: 0.0}
    assert q1["complete"] is False and q1["completed_at"] is None
    assert q1["chain_found"] == pytest.approx(1 / 3)


def test_a_small_overlap_does_not_find_a_span():
    # 49 of 100 characters: below half of the shorter span
    assert not Result("d1", 51, 151).finds(A)
    assert Result("d1", 50, 150).finds(A)


def test_flat_per_query_has_hop_columns():
    frame = flat_per_query(evaluate_trajectories(TRAJECTORIES, CHAINS, k=2)).set_index("query_id")
    assert frame.loc["q1", "hop2_recall@2"] == 0.5
    assert math.isnan(frame.loc["q2", "hop2_recall@2"])


def test_retrieving_every_gold_span_completes_every_chain():
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(100):
        chains, trajectories = {}, []
        for q in range(int(rng.integers(1, 6))):
            spans = []
            for i in range(int(rng.integers(1, 6))):
                start = int(rng.integers(0, 1000))
                spans.append(ChainSpan(int(rng.integers(1, 4)), Span(f"d{int(rng.integers(0, 4))}", start,
                                                                     start + int(rng.integers(1, 300)))))
            chains[f"q{q}"] = spans
            # the gold spans spread over random hops, shuffled, with distractors in between
            n_hops = int(rng.integers(1, 4))
            hops = [[] for _ in range(n_hops)]
            for s in spans:
                hops[int(rng.integers(0, n_hops))].append(Result(s.span.doc_id, s.span.start, s.span.end))
            for h in hops:
                h.append(Result("elsewhere", 0, 50))
                rng.shuffle(h)
            trajectories.append(Trajectory(f"q{q}", tuple(Hop(True, None, tuple(h)) for h in hops)))
        r = evaluate_trajectories(trajectories, chains, k=20)
        assert r.aggregate["completeness"] == 1.0 and r.aggregate["chain_found"] == 1.0
        assert all(v["completed_at"] is not None for v in r.per_query.values())
        checked += 1
    assert checked == 100


def test_parse_trajectories_and_chains():
    records = [(1, {"query_id": "q1", "hops": [
        {"search": True, "sub_query": "s", "results": [{"doc_id": "d1", "start": 0, "end": 5}, {"chunk_id": "c:d2:0"}]},
        {"search": False}]})]
    [t] = parse_trajectories(records, "t.jsonl")
    assert t.hops[0].results[0] == Result("d1", 0, 5) and t.hops[0].results[1].chunk_id == "c:d2:0"
    assert t.hops[1].searched is False
    chains = parse_chains([(1, {"query_id": "q1", "hop": 2, "doc_id": "d1", "start": 0, "end": 9})], "c.jsonl")
    assert chains == {"q1": [ChainSpan(2, Span("d1", 0, 9))]}


@pytest.mark.parametrize("record, message", [
    ({"hops": []}, "needs a query_id"),
    ({"query_id": "q1", "hops": "x"}, "'hops' must be a list"),
    ({"query_id": "q1", "hops": [{"search": "yes"}]}, "'search' must be true or false"),
    ({"query_id": "q1", "hops": [{"search": False, "results": [{"doc_id": "d"}]}]}, "cannot have results"),
    ({"query_id": "q1", "hops": [{"results": [{"doc_id": "d", "start": 5}]}]}, "both start and end"),
    ({"query_id": "q1", "hops": [{"results": [{"start": 1, "end": 2}]}]}, "needs doc_id or chunk_id"),
])
def test_bad_trajectories_name_file_and_line(record, message):
    with pytest.raises(InputError, match=f"t.jsonl:4: .*{message}"):
        parse_trajectories([(4, record)], "t.jsonl")


def test_a_query_with_two_trajectories_is_refused():
    with pytest.raises(InputError, match="t.jsonl:2: query 'q1' has a second trajectory .first on line 1"):
        parse_trajectories([(1, {"query_id": "q1", "hops": []}), (2, {"query_id": "q1", "hops": []})], "t.jsonl")


def test_bad_chain_spans_are_refused():
    with pytest.raises(InputError, match="c.jsonl:3: hop must be a whole number >= 1"):
        parse_chains([(3, {"query_id": "q", "hop": 0, "doc_id": "d", "start": 0, "end": 1})], "c.jsonl")
    with pytest.raises(InputError, match="c.jsonl:3: an evidence span must not be empty"):
        parse_chains([(3, {"query_id": "q", "hop": 1, "doc_id": "d", "start": 4, "end": 4})], "c.jsonl")
