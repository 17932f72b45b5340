"""Metric engine benchmark: ours vs pytrec_eval, ranx and ir_measures on the same data.

    python benchmarks/metrics_bench.py [--queries 10000] [--docs 100] [--scale 100000] [--repeat 3]

Data: Q queries x D docs (run rows sorted by query then score, scores rounded to 3 decimals so
some tie), ~20 judged docs per query (10 retrieved, 10 not) graded 0-3. Measures: ndcg@10,
recall@100, map, mrr@10, precision@10 (pytrec_eval has no RR cutoff: it computes recip_rank).

Every tool runs in its own fresh subprocess on the same files; peak memory is that process's
``VmHWM`` (its own high-water mark, imports included: what a user's process pays). The time is
the best of ``--repeat`` runs inside the process ("warm": imports done, ranx's numba JIT
compiled on a small warm-up). Dict variants load the dicts untimed, then time evaluation.
Ours is timed as a user calls it: ``evaluate(...).aggregate``.
A last block times ours and pytrec_eval from files at ``--scale`` queries x D docs (one run
each: time and peak memory, with the ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MEASURES = {
    "ours": ["ndcg@10", "recall@100", "map", "mrr@10", "precision@10"],
    "pytrec_eval": ["ndcg_cut.10", "recall.100", "map", "recip_rank", "P.10"],
    "ranx": ["ndcg@10", "recall@100", "map", "mrr@10", "precision@10"],
    "ir_measures": ["nDCG@10", "R@100", "AP", "RR@10", "P@10"],
}


def generate(directory: Path, n_queries: int, n_docs: int, seed: int = 0) -> tuple[Path, Path]:
    import pandas as pd

    rng = np.random.default_rng(seed)
    q = np.repeat(np.arange(n_queries), n_docs)
    docs = rng.integers(0, 50 * n_queries * n_docs // 100 + 1000, size=q.size)
    # make docs unique inside a query: offset by position
    docs = docs * n_docs + np.tile(np.arange(n_docs), n_queries)
    scores = np.round(rng.random(q.size) * 20, 3)
    order = np.lexsort((-scores, q))
    q, docs, scores = q[order], docs[order], scores[order]
    rank = np.tile(np.arange(1, n_docs + 1), n_queries)
    run = directory / f"run_{n_queries}.txt"
    pd.DataFrame({"q": q, "z": "Q0", "d": np.char.add("D", docs.astype(str)), "r": rank, "s": scores, "t": "bench"}) \
        .to_csv(run, sep=" ", header=False, index=False)
    # qrels: 10 retrieved docs + 10 unretrieved per query
    pick = rng.random((n_queries, n_docs)).argsort(axis=1)[:, :10] + (np.arange(n_queries) * n_docs)[:, None]
    judged_docs = np.concatenate([docs[pick.ravel()], -1 - rng.integers(0, 10**9, size=n_queries * 10)])
    judged_q = np.concatenate([np.repeat(np.arange(n_queries), 10)] * 2)
    grades = rng.integers(0, 4, size=judged_q.size)
    qrels = directory / f"qrels_{n_queries}.txt"
    names = np.where(judged_docs >= 0, np.char.add("D", np.abs(judged_docs).astype(str)),
                     np.char.add("X", np.abs(judged_docs).astype(str)))
    pd.DataFrame({"q": judged_q, "z": 0, "d": names, "g": grades}).to_csv(qrels, sep=" ", header=False, index=False)
    return qrels, run


def _dicts(qrels: Path, run: Path):
    import pytrec_eval

    with qrels.open() as f:
        qd = pytrec_eval.parse_qrel(f)
    with run.open() as f:
        rd = pytrec_eval.parse_run(f)
    return qd, rd


def task(name: str, qrels: Path, run: Path, repeat: int) -> dict:
    setup = None
    if name.startswith("ours"):
        from workbench import evaluate

        if name == "ours_files":
            fn = lambda: evaluate(qrels, run, MEASURES["ours"]).aggregate  # noqa: E731
        else:
            qd, rd = _dicts(qrels, run)
            fn = lambda: evaluate(qd, rd, MEASURES["ours"]).aggregate  # noqa: E731
    elif name.startswith("pytrec"):
        import pytrec_eval

        def agg(qd, rd):
            res = pytrec_eval.RelevanceEvaluator(qd, set(MEASURES["pytrec_eval"])).evaluate(rd)
            keys = next(iter(res.values())).keys()
            return {k: float(np.mean([v[k] for v in res.values()])) for k in keys}

        if name == "pytrec_files":
            fn = lambda: agg(*_dicts(qrels, run))  # noqa: E731
        else:
            qd, rd = _dicts(qrels, run)
            fn = lambda: agg(qd, rd)  # noqa: E731
    elif name.startswith("ranx"):
        import ranx

        qd, rd = _dicts(qrels, run)
        small_q = {k: qd[k] for k in list(qd)[:5]}
        small_r = {k: rd[k] for k in list(qd)[:5]}
        ranx.evaluate(ranx.Qrels(small_q), ranx.Run(small_r), MEASURES["ranx"])  # JIT warm-up
        if name == "ranx_files":
            fn = lambda: ranx.evaluate(  # noqa: E731
                ranx.Qrels.from_file(str(qrels), kind="trec"), ranx.Run.from_file(str(run), kind="trec"),
                MEASURES["ranx"], make_comparable=True)
        elif name == "ranx_objects":
            qo, ro = ranx.Qrels(qd), ranx.Run(rd)
            fn = lambda: ranx.evaluate(qo, ro, MEASURES["ranx"], make_comparable=True)  # noqa: E731
        else:
            fn = lambda: ranx.evaluate(ranx.Qrels(qd), ranx.Run(rd), MEASURES["ranx"], make_comparable=True)  # noqa: E731
    elif name.startswith("irm"):
        import ir_measures

        ms = [ir_measures.parse_measure(m) for m in MEASURES["ir_measures"]]
        if name == "irm_files":
            fn = lambda: ir_measures.calc_aggregate(  # noqa: E731
                ms, ir_measures.read_trec_qrels(str(qrels)), ir_measures.read_trec_run(str(run)))
        else:
            qd, rd = _dicts(qrels, run)
            fn = lambda: ir_measures.calc_aggregate(ms, qd, rd)  # noqa: E731
    else:
        raise SystemExit(f"unknown task {name}")
    times = []
    result = None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    del setup
    values = {str(k): float(v) for k, v in dict(result).items()}
    return {"seconds": min(times), "maxrss_mb": _peak_mb(), "values": values}


def _peak_mb() -> float:
    # VmHWM belongs to this process image; ru_maxrss would carry the parent's peak over fork+exec
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_task(name: str, qrels: Path, run: Path, repeat: int) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--task", name, "--qrels", str(qrels), "--run", str(run), "--repeat", str(repeat)],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--scale", type=int, default=100_000, help="queries for the scaling line (0: skip)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--task")
    ap.add_argument("--qrels")
    ap.add_argument("--run")
    args = ap.parse_args()
    if args.task:
        print(json.dumps(task(args.task, Path(args.qrels), Path(args.run), args.repeat)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        qrels, run = generate(Path(tmp), args.queries, args.docs)
        print(f"{args.queries} queries x {args.docs} docs = {args.queries * args.docs:,} run rows; "
              f"best of {args.repeat}; each tool in its own process")
        rows = {}
        for name in ["ours_files", "pytrec_files", "ours_dicts", "pytrec_dicts", "ranx_objects", "ranx_dicts",
                     "ranx_files", "irm_dicts", "irm_files"]:
            rows[name] = run_task(name, qrels, run, args.repeat)
            r = rows[name]
            print(f"  {name:<14} {r['seconds']:8.3f} s   peak RSS {r['maxrss_mb']:8.1f} MB")
        ours_f, ours_d = rows["ours_files"]["seconds"], rows["ours_dicts"]["seconds"]
        print("ratios (other / ours; > 1 means ours is faster):")
        print(f"  pytrec_eval files / ours files   {rows['pytrec_files']['seconds'] / ours_f:6.2f}x  (target >= 2)")
        print(f"  pytrec_eval dicts / ours dicts   {rows['pytrec_dicts']['seconds'] / ours_d:6.2f}x  (target >= 1)")
        for name in ("ranx_objects", "ranx_dicts"):
            print(f"  {name + ' / ours dicts':<33}{rows[name]['seconds'] / ours_d:6.2f}x  (target > 1)")
        print(f"  {'ranx_files / ours files':<33}{rows['ranx_files']['seconds'] / ours_f:6.2f}x  (target > 1)")
        print(f"  ir_measures dicts / ours dicts   {rows['irm_dicts']['seconds'] / ours_d:6.2f}x  (target >= 3)")
        print(f"  ir_measures files / ours files   {rows['irm_files']['seconds'] / ours_f:6.2f}x  (target >= 3)")
        print(f"  peak RSS ours files / pytrec_eval files "
              f"{rows['ours_files']['maxrss_mb'] / rows['pytrec_files']['maxrss_mb']:6.2f}  (target <= 1)")
        ours_v, pte_v = rows["ours_files"]["values"], rows["pytrec_files"]["values"]
        pairs = [("ndcg@10", "ndcg_cut_10"), ("recall@100", "recall_100"), ("map", "map"), ("precision@10", "P_10")]
        diff = max(abs(ours_v[a] - pte_v[b]) for a, b in pairs)
        print(f"  check: max |ours - pytrec_eval| over ndcg@10, recall@100, map, P@10 = {diff:.2e}")
        if args.scale:
            qrels, run = generate(Path(tmp), args.scale, args.docs, seed=1)
            print(f"scaling: {args.scale} queries x {args.docs} docs ({args.scale * args.docs:,} rows), from files")
            big = {}
            for name in ("ours_files", "pytrec_files"):
                r = big[name] = run_task(name, qrels, run, 1)
                print(f"  {name:<14} {r['seconds']:8.2f} s   peak RSS {r['maxrss_mb']:8.0f} MB")
            print(f"  pytrec_eval / ours: time {big['pytrec_files']['seconds'] / big['ours_files']['seconds']:5.2f}x"
                  f" (> 1: ours faster), peak RSS ours / pytrec_eval "
                  f"{big['ours_files']['maxrss_mb'] / big['pytrec_files']['maxrss_mb']:5.2f} (<= 1: ours smaller)")


if __name__ == "__main__":
    main()
