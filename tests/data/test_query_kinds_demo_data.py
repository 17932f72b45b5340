"""The demo's query-kind files agree with the demo corpus: every id exists, chains are the
multi-hop queries' grade-2 label spans, results' offsets lie inside their documents."""

from __future__ import annotations

import json

import pytest

from workbench.resources import DEMO_DIR


def _jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (DEMO_DIR / name).read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def corpus():
    docs = {d["doc_id"]: d for d in _jsonl("documents.jsonl")}
    queries = {q["query_id"]: q for q in _jsonl("queries.jsonl")}
    return docs, queries


def test_access_names_existing_documents(corpus):
    docs, _ = corpus
    rows = _jsonl("access.jsonl")
    assert len(rows) == 4
    for r in rows:
        assert r["doc_id"] in docs and r["roles"] and all(isinstance(x, str) for x in r["roles"])
        assert "roles" not in docs[r["doc_id"]]["metadata"]  # documents.jsonl itself stays public


def test_chains_are_the_multi_hop_queries_grade_2_spans(corpus):
    docs, queries = corpus
    chains = _jsonl("chains.jsonl")
    multi_hop = {q for q, v in queries.items() if v["tags"]["type"] == "multi-hop"}
    assert {c["query_id"] for c in chains} == multi_hop and len(multi_hop) == 7
    labels = {(x["query_id"], x["doc_id"], x["start"], x["end"]) for x in _jsonl("labels.jsonl") if x["grade"] == 2}
    for c in chains:
        assert (c["query_id"], c["doc_id"], c["start"], c["end"]) in labels
        assert 0 <= c["start"] < c["end"] <= len(docs[c["doc_id"]]["text"])
    for q in multi_hop:  # every chain has a first and a second hop
        assert {c["hop"] for c in chains if c["query_id"] == q} == {1, 2}


def test_trajectories_point_into_the_corpus(corpus):
    docs, queries = corpus
    for t in _jsonl("trajectories.jsonl"):
        assert t["query_id"] in queries
        for hop in t["hops"]:
            assert hop["search"] == bool(hop["results"]) or not hop["search"]
            for r in hop["results"]:
                assert r["chunk_id"] == f"sections:{r['doc_id']}:{r['chunk_id'].rsplit(':', 1)[1]}"
                assert 0 <= r["start"] < r["end"] <= len(docs[r["doc_id"]]["text"])


def test_answers_cover_the_unanswerable_queries(corpus):
    _, queries = corpus
    answers = _jsonl("answers.jsonl")
    assert all(a["query_id"] in queries for a in answers)
    unanswerable = {q for q, v in queries.items() if v["tags"]["type"] == "unanswerable"}
    assert unanswerable <= {a["query_id"] for a in answers}
