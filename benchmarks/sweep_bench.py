"""Time and peak memory of a 4 × 3 sweep (four fixed token chunkings × bm25, dense, hybrid) as the
user runs it: a ``workbench sweep`` process on a project database on disk, first run (chunks,
indexes, encodes everything) and second run (the cache's effect: chunkings, runs and embeddings
reused), for one or more corpus sizes.

    .venv/bin/python benchmarks/sweep_bench.py --docs 10000,30000,100000 --retrievers bm25
    .venv/bin/python benchmarks/sweep_bench.py --docs 300,1000 --backend onnx

Synthetic corpus (seeded ``numpy.random.Generator``; the seed is printed): a vocabulary of 20,000
pseudo-words built from syllables plus 300 upper-case acronyms, drawn with a Zipf law (s = 1.1);
sentences of 4-30 words; document lengths log-normal (median about 120 words, σ = 0.9, at least
8 words) with 1% long documents of 1,000-6,000 words; 1% exact duplicates of earlier documents
(near-identical pages are common in real corpora). Document ids are random hex strings written
in random order. Each query takes 3-6 words of one sentence of a source document and that
sentence is labelled grade 2 as a character span (``--format spans``), so every chunking gets
chunk qrels from the same spans.

Measured per run: wall seconds of the process, CPU seconds (user + system of the child),
peak RSS of the process tree (sum of VmRSS over the process and its descendants, polled every
0.2 s), and the sweep's own time by stage (the line the sweep
prints on stderr: wall/CPU seconds per stage) plus where the chunk vectors came from. On a
shared machine wall time depends on the load, so the load average is printed with every run;
CPU seconds are the steadier figure. Nothing is extrapolated: a size that does not finish
within ``--timeout`` is reported as such.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CHUNKINGS = "fixed:64,fixed:128,fixed:256,fixed:512"
RETRIEVERS = "bm25,dense,hybrid"
SYLLABLES = ("ka", "to", "ri", "mel", "an", "sor", "vi", "den", "lo", "pra", "gus", "te", "mon", "ax", "ul",
             "ber", "qui", "ne", "sta", "fo", "zin", "ha", "cor", "el", "tri", "da", "pen", "ro", "sy", "lu")


def vocabulary(rng: np.random.Generator, size: int = 20_000) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(1, 5))
        words.add("".join(rng.choice(SYLLABLES, size=n)))
    out = sorted(words)
    rng.shuffle(out)
    acronyms = {"".join(rng.choice(list("ABCDEFGHKLMNPRSTVWXZ"), size=int(rng.integers(2, 5)))) for _ in range(300)}
    return out + sorted(acronyms)


def corpus(folder: Path, n_docs: int, n_queries: int, seed: int) -> dict:
    """Write docs.jsonl, queries.jsonl and labels.jsonl (span labels); return corpus statistics."""
    rng = np.random.default_rng(seed)
    vocab = np.array(vocabulary(rng))
    p = 1.0 / np.arange(1, len(vocab) + 1) ** 1.1
    p /= p.sum()
    lengths = np.maximum(8, rng.lognormal(np.log(120), 0.9, size=n_docs)).astype(int)
    long_docs = rng.random(n_docs) < 0.01
    lengths[long_docs] = rng.integers(1000, 6000, size=int(long_docs.sum()))
    ids = [f"{v:012x}" for v in rng.choice(2**46, size=n_docs, replace=False)]
    words = rng.choice(vocab, size=int(lengths.sum()), p=p)
    sentence_len = rng.integers(4, 31, size=len(words))
    texts, sentences_of = [], []
    at = 0
    for d in range(n_docs):
        if d > 10 and rng.random() < 0.01:  # an exact duplicate of an earlier document
            src = int(rng.integers(d))
            texts.append(texts[src])
            sentences_of.append(sentences_of[src])
            continue
        w = words[at:at + lengths[d]]
        at += lengths[d]
        parts, spans, pos, i = [], [], 0, 0
        while i < len(w):
            n = int(sentence_len[at - lengths[d] + i])
            sentence = " ".join(w[i:i + n])
            sentence = sentence[0].upper() + sentence[1:] + "."
            spans.append((pos, pos + len(sentence)))
            parts.append(sentence)
            pos += len(sentence) + 1
            i += n
        texts.append(" ".join(parts))
        sentences_of.append(spans)
    order = rng.permutation(n_docs)  # unsorted ids in the file
    with (folder / "docs.jsonl").open("w") as out:
        for d in order:
            out.write(json.dumps({"_id": ids[d], "title": "", "text": texts[d]}) + "\n")
    with (folder / "queries.jsonl").open("w") as q, (folder / "labels.jsonl").open("w") as lab:
        for i in range(n_queries):
            d = int(rng.integers(n_docs))
            s, e = sentences_of[d][int(rng.integers(len(sentences_of[d])))]
            words_in = texts[d][s:e].rstrip(".").split()
            pick = rng.choice(words_in, size=min(len(words_in), int(rng.integers(3, 7))), replace=False)
            q.write(json.dumps({"_id": f"q-{i:04d}", "text": " ".join(pick).lower()}) + "\n")
            lab.write(json.dumps({"query_id": f"q-{i:04d}", "doc_id": ids[d], "start": s, "end": e, "grade": 2,
                                  "assessor": "synthetic"}) + "\n")
    chars = np.array([len(t) for t in texts])
    return {"documents": n_docs, "words_total": int(lengths.sum()), "median_chars": int(np.median(chars)),
            "p99_chars": int(np.percentile(chars, 99)), "max_chars": int(chars.max()), "queries": n_queries,
            "seed": seed}


def _tree_rss_kb(root: int) -> int:
    """Sum of VmRSS (kB) of ``root`` and its descendants, from /proc."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                status = f.read()
        except OSError:
            continue
        pid = int(entry)
        m = re.search(r"^PPid:\s+(\d+)", status, re.MULTILINE)
        parent[pid] = int(m.group(1)) if m else 0
        m = re.search(r"^VmRSS:\s+(\d+)", status, re.MULTILINE)
        rss[pid] = int(m.group(1)) if m else 0
    total = 0
    for pid, kb in rss.items():
        p = pid
        while p and p != root:
            p = parent.get(p, 0)
        if p == root:
            total += kb
    return total


