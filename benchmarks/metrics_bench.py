"""Metric engine benchmark: what users run, against pytrec_eval, measured in the same run.

    python benchmarks/metrics_bench.py [--queries 10000] [--docs 100] [--rounds 5] [--block-rows N]

Data (unfriendly on purpose): Q queries x D docs, ids like ``q123`` / ``d4567`` (strings, so
nothing can be parsed as an integer), BM25-like scores (gamma distributed, 4 decimals) of which
about 5% repeat the score before them in the same query (ties, as BM25 gives documents with the
same term statistics), about 20 judged docs per query (10 retrieved, 10 not) graded 0-3. Three
run files hold the same rows: one sorted by query and score (as most tools write them), one
with every query's rows scattered over the whole file, and the sorted one with tabs between
fields and CR LF line ends (as other tools write them).

Every row is measured in ``--rounds`` rounds, ours and pytrec_eval alternating inside each
round (a shared machine's load then weighs on both alike). Reported: CPU seconds (user + system
of the process, or of the call for the in-process rows) as the median over the rounds, the
ratio ours / theirs as the median and min-max of the per-round ratios, and the peak RSS of
the processes. The load average is printed before and after: on a loaded 2-core machine CPU
seconds grow too (shared caches), ratios less.

* ``workbench eval`` as a user runs it: a whole ``python -m workbench eval QRELS RUN -m ...``
  process (interpreter start, imports, reading, ranking, scoring, printing the table),
  against a whole Python process that reads the same files with pytrec_eval's parsers,
  scores them with ``RelevanceEvaluator`` and prints the means. Target: ours <= 0.3x theirs.
* ``evaluate()`` from dicts: ``evaluate(qrels_dict, run_dict, measures).aggregate`` against
  ``RelevanceEvaluator(qrels_dict, measures).evaluate(run_dict)`` plus the means, alternated
  inside one process, on the dicts of the unsorted run (loaded once, untimed). Target: ours
  <= 1.0x.
* ``workbench --help``: the whole process. Target: < 0.3 s.

``--block-rows N`` passes a block size to ``workbench eval`` (through the Python API, as the CLI
has no such option): with N below the run's rows, the run is scored in parts.

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
from pathlib import Path
from statistics import median

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

ours(), theirs()  # untimed: the first call imports what the engine imports lazily
rounds = {"ours": [], "theirs": []}
for _ in range(repeat):  # alternate: the machine's load weighs on both alike
    for name, fn in (("ours", ours), ("theirs", theirs)):
        t = time.process_time()
        fn()
        rounds[name].append(time.process_time() - t)
print(json.dumps(rounds))
"""


def generate(directory: Path, n_queries: int, n_docs: int, seed: int = 0) -> tuple[Path, Path, Path]:
    """qrels, sorted run, shuffled run (the same rows)."""
    rng = np.random.default_rng(seed)
    q = np.repeat(np.arange(n_queries), n_docs)
    # distinct docs inside a query: a random start plus a stride, over a ~10k-100k vocabulary
    vocab = max(10_000, n_queries * 5)
    docs = (rng.integers(0, vocab, size=(n_queries, 1)) + np.arange(n_docs) * 97) % (vocab + n_docs * 97)
    docs = docs.ravel()
    # BM25-like: gamma-distributed, 4 decimals; ~5% of the rows repeat the score before them
    scores = np.round(rng.gamma(2.0, 5.0, q.size), 4)
    tie = (rng.random(q.size) < 0.05) & (np.arange(q.size) % n_docs > 0)
    scores[tie] = scores[np.flatnonzero(tie) - 1]
    order = np.lexsort((-scores, q))
    rank = np.tile(np.arange(1, n_docs + 1), n_queries)
    qs, ds = np.char.add("q", q.astype(str)), np.char.add("d", docs.astype(str))

    def lines(rows: np.ndarray, ranks: np.ndarray) -> str:
        cols = [qs[rows], np.full(len(rows), "Q0"), ds[rows], ranks.astype(str),
                np.char.mod("%.4f", scores[rows]), np.full(len(rows), "bench")]
        return "\n".join(" ".join(r) for r in zip(*(c.tolist() for c in cols))) + "\n"

    sorted_run = directory / "run_sorted.txt"
    text = lines(order, rank)
    sorted_run.write_text(text)
    # the same rows as another tool may write them: tab-separated, CR LF line ends
    (directory / "run_tabs_crlf.txt").write_bytes(text.replace(" ", "\t").replace("\n", "\r\n").encode())
    del text
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


