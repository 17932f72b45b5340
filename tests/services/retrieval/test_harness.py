"""The harness against a real subprocess script and a real loopback HTTP server."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pandas as pd
import pytest

from workbench.errors import InputError
from workbench.services.chunking import create_chunking
from workbench.services.retrieval.harness import command_argv, run_harness
from workbench.store.corpus import write_documents, write_queries
from workbench.store.database import Database
from workbench.store.latencies import read_latencies
from workbench.store.runs import read_run_info, read_run_rows

EVIL = "x'; rm -rf \"$HOME\" ; echo \"pwned"

SCRIPT = r'''
import json, sys, time
query = sys.argv[1]
log = sys.argv[2]
with open(log, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\n")
if query == "boom":
    print("bad thing happened", file=sys.stderr); sys.exit(7)
if query == "slow":
    time.sleep(5)
if query == "garbage":
    print("not json"); sys.exit(0)
if query == "spans":
    print(json.dumps({"doc_id": "d1", "start": 0, "end": 5, "score": 0.5}))
    sys.exit(0)
print(json.dumps({"doc_id": "d2", "score": 0.2}))
print(json.dumps({"doc_id": "d1", "score": 0.9}))
print(json.dumps({"doc_id": "d3", "score": 0.2}))
'''


@pytest.fixture
def db(tmp_path):
    with Database(tmp_path / "p.duckdb") as db:
        with db.transaction() as tx:
            write_documents(tx, pd.DataFrame({"doc_id": ["d1", "d2", "d3"],
                                              "text": ["alpha beta", "gamma delta", "epsilon zeta"]}))
            write_queries(tx, pd.DataFrame({"query_id": ["q1", "q2", "q3", "q4"],
                                            "text": [EVIL, "boom", "garbage", "plain"]}))
        yield db


def _script(tmp_path):
    path = tmp_path / "system.py"
    path.write_text(SCRIPT)
    return path


def test_command_argv_keeps_the_query_one_element():
    argv = command_argv("python s.py --q {query} --id={query_id}", "q1", EVIL)
    assert argv == ["python", "s.py", "--q", EVIL, "--id=q1"]


def test_command_run_records_ranks_failures_and_latency(db, tmp_path):
    log = tmp_path / "argv.log"
    template = f"{sys.executable} {_script(tmp_path)} {{query}} {log}"
    s = run_harness(db, "ext", command=template, timeout=20)
    assert (s.queries, s.answered, s.level) == (4, 2, "doc")
    failed = {f["query_id"]: f["error"] for f in s.failed}
    assert set(failed) == {"q2", "q3"}
    assert "exit code 7" in failed["q2"] and "bad thing happened" in failed["q2"]
    assert "not JSON" in failed["q3"]
    # The dangerous query reached the program as one argument, verbatim; nothing was deleted.
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert [EVIL, str(log)] in seen and tmp_path.exists()
    rows = read_run_rows(db, "ext")
    q1 = rows.loc[rows["query_id"] == "q1"].sort_values("rank")
    # Score descending; the tie (d2, d3 at 0.2) keeps the system's order.
    assert q1["doc_id"].tolist() == ["d1", "d2", "d3"] and q1["rank"].tolist() == [1, 2, 3]
    assert set(rows["query_id"]) == {"q1", "q4"}  # failed queries have no rows ...
    params = read_run_info(db, ["ext"]).loc[0, "params"]
    params = json.loads(params) if isinstance(params, str) else params
    assert {f["query_id"] for f in params["failures"]} == {"q2", "q3"}  # ... but are recorded
    # Latency per answered query only; a failure keeps its time to fail with its error.
    lat = read_latencies(db, ["ext"])
    assert sorted(lat["query_id"]) == ["q1", "q4"] and (lat["latency_ms"] > 0).all()
    assert all(f["latency_ms"] > 0 for f in params["failures"])
    values = lat["latency_ms"].to_numpy()
    assert params["latency_p50_ms"] == pytest.approx(np.percentile(values, 50), rel=1e-12)
    assert (s.latency_ms_p50, s.latency_ms_p95) == (params["latency_p50_ms"], params["latency_p95_ms"])
    assert params["latency_ms"] == pytest.approx(np.percentile(values, 95), rel=1e-12)


def test_timeout_is_a_failure(db, tmp_path):
    with db.transaction() as tx:
        write_queries(tx, pd.DataFrame({"query_id": ["q9"], "text": ["slow"]}))
    ids = tmp_path / "ids.txt"
    ids.write_text("# just these\nq9\nq4\n")
    s = run_harness(db, "t", command=f"{sys.executable} {_script(tmp_path)} {{query}} {tmp_path / 'l'}",
                    timeout=1, queries=str(ids))
    assert s.queries == 2 and [f["query_id"] for f in s.failed] == ["q9"]
    assert "timed out after 1 s" in s.failed[0]["error"]


def test_every_query_failing_stores_nothing(db, tmp_path):
    with pytest.raises(InputError, match="every query failed"):
        run_harness(db, "none", command=f"{sys.executable} -c 'import sys; sys.exit(2)' {{query}}")
    assert read_run_info(db, ["none"]).empty


def test_spans_need_a_chunking_and_map_onto_chunks(db, tmp_path):
    create_chunking(db, "docs", "document")
    only = tmp_path / "ids.txt"
    with db.transaction() as tx:
        write_queries(tx, pd.DataFrame({"query_id": ["q5"], "text": ["spans"]}))
    only.write_text("q5\n")
    template = f"{sys.executable} {_script(tmp_path)} {{query}} {tmp_path / 'l'}"
    with pytest.raises(InputError, match="--chunking"):
        run_harness(db, "sp", command=template, queries=str(only))
    s = run_harness(db, "sp", command=template, queries=str(only), chunking="docs")
    assert (s.level, s.chunking, s.rows) == ("chunk", "docs", 1)
    row = read_run_rows(db, "sp").iloc[0]
    assert row["doc_id"] == "d1" and row["chunk_id"].startswith("docs")


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body["query"] == "boom":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"kaputt")
            return
        answer = [{"doc_id": "d3", "score": 1.0}, {"doc_id": body["query_id"].replace("q", "d"), "score": 2.0}]
        if body["query"] == "garbage":
            answer = {"not": "a list"}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_url_run_against_a_local_server(db):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/search"
        s = run_harness(db, "http", url=url, timeout=10)
    finally:
        server.shutdown()
    failed = {f["query_id"]: f["error"] for f in s.failed}
    assert set(failed) == {"q2", "q3"} and "HTTP 500" in failed["q2"] and "JSON list" in failed["q3"]
    rows = read_run_rows(db, "http")
    assert rows.loc[rows["query_id"] == "q1"].sort_values("rank")["doc_id"].tolist() == ["d1", "d3"]


def test_remote_urls_are_refused(db):
    with pytest.raises(InputError, match="127.0.0.1"):
        run_harness(db, "r", url="http://example.com/search")


def test_a_list_of_query_ids_is_sent_in_order_and_unknown_ids_are_refused(db, tmp_path):
    log = tmp_path / "argv.log"
    template = f"{sys.executable} {_script(tmp_path)} {{query}} {log}"
    with pytest.raises(InputError, match="not in the project"):
        run_harness(db, "few", command=template, queries=["q4", "nope"])
    s = run_harness(db, "few", command=template, queries=["q4", "q1"])
    assert (s.queries, s.answered) == (2, 2)
    sent = [json.loads(line)[0] for line in log.read_text().splitlines()]
    assert sent == ["plain", EVIL]  # q4 then q1: the order chosen
    params = read_run_info(db, ["few"]).loc[0, "params"]
    assert params["queries"] == ["q4", "q1"]


def test_an_answer_naming_an_unknown_chunk_fails_and_leaves_the_latencies(db, tmp_path):
    create_chunking(db, "docs", "document")
    script = tmp_path / "chunks.py"
    script.write_text("import json, sys\n"
                      "cid = 'nowhere' if sys.argv[1] == 'boom' else sys.argv[2]\n"
                      "print(json.dumps({'chunk_id': cid, 'score': 1.0}))\n")
    from workbench.store.chunks import read_chunks

    cid = read_chunks(db, "docs")["chunk_id"].iloc[0]
    s = run_harness(db, "ck", command=f"{sys.executable} {script} {{query}} {cid}", queries=["q2", "q4"])
    assert [f["query_id"] for f in s.failed] == ["q2"] and "unknown chunk_id" in s.failed[0]["error"]
    assert s.failed[0]["latency_ms"] > 0
    assert read_latencies(db, ["ck"])["query_id"].tolist() == ["q4"]


def test_query_choices_list_ids_and_tags(db):
    from workbench.services.retrieval.harness import query_choices

    with db.transaction() as tx:
        write_queries(tx, pd.DataFrame({"query_id": ["t1", "t2"], "text": ["a", "b"],
                                        "tags": [{"type": "fact"}, ["x", "y"]]}))
    ids, by_tag = query_choices(db)
    assert ids[-2:] == ["t1", "t2"] and {"q1", "q4"} <= set(ids)
    assert by_tag == {"type=fact": ["t1"], "x": ["t2"], "y": ["t2"]}


def test_the_queries_go_out_with_the_project_closed(tmp_path):
    """plan_harness / collect_answers / store_harness (the page's path): while the system answers,
    another process can open the project file for writing. The same system fails while the
    project is held, so the check is real."""
    path = tmp_path / "p.duckdb"
    script = tmp_path / "opens_the_project.py"
    script.write_text("import duckdb, json, sys\n"
                      "duckdb.connect(sys.argv[2]).close()\n"
                      "print(json.dumps({'doc_id': 'd1', 'score': 1.0}))\n")
    template = f"{sys.executable} {script} {{query}} {path}"
    from workbench.services.retrieval.harness import collect_answers, plan_harness, store_harness

    with Database(path) as db:
        with db.transaction() as tx:
            write_documents(tx, pd.DataFrame({"doc_id": ["d1"], "text": ["alpha"]}))
            write_queries(tx, pd.DataFrame({"query_id": ["q1", "q2"], "text": ["a", "b"]}))
        plan = plan_harness(db, "closed", command=template, timeout=60)
        held = collect_answers(plan)
    assert [f["query_id"] for f in held.failures] == ["q1", "q2"]  # the file was held
    got = collect_answers(plan)
    assert got.failures == [] and sorted(got.answers) == ["q1", "q2"]
    with Database(path) as db:
        s = store_harness(db, plan, got)
        assert (s.answered, s.rows) == (2, 2)
        assert read_latencies(db, ["closed"])["query_id"].tolist() == ["q1", "q2"]
