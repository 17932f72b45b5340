"""Stored ranks follow the order the evaluation reads a run in (trec_eval's: score descending,
ties by item id descending), so pooling depth, judged@k and coverage see what nDCG scores, and
an exported run imports back with the same ranks. The demo's BM25 run has hundreds of tied
scores and RRF ties are frequent, so these checks have plenty of ties to fail on."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.support.templates import demo_project
from workbench.retrieval.bm25 import Bm25Params
from workbench.services.qrels.export import export_run
from workbench.services.ingest import import_file
from workbench.services.retrieval.runs import run_bm25, run_hybrid
from workbench.store.database import Database
from workbench.store.runs import read_run_rows


def _trec_order_ranks(rows: pd.DataFrame, id_col: str) -> pd.Series:
    """The oracle: sort each query by score descending, then id descending (Python string order
    equals trec_eval's byte order for these ids), and number the rows."""
    order = rows.sort_values(["query_id", "score", id_col], ascending=[True, False, False], kind="stable")
    return (order.groupby("query_id", sort=False).cumcount() + 1).reindex(rows.index)


def _ties(rows: pd.DataFrame) -> int:
    return int((rows.groupby(["query_id", "score"]).size() > 1).sum())


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ties") / "demo.duckdb"
    demo_project(path)  # a copy of the worker's init --demo template
    with Database(path) as db:
        # a different BM25 (no stemming, no stopwords, flatter length norm) ranks differently, so
        # many items sit at one rank in one run only: equal RRF scores
        run_bm25(db, "sections", "bm25-b", k=30, params=Bm25Params(stemmer=None, stopwords=None, b=0.2))
        run_hybrid(db, "hyb", ["bm25", "bm25-b"], k=50)
    return path


@pytest.mark.parametrize("run", ["bm25", "hyb"])
def test_stored_ranks_are_the_evaluation_order(demo, run):
    with Database(demo) as db:
        rows = read_run_rows(db, run)
    assert _ties(rows) >= 20  # ties to get wrong
    assert (rows["rank"] == _trec_order_ranks(rows, "chunk_id")).all()
    assert rows.groupby("query_id")["rank"].max().max() <= (100 if run == "bm25" else 50)


def test_an_exported_run_imports_back_with_the_same_ranks(demo, tmp_path):
    out = tmp_path / "hyb.txt"
    with Database(demo) as db:
        export_run(db, "hyb", out)
        import_file(db, "run", out, name="hyb-again")
        before, after = read_run_rows(db, "hyb"), read_run_rows(db, "hyb-again")
    key = ["query_id", "chunk_id"]
    merged = before.merge(after, on=key, suffixes=("", "_again"))
    assert len(merged) == len(before) == len(after)
    assert (merged["rank"] == merged["rank_again"]).all()
    assert (merged["score"] == merged["score_again"]).all()
