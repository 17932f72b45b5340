"""The retriever registry is the one place a retriever is declared: the CLI's ``retrieve``
sub-commands and flags, ``Project.retrieve``'s options and the sweep's grid come from it, and
every run (single or sweep cell) is stored by ``runs.store_run``. A retriever added as one
registry entry (here a toy one, defined in this test) is runnable from the CLI, the API and a
sweep without touching them."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from workbench.api import Project
from workbench.cli import build_parser, main
from workbench.errors import ConfigError
from workbench.services.evaluation import sweep
from workbench.services.retrieval import registry
from workbench.services.retrieval.registry import RETRIEVERS, Retriever, option, run_retriever
from workbench.store.database import Database
from workbench.store.runs import read_run_info, read_run_rows

DOCS = {"d1": "apples and pears grow on trees", "d2": "trains run late on monday", "d3": "pears are sweet"}
QUERIES = {"q1": "pears", "q2": "trains late"}


@pytest.fixture
def project(tmp_path) -> Project:
    project = Project.create(tmp_path / "p.duckdb")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in DOCS.items()))
    queries = tmp_path / "queries.tsv"
    queries.write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
    project.import_corpus(corpus)
    project.import_queries(queries)
    project.chunk("docs", "document")
    return project


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_cli_retrieve_subcommands_and_flags_are_the_registry():
    retrieve = _subcommands(build_parser())["retrieve"]
    commands = _subcommands(retrieve)
    assert set(commands) == set(RETRIEVERS) | {"list"}
    for name, spec in RETRIEVERS.items():
        actions = {a.option_strings[0]: a for a in commands[name]._actions if a.option_strings}
        assert actions["--chunking"].required == (spec.chunking == "required")
        for p in spec.parameters:
            action = actions[p.flag]
            assert action.required == p.required, (name, p.name)
            if not p.required:
                assert action.default == p.default, (name, p.name)
            assert tuple(action.choices or ()) == tuple(p.choices or ()), (name, p.name)


def test_api_options_are_the_registry_parameters(project):
    with pytest.raises(ConfigError) as err:
        project.retrieve("dense", name="x", chunking="docs", k1=0.9)  # a bm25 option
    assert "k1=" in str(err.value) and "model=" in str(err.value)
    with pytest.raises(ConfigError, match="chunking="):
        project.retrieve("bm25", name="x")
    with pytest.raises(ConfigError, match="runs="):
        project.retrieve("hybrid", name="x")
    with pytest.raises(ConfigError, match="unknown retriever 'tfidf'"):
        project.retrieve("tfidf", name="x", chunking="docs")


def test_api_and_cli_make_the_same_run(project):
    project.retrieve("bm25", name="api", chunking="docs", k=2, k1=0.9, b=0.4, stemmer="none")
    assert main(["--db", str(project.path), "retrieve", "bm25", "--chunking", "docs", "--name", "cli", "--k", "2",
                 "--k1", "0.9", "--b", "0.4", "--stemmer", "none", "--no-progress"]) == 0
    with Database(project.path) as db:
        a, b = read_run_rows(db, "api"), read_run_rows(db, "cli")
        info = read_run_info(db, ["api", "cli"]).set_index("name")
    pd.testing.assert_frame_equal(a.drop(columns="run_id", errors="ignore"), b.drop(columns="run_id", errors="ignore"))
    params = {n: {k: v for k, v in info.loc[n, "params"].items() if not k.startswith("latency")} for n in info.index}
    assert params["api"] == params["cli"] and params["api"]["k1"] == 0.9 and params["api"]["stemmer"] is None


# -- a retriever added as one registry entry ---------------------------------------------------

@dataclass(frozen=True)
class LengthOptions:
    longest: bool = option(True, "rank longer chunks first (else shorter first)")


def _length_run(db, request):
    """A toy retriever: every query ranks the chunks by their length."""
    from workbench.services.retrieval.runs import RunSummary, Workspace, ranked_rows, store_run

    ws = request.workspace or Workspace()
    chunks, queries = ws.chunks(db, request.chunking), ws.queries(db)
    length = (chunks["end"] - chunks["start"]).to_numpy(dtype=float)
    score = length if request.options.longest else -length
    n = min(request.k, len(chunks))
    order = np.argsort(-score, kind="stable")[:n]
    qi = np.repeat(np.arange(len(queries)), n)
    ci = np.tile(order, len(queries))
    rows = ranked_rows(queries, chunks, qi, ci, score[ci])
    latency = pd.DataFrame({"query_id": queries["query_id"].astype(str), "latency_ms": 0.0})
    written, params = store_run(db, request.name, "length", rows,
                                {"longest": request.options.longest, "k": request.k, **(request.extra_params or {})},
                                "chunk", request.chunking, latency, how="not measured (toy)")
    return RunSummary(request.name, "length", "chunk", request.chunking, len(queries), written, 0.0, params)


@pytest.fixture
def with_length(monkeypatch):
    monkeypatch.setitem(RETRIEVERS, "length", Retriever("length", "rank chunks by length", "By length",
                                                        LengthOptions, _length_run, sweep=()))


def test_a_new_retriever_runs_from_the_cli_the_api_and_the_sweep_grid(project, with_length):
    assert main(["--db", str(project.path), "retrieve", "length", "--chunking", "docs", "--name", "long",
                 "--k", "2", "--no-progress"]) == 0
    shortest = project.retrieve("length", name="short", chunking="docs", k=1, longest=False)
    assert shortest.retriever == "length" and shortest.rows == 2
    with Database(project.path) as db:
        long_rows = read_run_rows(db, "long")
        short_rows = read_run_rows(db, "short")
    # d1 (30 characters) is the longest document, d3 (15) the shortest.
    assert long_rows.loc[long_rows["rank"] == 1, "doc_id"].tolist() == ["d1", "d1"]
    assert short_rows["doc_id"].tolist() == ["d3", "d3"]
    chunkings, names = sweep.parse_grid("document", "bm25,length")
    assert names == ["bm25", "length"]
    assert "length" in sweep.parse_grid.__globals__["sweep_retrievers"]()


# -- a sweep's cells are the registry's runs ----------------------------------------------------

def _labelled(tmp_path) -> Database:
    from workbench.services.ingest import import_file
    from workbench.services.project.lifecycle import init_project

    docs = [{"_id": d, "text": t} for d, t in DOCS.items()]
    labels = [{"query_id": "q1", "doc_id": "d3", "start": 0, "end": 15, "grade": 2, "assessor": "sme-a"},
              {"query_id": "q2", "doc_id": "d2", "start": 0, "end": 10, "grade": 1, "assessor": "sme-a"}]
    for name, rows in (("docs", docs), ("labels", labels)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "queries.tsv").write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
    init_project(tmp_path / "s.duckdb")
    db = Database(tmp_path / "s.duckdb")
    import_file(db, "corpus", tmp_path / "docs.jsonl")
    import_file(db, "queries", tmp_path / "queries.tsv")
    import_file(db, "qrels", tmp_path / "labels.jsonl", format="spans")
    return db


def test_a_sweep_cell_is_the_single_run_of_its_retriever(tmp_path, with_length):
    db = _labelled(tmp_path)
    try:
        result = sweep.run_sweep(db, "document", "bm25,length", ["ndcg@10"], budgets=[100], labels="human", k=10)
        chunking = result.cells[0].chunking_name
        run_retriever(db, "bm25", name="single-bm25", chunking=chunking, k=10)
        run_retriever(db, "length", name="single-length", chunking=chunking, k=10)
        for retriever in ("bm25", "length"):
            cell = next(c for c in result.cells if c.retriever == retriever)
            a, b = read_run_rows(db, cell.run), read_run_rows(db, f"single-{retriever}")
            assert len(a) and a[["query_id", "doc_id", "chunk_id", "rank", "score"]].equals(
                b[["query_id", "doc_id", "chunk_id", "rank", "score"]]), retriever
            info = read_run_info(db, [cell.run, f"single-{retriever}"]).set_index("name")
            cell_params, single = info.loc[cell.run, "params"], info.loc[f"single-{retriever}", "params"]
            # One store path: the same parameters, the sweep's mark, the same latency record.
            assert cell_params.pop("sweep") is True
            assert {k: v for k, v in cell_params.items() if k not in ("latency_ms", "latency_p50_ms",
                                                                      "latency_p95_ms")} == \
                   {k: v for k, v in single.items() if k not in ("latency_ms", "latency_p50_ms", "latency_p95_ms")}
            assert db.query_all("SELECT count(*) FROM run_latencies WHERE run = ?", [cell.run])[0][0] == len(QUERIES)
        assert result.stages["bm25 index"]["calls"] == 1 and "store runs" in result.stages
    finally:
        db.close()


def test_run_retriever_refuses_options_of_another_retriever(project):
    with Database(project.path) as db, pytest.raises(ConfigError, match="Bm25Options"):
        run_retriever(db, "bm25", name="x", chunking="docs", options=registry.DenseOptions())
