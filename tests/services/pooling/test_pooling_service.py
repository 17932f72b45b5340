"""Pools through the service and the store, against hand-counted sets and RRF priorities.

Runs (chunk ids abbreviated to their document), pooled at depth 2:

    A  q1: cats 1, dogs 2, plants 3      q2: plants 1, stocks 2
    B  q1: dogs 1, stocks 2              q2: plants 1, cats 2
    C  q1: cats 1, plants 2              q2: dogs 1
"""

from __future__ import annotations

import pytest

from tests.support.retrieval_fixtures import write_chunk_run, write_corpus
from workbench.errors import InputError, StoreError
from workbench.services.chunking import create_chunking
from workbench.services.pooling.pools import add_runs, build_pool, pool_stats
from workbench.store.database import Database
from workbench.store.pools import read_pool, read_pool_pairs, read_pool_provenance

LABELS = [  # spans inside each whole-document chunk, so each matches it fully
    {"query_id": "q1", "doc_id": "cats", "start": 0, "end": 10, "grade": 3},
    {"query_id": "q1", "doc_id": "stocks", "start": 0, "end": 20, "grade": 0},
    {"query_id": "q1", "doc_id": "plants", "start": 5, "end": 30, "grade": 2},
    {"query_id": "q2", "doc_id": "plants", "start": 0, "end": 5, "grade": 2},
]


def c(doc: str) -> str:
    return f"doc:{doc}:0"


@pytest.fixture
def db(db_path):
    with Database(db_path) as db:
        write_corpus(db, labels=LABELS)
        create_chunking(db, "doc", "document")
        write_chunk_run(db, "A", [("q1", c("cats"), 1), ("q1", c("dogs"), 2), ("q1", c("plants"), 3),
                                  ("q2", c("plants"), 1), ("q2", c("stocks"), 2)])
        write_chunk_run(db, "B", [("q1", c("dogs"), 1), ("q1", c("stocks"), 2),
                                  ("q2", c("plants"), 1), ("q2", c("cats"), 2)])
        write_chunk_run(db, "C", [("q1", c("cats"), 1), ("q1", c("plants"), 2), ("q2", c("dogs"), 1)])
        yield db


def _pairs(db, name):
    return {(r.query_id, r.doc_id): (r.priority, r.rrf_score) for r in read_pool_pairs(db, name).itertuples()}


def test_pool_is_the_union_with_rrf_priorities(db):
    summary = build_pool(db, "p", ["A", "B"], 2)
    pairs = _pairs(db, "p")
    assert set(pairs) == {("q1", "cats"), ("q1", "dogs"), ("q1", "stocks"),
                          ("q2", "plants"), ("q2", "stocks"), ("q2", "cats")}
    assert summary.pairs_total == 6 and summary.queries == 2
    # q1: dogs 1/61+1/62 > cats 1/61 > stocks 1/62; q2: plants 2/61, then cats = stocks = 1/62 (id order)
    assert {k: v[0] for k, v in pairs.items()} == {
        ("q1", "dogs"): 1, ("q1", "cats"): 2, ("q1", "stocks"): 3,
        ("q2", "plants"): 1, ("q2", "cats"): 2, ("q2", "stocks"): 3}
    assert pairs[("q1", "dogs")][1] == pytest.approx(1 / 61 + 1 / 62)
    assert pairs[("q2", "plants")][1] == pytest.approx(2 / 61)
    record = read_pool(db, "p")
    assert (record["level"], record["chunking"], record["depth"], record["runs"]) == ("chunk", "doc", 2, ["A", "B"])
    assert read_pool_pairs(db, "p")["chunk_id"].tolist()[0].startswith("doc:")


def test_provenance_names_each_run_and_rank_within_depth(db):
    build_pool(db, "p", ["A", "B"], 2)
    prov = read_pool_provenance(db, "p")
    assert sorted(prov[["run", "query_id", "doc_id", "rank"]].itertuples(index=False, name=None)) == sorted([
        ("A", "q1", "cats", 1), ("A", "q1", "dogs", 2), ("A", "q2", "plants", 1), ("A", "q2", "stocks", 2),
        ("B", "q1", "dogs", 1), ("B", "q1", "stocks", 2), ("B", "q2", "plants", 1), ("B", "q2", "cats", 2),
    ])


def test_adding_a_run_adds_only_its_new_pairs(db):
    build_pool(db, "p", ["A", "B"], 2)
    before = _pairs(db, "p")
    summary = add_runs(db, "p", ["C"])
    after = _pairs(db, "p")
    assert summary.pairs_added == 2 and summary.provenance_added == 3 and summary.pairs_total == 8
    assert {k: after[k] for k in before} == before                     # existing pairs untouched
    assert set(after) - set(before) == {("q1", "plants"), ("q2", "dogs")}
    assert after[("q1", "plants")] == (4, pytest.approx(1 / 62))      # after q1's max priority 3
    assert after[("q2", "dogs")] == (4, pytest.approx(1 / 61))
    prov = read_pool_provenance(db, "p").query("run == 'C'")
    assert sorted(zip(prov["query_id"], prov["doc_id"])) == [("q1", "cats"), ("q1", "plants"), ("q2", "dogs")]
    assert read_pool(db, "p")["runs"] == ["A", "B", "C"]
    assert len(read_pool_provenance(db, "p")) == 11