def once(argv: list[str]) -> tuple[float, float]:
    """CPU seconds (user + system) and peak RSS (MB) of one whole process (os.wait4's usage)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env(), cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by subprocess
        if proc.returncode:
            err.seek(0)
            raise SystemExit(f"{' '.join(argv[:4])} ... failed:\n{err.read().decode()}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def paired(a: list[str], b: list[str], rounds: int) -> dict:
    """Two commands run alternately ``rounds`` times: each one's CPU seconds and peak RSS per
    round, and the per-round ratios a / b."""
    cpu_a, cpu_b, rss_a, rss_b = [], [], [], []
    for _ in range(rounds):
        for argv, cpu, rss in ((a, cpu_a, rss_a), (b, cpu_b, rss_b)):
            c, m = once(argv)
            cpu.append(c)
            rss.append(m)
    return {"a": cpu_a, "b": cpu_b, "rss_a": max(rss_a), "rss_b": max(rss_b),
            "ratios": [x / y for x, y in zip(cpu_a, cpu_b)]}


BLOCKS = """
import sys
from workbench.services.evaluation.evaluate import evaluate_files
(result,) = evaluate_files(sys.argv[1], [sys.argv[2]], sys.argv[4].split(","), block_rows=int(sys.argv[3])).values()
for m, v in result.aggregate.items():
    print(f"{m}\t{v:.4f}")
"""


def ours_cmd(qrels: Path, run: Path, fmt: str = "table", block_rows: int | None = None) -> list[str]:
    if block_rows is not None and fmt != "json":
        return [sys.executable, "-c", BLOCKS, str(qrels), str(run), str(block_rows), ",".join(OURS)]
    argv = [sys.executable, "-m", "workbench", "eval", str(qrels), str(run), "--format", fmt]
    for m in OURS:
        argv += ["-m", m]
    return argv


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


def dicts_task(qrels: Path, run: Path, rounds: int) -> dict:
    """In-process CPU seconds of ``evaluate()`` and pytrec_eval on the same dicts, alternated
    inside one process (the dicts are loaded once, untimed)."""
    out = subprocess.run([sys.executable, "-c", DICTS_TASK, str(qrels), str(run), str(rounds), ",".join(OURS),
                          ",".join(PTE)], capture_output=True, text=True, env=env(), check=True, cwd=REPO)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return {"a": got["ours"], "b": got["theirs"], "rss_a": None, "rss_b": None,
            "ratios": [x / y for x, y in zip(got["ours"], got["theirs"])]}


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--docs", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5, help="alternated rounds per row (default 5)")
    ap.add_argument("--block-rows", type=int, default=None,
                    help="score the files in parts of this many rows (default: the engine's default)")
    ap.add_argument("--generate-into", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.generate_into is not None:  # the child that writes the data (see below)
        generate(args.generate_into, args.queries, args.docs)
        return
    print(load())
    with tempfile.TemporaryDirectory() as tmp:
        # written by a child process: this one stays small, and the peak RSS a forked process
        # reports starts from its parent's size
        subprocess.run([sys.executable, __file__, "--queries", str(args.queries), "--docs", str(args.docs),
                        "--generate-into", tmp], check=True)
        qrels, sorted_run, unsorted_run = (Path(tmp) / n for n in ("qrels.txt", "run_sorted.txt", "run_unsorted.txt"))
        n = args.queries * args.docs
        print(f"{args.queries:,} queries x {args.docs} docs = {n:,} run rows, string ids (q123/d4567), "
              f"~5% tied scores; {args.rounds} alternated rounds per row")
        tabs_crlf = Path(tmp) / "run_tabs_crlf.txt"
        diff = max(check_same_means(qrels, r) for r in (sorted_run, unsorted_run, tabs_crlf))
        print(f"check: max |ours - pytrec_eval| over the five means = {diff:.1e} (pytrec_eval printed to 4 decimals)")
        rows = []
        for label, run in (("sorted rows", sorted_run), ("scattered rows", unsorted_run),
                           ("sorted, tabs and CR LF", tabs_crlf)):
            got = paired(ours_cmd(qrels, run, block_rows=args.block_rows), pte_cmd(qrels, run), args.rounds)
            rows.append((f"workbench eval, files, {label}", got, "<= 0.30"))
        rows.append(("evaluate() from dicts, scattered rows", dicts_task(qrels, unsorted_run, args.rounds), "<= 1.00"))
        print()
        print(f"  {'what':<44} {'workbench':>10} {'pytrec_eval':>12} {'ratio':>6} {'min-max':>11}  "
              f"{'peak RSS MB':>14}  target")
        for what, got, target in rows:
            r = got["ratios"]
            rss = f"{got['rss_a']:.0f} / {got['rss_b']:.0f}" if got["rss_a"] else ""
            print(f"  {what:<44} {median(got['a']):>9.3f}s {median(got['b']):>11.3f}s {median(r):>6.2f} "
                  f"{min(r):>5.2f}-{max(r):<5.2f}  {rss:>14}  {target}")
        helps = [once([sys.executable, "-m", "workbench", "--help"])[0] for _ in range(args.rounds)]
        print(f"  {'workbench --help (whole process, CPU)':<44} {median(helps):>9.3f}s {'':>12} {'':>6} "
              f"{'':>11}  {'':>14}  < 0.3 s")
        print("\nCPU seconds: medians over the rounds; ratio = workbench / pytrec_eval per round (median, min-max;"
              " < 1: workbench cheaper)")
    print(load())


if __name__ == "__main__":
    main()
