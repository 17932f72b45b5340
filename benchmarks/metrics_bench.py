"""Metric engine benchmark: what users run, against pytrec_eval, measured in the same run.

    python benchmarks/metrics_bench.py [--queries 10000] [--docs 100] [--repeat 7]

Data (unfriendly on purpose): Q queries x D docs, ids like ``q123`` / ``d4567`` (strings, so
nothing can be parsed as an integer), scores rounded to 3 decimals (some tie), about 20 judged
docs per query (10 retrieved, 10 not) graded 0-3. Two run files hold the same rows: one
sorted by query and score (as most tools write them), one shuffled.

Rows of the table (each the best of ``--repeat`` runs; ours and pytrec_eval alternate so that
a shared machine's load weighs on both alike):

* ``workbench eval`` as a user runs it: a whole ``python -m workbench eval QRELS RUN -m ...``
  process (interpreter start, imports, reading, ranking, scoring, printing the table),
  against a whole Python process that reads the same files with pytrec_eval's parsers,
  scores them with ``RelevanceEvaluator`` and prints the means. Targets: ours <= 0.5x theirs,
  sorted and unsorted.
* ``evaluate()`` from dicts: ``evaluate(qrels_dict, run_dict, measures).aggregate`` against
  ``RelevanceEvaluator(qrels_dict, measures).evaluate(run_dict)`` plus the means, alternated
  inside one process, on the dicts of the unsorted run (loaded once, untimed). Target: ours
  <= 1.0x.
* ``workbench --help``: the whole process. Target: < 0.3 s.
* a diagnostic row: the sorted-rows process with a parser that registers only ``eval``; its
  difference to the full row is what the other command groups add while the parser is built.

Bytecode caching is on for every process (as for an installed package); a first untimed run of
each command (the agreement check) writes it.

Measures: ndcg@10, recall@100, map, RR (pytrec_eval's recip_rank has no cutoff), P@10; the
script checks both tools report the same means before timing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OURS = ["ndcg@10", "recall@100", "map", "RR", "P@10"]
PTE = {"ndcg_cut.10": "ndcg@10", "recall.100": "recall@100", "map": "map", "recip_rank": "RR", "P.10": "P@10"}

PTE_PROCESS = """
import sys
import pytrec_eval
with open(sys.argv[1]) as f:
    qrels = pytrec_eval.parse_qrel(f)
with open(sys.argv[2]) as f:
    run = pytrec_eval.parse_run(f)
per_query = pytrec_eval.RelevanceEvaluator(qrels, set(sys.argv[3].split(","))).evaluate(run)
for measure in next(iter(per_query.values())):
    values = [v[measure] for v in per_query.values()]
    print(f"{measure}\\t{sum(values) / len(values):.4f}")
"""

DICTS_TASK = """
import json, sys, time
import pytrec_eval
from workbench import evaluate
with open(sys.argv[1]) as f:
    qrels = pytrec_eval.parse_qrel(f)
with open(sys.argv[2]) as f:
    run = pytrec_eval.parse_run(f)
repeat = int(sys.argv[3])
ours_measures, their_measures = sys.argv[4].split(","), set(sys.argv[5].split(","))

def ours():
    return evaluate(qrels, run, ours_measures).aggregate

def theirs():
    per_query = pytrec_eval.RelevanceEvaluator(qrels, their_measures).evaluate(run)
    return {m: sum(v[m] for v in per_query.values()) / len(per_query) for m in next(iter(per_query.values()))}

best = {"ours": float("inf"), "theirs": float("inf")}
for _ in range(repeat):  # alternate: the machine's load weighs on both alike
    for name, fn in (("ours", ours), ("theirs", theirs)):
        t = time.perf_counter()
        fn()
        best[name] = min(best[name], time.perf_counter() - t)
