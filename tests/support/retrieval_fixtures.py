"""Tiny corpora for the chunking, retrieval and pooling tests, written via store functions; and
:func:`shared_onnx_cache`, the ONNX model cache one test session shares (built under
:func:`tests.support.templates.session_lock`)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from workbench.store.corpus import write_documents, write_queries
from workbench.store.database import Database
from workbench.store.judgments import write_judgments
from workbench.store.runs import set_run_scope, write_run

DOCS = {
    "cats": "The cat sat on the mat. Cats love warm mats.",
    "dogs": "Dogs bark loudly in the park.",
    "plants": "Photosynthesis converts sunlight into chemical energy in green plants.",
    "stocks": "Stock markets fell sharply on Tuesday after the interest rate decision.",
}
QUERIES = {"q1": "cat on a mat", "q2": "how do plants turn light into energy"}


def write_corpus(db: Database, docs: dict[str, str] = DOCS, queries: dict[str, str] = QUERIES,
                 labels: list[dict] | None = None) -> None:
    with db.transaction() as tx:
        write_documents(tx, pd.DataFrame({"doc_id": list(docs), "text": list(docs.values())}))
        write_queries(tx, pd.DataFrame({"query_id": list(queries), "text": list(queries.values())}))
        if labels:
            frame = pd.DataFrame(labels)
            frame["source"] = "human"
            frame["assessor"] = "sme"
            frame["status"] = "ok"
            write_judgments(tx, frame)


def write_chunk_run(db: Database, name: str, rows: list[tuple], *, chunking: str = "doc",
                    level: str = "chunk") -> None:
    """A run from ``(query_id, chunk_id or doc_id, rank)`` tuples; chunk ids are ``chunking:doc:seq``."""
    records = []
    for query_id, item, rank in rows:
        if level == "chunk":
            doc_id = item.split(":")[1]
            records.append({"query_id": query_id, "doc_id": doc_id, "chunk_id": item, "rank": rank,
                            "score": 1.0 / rank})
        else:
            records.append({"query_id": query_id, "doc_id": item, "chunk_id": None, "rank": rank,
                            "score": 1.0 / rank})
    with db.transaction() as tx:
        write_run(tx, name, "test", pd.DataFrame(records))
        set_run_scope(tx, name, level, chunking if level == "chunk" else None)


def shared_onnx_cache(tmp_path_factory, *precisions: str) -> Path:
    """An ONNX model cache (``WORKBENCH_ONNX_CACHE``) fresh for this test session and shared by
    its workers and modules: the default model exported, fused and quantised from scratch once
    per run (not read from the user's ~/.cache), each of ``precisions`` built under the lock so two
    workers never export at the same time. ``tests/conftest.py`` points every test at this folder
    (its ``onnx_model_cache`` fixture)."""
    from workbench.retrieval import dense, onnx_dense

    from tests.support.templates import session_folder, session_lock

    model_dir = Path(dense.model_location(dense.DEFAULT_MODEL))
    before = os.environ.get("WORKBENCH_ONNX_CACHE")
    folder = session_folder(tmp_path_factory, "onnx-cache")[0]
    folder.mkdir(parents=True, exist_ok=True)
    for precision in precisions:
        # The lock is taken per precision: a worker that needs fp32 only waits for the export, not
        # for the quantisations another worker builds next.
        with session_lock(tmp_path_factory, "onnx-cache"):
            os.environ["WORKBENCH_ONNX_CACHE"] = str(folder)
            try:
                onnx_dense.model_files(model_dir, precision)  # a cache hit once any worker built it
            finally:
                if before is None:
                    os.environ.pop("WORKBENCH_ONNX_CACHE", None)
                else:
                    os.environ["WORKBENCH_ONNX_CACHE"] = before
    return folder


def default_onnx_export(tmp_path_factory) -> None:
    """Before a test whose dense runs take the default backend: when that is ONNX here, the run's
    fp32 export of the default model (:func:`shared_onnx_cache`, under the run's lock), so two
    workers that reach it at once export it once. Nothing when the default is PyTorch or the
    export cannot be made here: the test's own run meets that as it would have."""
    from workbench.errors import ConfigError
    from workbench.services.retrieval.runs import default_dense_backend

    if default_dense_backend() != "onnx":
        return
    try:
        shared_onnx_cache(tmp_path_factory, "fp32")
    except ConfigError:
        pass
