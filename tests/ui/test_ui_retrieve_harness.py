"""Retrieve & Pool's "Run your own retriever" tab and latency columns, in Streamlit's AppTest,
against a real retriever: a tiny ``http.server`` on 127.0.0.1 that answers from the demo's
chunks and fails one query on purpose."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.ui.html_tables import html_tables
from workbench.services.tags import query_tags
from workbench.store.chunks import read_chunks
from workbench.store.database import Database
from workbench.store.latencies import read_latencies
from workbench.store.runs import read_run_info, read_run_rows

FAILING = "q003"


def _page():
    from workbench.ui.views import retrieve

    retrieve.render()


class Retriever:
    """A loopback HTTP retriever: for each query, 3 demo chunks picked and scored from a hash of
    the query id; ``FAILING`` gets HTTP 500. Remembers every answer it gave."""

    def __init__(self, chunk_ids: list[str]):
        self.chunk_ids = chunk_ids
        self.answers: dict[str, list[dict]] = {}
        self.received: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                qid = body["query_id"]
                outer.received.append(qid)
                if qid == FAILING:
                    data = b"index offline for maintenance"
                    self.send_response(500)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                seed = int(hashlib.sha256(qid.encode()).hexdigest(), 16)
                picks = [outer.chunk_ids[(seed >> (8 * i)) % len(outer.chunk_ids)] for i in range(3)]
                answer = [{"chunk_id": c, "score": round(1.0 / (i + 1) + (seed % 7) / 100, 4)}
                          for i, c in enumerate(dict.fromkeys(picks))]
                outer.answers[qid] = answer
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/search"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def retriever(demo_db):
    with Database(demo_db) as db:
        chunk_ids = read_chunks(db, "sections")["chunk_id"].astype(str).tolist()
    with Retriever(chunk_ids) as r:
        yield r


def _run() -> AppTest:
    at = AppTest.from_function(_page, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


def _start(at: AppTest) -> AppTest:
    next(b for b in at.button if b.label == "Start").click().run()
    assert not at.exception, at.exception
    return at


def test_the_stored_run_equals_what_the_retriever_answered_and_the_failure_is_shown(demo_db, retriever):
    at = _run()
    at.text_input(key="harness_url").input(retriever.url)
    at.text_input(key="harness_name").input("mine")
    _start(at)
    assert not at.error, [e.value for e in at.error]

    with Database(demo_db) as db:
        rows = read_run_rows(db, "mine")
        params = read_run_info(db, ["mine"]).loc[0, "params"]
        stored = read_latencies(db, ["mine"])
    assert len(retriever.received) == 44  # every demo query was sent once
    # Every answered query: the stored ranking is the answer sorted by score (ties: answer order).
    checked = 0
    for qid, answer in retriever.answers.items():
        expected = [a["chunk_id"] for a in sorted(answer, key=lambda a: -a["score"])]
        mine = rows.loc[rows["query_id"] == qid].sort_values("rank")
        assert mine["chunk_id"].tolist() == expected
        assert mine["score"].tolist() == sorted((a["score"] for a in answer), reverse=True)
        checked += 1
    assert checked == 43 and set(rows["query_id"]) == set(retriever.answers)
    # The failing query: no rows, stored as failed with its error, shown with it on the page.
    assert FAILING not in set(rows["query_id"])
    assert [f["query_id"] for f in params["failures"]] == [FAILING]
    assert "HTTP 500: index offline for maintenance" == params["failures"][0]["error"]
    failures = html_tables(at)["harness_failures"]
    assert [(f["query"], f["error"]) for f in failures] == [(FAILING, "HTTP 500: index offline for maintenance")]
    # Latency: one per answered query; the page shows numpy's p50/p95 of the stored values.
    assert sorted(stored["query_id"]) == sorted(retriever.answers)
    values = stored["latency_ms"].to_numpy()
    p50, p95 = np.percentile(values, 50), np.percentile(values, 95)
    result = next(w.value for w in at.warning if "Run mine" in w.value)
    assert "43 of 44 queries answered" in result
    assert f"p50 {p50:,.1f} ms, p95 {p95:,.1f} ms" in result
    runs = {r["run"]: r for r in html_tables(at)["runs"]}
    assert (runs["mine"]["latency p50"], runs["mine"]["latency p95"]) == (f"{p50:,.1f} ms", f"{p95:,.1f} ms")
    # The page speaks in its own words: no CLI flags anywhere in what it shows.
    shown = [w.value for w in at.warning] + [s.value for s in at.markdown] + [c.value for c in at.caption]
    assert not any("--" in text for text in shown)


def test_a_tag_sends_only_its_queries_and_the_demo_bm25_run_shows_its_latency(demo_db, retriever):
    at = _run()
    with Database(demo_db) as db:
        tags = query_tags(db)
        stored = read_latencies(db, ["bm25"])["latency_ms"].to_numpy()
    runs = {r["run"]: r for r in html_tables(at)["runs"]}
    assert runs["bm25"]["latency p95"] == f"{np.percentile(stored, 95):,.1f} ms"
    at.text_input(key="harness_url").input(retriever.url)
    at.text_input(key="harness_name").input("facts")
    at.selectbox(key="harness_queries").select("type=fact")
    _start(at)
    expected = set(tags.loc[tags["tag"] == "type=fact", "query_id"])
    assert len(expected) == 18 and set(retriever.received) == expected
    assert any("Run facts: 18 of 18 queries answered" in s.value for s in at.success), [e.value for e in at.error]


def test_a_remote_address_or_a_dead_one_is_refused_in_the_pages_words(demo_db):
    at = _run()
    at.text_input(key="harness_url").input("http://example.com/search")
    at.text_input(key="harness_name").input("remote")
    _start(at)
    assert any("“Address of your retriever”" in e.value and "127.0.0.1" in e.value for e in at.error), \
        [e.value for e in at.error]
    # A local address nobody listens on: every query fails, nothing is stored, the error says so.
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as probe:
        port = probe.server_address[1]  # free once closed
    at.text_input(key="harness_url").input(f"http://127.0.0.1:{port}/search")
    at.multiselect(key="harness_ids").select("q001").select("q002")
    _start(at)
    assert any("every query failed (2)" in e.value for e in at.error), [e.value for e in at.error]
    assert not any("--" in e.value for e in at.error)
    with Database(demo_db) as db:
        assert read_run_info(db, ["remote"]).empty


def test_the_runs_table_counts_chosen_queries_instead_of_listing_them(demo_db, retriever):
    at = _run()
    at.text_input(key="harness_url").input(retriever.url)
    at.text_input(key="harness_name").input("two")
    at.multiselect(key="harness_ids").select("q001").select("q002")
    _start(at)
    runs = {r["run"]: r for r in html_tables(at)["runs"]}
    assert "queries = 2 chosen" in runs["two"]["parameters"] and "q001" not in runs["two"]["parameters"]
    with Database(demo_db) as db:
        assert read_run_info(db, ["two"]).loc[0, "params"]["queries"] == ["q001", "q002"]
    assert retriever.received == ["q001", "q002"]
