"""How long does ``judge learn`` take on a million pool pairs, and how much memory does it hold?

A synthetic project, built at run time in a temporary folder (deleted at the end):
``--queries`` queries of three words, each pooled with ``--per-query`` documents by two imported
runs (``r1`` ranks a query's pairs one way, ``r2`` the reverse), a quarter of them "home"
documents that hold the query's words and are relevant more often; documents of 30-60 words from
a Zipf vocabulary of 50,000 words; an external judge's grade of every pair imported with
``import judgments`` (a noisy copy of the hidden grade); a calibration sample (2,000 held out,
500 tuning, all labelled with the hidden grade); and the dense cosine's vectors already in the
project's embeddings cache (random unit vectors, 384 dimensions, under the encoder key ``learn``
would use): encoding a million passages is the dense retriever's cost, paid once per corpus and
measured in ``benchmarks/retrieval_bench.py``; here the cosine is read from the cache, as on a
second ``learn`` or after a dense run.

Timed, in a fresh child process so its peak RSS (``ru_maxrss``) is ``learn``'s alone: the
whole ``learn`` (every pair's features in blocks, the model's choice by cross-validation on the
500 tuning labels, the grade and probability of every pair written as a judge configuration),
and, in a second child, ``pool_features`` alone (the features' share). The machine's load
average is printed before and after.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/learned_judge_scale.py [--queries 10000] [--per-query 100]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VOCAB = 50_000
DIM = 384


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def build(where: Path, queries: int, per_query: int, seed: int) -> None:
    from workbench.services.calibration import workflow as cal
    from workbench.services.ingest import import_file
    from workbench.services.judge import learned_dense
    from workbench.services.judge.imported import import_judgments
    from workbench.services.pooling.pools import build_pool
    from workbench.services.project.lifecycle import open_project
    from workbench.store.calibration import read_sample_items
    from workbench.store.embeddings import write_embeddings

    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(VOCAB)])
    zipf = 1.0 / np.arange(1, VOCAB + 1)
    zipf /= zipf.sum()
    home = per_query // 4
    n_docs = queries * home
    q_terms = rng.choice(VOCAB, size=(queries, 3), p=zipf ** 0.5 / (zipf ** 0.5).sum())
    lengths = rng.integers(30, 61, n_docs)
    body = rng.choice(VOCAB, size=int(lengths.sum()), p=zipf)
    starts = np.r_[0, np.cumsum(lengths)]
    doc_home = np.arange(n_docs) // home
    t = time.perf_counter()
    with open(where / "corpus.jsonl", "w") as f:
        for d in range(n_docs):
            toks = list(words[body[starts[d]:starts[d + 1]]])
            if d % 2 == 0:  # half the home documents hold the query's words
                toks[::10] = list(words[q_terms[doc_home[d]]]) * (len(toks[::10]) // 3) + \
                    list(words[q_terms[doc_home[d]]])[: len(toks[::10]) % 3]
            f.write(json.dumps({"docid": f"d{d}", "doc": " ".join(toks)}) + "\n")
    with open(where / "queries.tsv", "w") as f:
        for q in range(queries):
            f.write(f"q{q}\t{' '.join(words[q_terms[q]])}\n")
    # each query's pool: its home documents and random others
    docs = np.empty((queries, per_query), dtype=np.int64)
    for q in range(queries):
        others = rng.choice(n_docs, size=per_query - home + 10, replace=False)
        others = others[doc_home[others] != q][: per_query - home]
        docs[q] = np.r_[np.arange(q * home, (q + 1) * home), others]
    qq = np.repeat(np.arange(queries), per_query)
    dd = docs.ravel()
    is_home = doc_home[dd] == qq
    holds = is_home & (dd % 2 == 0)
    latent = 0.5 * holds + 0.4 * is_home + rng.normal(0, 0.5, len(dd))
    truth = np.digitize(latent, [0.3, 0.7, 1.1])
    judge = np.clip(truth + rng.integers(-1, 2, len(dd)) * (rng.random(len(dd)) < 0.45), 0, 3)
    score = latent + rng.normal(0, 0.3, len(dd))
    for name, key in (("r1", -score), ("r2", score)):
        order = np.lexsort((key, qq))
        rank = np.empty(len(dd), dtype=np.int64)
        rank[order] = np.arange(len(dd)) - np.repeat(np.arange(queries) * per_query, per_query)[order] + 1
        pd.DataFrame({"q": [f"q{q}" for q in qq], "Q0": "Q0", "d": [f"d{d}" for d in dd], "rank": rank,
                      "score": -key, "tag": name}).to_csv(where / f"{name}.txt", sep=" ", header=False, index=False)
    pd.DataFrame({"q": [f"q{q}" for q in qq], "it": 0, "d": [f"d{d}" for d in dd], "g": judge}).to_csv(
        where / "judge.qrels", sep=" ", header=False, index=False)
    print(f"files written in {time.perf_counter() - t:.0f} s: {n_docs:,} documents, {len(dd):,} pairs", flush=True)
    t = time.perf_counter()
    with open_project(where / "scale.duckdb", create=True) as db:
        import_file(db, "corpus", where / "corpus.jsonl")
        import_file(db, "queries", where / "queries.tsv", format="tsv")
        for name in ("r1", "r2"):
            import_file(db, "run", where / f"{name}.txt", name=name)
        build_pool(db, "p", ["r1", "r2"], per_query)
        key = import_judgments(db, where / "judge.qrels", judge="synthetic", pool="p").config
        print(f"project built in {time.perf_counter() - t:.0f} s", flush=True)
        t = time.perf_counter()
        source = learned_dense.choose_source(db, "p", "doc", None)
        texts = dict(db.query_all("SELECT doc_id, text FROM documents"))
        for start in range(0, n_docs, 50_000):
            ids = [f"d{d}" for d in range(start, min(start + 50_000, n_docs))]
            vectors = rng.normal(size=(len(ids), DIM)).astype(np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            with db.transaction() as tx:
                write_embeddings(tx, learned_dense.DOCUMENTS, source.key,
                                 [learned_dense.text_id(i, texts[i]) for i in ids], vectors)
        del texts
        qtexts = db.query_df("SELECT query_id, text FROM queries")
        vectors = rng.normal(size=(len(qtexts), DIM)).astype(np.float32)
        with db.transaction() as tx:
            write_embeddings(tx, learned_dense.QUERIES, source.key,
                             [learned_dense.text_id(q, t_) for q, t_ in zip(qtexts["query_id"], qtexts["text"])],
                             vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
        print(f"cached vectors written in {time.perf_counter() - t:.0f} s", flush=True)
        cal.create_sample(db, "s", "p", size=2500, seed=seed, holdout_share=0.8, min_per_class=50, judge=key)
        items = read_sample_items(db, "s")
        grade = {(f"q{q}", f"d{d}"): int(g) for q, d, g in zip(qq, dd, truth)}
        cal.save_labels(db, "s", "sme", {int(p): grade[(q, d)] for p, q, d in
                                         zip(items["position"], items["query_id"], items["doc_id"])})


def child(path: Path, what: str) -> None:
    from workbench.services.judge.learned import learn, pool_features
    from workbench.services.project.lifecycle import open_project

    t = time.perf_counter()
    c = time.process_time()
    with open_project(path) as db:
        if what == "learn":
            r = learn(db, "s", seed=0)
            extra = {"model": r.model, "graded": r.graded, "features": len(r.features), "dense": r.dense,
                     "rule": r.operating.rule}
        else:
            info: dict = {}
            spans, table = pool_features(db, "p", "doc", [], {}, chunking=None, info=info)
            extra = {"pairs": len(spans), "features": len(table.names), "dense": info.get("dense")}
    print(json.dumps({"what": what, "seconds": time.perf_counter() - t, "cpu_seconds": time.process_time() - c,
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **extra}))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--per-query", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", nargs=2, metavar=("PATH", "WHAT"), help=argparse.SUPPRESS)
    ap.add_argument("--keep", type=Path, help="build (or reuse) the project in this folder and keep it")
    args = ap.parse_args(argv)
    if args.child:
        child(Path(args.child[0]), args.child[1])
        return
    print(f"load average at start: {_load()} on {os.cpu_count()} cores", flush=True)
    where = args.keep or Path(tempfile.mkdtemp(prefix="learned-scale-"))
    where.mkdir(parents=True, exist_ok=True)
    try:
        if not (where / "scale.duckdb").exists():
            build(where, args.queries, args.per_query, args.seed)
        for what in ("learn", "features"):
            done = subprocess.run([sys.executable, __file__, "--child", str(where / "scale.duckdb"), what],
                                  capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            if done.returncode:
                print(done.stderr[-3000:])
                raise SystemExit(done.returncode)
            r = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{what}: {r['seconds']:.0f} s wall, {r['cpu_seconds']:.0f} s CPU, peak RSS {r['peak_rss_mb']:.0f} MB; "
                  + json.dumps({k: v for k, v in r.items() if k not in ('what', 'seconds', 'cpu_seconds', 'peak_rss_mb')}),
                  flush=True)
        print(f"load average at end: {_load()}")
    finally:
        if args.keep is None:
            shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
