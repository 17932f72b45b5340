"""First load of the Queries & Labels, Qrels and Overview pages on a 1M-judgment project.

Builds (once, reused when the file exists) a project of 10k queries, 100k short synthetic
documents and 1M ok LLM judgments plus 2k imported labels (``--pool``: and a document pool of
every judged pair), written in bulk through the store layer (``insert_frame`` of whole frames). Then, for each page, runs the page once in Streamlit's
AppTest in a fresh subprocess (so one page's caches and arena do not flatter the next) and
reports wall time of ``at.run()``, the CPU time the process spent in it (user + system, every
thread: on a shared machine wall time mostly measures the wait for a core) and the peak RSS
growth of that process over its RSS just before the run (``ru_maxrss`` after minus RSS
before). Rounds alternate the pages; the summary
gives median and min-max per page, with the machine load.

    PYTHONPATH=$PWD python benchmarks/pages_scale_bench.py --db /tmp/pages1m.duckdb --rounds 3

``--peer DIR``: another checkout (e.g. ``git worktree add DIR main``) measured alternately in
the same rounds, page by page; the summary adds this checkout's median time and MB over the peer's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PAGES = {"browse": "workbench.ui.views.browse", "qrels": "workbench.ui.views.qrels",
         "overview": "workbench.ui.views.overview"}


def build(path: Path, queries: int, documents: int, judgments: int, seed: int = 0, pool: bool = False,
          passed: bool = False) -> float:
    import numpy as np
    import pandas as pd

    from workbench.store.corpus import write_documents, write_queries
    from workbench.store.database import Database, insert_frame
    from workbench.store.judgments import write_judgments
    from workbench.store.pools import create_pool

    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    db = Database(path)
    words = np.array("the of river bank loan water money flood interest rate city bridge".split())
    texts = [" ".join(words[rng.integers(0, len(words), 30)]) for _ in range(documents)]
    docs = pd.DataFrame({"doc_id": [f"d{i}" for i in range(documents)], "title": [f"Doc {i}" for i in range(documents)],
                         "text": texts})
    qs = pd.DataFrame({"query_id": [f"q{i:05d}" for i in range(queries)],
                       "text": [f"question about topic {i}" for i in range(queries)]})
    qid = np.repeat(np.arange(queries), judgments // queries)
    did = rng.integers(0, documents, len(qid))
    frame = pd.DataFrame({"query_id": qs["query_id"].to_numpy()[qid], "doc_id": docs["doc_id"].to_numpy()[did],
                          "start": 0, "end": 50, "grade": rng.integers(0, 4, len(qid)), "source": "llm",
                          "assessor": "judge", "model": "m", "prompt_hash": "h", "status": "ok"})
    imported = pd.DataFrame({"query_id": qs["query_id"].to_numpy()[np.arange(2000) % queries],
                             "doc_id": docs["doc_id"].to_numpy()[rng.integers(0, documents, 2000)],
                             "start": 0, "end": 50, "grade": rng.integers(0, 4, 2000), "source": "imported",
                             "assessor": "qrels.txt", "status": "ok"})
    with db.transaction() as tx:
        write_documents(tx, docs)
        write_queries(tx, qs)
        write_judgments(tx, imported)
        for part in np.array_split(np.arange(len(frame)), 10):
            write_judgments(tx, frame.iloc[part])
        if pool:  # a document pool of every judged pair: the Overview and Qrels coverage then read it
            pairs = frame[["query_id", "doc_id"]].drop_duplicates()
            create_pool(tx, "p", level="doc", chunking=None, depth=100, runs=["r"])
            insert_frame(tx, "pool_pairs", pairs.assign(pool="p", chunk_id=None, priority=1, rrf_score=1.0))
    if passed:
        state = pass_the_gate(db)
        print(f"judge configuration: {state}", flush=True)
    db.close()
    return time.perf_counter() - started


def pass_the_gate(db, sample: str = "cal") -> str:
    """Make the judge configuration pass the gate through the services' own path: draw a
    calibration sample of the pool (seed 0), have an SME label every item with the judge's own
    grade (perfect agreement) and let the gate decide and store its verdict. Returns the state."""
    from workbench.services.calibration import labelling, samples, verdicts
    from workbench.store.calibration import read_sample_items

    samples.create_sample(db, sample, "p", size=200, seed=0)
    items = read_sample_items(db, sample)
    labelling.save_labels(db, sample, "sme1", {int(p): int(g) for p, g in zip(items["position"], items["judge_grade"])})
    states = verdicts.states(db)  # computes and stores the verdict, as the qrels rule would
    return ",".join(s.state for s in states)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def one(page: str) -> None:
    """Run ``page`` once in AppTest (this process) and print ``{"seconds", "mb"}``."""
    import importlib

    from streamlit.testing.v1 import AppTest

    importlib.import_module(PAGES[page])
    import workbench.ui.views.browse, workbench.ui.views.qrels, workbench.ui.views.overview  # noqa: E401,F401

    script = f"import {PAGES[page]} as m\nm.render()\n"
    at = AppTest.from_string(script, default_timeout=900)
    before = _rss_mb()
    used = resource.getrusage(resource.RUSAGE_SELF)
    t = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime + after.ru_stime) - (used.ru_utime + used.ru_stime)  # every thread's, DuckDB's too
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # an error the page shows (st.error) is a failed run too, not a fast one
    shown = [str(e.value) for e in at.error]
    print(json.dumps({"seconds": seconds, "cpu": cpu, "mb": peak - before, "exception": bool(at.exception or shown),
                      "error": (str(at.exception[0].message) if at.exception else " | ".join(shown))[:200]}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", default="/tmp/pages_scale_bench.duckdb")
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--documents", type=int, default=100_000)
    ap.add_argument("--judgments", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pool", action="store_true", help="also a document pool of every judged pair")
    ap.add_argument("--passed", action="store_true",
                    help="with --pool: the judge configuration passes the gate (its 1M labels are admitted)")
    ap.add_argument("--pages", default=",".join(PAGES))
    ap.add_argument("--peer", help="another checkout to measure alternately (ratios against it)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args.one)
        return
    path = Path(args.db)
    if not path.exists():
        took = build(path, args.queries, args.documents, args.judgments, pool=args.pool or args.passed,
                     passed=args.passed)
        print(f"built {path} in {took:.1f} s", flush=True)
    pages = args.pages.split(",")
    if not args.rounds:
        return
    checkouts = {"this": REPO} | ({"peer": Path(args.peer).resolve()} if args.peer else {})
    results: dict[tuple[str, str], list[dict]] = {(c, p): [] for c in checkouts for p in pages}
    for r in range(args.rounds):
        for page in (pages if r % 2 == 0 else pages[::-1]):
            for who in (list(checkouts) if r % 2 == 0 else list(checkouts)[::-1]):
                root = checkouts[who]
                env = dict(os.environ, WORKBENCH_DB=str(path), PYTHONPATH=str(root))
                script = root / "benchmarks" / "pages_scale_bench.py"
                out = subprocess.run([sys.executable, str(script), "--one", page], env=env, capture_output=True,
                                     text=True, cwd=root)
                line = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else json.dumps(
                    {"seconds": float("nan"), "cpu": float("nan"), "mb": float("nan"), "exception": True, "error": out.stderr[-300:]})
                res = json.loads(line)
                results[(who, page)].append(res)
                print(f"round {r} {who} {page}: {res}", flush=True)
    one_min, five, _ = os.getloadavg()
    print(f"machine: load average {one_min:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores")
    import statistics

    for (who, page), rs in results.items():
        s = [x["seconds"] for x in rs]
        c = [x.get("cpu", float("nan")) for x in rs]
        m = [x["mb"] for x in rs]
        print(f"{who:4s} {page:9s} seconds median {statistics.median(s):.1f} (min {min(s):.1f}, max {max(s):.1f}); "
              f"CPU seconds median {statistics.median(c):.2f} (min {min(c):.2f}, max {max(c):.2f}); "
              f"MB median {statistics.median(m):.0f} (min {min(m):.0f}, max {max(m):.0f})")
    if args.peer:
        for page in pages:
            mine, peer = results[("this", page)], results[("peer", page)]
            # a peer whose script predates the CPU figure: nan
            ratio = [statistics.median([x.get(k, float("nan")) for x in mine])
                     / statistics.median([x.get(k, float("nan")) for x in peer])
                     for k in ("seconds", "cpu", "mb")]
            print(f"{page:9s} this / peer: seconds {ratio[0]:.2f}x, CPU seconds {ratio[1]:.2f}x, MB {ratio[2]:.2f}x")


if __name__ == "__main__":
    main()
