"""The Retrieve & Pool page in Streamlit's AppTest: chunk, run BM25 and pool through its forms."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from workbench.services.project import init_project
from workbench.store.chunks import read_chunks
from workbench.store.database import Database
from workbench.store.pools import read_pool, read_pool_pairs
from workbench.store.runs import read_run_rows


def _page():
    from workbench.ui.views import retrieve

    retrieve.render()


@pytest.fixture
def demo_db(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "demo.duckdb"
    init_project(path, demo=True)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    return path


def _run() -> AppTest:
    at = AppTest.from_function(_page, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def _submit(at: AppTest, label: str) -> AppTest:
    button = next(b for b in at.button if b.label == label)
    button.click().run()
    assert not at.exception, at.exception
    return at


def test_page_shows_the_demo_pool_statistics(demo_db):
    at = _run()
    metrics = {m.label: m.value for m in at.metric}
    with Database(demo_db) as db:
        pairs = read_pool_pairs(db, "demo")
    assert metrics["Pairs"] == f"{len(pairs):,}"
    assert metrics["Queries"] == f"{pairs['query_id'].nunique():,}"
    assert len(at.get("vega_lite_chart")) == 3  # size, contributions, judged@k bar charts


def test_chunk_bm25_and_pool_through_the_page(demo_db):
    at = _run()
    at.text_input(key="chunk_name").input("fx")
    at.selectbox(key="chunk_strategy").select("fixed")
    at.number_input(key="chunk_size").set_value(400)
    _submit(at, "Create chunking")
    assert any("Chunking fx" in s.value for s in at.success)

    at.selectbox(key="bm25_chunking").select("fx")
    at.text_input(key="bm25_name").input("bm25fx")
    at.number_input(key="bm25_k").set_value(15)
    _submit(at, "Run BM25")
    assert any("bm25fx" in s.value for s in at.success), [e.value for e in at.error]

    at.text_input(key="pool_name").input("fxpool")
    at.multiselect(key="pool_runs").select("bm25fx")
    at.number_input(key="pool_depth").set_value(3)
    _submit(at, "Build pool")
    assert any("fxpool" in s.value for s in at.success), [e.value for e in at.error]

    with Database(demo_db) as db:
        chunks = read_chunks(db, "fx")
        run = read_run_rows(db, "bm25fx")
        pool = read_pool(db, "fxpool")
        pairs = read_pool_pairs(db, "fxpool")
    assert (chunks["end"] - chunks["start"]).max() == 400
    assert run.groupby("query_id").size().max() == 15
    assert pool["depth"] == 3 and pool["runs"] == ["bm25fx"]
    assert len(pairs) == run.query("rank <= 3").shape[0]


def test_errors_show_in_the_page(demo_db):
    at = _run()
    at.text_input(key="chunk_name").input("sections")  # the demo's chunking
    at.selectbox(key="chunk_strategy").select("section")
    _submit(at, "Create chunking")
    assert any("already exists" in e.value for e in at.error)
    at.text_input(key="pool_name").input("empty")
    _submit(at, "Build pool")
    assert any("no runs given" in e.value for e in at.error)


def test_names_and_pool_items_are_shown_literally(demo_db):
    at = _run()
    # The pool peek shows the item ids and text as escaped HTML, never as markdown.
    shown = " ".join(h.proto.body for h in at.get("html"))
    with Database(demo_db) as db:
        first = read_pool_pairs(db, "demo").sort_values(["query_id", "priority"]).iloc[0]
    assert f"priority 1 · {first['chunk_id']} · RRF" in shown
    assert not any(first["chunk_id"] in c.value for c in at.caption)
    # A name with markdown characters comes back escaped, so `*` and `_` render as typed.
    at.selectbox(key="bm25_chunking").select("sections")
    at.text_input(key="bm25_name").input("b*m*_25_")
    at.number_input(key="bm25_k").set_value(5)
    _submit(at, "Run BM25")
    assert any(r"b\*m\*\_25\_" in s.value for s in at.success), [e.value for e in at.error]