def run(args: list[str], timeout: float) -> dict:
    """Run ``python -m workbench ARGS``; wall/CPU seconds, peak tree RSS, stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "workbench", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    peak = [0]
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _tree_rss_kb(proc.pid))
            stop.wait(0.2)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        timed_out = True
    stop.set()
    watcher.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall_s": time.perf_counter() - started, "rc": proc.returncode, "timed_out": timed_out,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "tree_rss_mb": peak[0] / 1024, "stdout": out, "stderr": err,
            "load": os.getloadavg()[0]}


def stages(stderr: str) -> dict[str, tuple[float, float]]:
    line = next((x for x in stderr.splitlines() if x.startswith("time by stage")), "")
    found = re.findall(r"([a-z][a-z0-9@ -]*?) ([\d.]+)/([\d.]+)", line.split(":", 1)[1] if line else "")
    return {name.strip(): (float(w), float(c)) for name, w, c in found}


def one_size(n_docs: int, args: argparse.Namespace) -> dict:
    with tempfile.TemporaryDirectory(prefix="sweep-bench-", dir=args.tmp) as tmp:
        folder = Path(tmp)
        db = str(folder / "bench.duckdb")
        t0 = time.perf_counter()
        info = corpus(folder, n_docs, args.queries, args.seed)
        generate = time.perf_counter() - t0
        setup = {}
        for step in (["init"], ["import", "corpus", str(folder / "docs.jsonl")],
                     ["import", "queries", str(folder / "queries.jsonl")],
                     ["import", "qrels", "--format", "spans", str(folder / "labels.jsonl")]):
            done = run(["--db", db, *step], args.timeout)
            if done["rc"] != 0:
                sys.exit(f"setup {step} failed: {done['stderr'].strip()[-400:]}")
            setup[step[0] if step[0] == "init" else step[1]] = done
        grid = ["--db", db, "sweep", "--chunkings", CHUNKINGS, "--retrievers", args.retrievers,
                "-m", "ndcg@10", "-m", "recall@10", "--format", "json", "--no-progress", "--backend", args.backend]
        first = run(grid, args.timeout)
        second = run(grid, args.timeout) if not first["timed_out"] and first["rc"] == 0 else None
        db_mb = Path(db).stat().st_size / 2**20
    return {"docs": n_docs, "info": info, "generate_s": generate, "setup": setup, "first": first,
            "second": second, "db_mb": db_mb}


def report(r: dict, args: argparse.Namespace) -> None:
    info, first, second = r["info"], r["first"], r["second"]
    print(f"\n## {r['docs']:,} documents ({info['words_total']:,} words; median {info['median_chars']:,} chars, "
          f"p99 {info['p99_chars']:,}, max {info['max_chars']:,}), {info['queries']} queries, seed {info['seed']}")
    imp = r["setup"]["corpus"]
    print(f"corpus generated in {r['generate_s']:.1f} s; `workbench import corpus`: {imp['wall_s']:.1f} s wall, "
          f"{imp['cpu_s']:.1f} s CPU, peak {imp['tree_rss_mb']:.0f} MB")
    print(f"{'run':<34}{'wall s':>9}{'CPU s':>9}{'peak RSS MB':>13}{'load':>6}")
    for label, x in (("first (builds everything)", first), ("second (cache: reuses all)", second)):
        if x is None:
            print(f"{label:<34}{'not run':>9}")
            continue
        state = " TIMED OUT" if x["timed_out"] else (f" FAILED rc={x['rc']}" if x["rc"] else "")
        print(f"{label:<34}{x['wall_s']:>9.1f}{x['cpu_s']:>9.1f}{x['tree_rss_mb']:>13.0f}"
              f"{x['load']:>6.1f}{state}")
    if first["timed_out"]:
        print(f"first run did not finish within {args.timeout:.0f} s; last lines: "
              + " | ".join(first["stderr"].strip().splitlines()[-3:])[-600:])
        return
    if first["rc"]:
        print("first run failed: " + first["stderr"].strip()[-600:])
        return
    if second and not second["rc"]:
        print(f"cache effect: the second run takes {second['wall_s'] / first['wall_s']:.3f}x the wall time "
              f"and {second['cpu_s'] / max(first['cpu_s'], 1e-9):.3f}x the CPU of the first; database {r['db_mb']:.0f} MB")
    print("first run, time by stage (wall s / CPU s):")
    for name, (w, c) in sorted(stages(first["stderr"]).items(), key=lambda kv: -kv[1][0]):
        print(f"  {name:<26}{w:>9.1f}{c:>9.1f}")
    vectors = [x for x in first["stderr"].splitlines() if x.startswith("chunk vectors")]
    if vectors:
        print("  " + vectors[0])
    cells = json.loads(first["stdout"])["cells"]
    print("cells: " + "; ".join(f"{c['chunking']}/{c['retriever']} ndcg@10 {c['aggregate']['ndcg@10']:.3f}"
                               for c in cells))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", default="2000", help="corpus sizes, comma-separated (default 2000)")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--retrievers", default=RETRIEVERS)
    ap.add_argument("--backend", choices=("torch", "onnx"), default="onnx" if _onnx() else "torch",
                    help="dense encoder (default: onnx when onnxruntime is installed, the faster path here)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds allowed per workbench process")
    ap.add_argument("--tmp", default=None, help="folder for the temporary project (default: system temp)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.docs.split(",") if x.strip()]
    print(f"sweep {CHUNKINGS} x {args.retrievers}; dense backend {args.backend}; "
          f"{os.cpu_count()} CPUs; load average at start {os.getloadavg()[0]:.1f}")
    for n in sizes:
        result = one_size(n, args)
        report(result, args)
        sys.stdout.flush()
        if result["first"]["timed_out"]:
            break


def _onnx() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


if __name__ == "__main__":
    main()
