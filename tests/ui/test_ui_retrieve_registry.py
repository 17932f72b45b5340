"""The Retrieve & Pool page's retriever tabs come from the retriever registry: a retriever added as
one registry entry gets a tab with a form generated from its parameters, and runs from it."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.services.retrieval.test_retriever_registry import LengthOptions, _length_run
from workbench.services.retrieval.registry import RETRIEVERS, Retriever
from workbench.store.database import Database
from workbench.store.runs import read_run_info, read_run_rows


def _page():
    from workbench.ui.views import retrieve

    retrieve.render()


def _run() -> AppTest:
    at = AppTest.from_function(_page, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def test_tabs_are_the_registry_retrievers_the_page_offers(demo_db):
    at = _run()
    labels = [t.label for t in at.tabs]
    offered = [spec.title for spec in RETRIEVERS.values() if spec.page]
    assert labels[:len(offered) + 1] == [*offered, "Run your own retriever"]
    assert "From a document run" not in labels  # from-doc: page=False


@pytest.fixture
def with_length(monkeypatch):
    monkeypatch.setitem(RETRIEVERS, "length", Retriever("length", "rank chunks by length", "By length",
                                                        LengthOptions, _length_run, sweep=()))


def test_a_new_registry_entry_gets_a_generated_form_that_runs(demo_db, with_length):
    at = _run()
    assert "By length" in [t.label for t in at.tabs]
    at.selectbox(key="length_chunking").select("sections")
    at.text_input(key="length_name").input("by-length")
    at.number_input(key="length_k").set_value(3)
    at.checkbox(key="length_longest").uncheck()
    next(b for b in at.button if b.label == "Run By length").click().run()
    assert not at.exception, at.exception
    assert any("by-length" in s.value for s in at.success), [e.value for e in at.error]
    with Database(demo_db) as db:
        info = read_run_info(db, ["by-length"]).iloc[0]
        rows = read_run_rows(db, "by-length")
    assert info["retriever"] == "length" and info["params"]["longest"] is False
    assert rows.groupby("query_id").size().max() == 3
