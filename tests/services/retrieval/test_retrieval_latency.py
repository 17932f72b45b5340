"""Per-query latency of the runs our retrievers make (bm25, dense, hybrid, from-doc).

The oracle for p50/p95 is numpy's percentile over the values stored in ``run_latencies``
(read back from the DuckDB file), never the service's own summary.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.support.prerequisites import require
from tests.support.templates import demo_project
from workbench.services.chunking import create_chunking
from workbench.services.evaluation.views import latencies as chart_latencies
from workbench.services.retrieval.runs import (
    list_runs,
    map_doc_run,
    run_bm25,
    run_dense,
    run_hybrid,
)
from workbench.services.retrieval.latency import import_latencies
from workbench.store.corpus import read_queries, write_documents, write_queries
from workbench.store.database import Database
from workbench.store.latencies import read_latencies
from workbench.store.runs import read_run_info, read_run_rows, set_run_scope, write_run


def _params(db: Database, run: str) -> dict:
    params = read_run_info(db, [run]).loc[0, "params"]
    return json.loads(params) if isinstance(params, str) else params


def _check_latency_record(db: Database, run: str, query_ids: list[str]) -> np.ndarray:
    """One latency per query, all > 0; params p50/p95 equal numpy over the stored values."""
    stored = read_latencies(db, [run])
    assert sorted(stored["query_id"]) == sorted(query_ids)
    assert stored["query_id"].is_unique
    values = stored["latency_ms"].to_numpy(dtype=float)
    assert (values > 0).all() and np.isfinite(values).all()
    params = _params(db, run)
    assert params["latency_p50_ms"] == pytest.approx(np.percentile(values, 50), rel=1e-12)
    assert params["latency_p95_ms"] == pytest.approx(np.percentile(values, 95), rel=1e-12)
    assert params["latency_ms"] == params["latency_p95_ms"]  # what the quality-vs-latency chart reads
    return values


def test_cli_bm25_run_on_the_demo_stores_one_latency_per_query(cli, db_path):
    demo_project(db_path)  # what `init --demo` builds: a copy of the worker's template
    done = cli("--db", str(db_path), "retrieve", "bm25", "--chunking", "sections", "--name", "b", "--no-progress")
    assert done.returncode == 0, done.stderr
    with Database(db_path) as db:
        queries = read_queries(db)["query_id"].astype(str).tolist()
        values = _check_latency_record(db, "b", queries)
        listed = list_runs(db).set_index("name")
        chart = chart_latencies(db, ["b"])
    assert len(values) == len(queries) == 44
    # The CLI line, the run listing and the Evaluate chart show the same stored numbers.
    p50, p95 = np.percentile(values, 50), np.percentile(values, 95)
    assert f"p50 {p50:.2f} ms, p95 {p95:.2f} ms" in done.stdout
    assert listed.at["b", "latency_p50_ms"] == pytest.approx(p50) and listed.at["b", "timed_queries"] == 44
    assert chart == {"b": pytest.approx(p95)}
    shown = cli("--db", str(db_path), "retrieve", "list", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    runs = {r["name"]: r for r in json.loads(shown.stdout)["runs"]}
    assert runs["b"]["latency_ms"] == {"p50": round(p50, 3), "p95": round(p95, 3)}
    assert runs["b"]["timed_queries"] == 44


DOCS = {"d1": "Alpha beta gamma. The cat sat on the mat.", "d2": "Delta epsilon. Dogs bark at night.",
        "d3": "Zeta eta theta. Plants need light and water."}
QUERIES = {"q1": "cat on a mat", "q2": "barking dogs", "q3": "zzzz unknownword", "q4": "water for plants"}


@pytest.fixture
def db(tmp_path):
    with Database(tmp_path / "p.duckdb") as db:
        with db.transaction() as tx:
            write_documents(tx, pd.DataFrame({"doc_id": list(DOCS), "text": list(DOCS.values())}))
            write_queries(tx, pd.DataFrame({"query_id": list(QUERIES), "text": list(QUERIES.values())}))
        create_chunking(db, "doc", "document")
        yield db


def test_a_query_without_hits_still_has_a_latency(db):
    s = run_bm25(db, "doc", "b")
    rows = read_run_rows(db, "b")
    assert "q3" not in set(rows["query_id"])  # no query term is in the corpus
    values = _check_latency_record(db, "b", list(QUERIES))
    assert s.latency_p95_ms == pytest.approx(np.percentile(values, 95))


def test_hybrid_latency_is_the_sum_of_its_parts_plus_an_equal_fusion_share(db):
    run_bm25(db, "doc", "a")
    run_bm25(db, "doc", "b", k=2)
    run_hybrid(db, "h", ["a", "b"])
    stored = read_latencies(db, ["a", "b", "h"]).pivot(index="query_id", columns="run", values="latency_ms")
    _check_latency_record(db, "h", list(QUERIES))
    share = stored["h"] - stored["a"] - stored["b"]
    assert (share >= 0).all() and np.ptp(share.to_numpy()) == pytest.approx(0, abs=1e-9)


def test_hybrid_of_a_run_without_latencies_makes_none_up(db):
    run_bm25(db, "doc", "a")
    chunk_id = read_run_rows(db, "a")["chunk_id"].iloc[0]
    with db.transaction() as tx:  # an imported run: no latency sidecar
        write_run(tx, "ext2", "import", pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"], "chunk_id": [chunk_id],
                                                      "rank": [1], "score": [1.0]}))
        set_run_scope(tx, "ext2", "chunk", "doc")
    s = run_hybrid(db, "h", ["a", "ext2"])
    assert read_latencies(db, ["h"]).empty
    params = _params(db, "h")
    assert "latency_ms" not in params and "ext2" in params["latency"]
    assert np.isnan(s.latency_p95_ms)  # not recorded
    assert chart_latencies(db, ["h"]) == {}


def test_from_doc_keeps_the_source_runs_imported_latencies(db, tmp_path):
    with db.transaction() as tx:
        write_run(tx, "docs", "import", pd.DataFrame({"query_id": ["q1", "q1", "q2"], "doc_id": ["d1", "d2", "d2"],
                                                      "chunk_id": [None, None, None], "rank": [1, 2, 1],
                                                      "score": [2.0, 1.0, 3.0]}))
    with db.transaction() as tx:
        set_run_scope(tx, "docs", "doc", None)
    sidecar = tmp_path / "lat.jsonl"
    sidecar.write_text('{"query_id": "q1", "latency_ms": 12.5}\n{"query_id": "q2", "latency_ms": 40}\n')
    import_latencies(db, "docs", sidecar)
    map_doc_run(db, "docs", "doc", "mapped")
    stored = read_latencies(db, ["mapped"]).set_index("query_id")["latency_ms"].to_dict()
    assert stored == {"q1": 12.5, "q2": 40.0}
    assert _params(db, "mapped")["latency_p50_ms"] == pytest.approx(np.percentile([12.5, 40.0], 50))


@pytest.fixture(scope="module")
def model():
    try:
        from workbench.retrieval.dense import load_encoder

        return load_encoder()
    except Exception as exc:  # noqa: BLE001 - a missing optional dependency on a user's machine
        require(False, f"the offline dense model cannot be loaded ({exc}); pip install -e .[dense]")


def test_dense_times_each_query_and_ranks_as_a_batched_search_would(db, model):
    from workbench.retrieval.dense import encode, top_k

    s = run_dense(db, "doc", "d", encoder=model)
    values = _check_latency_record(db, "d", list(QUERIES))
    assert s.latency_p50_ms == pytest.approx(np.percentile(values, 50))
    # Oracle: all queries encoded in one batch and searched at once (the old path).
    from workbench.store.chunks import read_chunks

    chunks = read_chunks(db, "doc", with_text=True)
    matrix = encode(model, chunks["text"].tolist())
    qi, ci, score = top_k(encode(model, list(QUERIES.values())), matrix, 100)
    rows = read_run_rows(db, "d").sort_values(["query_id", "rank"])
    checked = 0
    for i, qid in enumerate(QUERIES):
        mine = rows.loc[rows["query_id"] == qid]
        assert mine["chunk_id"].tolist() == chunks["chunk_id"].to_numpy()[ci[qi == i]].tolist()
        assert mine["score"].to_numpy() == pytest.approx(score[qi == i], abs=1e-5)
        checked += 1
    assert checked == len(QUERIES)


def test_the_quality_latency_chart_reads_an_imported_sidecar(db, tmp_path):
    """An external run gets its latency from a JSONL sidecar only; the Evaluate chart reads the
    stored values (p95), not a parameter the import never writes."""
    with db.transaction() as tx:
        write_run(tx, "ext", "import", pd.DataFrame({"query_id": ["q1", "q2"], "doc_id": ["d1", "d2"],
                                                     "chunk_id": [None, None], "rank": [1, 1], "score": [1.0, 1.0]}))
    assert chart_latencies(db, ["ext"]) == {}
    sidecar = tmp_path / "lat.jsonl"
    values = [3.0, 5.0, 8.0, 100.0]
    sidecar.write_text("".join(json.dumps({"query_id": q, "latency_ms": v}) + "\n" for q, v in zip(QUERIES, values)))
    import_latencies(db, "ext", sidecar)
    assert chart_latencies(db, ["ext"]) == {"ext": pytest.approx(np.percentile(values, 95))}
