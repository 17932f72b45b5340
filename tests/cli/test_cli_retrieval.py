"""``workbench chunk / retrieve / pool / pool-stats`` in real subprocesses on the demo project."""

from __future__ import annotations

import json

import pytest

from workbench.services.pooling.pools import pool_stats
from workbench.store.chunks import read_chunks
from workbench.store.database import Database
from workbench.store.pools import read_pool, read_pool_pairs
from workbench.store.runs import read_run_info, read_run_rows


@pytest.fixture
def demo(cli, db_path):
    result = cli("--db", str(db_path), "init", "--demo")
    assert result.returncode == 0, result.stderr
    return db_path


def test_init_demo_prepares_sections_bm25_and_a_pool(demo, cli):
    with Database(demo) as db:
        pool = read_pool(db, "demo")
        pairs = read_pool_pairs(db, "demo")
        bm25 = read_run_rows(db, "bm25")
        info = read_run_info(db, ["bm25"]).iloc[0]
    assert (info["level"], info["chunking"]) == ("chunk", "sections")
    assert pool["depth"] == 20 and pool["runs"] == ["bm25"] and pool["chunking"] == "sections"
    # A one-run pool at depth 20 holds exactly each query's top 20 (or all it retrieved).
    expected = bm25.groupby("query_id").size().clip(upper=20)
    assert pairs.groupby("query_id").size().sort_index().tolist() == expected.sort_index().tolist()


def test_chunk_retrieve_pool_and_stats_end_to_end(demo, cli):
    db = ["--db", str(demo)]
    r = cli(*db, "chunk", "--name", "fixed500", "--strategy", "fixed", "--size", "500", "--overlap", "50",
            "--progress")
    assert r.returncode == 0, r.stderr
    assert "chunking 'fixed500'" in r.stdout and "chunk fixed500" in r.stderr  # progress bar on stderr
    assert "doc/s" in r.stderr

    r = cli(*db, "retrieve", "bm25", "--chunking", "fixed500", "--name", "bm25fx", "--k", "30",
            "--stemmer", "none", "--stopwords", "none", "--progress")
    assert r.returncode == 0, r.stderr
    assert "run 'bm25fx'" in r.stdout and "bm25 index" in r.stderr

    # stderr is a pipe here, not a terminal: without --progress no bar lands in a log or a file
    r = cli(*db, "retrieve", "bm25", "--chunking", "fixed500", "--name", "bm25fx2", "--k", "30")
    assert r.returncode == 0, r.stderr
    assert r.stderr == "" and r.stdout.count("run 'bm25fx2'") == 1
    r = cli(*db, "retrieve", "hybrid", "--chunking", "fixed500", "--name", "hyb",
            "--runs", "bm25fx,bm25fx2", "--rrf-k", "10", "--weights", "2,1")
    assert r.returncode == 0, r.stderr

    r = cli(*db, "pool", "--name", "main", "--runs", "bm25fx,bm25fx2", "--depth", "5")
    assert r.returncode == 0, r.stderr
    r = cli(*db, "pool", "--name", "main", "--runs", "hyb", "--add")
    assert r.returncode == 0, r.stderr
    assert "added runs ['hyb'] at depth 5" in r.stdout

    r = cli(*db, "pool-stats", "--name", "main", "--format", "json", "--k", "5")
    assert r.returncode == 0, r.stderr
    stats = json.loads(r.stdout)
    with Database(demo) as database:
        chunks = read_chunks(database, "fixed500")
        pairs = read_pool_pairs(database, "main")
        hyb = read_run_info(database, ["hyb"]).iloc[0]
        direct = pool_stats(database, "main", k=5)
    assert len(chunks) > 41 and chunks["chunk_id"].str.startswith("fixed500:").all()
    assert hyb["params"]["weights"] == {"bm25fx": 2.0, "bm25fx2": 1.0} and hyb["params"]["rrf_k"] == 10
    assert stats["summary"]["pairs"] == len(pairs) == direct.pairs
    assert stats["pool"]["runs"] == ["bm25fx", "bm25fx2", "hyb"]
    assert [c["run_id"] for c in stats["contributions"]] == ["bm25fx", "bm25fx2", "hyb"]
    assert sum(s["pool_size"] for s in stats["sizes"]) == len(pairs)
    assert {j["run_id"]: j["judged_at_k"] for j in stats["judged_at_k"]} == pytest.approx(
        dict(zip(direct.judged["run_id"], direct.judged["judged_at_k"])))

    table = cli(*db, "pool", "--name", "main", "--stats")
    assert table.returncode == 0, table.stderr
    assert "judged@10 per run" in table.stdout and "leave-one-run-out" in table.stdout


