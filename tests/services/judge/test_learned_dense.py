"""The learned judge's dense cosine feature (workbench.services.judge.learned_dense): worked
values on a tiny project, reuse of a dense run's vectors and scores, the cache that spares a second
``learn`` from encoding again, and its place in the configuration's key."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tests.support.calibration_project import build_project, label_all
from workbench.services.calibration import workflow as cal
from workbench.services.chunking import create_chunking
from workbench.services.judge.learned import DenseOptions, learn, pool_features
from workbench.services.pooling.pools import build_pool
from workbench.services.retrieval.runs import run_bm25, run_dense
from workbench.store.corpus import write_documents, write_queries
from workbench.store.database import Database, insert_frame
from workbench.store.embeddings import count_embeddings
from workbench.store.pools import create_pool

WORDS = ["apple", "banana", "cherry", "date"]


class WordCounts:
    """A stand-in for a sentence encoder whose vectors are worked out by hand: the count of each
    of :data:`WORDS` in the text. ``texts`` records every text it was asked to encode."""

    def __init__(self):
        self.texts: list[str] = []

    def encode(self, texts, batch_size=64, **_):
        self.texts += list(texts)
        return np.array([[t.lower().split().count(w) for w in WORDS] for t in texts], dtype=np.float32)

    def get_sentence_embedding_dimension(self):
        return len(WORDS)


def _tiny(path) -> Database:
    db = Database(path)
    docs = {"d1": "apple apple cherry", "d2": "banana", "d3": "cherry date"}
    with db.transaction() as tx:
        write_documents(tx, pd.DataFrame({"doc_id": list(docs), "text": list(docs.values())}))
        write_queries(tx, pd.DataFrame({"query_id": ["q1", "q2"], "text": ["apple banana", "date"],
                                        "description": ["not encoded", "not encoded either"]}))
        create_pool(tx, "p", level="doc", chunking=None, depth=10, runs=[])
        pairs = pd.DataFrame({"query_id": ["q1", "q1", "q1", "q2"], "doc_id": ["d1", "d2", "d3", "d3"]})
        insert_frame(tx, "pool_pairs", pairs.assign(pool="p", chunk_id=None, priority=1, rrf_score=0.0))
    return db


def _cosines(db, pool="p", level="doc", chunking=None, encoder=None, model="word-counts", block=2):
    info: dict = {}
    spans, table = pool_features(db, pool, level, [], {}, block=block, chunking=chunking,
                                 dense=DenseOptions(model=model, encoder=encoder), info=info)
    name = next(n for n in table.names if n.startswith("cosine["))
    return spans, dict(zip(table.names, table.columns)), name, info


def test_cosine_by_hand_on_a_tiny_pool(tmp_path):
    db = _tiny(tmp_path / "tiny.duckdb")
    encoder = WordCounts()
    spans, columns, name, info = _cosines(db, encoder=encoder)
    assert name == "cosine[word-counts]"
    got = dict(zip(zip(spans["query_id"], spans["doc_id"]), columns[name]))
    # q1 = (1, 1, 0, 0); d1 = (2, 0, 1, 0): 2 / (sqrt 2 * sqrt 5); d2 = (0, 1, 0, 0): 1 / sqrt 2; d3 shares nothing
    assert got[("q1", "d1")] == pytest.approx(2 / math.sqrt(10), abs=1e-6)
    assert got[("q1", "d2")] == pytest.approx(1 / math.sqrt(2), abs=1e-6)
    assert got[("q1", "d3")] == pytest.approx(0.0, abs=1e-7)
    # q2 = (0, 0, 0, 1); d3 = (0, 0, 1, 1): 1 / sqrt 2
    assert got[("q2", "d3")] == pytest.approx(1 / math.sqrt(2), abs=1e-6)
    # within q1: mean 0.4473, population sd 0.3032 -> z of d2 = (0.7071 - 0.4473) / 0.3032
    q1 = np.array([2 / math.sqrt(10), 1 / math.sqrt(2), 0.0])
    z = dict(zip(zip(spans["query_id"], spans["doc_id"]), columns["cosine_z"]))
    assert z[("q1", "d2")] == pytest.approx((q1[1] - q1.mean()) / q1.std(), abs=1e-6)
    assert z[("q2", "d3")] == 0.0  # one pair: no spread
    # the query's text alone is encoded (as the dense retriever does), each passage once
    assert sorted(encoder.texts) == sorted(["apple banana", "date", "apple apple cherry", "banana", "cherry date"])
    assert info["dense"]["encoded_passages"] == 3 and info["dense"]["encoded_queries"] == 2


def test_a_second_learn_encodes_nothing_again(tmp_path):
    db = _tiny(tmp_path / "tiny.duckdb")
    first, second = WordCounts(), WordCounts()
    _, a, name, _ = _cosines(db, encoder=first)
    _, b, _, info = _cosines(db, encoder=second)
    assert first.texts and second.texts == []
    assert np.array_equal(a[name], b[name])
    assert info["dense"]["cached_passages"] == 3 and info["dense"]["encoded_passages"] == 0
    # an edited passage is another cache entry: encoded again, never read stale
    with db.transaction() as tx:
        tx.execute("UPDATE documents SET text = 'apple' WHERE doc_id = 'd2'")
    third = WordCounts()
    spans, c, _, _ = _cosines(db, encoder=third)
    assert third.texts == ["apple"]
    got = dict(zip(zip(spans["query_id"], spans["doc_id"]), c[name]))
    assert got[("q1", "d2")] == pytest.approx(1 / math.sqrt(2), abs=1e-6)  # (1,1,0,0).(1,0,0,0)


def test_a_dense_runs_vectors_and_scores_are_reused(tmp_path):
    db = _tiny(tmp_path / "tiny.duckdb")
    create_chunking(db, "c", "section")
    encoder = WordCounts()
    run_dense(db, "c", "dense", k=1, model="word-counts", encoder=encoder)
    run_bm25(db, "c", "bm25", k=3)
    build_pool(db, "cp", ["dense", "bm25"], 3)
    retriever_calls = len(encoder.texts)
    assert count_embeddings(db, "c", "word-counts") == 3
    mine = WordCounts()
    spans, columns, name, info = _cosines(db, pool="cp", level="chunk", chunking="c", encoder=mine)
    # every chunk's vector comes from the dense run's cache: only the queries are encoded here
    assert sorted(mine.texts) == ["apple banana", "date"] and retriever_calls > 0
    assert info["dense"]["reused_runs"] == ["dense"] and info["dense"]["encoded_passages"] == 0
    run = db.query_df("SELECT query_id, chunk_id, score FROM run_rows WHERE run = 'dense'")
    got = dict(zip(zip(spans["query_id"], spans["chunk_id"]), columns[name]))
    assert info["dense"]["reused_scores"] == len(run) == 2
    for q, c, score in run.itertuples(index=False):
        assert got[(q, c)] == score  # the stored score itself
    # the pairs only BM25 pooled are computed from the cached vectors: q1 against 'banana'
    banana = db.query_value("SELECT chunk_id FROM chunks WHERE doc_id = 'd2'")
    if ("q1", banana) not in set(zip(run["query_id"], run["chunk_id"])):
        assert got[("q1", banana)] == pytest.approx(1 / math.sqrt(2), abs=1e-6)


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    path = tmp_path_factory.mktemp("learned-dense") / "p.duckdb"
    db, truth = build_project(path, seed=3)
    cal.create_sample(db, "s", "p", size=200, seed=1, min_per_class=50)
    label_all(db, "s", truth, flip=0.1, seed=2)
    db.close()
    return path


def test_the_encoder_is_part_of_the_configuration(labelled, tmp_path):
    import shutil

    path = tmp_path / "copy.duckdb"
    shutil.copy(labelled, path)
    db = Database(path)
    with_dense = learn(db, "s", seed=0, dense=DenseOptions(model="word-counts", encoder=WordCounts()))
    without = learn(db, "s", seed=0, dense=DenseOptions(enabled=False))
    assert "cosine[word-counts]" in with_dense.features and "cosine_z" in with_dense.features
    assert not any(f.startswith("cosine") for f in without.features)
    assert with_dense.config != without.config and with_dense.created and without.created
    assert with_dense.dense["model"] == "word-counts"
    again = learn(db, "s", seed=0, dense=DenseOptions(model="word-counts", encoder=WordCounts()))
    assert again.config == with_dense.config and not again.created
    assert again.dense["encoded_passages"] == 0
    assert "dense cosine with word-counts: 360 passages from the embeddings cache, 0 encoded now" in again.summary()


def test_the_compact_and_averaged_candidates_are_scored_and_the_average_predicts_the_mean():
    from workbench.core.judging import learned as core

    rng = np.random.default_rng(0)
    n = 200
    y = (rng.random(n) < 0.4).astype(int)
    grade = np.clip(y * 2 + rng.integers(-1, 2, n), 0, 3).astype(float)
    cosine = y * 0.3 + rng.normal(0.4, 0.15, n)
    noise = rng.normal(size=n)
    x = np.column_stack([grade, cosine, noise])
    groups = np.arange(n) % 20
    fitted = core.fit(x, y, np.ones(n), 0, groups=groups, strata=grade.astype(int), base_columns=[0],
                      signal_columns=[1])
    assert "logistic on the judges' grades and the text signals" in fitted.scores
    assert core.AVERAGE in fitted.scores
    without = core.fit(x, y, np.ones(n), 0, groups=groups, strata=grade.astype(int), base_columns=[0])
    assert not any("text signals" in name for name in without.scores)


class _Fixed:
    """A fitted model stand-in whose p(relevant) is the sum of the columns it is given."""

    def predict_proba(self, x):
        p = np.asarray(x).sum(axis=1)
        return np.column_stack([1 - p, p])


def test_the_average_is_the_mean_of_its_members_on_their_own_columns():
    from workbench.core.judging import learned as core

    # columns: a, b, c, then the query effect last; member 1 reads a; member 2 reads c and the effect
    x = np.array([[0.2, 9.0, 0.1, 0.3], [0.6, 9.0, 0.0, 0.1]])
    average = core._Average([(_Fixed(), [0], False), (_Fixed(), [2], True)])
    # row 1: (0.2 + (0.1 + 0.3)) / 2 = 0.3; row 2: (0.6 + 0.1) / 2 = 0.35
    assert np.allclose(average.predict_proba(x)[:, 1], [0.3, 0.35])
