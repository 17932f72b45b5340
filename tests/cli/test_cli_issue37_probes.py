"""Issue 37: tracebacks and small defects found by probing the CLI. Each probe runs the real
``workbench.cli.main`` in this process (:mod:`tests.support.cli_runner`) and expects the
documented exit code, exactly one line on stderr, never a traceback, and nothing written
where nothing should be."""

from __future__ import annotations

import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.support.cli_runner import run_in_process
from tests.support.templates import demo_project

BAD_COMMAND_LINE, BAD_INPUT = 2, 3  # workbench.cli.common.EXIT_CODES
BIG = "9" * 5000  # more digits than Python converts (sys.get_int_max_str_digits() = 4300)


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "WORKBENCH_"))}
    return {**env, **extra}


def _run(cwd: Path, *args, env: dict | None = None):
    return run_in_process(tuple(str(a) for a in args), cwd=cwd, env=env or _env(), timeout=300)


def _one_line(done, code: int) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture
def demo(tmp_path) -> Path:
    return demo_project(tmp_path / "demo.duckdb")


# -- integers longer than 4,300 digits in every JSON lines reader ------------------------------

LONG_INT = {
    "corpus.jsonl": '{"doc_id": "x1", "text": "hello", "n": BIG}',
    "queries.jsonl": '{"query_id": "qx", "text": "hi", "n": BIG}',
    "qrels.jsonl": '{"query_id": "q001", "doc_id": "it-vpn", "grade": BIG}',
    "spans.jsonl": '{"query_id": "q001", "doc_id": "it-vpn", "start": 0, "end": BIG, "grade": 2}',
    "answers.jsonl": '{"query_id": "q001", "answer": "x", "context_ids": [BIG]}',
    "latency.jsonl": '{"query_id": "q001", "latency_ms": BIG}',
    "trajectories.jsonl": '{"query_id": "q001", "steps": BIG}',
    "chains.jsonl": '{"query_id": "q001", "chain": [BIG]}',
    "results.jsonl": '{"custom_id": "a", "n": BIG}',
}
JUDGE = ("judge", "--pool", "demo", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--batch-results")
READERS = {
    "import corpus": (("import", "corpus"), "corpus.jsonl"),
    "import queries": (("import", "queries"), "queries.jsonl"),
    "import qrels": (("import", "qrels"), "qrels.jsonl"),
    "import span qrels": (("import", "qrels", "--format", "spans"), "spans.jsonl"),
    "citations": (("citations",), "answers.jsonl"),
    "abstention answers": (("abstention", "--answers"), "answers.jsonl"),
    "latency import": (("latency", "import", "--run", "bm25"), "latency.jsonl"),
    "multihop trajectories": (("multihop",), "trajectories.jsonl"),
    "multihop chains": (("multihop", "--chains"), "chains.jsonl"),
    "agree": (("agree", "qrels.jsonl"), "qrels.jsonl"),
    "judge batch results": (JUDGE, "results.jsonl"),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_an_integer_of_5000_digits_is_one_line_naming_file_and_line(demo, tmp_path, reader):
    words, name = READERS[reader]
    path = tmp_path / name
    path.write_text(LONG_INT[name].replace("BIG", BIG) + "\n")
    before = demo.read_bytes()
    done = _run(tmp_path, "--db", demo, *words, path, env=_env(OPENAI_API_KEY="sk-test"))
    line = _one_line(done, BAD_INPUT)
    assert f"{name}:1:" in line and "5,000 digits" in line and "4,300" in line, line
    assert demo.read_bytes() == before


# -- the harness: output that is not UTF-8, or not a number a float holds ----------------------

def _harness(demo, tmp_path, script: str, *extra):
    path = tmp_path / "system.py"
    path.write_text(script)
    return _run(tmp_path, "--db", demo, "harness", "--name", "ext", "--queries", "tag:unanswerable",
                "--command", f"{sys.executable} {path}", *extra)


@pytest.mark.parametrize("script, said", [
    ('import sys\nsys.stdout.buffer.write(b\'{"doc_id": "it-vpn", "score": 1, "x": "\\xff"}\\n\')\n',
     "stdout is not UTF-8: byte 0xff on line 1"),
    ('import sys\nsys.stderr.buffer.write(b"broke \\xff\\n"); sys.exit(2)\n', "exit code 2: broke \ufffd"),
    ('print(\'{"doc_id": "it-vpn", "score": \' + "9" * 5000 + "}")\n', "5,000 digits"),
    ('print(\'{"doc_id": "it-vpn", "score": \' + "9" * 400 + "}")\n', "has no finite numeric 'score'"),
], ids=["stdout not UTF-8", "stderr not UTF-8", "5000-digit score", "score beyond a float"])
def test_harness_command_output_is_a_failed_query_not_a_traceback(demo, tmp_path, script, said):
    done = _harness(demo, tmp_path, script)
    line = _one_line(done, BAD_INPUT)  # every query failed: nothing stored
    assert "every query failed" in line and said in line, line


class _Answers(BaseHTTPRequestHandler):
    body = b""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("body, said", [
    (b'[{"doc_id": "it-vpn", "score": 1, "x": "\xff"}]', "the answer is not UTF-8: byte 0xff"),
    (b'[{"doc_id": "it-vpn", "score": ' + BIG.encode() + b"}]", "5,000 digits"),
], ids=["not UTF-8", "5000-digit score"])
def test_harness_url_answer_is_a_failed_query_not_a_traceback(demo, tmp_path, body, said):
    handler = type("Handler", (_Answers,), {"body": body, "disable_nagle_algorithm": True})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.request_queue_size = 64
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        done = _run(tmp_path, "--db", demo, "harness", "--name", "ext", "--queries", "tag:unanswerable",
                    "--url", f"http://127.0.0.1:{server.server_address[1]}/search")
    finally:
        server.shutdown()
        server.server_close()
    line = _one_line(done, BAD_INPUT)
    assert "every query failed" in line and said in line, line


# -- judge --batch-results that is not UTF-8 ---------------------------------------------------

def test_batch_results_not_utf8_is_one_line(demo, tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"custom_id": "a"}\n{"custom_id": "b\xff"}\n')
    done = _run(tmp_path, "--db", demo, *JUDGE, path, env=_env(OPENAI_API_KEY="sk-test"))
    line = _one_line(done, BAD_INPUT)
    assert "results.jsonl:2:" in line and "not UTF-8: byte 0xff" in line, line


# -- export qrels --iteration must be one word -------------------------------------------------

@pytest.mark.parametrize("iteration", ["a b", "", "a\tb", "Q\u00a00"])
def test_export_iteration_with_blanks_is_refused(demo, tmp_path, iteration):
    out = tmp_path / "qrels.txt"
    done = _run(tmp_path, "--db", demo, "export", "qrels", "--iteration", iteration, "--out", out)
    line = _one_line(done, BAD_COMMAND_LINE)
    assert "--iteration must be one word" in line, line
    assert not out.exists()


def test_export_iteration_zero_is_read_back(demo, tmp_path):
    out = tmp_path / "qrels.txt"
    done = _run(tmp_path, "--db", demo, "export", "qrels", "--iteration", "0", "--out", out)
    assert done.returncode == 0, done.stderr
    assert all(line.split()[1] == "0" and len(line.split()) == 4 for line in out.read_text().splitlines())


# -- labels propagate: option values the store or MinHash cannot take ---------------------------

@pytest.mark.parametrize("option, value, said", [
    ("--shingle", str(10**20), "--shingle must be from 1 to 2,147,483,647"),
    ("--shingle", str(2**31), "--shingle must be from 1 to 2,147,483,647"),
    ("--num-perm", str(10**20), "--num-perm must be from 16 to 4,096"),
    ("--num-perm", "8", "--num-perm must be from 16 to 4,096"),
    ("--seed", str(10**20), "--seed must be from 0 to 4,294,967,295"),
    ("--seed", "-1", "--seed must be from 0 to 4,294,967,295"),
])
def test_propagate_options_out_of_range_are_a_bad_command_line(demo, tmp_path, option, value, said):
    before = demo.read_bytes()
    done = _run(tmp_path, "--db", demo, "labels", "propagate", "--chunking", "sections", option, value)
    line = _one_line(done, BAD_COMMAND_LINE)
    assert said in line and "database" not in line, line
    assert demo.read_bytes() == before


# -- export --out: never a name DuckDB keeps beside the project -------------------------------

@pytest.mark.parametrize("suffix", [".wal", ".tmp"])
@pytest.mark.parametrize("how", ["plain", "through a folder to be created"])
def test_export_to_a_duckdb_sibling_of_the_project_is_refused(demo, tmp_path, suffix, how):
    out = f"{demo.name}{suffix}" if how == "plain" else f"new/../{demo.name}{suffix}"
    done = _run(tmp_path, "--db", demo, "export", "qrels", "--out", out)
    line = _one_line(done, BAD_INPUT)
    assert "is where DuckDB keeps the" in line and f"of the database {demo.name}" in line, line
    assert not (tmp_path / f"{demo.name}{suffix}").exists() and not (tmp_path / "new").exists()
    # the project still takes writes and still has its qrels
    assert _run(tmp_path, "--db", demo, "labels", "propagate", "--chunking", "sections").returncode == 0


def test_export_to_a_wal_name_of_no_database_is_written(demo, tmp_path):
    done = _run(tmp_path, "--db", demo, "export", "qrels", "--out", "notes.wal")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "notes.wal").read_text().startswith("q0")
