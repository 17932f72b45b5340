"""The demo project's pipeline after loading: a section chunking, a BM25 run and a pool.

``workbench init --demo`` calls :func:`prepare_demo` right after the demo corpus is loaded, so
a new user lands on a project whose Retrieve & Pool page already shows a pool. Dense
retrieval is left out on purpose: loading the model and encoding the demo chunks is too slow
for ``init`` (docs/performance.md; run ``workbench retrieve dense`` afterwards).

Each step is its own transaction, so :func:`prepare_demo` is idempotent: a step whose result
already exists (chunking ``sections``, run ``bm25``, pool ``demo``) is skipped, and calling it
again after an interruption completes the preparation.
"""

from __future__ import annotations

from workbench.services.chunking import create_chunking
from workbench.services.pooling.pools import build_pool
from workbench.services.retrieval.runs import run_bm25
from workbench.store.chunks import chunking_exists
from workbench.store.database import Database
from workbench.store.pools import read_pool
from workbench.store.runs import run_exists

DEMO_CHUNKING = "sections"
DEMO_RUN = "bm25"
DEMO_POOL = "demo"


def prepare_demo(db: Database, *, depth: int) -> dict[str, int]:
    """Chunk the demo by sections, run BM25 (top 100) and pool it at ``depth``.

    ``depth`` is the ``pool.depth`` setting of the caller (``init`` passes the one resolved
    from ``--config``, the environment and the defaults). Returns the row counts of the steps
    it ran, among ``{"chunks", "run_rows", "pool_pairs"}``; steps done before are skipped.
    """
    done: dict[str, int] = {}
    if not chunking_exists(db, DEMO_CHUNKING):
        done["chunks"] = create_chunking(db, DEMO_CHUNKING, "section").chunks
    if not run_exists(db, DEMO_RUN):
        done["run_rows"] = run_bm25(db, DEMO_CHUNKING, DEMO_RUN, k=100).rows
    if read_pool(db, DEMO_POOL) is None:
        done["pool_pairs"] = build_pool(db, DEMO_POOL, [DEMO_RUN], depth).pairs_total
    return done
