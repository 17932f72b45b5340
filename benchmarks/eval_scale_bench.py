"""`workbench eval` at scale: CPU, peak memory and values on run files of N queries x D docs.

Writes a qrels file and two run files of the same rows: *scattered* (D passes over the queries,
each in a new random order, so every query's rows are spread over the whole file) and *sorted*
(grouped by query, best score first). Scores are BM25-like (gamma, 4 decimals) and ~5% of a
query's rows repeat the score of its previous row (ties); doc ids come from a vocabulary of
5 x N; the qrels judge 10 of each query's docs and 10 it did not retrieve (20 rows per query).
The files are written with pyarrow's CSV writer in blocks, so 10^8 rows need ~1 GB to write.

Then it runs the whole `workbench eval` process (five measures, `--format json`) on each file,
``--rounds`` times, alternating with ``--baseline DIR`` (another checkout, e.g. a `git archive`
of an older commit) when given; CPU (user + system) and peak RSS come from ``wait4``. Every
output of a file must be byte-identical to its first (the same values whichever code and round),
and the scattered file's values must equal the sorted file's: the script exits 1 otherwise.

    .venv/bin/python benchmarks/eval_scale_bench.py [--queries 1000000] [--docs 100]
        [--rounds 1] [--baseline DIR] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
MEASURES = ["ndcg@10", "recall@100", "map", "RR", "P@10"]


def generate(directory: Path, n_queries: int, n_docs: int, seed: int = 0) -> None:
    """qrels.txt, run_scattered.txt, run_sorted.txt in ``directory`` (see the module docstring)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as csv

    rng = np.random.default_rng(seed)
    vocab = max(10_000, n_queries * 5)
    modulus = vocab + n_docs * 97
    start = rng.integers(0, vocab, n_queries)
    qids = pc.binary_join_element_wise(pa.scalar("q"), pc.cast(pa.array(np.arange(n_queries)), pa.string()), "")
    options = csv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")

    def ids(prefix: str, numbers) -> pa.Array:
        return pc.binary_join_element_wise(pa.scalar(prefix), pc.cast(pa.array(numbers), pa.string()), "")

    def rows(queries, docs, ranks, scores) -> pa.Table:
        n = len(queries)
        return pa.table({"query_id": qids.take(pa.array(queries)), "q0": pa.repeat(pa.scalar("Q0"), n),
                         "doc_id": ids("d", docs), "rank": pa.array(ranks), "score": pa.array(scores),
                         "tag": pa.repeat(pa.scalar("bench"), n)})

    scores = np.empty((n_docs, n_queries))
    with open(directory / "run_scattered.txt", "wb") as out:
        for p in range(n_docs):  # pass p: each query's p-th doc, queries in a new order
            s = np.round(rng.gamma(2.0, 5.0, n_queries), 4)
            if p:
                tie = rng.random(n_queries) < 0.05
                s[tie] = scores[p - 1][tie]
            scores[p] = s
            order = rng.permutation(n_queries)
            csv.write_csv(rows(order, (start[order] + p * 97) % modulus, np.zeros(n_queries, np.int64), s[order]),
                          out, options)
    with open(directory / "run_sorted.txt", "wb") as out:
        step = max(1, 1_000_000 // n_docs)
        for a in range(0, n_queries, step):
            b = min(n_queries, a + step)
            block = scores[:, a:b].T
            docs = (start[a:b, None] + np.arange(n_docs)[None, :] * 97) % modulus
            best = np.argsort(-block, axis=1, kind="stable")
            csv.write_csv(rows(np.repeat(np.arange(a, b), n_docs), np.take_along_axis(docs, best, 1).ravel(),
                               np.tile(np.arange(1, n_docs + 1), b - a), np.take_along_axis(block, best, 1).ravel()),
                          out, options)
    judged = (start[:, None] + np.argsort(rng.random((n_queries, n_docs)), axis=1)[:, :10] * 97) % modulus
    per_query = np.repeat(np.arange(n_queries), 10)
    grades = rng.integers(0, 4, n_queries * 20)
    table = pa.table({"query_id": qids.take(pa.array(np.concatenate([per_query, per_query]))),
                      "iteration": pa.repeat(pa.scalar("0"), n_queries * 20),
                      "doc_id": pa.concat_arrays([ids("d", judged.ravel()),
                                                  ids("x", rng.integers(0, 10**9, n_queries * 10))]),
                      "grade": pa.array(grades)})
    with open(directory / "qrels.txt", "wb") as out:
        csv.write_csv(table, out, options)


def run_eval(root: Path, qrels: Path, run: Path, out: Path) -> dict:
    """One whole `workbench eval` process of the checkout ``root``: CPU, wall, peak RSS."""
    argv = [sys.executable, "-m", "workbench", "eval", str(qrels), str(run), "--format", "json"]
    for m in MEASURES:
        argv += ["-m", m]
    env = {**os.environ, "PYTHONPATH": str(root)}
    started = time.perf_counter()
    with open(out, "wb") as sink:
        process = subprocess.Popen(argv, cwd=tempfile.gettempdir(), env=env, stdout=sink, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    err = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"eval_scale_bench: {root} failed on {run.name}: {err.strip()[-500:]}")
    return {"cpu": usage.ru_utime + usage.ru_stime, "wall": wall, "rss_mb": usage.ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=1_000_000)
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--baseline", type=Path, default=None, help="another checkout, run alternately")
    ap.add_argument("--keep", type=Path, default=None, help="write the data here and keep it (reused if present)")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    directory = args.keep or Path(tempfile.mkdtemp(prefix="eval-scale-"))
    directory.mkdir(parents=True, exist_ok=True)
    try:
        if not (directory / "qrels.txt").exists():
            started = time.perf_counter()
            generate(directory, args.queries, args.docs)
            print(f"wrote {args.queries:,} queries x {args.docs} docs in {time.perf_counter() - started:.0f} s: "
                  + ", ".join(f"{p.name} {p.stat().st_size / 1e6:,.0f} MB" for p in sorted(directory.glob("*.txt"))),
                  flush=True)
        codes = [("this checkout", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
        results: dict[tuple[str, str], list[dict]] = {}
        first: dict[str, bytes] = {}
        for r in range(args.rounds):
            for name in ("run_scattered", "run_sorted"):
                for label, root in (codes if r % 2 == 0 else codes[::-1]):
                    out = directory / f"{name}.out.json"
                    got = run_eval(root, directory / "qrels.txt", directory / f"{name}.txt", out)
                    got["load"] = os.getloadavg()[0]
                    results.setdefault((name, label), []).append(got)
                    print(f"[{r + 1}] {name} {label}: CPU {got['cpu']:.1f} s, wall {got['wall']:.1f} s, "
                          f"peak RSS {got['rss_mb']:,.0f} MB, load {got['load']:.1f}", flush=True)
                    body = json.loads(out.read_bytes())
                    values = json.dumps(next(iter(body.values())), sort_keys=True).encode()
                    if first.setdefault("values", values) != values:
                        sys.exit(f"eval_scale_bench: {label} gave other values on {name} (round {r + 1})")
                    out.unlink()
        print(f"\n{args.queries:,} queries x {args.docs} docs, {args.rounds} round(s); median (min-max); every "
              "output had the same values (both files, every code)")
        print(f"  {'file':<14} {'code':<14} {'CPU s':>18} {'peak RSS MB':>22}")
        for (name, label), rows in results.items():
            cpu, rss = [g["cpu"] for g in rows], [g["rss_mb"] for g in rows]
            print(f"  {name[4:]:<14} {label:<14} {median(cpu):>7.1f} ({min(cpu):.1f}-{max(cpu):.1f}) "
                  f"{median(rss):>9,.0f} ({min(rss):,.0f}-{max(rss):,.0f})")
    finally:
        if args.keep is None:
            shutil.rmtree(directory, ignore_errors=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