def test_stats_match_hand_counts(db):
    build_pool(db, "p", ["A", "B"], 2)
    add_runs(db, "p", ["C"])
    st = pool_stats(db, "p", k=2, min_overlap=0.5, relevance_threshold=1)
    assert st.sizes.values.tolist() == [["q1", 4], ["q2", 4]]
    assert st.contributions.values.tolist() == [["A", 4, 1], ["B", 4, 2], ["C", 3, 2]]
    overlap = {(r.run_a, r.run_b): (r.shared, r.union) for r in st.overlap.itertuples()}
    assert overlap == {("A", "B"): (2, 6), ("A", "C"): (1, 6), ("B", "C"): (0, 7)}
    # judged@2: A (1/2 + 1/2)/2; B (1/2 + 1/2)/2; C (2/2 + 0/2)/2
    assert dict(zip(st.judged["run_id"], st.judged["judged_at_k"])) == pytest.approx({"A": 0.5, "B": 0.5, "C": 0.5})
    loo = st.leave_one_out.set_index("run_id")
    # C alone found q1/plants (grade 2): P@2 with = (2/2 + 0)/2, without = (1/2 + 0)/2
    assert loo.loc["C", ["unique_pairs", "unique_judged"]].tolist() == [2, 1]
    assert loo.loc["C", "metric_with"] == pytest.approx(0.5)
    assert loo.loc["C", "metric_without"] == pytest.approx(0.25)
    assert loo.loc["A", "delta"] == 0 and loo.loc["B", "unique_judged"] == 1
    assert (st.pairs, st.judged_pairs) == (8, 4)


def test_min_overlap_decides_which_chunks_count_as_judged(db):
    import pandas as pd

    from workbench.store.judgments import write_judgments

    create_chunking(db, "fx", "fixed", size=20)
    # cats text is 44 chars -> fx chunks [0,20) [20,40) [40,44). Span [15,30) covers 10 of its
    # 15 chars in chunk 1 (10/min(20,15) = 0.67) and 5 in chunk 0 (0.33); chunk 0 is judged
    # anyway through the span [0,10).
    with db.transaction() as tx:
        write_judgments(tx, pd.DataFrame([{"query_id": "q1", "doc_id": "cats", "start": 15, "end": 30,
                                           "grade": 1, "source": "human", "assessor": "sme"}]))
    write_chunk_run(db, "F", [("q1", "fx:cats:0", 1), ("q1", "fx:cats:1", 2)], chunking="fx")
    build_pool(db, "fp", ["F"], 2)
    assert pool_stats(db, "fp", k=2, min_overlap=0.5).judged_pairs == 2
    strict = pool_stats(db, "fp", k=2, min_overlap=0.7)
    assert strict.judged_pairs == 1 and strict.judged["judged_at_k"].tolist() == [0.5]


def test_document_level_pool_stores_no_chunk_ids(db):
    write_chunk_run(db, "D", [("q1", "cats", 1), ("q1", "dogs", 2)], level="doc")
    build_pool(db, "dp", ["D"], 5)
    pairs = read_pool_pairs(db, "dp")
    assert pairs["doc_id"].tolist() == ["cats", "dogs"] and pairs["chunk_id"].isna().all()
    st = pool_stats(db, "dp", k=2)
    assert st.judged["judged_at_k"].tolist() == [0.5]  # cats judged at document level


def test_pooling_errors_say_what_to_do(db):
    write_chunk_run(db, "D", [("q1", "cats", 1)], level="doc")
    with pytest.raises(InputError, match="same items"):
        build_pool(db, "bad", ["A", "D"], 2)
    build_pool(db, "p", ["A"], 2)
    with pytest.raises(StoreError, match="already exists.*--add"):
        build_pool(db, "p", ["B"], 2)
    with pytest.raises(InputError, match="already in pool"):
        add_runs(db, "p", ["A"])
    with pytest.raises(InputError, match="holds chunk items"):
        add_runs(db, "p", ["D"])
    with pytest.raises(InputError, match="no pool 'nope'"):
        add_runs(db, "nope", ["B"])
    with pytest.raises(InputError, match="depth must be a positive integer"):
        build_pool(db, "q", ["A"], 0)
    assert read_pool(db, "bad") is None


def test_preview_shows_a_query_pairs_in_judging_order_with_their_text(db):
    from workbench.services.pooling.pools import pool_preview
    from workbench.store.corpus import read_documents

    build_pool(db, "p", ["A", "B"], 2)
    preview = pool_preview(db, "p", "q1", limit=2)
    texts = read_documents(db).set_index("doc_id")["text"]
    # q1's priorities (see test_pool_is_the_union_with_rrf_priorities): dogs, then cats.
    assert preview["priority"].tolist() == [1, 2]
    assert preview["chunk_id"].tolist() == [c("dogs"), c("cats")]
    # Whole-document chunks: the chunk text is the document text.
    assert preview["text"].tolist() == [texts["dogs"], texts["cats"]]
