"""The demo project's pipeline after loading: a section chunking, a BM25 run and a pool.

``workbench init --demo`` calls :func:`prepare_demo` right after the demo corpus is loaded, so
a new user lands on a project whose Retrieve & Pool page already shows a pool. Dense
retrieval is left out on purpose: loading the model and encoding the demo chunks takes about
12 s on two CPU cores, too slow for ``init`` (run ``workbench retrieve dense`` afterwards).
"""

from __future__ import annotations

from workbench.config import load_settings
from workbench.services.chunking import create_chunking
from workbench.services.pooling import build_pool
from workbench.services.retrieval import run_bm25
from workbench.store.database import Database

DEMO_CHUNKING = "sections"
DEMO_RUN = "bm25"
DEMO_POOL = "demo"


def prepare_demo(db: Database, *, depth: int | None = None) -> dict[str, int]:
    """Chunk the demo by sections, run BM25 (top 100) and pool it at ``depth``.

    ``depth`` defaults to the ``pool.depth`` setting (file / environment layers). Returns row
    counts ``{"chunks", "run_rows", "pool_pairs"}``.
    """
    if depth is None:
        depth = int(load_settings().get("pool", "depth"))
    chunking = create_chunking(db, DEMO_CHUNKING, "section")
    run = run_bm25(db, DEMO_CHUNKING, DEMO_RUN, k=100)
    pool = build_pool(db, DEMO_POOL, [DEMO_RUN], depth)
    return {"chunks": chunking.chunks, "run_rows": run.rows, "pool_pairs": pool.pairs_total}
