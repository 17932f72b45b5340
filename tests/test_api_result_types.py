"""The Python API returns the services' own result types (no re-declared copies).

``Project.chunk`` returns :class:`~workbench.services.chunking.ChunkingSummary` and
``Project.retrieve`` :class:`~workbench.services.retrieval.runs.RunSummary`; the API's old names
``Chunking`` and ``RunInfo`` are the same classes, so code and docs naming them keep working.
"""

from __future__ import annotations

import pandas as pd

from workbench import api
from workbench.api import Project
from workbench.services.chunking import ChunkingSummary
from workbench.services.retrieval.runs import RunSummary


def _small(tmp_path) -> Project:
    project = Project.create(tmp_path / "p.duckdb")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "apples and pears"}\n{"_id": "d2", "text": "trains run late"}\n')
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\tapples\nq2\ttrains\n")
    project.import_corpus(corpus)
    project.import_queries(queries)
    return project


def test_old_names_are_the_service_types():
    assert api.Chunking is ChunkingSummary
    assert api.RunInfo is RunSummary
    from workbench.api import Chunking, RunInfo  # the names public docs and notebooks import

    assert (Chunking, RunInfo) == (ChunkingSummary, RunSummary)


def test_chunk_and_retrieve_return_the_service_results(tmp_path):
    project = _small(tmp_path)
    chunking = project.chunk("docs", "document")
    assert type(chunking) is ChunkingSummary
    assert (chunking.name, chunking.strategy, chunking.documents, chunking.chunks) == ("docs", "document", 2, 2)
    assert chunking.chunks_per_doc == {"min": 1, "mean": 1.0, "max": 1}
    frame = chunking.to_pandas()
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == [
        "name", "strategy", "documents", "chunks", "seconds"]

    run = project.retrieve("bm25", name="b", chunking="docs", k=1, stemmer="none", stopwords="none")
    assert type(run) is RunSummary
    # Each query's one term is in exactly one document: one hit per query.
    assert (run.name, run.retriever, run.level, run.chunking, run.queries, run.rows) == ("b", "bm25", "chunk",
                                                                                      "docs", 2, 2)
    assert run.params["k"] == 1 and run.stats["chunks"] == 2
    assert list(run.to_pandas().columns) == ["name", "retriever", "level", "chunking", "queries", "rows", "seconds",
                                             "latency_p50_ms", "latency_p95_ms"]


def test_pool_and_imports_return_the_service_results(tmp_path):
    from workbench.services.ingest.result import ImportResult
    from workbench.services.pooling.pools import PoolSummary

    assert api.Pool is PoolSummary and api.ImportSummary is ImportResult
    project = Project.create(tmp_path / "p.duckdb")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "apples and pears"}\n{"_id": "d2", "text": "trains run late"}\n')
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\tapples\nq2\ttrains\n")
    imported = project.import_corpus(corpus)
    assert type(imported) is ImportResult and imported.rows == 2 and imported.already_imported is None
    assert list(imported.to_pandas().columns) == ["kind", "path", "format", "name", "rows", "present", "excluded",
                                                  "already_imported", "level", "chunking", "seconds", "skipped"]
    assert bool(project.import_corpus(corpus).to_pandas().loc[0, "already_imported"]) is True
    project.import_queries(queries)
    project.chunk("docs", "document")
    project.retrieve("bm25", name="b", chunking="docs", k=2, stemmer="none", stopwords="none")
    pool = project.pool("p", ["b"], depth=1)
    assert type(pool) is PoolSummary
    # Each query's one term is in exactly one document: depth 1 pools one pair per query.
    assert (pool.runs, pool.depth, pool.queries, pool.pairs, pool.pairs_total, pool.pairs_added) == (
        ("b",), 1, 2, 2, 2, 2)
    frame = pool.to_pandas()
    assert list(frame.columns) == ["name", "level", "chunking", "depth", "runs", "queries", "pairs", "pairs_added",
                                   "seconds"]
    assert frame.loc[0, "runs"] == "b" and frame.loc[0, "pairs"] == 2