def test_errors_are_one_line_with_a_fix(demo, cli):
    db = ["--db", str(demo)]
    r = cli(*db, "chunk", "--name", "sections", "--strategy", "section")
    assert r.returncode == 4 and "already exists" in r.stderr and "Traceback" not in r.stderr
    r = cli(*db, "retrieve", "bm25", "--chunking", "missing", "--name", "x")
    assert r.returncode == 4 and "workbench chunk" in r.stderr
    r = cli(*db, "pool", "--name", "p", "--runs", "bm25,nope")
    assert r.returncode == 3 and "unknown run 'nope' in" in r.stderr
    r = cli(*db, "retrieve", "hybrid", "--name", "h", "--runs", "bm25,bm25")
    assert r.returncode == 3 and "twice" in r.stderr


def test_from_doc_maps_an_imported_document_run(demo, cli):
    from tests.support.retrieval_fixtures import write_chunk_run

    with Database(demo) as database:
        docs = read_chunks(database, "sections").drop_duplicates("doc_id")["doc_id"].tolist()[:2]
        write_chunk_run(database, "trec", [("q001", docs[0], 1), ("q001", docs[1], 2)], level="doc")
        first_chunks = read_chunks(database, "sections").query("seq == 0").set_index("doc_id")["chunk_id"]
        n_all = int(read_chunks(database, "sections")["doc_id"].isin(docs).sum())
    r = cli("--db", str(demo), "retrieve", "from-doc", "--source", "trec", "--chunking", "sections",
            "--name", "trec_first")
    assert r.returncode == 0, r.stderr
    r = cli("--db", str(demo), "retrieve", "from-doc", "--source", "trec", "--chunking", "sections",
            "--name", "trec_all", "--rule", "all")
    assert r.returncode == 0, r.stderr
    r = cli("--db", str(demo), "pool", "--name", "mixed", "--runs", "bm25,trec")
    assert r.returncode == 3 and "retrieve from-doc" in r.stderr
    with Database(demo) as database:
        first = read_run_rows(database, "trec_first")
        every = read_run_rows(database, "trec_all")
    assert first["chunk_id"].tolist() == [first_chunks[docs[0]], first_chunks[docs[1]]]
    assert first["rank"].tolist() == [1, 2]
    assert len(every) == n_all and every["rank"].tolist() == list(range(1, n_all + 1))


@pytest.mark.slow
def test_dense_cli_on_a_tiny_corpus_uses_the_cache_the_second_time(cli, db_path, tmp_path_factory):
    from tests.support.retrieval_fixtures import default_onnx_export, write_corpus
    from workbench.store.embeddings import count_embeddings

    default_onnx_export(tmp_path_factory)  # the run's one export of the default model
    with Database(db_path) as database:
        write_corpus(database)
    db = ["--db", str(db_path)]
    assert cli(*db, "chunk", "--name", "whole", "--strategy", "document").returncode == 0
    first = cli(*db, "retrieve", "dense", "--chunking", "whole", "--name", "d1", "--k", "2", "--progress")
    assert first.returncode == 0, first.stderr
    assert "encoded 4" in first.stdout and "encode whole" in first.stderr
    second = cli(*db, "retrieve", "dense", "--chunking", "whole", "--name", "d2", "--k", "2", "--progress")
    assert second.returncode == 0, second.stderr
    assert "encoded 0" in second.stdout and "cached 4" in second.stdout
    assert "encode whole" not in second.stderr  # no chunk encoding bar: nothing to encode
    with Database(db_path) as database:
        assert count_embeddings(database, "whole") == 4
        top = read_run_rows(database, "d2").query("query_id == 'q2'").iloc[0]
    assert top["doc_id"] == "plants"
