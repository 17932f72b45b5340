"""How fast the Label page gets the next pair with a million judgments stored.

Builds a project in a temporary DuckDB file with ``--judgments`` LLM judgments (default
1,000,000) over a document-level pool of the same size, draws a 200-pair calibration sample,
then times what the Label page does for every pair an SME labels, end to end through the
service layer on the file: store the label (``save_label``), then fetch what the page shows next
(``next_item`` with its query and document, ``my_state``, ``progress``). Prints p50/p95/max of
that round trip in milliseconds over ``--labels`` pairs; the issue's bar is p95 < 150 ms.

There is no peer tool doing this step, so the figures are absolute (this machine, same run).

    python benchmarks/label_bench.py [--judgments 1000000] [--labels 150] [--page-labels 40]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.services import calibration as cal
from workbench.store.corpus import write_documents, write_queries
from workbench.store.database import Database, insert_frame
from workbench.store.judgments import write_judgments
from workbench.store.pools import create_pool


def build(path: Path, n: int, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    queries = 500
    started = time.perf_counter()
    db = Database(path)
    docs = pd.DataFrame({"doc_id": [f"d{i}" for i in range(n)], "title": "t",
                         "text": "Some passage text about a topic. " * 20})
    qids = [f"q{i % queries}" for i in range(n)]
    with db.transaction() as tx:
        write_documents(tx, docs)
        write_queries(tx, pd.DataFrame({"query_id": [f"q{i}" for i in range(queries)],
                                        "text": [f"topic {i}" for i in range(queries)]}))
        create_pool(tx, "p", level="doc", chunking=None, depth=100, runs=["r"])
        insert_frame(tx, "pool_pairs", pd.DataFrame({"pool": "p", "query_id": qids, "doc_id": docs["doc_id"],
                                                     "chunk_id": None, "priority": 1, "rrf_score": 1.0}))
        write_judgments(tx, pd.DataFrame({"query_id": qids, "doc_id": docs["doc_id"], "start": 0, "end": 660,
                                          "grade": rng.integers(0, 4, n), "source": "llm", "assessor": "judge",
                                          "model": "m", "status": "ok"}))
    db.close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judgments", type=int, default=1_000_000)
    parser.add_argument("--labels", type=int, default=150)
    parser.add_argument("--page-labels", type=int, default=40,
                        help="pairs labelled through the Label page in AppTest (0: skip)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.duckdb"
        built = build(path, args.judgments)
        db = Database(path)
        try:
            t = time.perf_counter()
            cal.create_sample(db, "s", "p", seed=1)
            drawn = time.perf_counter() - t
            times = []
            item = cal.next_item(db, "s", "sme")
            for i in range(args.labels):
                t = time.perf_counter()
                cal.save_label(db, "s", "sme", item["position"], i % 4, seconds=1.0)
                item = cal.next_item(db, "s", "sme", after=item["position"])
                cal.my_state(db, "s", "sme", item["position"])
                cal.progress(db, "s", "sme")
                times.append((time.perf_counter() - t) * 1000)
            stored = db.query_value("SELECT count(*) FROM judgments")
        finally:
            db.close()
        page_ms = page_times(path, args.page_labels) if args.page_labels else None
    ms = np.array(times)
    print(f"project with {stored:,} judgments built in {built:.1f} s; 200-pair sample drawn in {drawn * 1000:.0f} ms")
    print(f"services, label + next pair, {len(ms)} pairs: p50 {np.percentile(ms, 50):.1f} ms, "
          f"p95 {np.percentile(ms, 95):.1f} ms, max {ms.max():.1f} ms (bar: p95 < 150 ms)")
    if page_ms is not None:
        print(f"Label page script run after a grade key (AppTest, no browser), {len(page_ms)} pairs: "
              f"p50 {np.percentile(page_ms, 50):.1f} ms, p95 {np.percentile(page_ms, 95):.1f} ms, "
              f"max {page_ms.max():.1f} ms")


def page_times(path: Path, labels: int) -> np.ndarray:
    """The Label page's whole script run (store the grade, rerun, draw the next pair) timed in
    Streamlit's AppTest on the same project: what the server does between a key press and the
    next pair (the browser's drawing is not included)."""
    import os

    from streamlit.testing.v1 import AppTest

    os.environ["WORKBENCH_DB"] = str(path)

    def page():
        from workbench.ui.views import label

        label.render()

    at = AppTest.from_function(page, default_timeout=120)
    at.session_state["annotator"] = "page-sme"
    at.run()
    out = []
    for i in range(labels):
        t = time.perf_counter()
        at.button(key=f"label_grade_s_{i % 2}").click().run()
        out.append((time.perf_counter() - t) * 1000)
        if at.exception:
            raise SystemExit(f"the page failed: {at.exception}")
    return np.array(out)


if __name__ == "__main__":
    main()