print(json.dumps(best))
"""


def generate(directory: Path, n_queries: int, n_docs: int, seed: int = 0) -> tuple[Path, Path, Path]:
    """qrels, sorted run, shuffled run (the same rows)."""
    rng = np.random.default_rng(seed)
    q = np.repeat(np.arange(n_queries), n_docs)
    # distinct docs inside a query: a random start plus a stride, over a ~10k-100k vocabulary
    vocab = max(10_000, n_queries * 5)
    docs = (rng.integers(0, vocab, size=(n_queries, 1)) + np.arange(n_docs) * 97) % (vocab + n_docs * 97)
    docs = docs.ravel()
    scores = np.round(rng.random(q.size) * 20, 3)
    order = np.lexsort((-scores, q))
    rank = np.tile(np.arange(1, n_docs + 1), n_queries)
    qs, ds = np.char.add("q", q.astype(str)), np.char.add("d", docs.astype(str))

    def lines(rows: np.ndarray, ranks: np.ndarray) -> str:
        cols = [qs[rows], np.full(len(rows), "Q0"), ds[rows], ranks.astype(str),
                np.char.mod("%.3f", scores[rows]), np.full(len(rows), "bench")]
        return "\n".join(" ".join(r) for r in zip(*(c.tolist() for c in cols))) + "\n"

    sorted_run = directory / "run_sorted.txt"
    sorted_run.write_text(lines(order, rank))
    shuffled = rng.permutation(q.size)
    unsorted_run = directory / "run_unsorted.txt"
    unsorted_run.write_text(lines(shuffled, np.zeros(q.size, dtype=int)))
    pick = rng.random((n_queries, n_docs)).argsort(axis=1)[:, :10] + (np.arange(n_queries) * n_docs)[:, None]
    judged = np.concatenate([ds[pick.ravel()], np.char.add("x", rng.integers(0, 10**9, n_queries * 10).astype(str))])
    jq = np.concatenate([np.repeat(qs[::n_docs], 10)] * 2)
    grades = rng.integers(0, 4, size=jq.size).astype(str)
    qrels = directory / "qrels.txt"
    qrels.write_text("\n".join(f"{a} 0 {b} {g}" for a, b, g in zip(jq.tolist(), judged.tolist(), grades.tolist())) + "\n")
    return qrels, sorted_run, unsorted_run


PYCACHE = Path(tempfile.gettempdir()) / "workbench-bench-pycache"


def env() -> dict:
    """The subprocesses' environment: the repository on the path, and bytecode caching on (an
    installed package has its .pyc files; PYTHONDONTWRITEBYTECODE would make every process
    recompile the workbench sources, ~0.1 s). The cache goes to a temporary prefix, not the tree."""
    out = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONPYCACHEPREFIX": str(PYCACHE)}
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


def once(argv: list[str]) -> float:
    """Wall time of one whole process."""
    t = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env(), cwd=REPO, check=False)
    seconds = time.perf_counter() - t
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv[:4])} ... failed:\n{proc.stderr}")
    return seconds


def paired(a: list[str], b: list[str], repeat: int) -> tuple[float, float]:
    """Best wall times of two commands run alternately (a shared machine's load then weighs
    on both alike)."""
    best_a = best_b = float("inf")
    for _ in range(repeat):
        best_a = min(best_a, once(a))
        best_b = min(best_b, once(b))
    return best_a, best_b


def ours_cmd(qrels: Path, run: Path, fmt: str = "table") -> list[str]:
    argv = [sys.executable, "-m", "workbench", "eval", str(qrels), str(run), "--format", fmt]
    for m in OURS:
        argv += ["-m", m]
    return argv


EVAL_ONLY = """
import argparse, sys
from workbench.cli import evaluation
parser = argparse.ArgumentParser(prog="workbench")
evaluation.register(parser.add_subparsers(dest="command"))
args = parser.parse_args(sys.argv[1:])
sys.exit(args.handler(args))
"""


def eval_only_cmd(qrels: Path, run: Path) -> list[str]:
    """``workbench eval`` with only the eval command registered: what the whole process costs
    once no command group imports heavy modules while the parser is built."""
    return [sys.executable, "-c", EVAL_ONLY, *ours_cmd(qrels, run)[3:]]


def pte_cmd(qrels: Path, run: Path) -> list[str]:
    return [sys.executable, "-c", PTE_PROCESS, str(qrels), str(run), ",".join(PTE)]


def check_same_means(qrels: Path, run: Path) -> float:
    ours = json.loads(subprocess.run(ours_cmd(qrels, run, "json"), capture_output=True, text=True, env=env(),
                                     check=True).stdout)
    (agg,) = [v["aggregate"] for v in ours.values()]
    theirs = dict(line.split("\t") for line in subprocess.run(
        pte_cmd(qrels, run), capture_output=True, text=True, env=env(), check=True).stdout.splitlines())
    # pytrec_eval prints 4 decimals here: agreement to that precision
    return max(abs(agg[ours_name] - float(theirs[te.replace(".", "_")])) for te, ours_name in PTE.items())


def dicts_task(qrels: Path, run: Path, repeat: int) -> tuple[float, float]:
    """Best in-process times of ``evaluate()`` and pytrec_eval on the same dicts, alternated
    inside one process (the dicts are loaded once, untimed)."""
    out = subprocess.run([sys.executable, "-c", DICTS_TASK, str(qrels), str(run), str(repeat), ",".join(OURS),
                          ",".join(PTE)], capture_output=True, text=True, env=env(), check=True, cwd=REPO)
    best = json.loads(out.stdout.strip().splitlines()[-1])
    return best["ours"], best["theirs"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=7, help="runs per row; the best is reported (default 7)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        qrels, sorted_run, unsorted_run = generate(Path(tmp), args.queries, args.docs)
        n = args.queries * args.docs
        print(f"{args.queries:,} queries x {args.docs} docs = {n:,} run rows, string ids (q123/d4567); "
              f"best of {args.repeat}")
        diff = max(check_same_means(qrels, r) for r in (sorted_run, unsorted_run))
        print(f"check: max |ours - pytrec_eval| over the five means = {diff:.1e} (pytrec_eval printed to 4 decimals)")
        rows = []
        for label, run in (("sorted rows", sorted_run), ("unsorted rows", unsorted_run)):
            ours, theirs = paired(ours_cmd(qrels, run), pte_cmd(qrels, run), args.repeat)
            rows.append((f"whole process, files, {label}", ours, theirs, "<= 0.50"))
        ours, theirs = paired(eval_only_cmd(qrels, sorted_run), pte_cmd(qrels, sorted_run), args.repeat)
        rows.append(("  sorted rows, parser with eval only (*)", ours, theirs, "diagnostic"))
        ours, theirs = dicts_task(qrels, unsorted_run, args.repeat)
        rows.append(("evaluate() from dicts, unsorted rows", ours, theirs, "<= 1.00"))
        print()
        print(f"  {'what':<40} {'workbench':>10} {'pytrec_eval':>12} {'ratio':>7}  target")
        for what, a, b, target in rows:
            print(f"  {what:<40} {a:>9.3f}s {b:>11.3f}s {a / b:>7.2f}  {target}")
        help_s = min(once([sys.executable, "-m", "workbench", "--help"]) for _ in range(args.repeat))
        print(f"  {'workbench --help (whole process)':<40} {help_s:>9.3f}s {'':>12} {'':>7}  < 0.3 s")
        print("\nratio = workbench / pytrec_eval (< 1: workbench faster)")
        print("(*) the parser built with the eval command alone: the part of the whole-process time that "
              "the other command groups' registration adds shows as the difference to the row above")


if __name__ == "__main__":
    main()
