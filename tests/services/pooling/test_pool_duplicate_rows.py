"""A run listing a (query, item) pair twice within the pool depth is refused, naming the row,
and nothing is stored (the pool's pairs are written by one SQL statement that detects it)."""

from __future__ import annotations

import pytest

from tests.support.retrieval_fixtures import write_chunk_run, write_corpus
from workbench.core.pooling.fusion import FusionError
from workbench.services.chunking import create_chunking
from workbench.services.pooling.pools import build_pool
from workbench.store.database import Database


def c(doc: str) -> str:
    return f"doc:{doc}:0"


@pytest.fixture
def db(db_path):
    with Database(db_path) as db:
        write_corpus(db)
        create_chunking(db, "doc", "document")
        write_chunk_run(db, "A", [("q1", c("cats"), 1), ("q1", c("dogs"), 2), ("q2", c("plants"), 1)])
        # B lists q2 / stocks at ranks 1 and 2, and q1 / cats twice beyond depth 2 (rank 3 and 4)
        write_chunk_run(db, "B", [("q2", c("stocks"), 1), ("q2", c("stocks"), 2), ("q1", c("cats"), 3),
                                  ("q1", c("cats"), 4)])
        yield db


def test_a_pair_listed_twice_within_the_depth_is_refused_and_nothing_is_stored(db):
    with pytest.raises(FusionError, match=r"run 'B' lists query 'q2' / chunk_id 'doc:stocks:0' twice"):
        build_pool(db, "p", ["A", "B"], 2)
    assert db.query_value("SELECT count(*) FROM pools") == 0
    assert db.query_value("SELECT count(*) FROM pool_pairs") == 0
    assert db.query_value("SELECT count(*) FROM pool_runs") == 0


def test_a_pair_listed_twice_only_beyond_the_depth_is_pooled(db):
    # depth 1: A gives q1 cats and q2 plants, B q2 stocks (its second stocks row is rank 2)
    summary = build_pool(db, "p", ["A", "B"], 1)
    assert (summary.pairs_total, summary.queries, summary.provenance_added) == (3, 2, 3)
