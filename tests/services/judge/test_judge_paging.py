"""The judge's streaming pages: keyset paging over pending units, and answers shared across pages.

The runner reads the next page while the current one is being sent (so that requests never
wait at a page boundary), which means a page is read before the answers of earlier pages are
stored. These tests make the pages tiny so that every boundary is crossed under concurrency.
"""

from __future__ import annotations

import pytest

from tests.llm.judge_project import demo_project, judge_settings, judgment_calls, pair_texts, query
from tests.support.openai_server import running_server
from workbench.services.judge import jobs as judge
from workbench.store import judging as store
from workbench.store.database import Database

KEY = "sk-test-paging-0123456789abcdef"
TWIN = "zz-twin"


@pytest.fixture
def project(tmp_path):
    return demo_project(tmp_path / "project.duckdb")


def _units(db, **extra):
    return store.pending_units(db, job_id=-1, pool="demo", level="chunk", prefix="p\x1f", samples=2,
                               limit=30, **extra)


def test_pages_after_a_unit_key_add_up_to_the_whole_pending_list(project):
    db = Database(project)
    try:
        whole = _units(db)
        pages, after = [], None
        while True:
            page = _units(db, page=7, after=after)
            if page.empty:
                break
            pages.append(page)
            after = store.unit_key(page.iloc[-1])
    finally:
        db.close()
    assert len(whole) == 60 and len(pages) == 9  # 30 pairs x 2 samples in pages of 7
    paged = [tuple(r) for p in pages for r in p[["query_id", "doc_id", "chunk_id", "sample", "cache_key"]].itertuples(index=False)]
    assert paged == [tuple(r) for r in whole[["query_id", "doc_id", "chunk_id", "sample", "cache_key"]].itertuples(index=False)]
    assert len(set(paged)) == 60


def _add_twin_query(path):
    """A query with q001's text and description, pooled with q001's chunks at the same
    priorities: its pairs have the same cache keys as q001's and fall on other pages."""
    db = Database(path)
    try:
        with db.transaction() as tx:
            tx.execute(f"INSERT INTO queries SELECT '{TWIN}', text, description, tags FROM queries WHERE query_id = 'q001'")
            tx.execute(f"""INSERT INTO pool_pairs (pool, query_id, doc_id, chunk_id, priority, rrf_score)
                           SELECT pool, '{TWIN}', doc_id, chunk_id, priority, rrf_score FROM pool_pairs
                           WHERE pool = 'demo' AND query_id = 'q001'""")
    finally:
        db.close()


@pytest.mark.parametrize("page_units", [1, 3])
def test_tiny_pages_judge_every_pair_once_and_send_each_text_once(project, monkeypatch, page_units):
    _add_twin_query(project)
    monkeypatch.setattr(judge, "PAGE_UNITS", page_units)
    limit = 120
    with running_server(latency=0.02) as server:
        spec = judge.resolve_spec(judge_settings(server.base_url, concurrency=8), api_key=KEY)
        report = judge.run_job(project, "demo", spec, limit=limit)
        calls = judgment_calls(server)
    assert report.state == "finished"
    stored = query(project, """SELECT query_id, doc_id, chunk_id, status, grade, cached FROM judgments
                               WHERE job_id = ? ORDER BY query_id, doc_id, chunk_id""", [report.job_id])
    assert len(stored) == limit and not stored.duplicated(["query_id", "doc_id", "chunk_id"]).any()
    assert set(stored["status"]) == {"ok"}
    # Oracle: distinct (query text, description, passage) among the judged pairs, read
    # independently of the judge's own cache keys.
    texts = pair_texts(project).merge(
        query(project, "SELECT query_id, text, coalesce(description, '') AS description FROM queries"), on="query_id")
    judged = stored.merge(texts, on=["query_id", "doc_id", "chunk_id"])
    distinct = judged[["text", "description", "passage"]].drop_duplicates()
    twins = judged[judged["query_id"] == TWIN]
    assert len(judged) == limit and len(twins) > 0
    assert len(distinct) < limit  # the twin's pairs repeat texts judged on other pages
    assert calls == len(distinct)
    assert int(stored["cached"].sum()) == limit - len(distinct)
    # A repeated text gets the same grade as its first judgment.
    by_text = judged.groupby(["text", "description", "passage"])["grade"].nunique()
    assert (by_text == 1).all()
