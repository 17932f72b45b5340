"""Time and peak memory of a 4 × 3 sweep (four fixed token chunkings × bm25, dense, hybrid) on a
synthetic corpus, first run and second run (the cache's effect: chunkings, runs and embeddings
reused), each as a whole ``workbench sweep`` process.

    .venv/bin/python benchmarks/sweep_bench.py [--docs 100000] [--queries 50]

Synthetic documents: 120-300 words drawn with a Zipf law from a 5,000-word vocabulary (seeded),
each query made of words from one "source" document, whose middle third is labelled grade 2
(span labels, so every chunking gets chunk qrels from the same spans). On a shared 2-core machine
100k documents is not feasible for the dense cells (encoding runs at ~60 short passages/s); the
script runs the size it is given and prints a linear extrapolation to 100k documents, labelled
as such.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CHUNKINGS = "fixed:64,fixed:128,fixed:256,fixed:512"
RETRIEVERS = "bm25,dense,hybrid"


def corpus(folder: Path, n_docs: int, n_queries: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(5000)]
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    texts = []
    with (folder / "docs.jsonl").open("w") as out:
        for d in range(n_docs):
            words = rng.choice(vocab, size=int(rng.integers(120, 300)), p=p)
            text = " ".join(words) + "."
            texts.append(text)
            out.write(json.dumps({"_id": f"d{d}", "title": "", "text": text}) + "\n")
    with (folder / "queries.jsonl").open("w") as q, (folder / "labels.jsonl").open("w") as lab:
        for i in range(n_queries):
            d = int(rng.integers(n_docs))
            text = texts[d]
            third = len(text) // 3
            words = text[third:2 * third].split()
            q.write(json.dumps({"_id": f"q{i}", "text": " ".join(rng.choice(words, size=6))}) + "\n")
            lab.write(json.dumps({"query_id": f"q{i}", "doc_id": f"d{d}", "start": third, "end": 2 * third,
                                  "grade": 2, "assessor": "synthetic"}) + "\n")


MEASURED = """
import resource, sys, time
from workbench.cli import main
t0 = time.perf_counter()
rc = main(sys.argv[1:])
print(f"BENCH {time.perf_counter() - t0:.2f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} {rc}",
      file=sys.stderr)
"""


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", MEASURED, *args], check=False, capture_output=True, text=True, cwd=REPO)


def measured(*args: str) -> tuple[float, float]:
    done = cli(*args)
    line = [x for x in done.stderr.splitlines() if x.startswith("BENCH ")]
    if done.returncode != 0 or not line:
        sys.exit(f"workbench {' '.join(args)} failed: {done.stderr.strip()[-400:]}")
    _, seconds, rss, _ = line[-1].split()
    return float(seconds), float(rss)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--retrievers", default=RETRIEVERS)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sweep-bench-") as tmp:
        folder = Path(tmp)
        db = str(folder / "bench.duckdb")
        t0 = time.perf_counter()
        corpus(folder, args.docs, args.queries, args.seed)
        for step in (["init"], ["import", "corpus", str(folder / "docs.jsonl")],
                     ["import", "queries", str(folder / "queries.jsonl")],
                     ["import", "qrels", "--format", "spans", str(folder / "labels.jsonl")]):
            done = cli("--db", db, *step)
            if done.returncode != 0:
                sys.exit(f"setup {step} failed: {done.stderr.strip()[-400:]}")
        setup = time.perf_counter() - t0
        grid = ["--db", db, "sweep", "--chunkings", CHUNKINGS, "--retrievers", args.retrievers,
                "-m", "ndcg@10", "-m", "recall@10", "--format", "json", "--no-progress"]
        first_s, first_mb = measured(*grid)
        second_s, second_mb = measured(*grid)
        db_mb = Path(db).stat().st_size / 2**20
    cells = 4 * len(args.retrievers.split(","))
    print(f"sweep {len(CHUNKINGS.split(','))} chunkings x {args.retrievers} = {cells} cells, "
          f"{args.docs:,} synthetic documents, {args.queries} queries (seed {args.seed}); setup {setup:.1f} s")
    print(f"{'run':<28}{'seconds':>10}{'peak RSS MB':>14}")
    print(f"{'first (builds everything)':<28}{first_s:>10.1f}{first_mb:>14.0f}")
    print(f"{'second (cache: reuses all)':<28}{second_s:>10.1f}{second_mb:>14.0f}")
    print(f"cache effect: second run takes {second_s / first_s:.2f}x the time of the first; database {db_mb:.0f} MB")
    if args.docs < 100_000:
        factor = 100_000 / args.docs
        print(f"extrapolated (linear in documents, NOT measured) to 100,000 documents: first run "
              f"~{first_s * factor / 3600:.1f} h, second run ~{second_s * factor / 60:.1f} min")


if __name__ == "__main__":
    main()
