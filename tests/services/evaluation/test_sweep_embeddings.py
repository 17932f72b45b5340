"""Dense sweeps embed each distinct chunk text once across chunkings; the shared vectors must be
the vectors an independent encoding of each chunking's own texts gives, and the dense runs the
rankings those independent vectors give (real model, real DuckDB file)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.support.prerequisites import require_installed
from tests.support.retrieval_fixtures import default_onnx_export
from workbench.retrieval import dense as dense_mod
from workbench.services.evaluation import sweep
from workbench.services.ingest import import_file
from workbench.services.project.lifecycle import init_project
from workbench.store.chunks import read_chunks
from workbench.store.database import Database
from workbench.store.embeddings import read_embeddings
from workbench.store.runs import read_run_rows

require_installed("sentence_transformers")  # found, not imported: collection stays cheap


WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma", "omega", "river", "stone", "cloud", "engine", "valve", "pump", "signal", "router", "kernel", "cache", "index", "shard", "replica", "quorum"]


def _project(tmp_path):
    rng = np.random.default_rng(7)
    docs = []
    for d in range(14):
        # 8 short documents (one identical chunk under both chunkings), 6 long ones
        n = int(rng.integers(5, 20)) if d < 8 else int(rng.integers(60, 140))
        docs.append({"_id": f"doc-{13 - d}", "text": " ".join(rng.choice(WORDS, size=n)) + "."})
    docs.append({"_id": "copy-of-3", "text": docs[3]["text"]})  # a duplicate text
    docs.append({"_id": "copy-of-10", "text": docs[10]["text"]})  # a long duplicate (duplicate chunks too)
    queries = [{"_id": f"q{i}", "text": " ".join(rng.choice(WORDS, size=4))} for i in range(5)]
    labels = [{"query_id": f"q{i}", "doc_id": docs[i * 2]["_id"], "start": 0, "end": 20, "grade": 2,
               "assessor": "sme-a"} for i in range(5)]
    for name, rows in (("docs", docs), ("queries", queries), ("labels", labels)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = tmp_path / "p.duckdb"
    init_project(path)
    db = Database(path)
    import_file(db, "corpus", tmp_path / "docs.jsonl")
    import_file(db, "queries", tmp_path / "queries.jsonl")
    import_file(db, "qrels", tmp_path / "labels.jsonl", format="spans")
    return db


def test_shared_vectors_equal_independent_encoding_and_runs_equal_their_ranking(tmp_path):
    db = _project(tmp_path)
    try:
        result = sweep.run_sweep(db, "fixed:16,fixed:48", "dense", ["ndcg@10"], budgets=[100], labels="human",
                                 k=10, backend="torch")  # the vectors are checked against PyTorch's
        encoder = dense_mod.load_encoder()
        all_texts = []
        checked = 0
        for cell in result.cells:
            chunks = read_chunks(db, cell.chunking_name, with_text=True)
            all_texts += chunks["text"].tolist()
            ids, cached = read_embeddings(db, cell.chunking_name, dense_mod.DEFAULT_MODEL)
            assert sorted(ids) == sorted(chunks["chunk_id"])
            cached = dict(zip(ids, cached))
            # independent: this chunking's texts alone, in their own batch
            fresh = dense_mod.encode(encoder, chunks["text"].tolist())
            stored = np.stack([cached[c] for c in chunks["chunk_id"]])
            assert np.abs(stored - fresh).max() < 1e-5
            q_text = dict(db.query_all("SELECT query_id, text FROM queries"))
            rows = read_run_rows(db, cell.run)
            for qid, group in rows.groupby("query_id"):
                q = dense_mod.encode(encoder, [q_text[qid]])
                scores = fresh @ q[0]
                top = np.sort(scores)[::-1][:10]
                got = group.sort_values("rank")
                assert got["score"].to_numpy() == pytest.approx(top, abs=1e-5)
                # items clearly above the 10th score must be the run's (ties at the cut may go either way)
                sure = set(chunks["chunk_id"].to_numpy()[scores > top[-1] + 1e-4])
                assert sure <= set(got["chunk_id"]) and len(sure) >= 5
                checked += 1
        assert checked == 10
        distinct = len(set(all_texts))
        counts = result.dense
        assert counts["chunks"] == len(all_texts)
        assert counts["encoded"] == distinct  # each distinct text once, across both chunkings
        assert counts["shared"] > 0 and counts["encoded"] + counts["shared"] < len(all_texts)
        # a second sweep reuses every run; nothing is encoded again
        again = sweep.run_sweep(db, "fixed:16,fixed:48", "dense", ["ndcg@10"], budgets=[100], labels="human", k=10,
                                backend="torch")
        assert all(c.reused for c in again.cells)
        assert again.dense == {}
    finally:
        db.close()


def test_a_resumed_chunking_takes_its_vectors_from_the_cache(tmp_path, tmp_path_factory):
    default_onnx_export(tmp_path_factory)  # the default backend: the run's one export of the model
    db = _project(tmp_path)
    try:
        first = sweep.run_sweep(db, "fixed:16", "dense", ["ndcg@10"], budgets=[100], labels="human", k=10)
        run = first.cells[0].run
        before = read_run_rows(db, run)
        from workbench.store.runs import delete_runs

        with db.transaction() as tx:  # the run is gone (an interrupted sweep), its vectors are cached
            delete_runs(tx, [run])
        resumed = sweep.run_sweep(db, "fixed:16", "dense", ["ndcg@10"], budgets=[100], labels="human", k=10)
        assert resumed.dense["encoded"] == 0
        assert resumed.dense["cached"] == resumed.dense["chunks"] > 0
        after = read_run_rows(db, run)
        assert after[["query_id", "chunk_id", "rank"]].equals(before[["query_id", "chunk_id", "rank"]])
    finally:
        db.close()


def test_text_digest_separates_texts_and_ignores_nothing():
    texts = ["a", "a ", "A", "", "é", "e\u0301", "a" * 10_000]
    assert len({sweep.text_digest(t) for t in texts}) == len(texts)
    assert sweep.text_digest("same text") == sweep.text_digest("same " + "text")


def test_cpu_batches_close_at_the_token_budget_and_keep_each_texts_vector(monkeypatch):
    """dense.encode batches a CPU sentence-transformers model by padded tokens (longest first):
    every text in exactly one batch, none over the budget or batch_size, and each vector the one
    the text gets encoded alone (no padding at all). A 512-token budget, so short texts show it."""
    monkeypatch.setattr(dense_mod, "MAX_BATCH_TOKENS", 512)
    encoder = dense_mod.load_encoder()
    rng = np.random.default_rng(3)
    texts = [" ".join(rng.choice(WORDS, size=int(n))) for n in rng.integers(1, 60, size=24)]
    texts += ["", "x", " ".join(["kernel"] * 300)]  # empty, one token, truncated at max_seq_length
    groups = dense_mod._token_batches(encoder, texts, 64)  # 64 rows of the longest would be far over
    assert groups is not None and len(groups) > 3
    assert sorted(i for g in groups for i in g) == list(range(len(texts)))
    lengths = [len(ids) for ids in encoder.tokenizer(texts, truncation=True, max_length=encoder.max_seq_length)["input_ids"]]
    assert max(lengths) == encoder.max_seq_length
    for group in groups:
        width = max(lengths[i] for i in group)
        assert len(group) <= 64 and len(group) * width <= 512
        assert [lengths[i] for i in group] == sorted((lengths[i] for i in group), reverse=True)
    with dense_mod.one_thread():  # one thread, as the sweep's query encoding runs
        batched = dense_mod.encode(encoder, texts, batch_size=64)
        alone = np.concatenate([dense_mod.encode(encoder, [t]) for t in texts])
    assert np.abs(batched - alone).max() < 1e-5
    assert dense_mod._token_batches(object(), texts, 64) is None  # a caller's encoder batches itself
