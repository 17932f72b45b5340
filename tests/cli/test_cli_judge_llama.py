"""``workbench judge`` against a real llama.cpp server (llama-cpp-python 0.3.36, SmolLM2-135M).

Plumbing only, never the tiny model's grades: the built-in defaults give no failed pair (the
probe finds that llama.cpp refuses json_schema with HTTP 500 and takes json_object with a schema),
logprobs reach the single-token parser, a killed server stops the job (exit 6) and a restarted one
resumes it, and --batch is refused in one line. One server for the whole module (it is slow to
start and serves one request at a time). The judge runs in this process
(:mod:`tests.support.cli_runner`), also the job whose server a thread kills under it.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import time

import pytest

from tests.llm.judge_project import demo_project, query
from tests.support.cli_runner import run_in_process
from tests.support.llama_server import ALIAS, live_llama, llama_server  # noqa: F401 - fixtures
from tests.support.polling import wait_until


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")}
    env["OPENAI_API_KEY"] = "sk-local"
    return env


def _workbench(cwd, db, *args, timeout=900):
    """The command exactly as a user types it: no --config, no WORKBENCH_* variable, and a working
    directory without config/workbench.toml, so the built-in defaults apply (run in this process)."""
    return run_in_process(("--db", str(db), *args), cwd=cwd, env=_env(), timeout=timeout)


def _judge(cwd, db, server, *args, timeout=900):
    return _workbench(cwd, db, "judge", "--pool", "demo", "--base-url", server.base_url, "--model", ALIAS, *args,
                      timeout=timeout)


def test_defaults_judge_every_pair_then_batch_is_refused_in_one_line(live_llama, tmp_path):
    assert not (tmp_path / "config" / "workbench.toml").exists()
    db = demo_project(tmp_path / "demo.duckdb")
    started = time.monotonic()
    done = _judge(tmp_path, db, live_llama, "--limit", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and time.monotonic() - started < 900
    # llama.cpp refuses json_schema (HTTP 500 naming the field); the probe falls back once, for the job
    assert "format json_object+schema (auto; refused: json_schema)" in done.stdout
    out = tmp_path / "judgments.jsonl"
    exported = _workbench(tmp_path, db, "export", "judgments", "--out", str(out), "--source", "llm")
    assert exported.returncode == 0, exported.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["query_id"] and row["chunk_id"] and row["model"] == ALIAS
        assert row["status"] in ("ok", "invalid")  # never failed for the request's shape
        assert (row["grade"] in (0, 1, 2, 3)) if row["status"] == "ok" else row["grade"] is None
        assert row["status"] == "ok" or row["error"]
        assert row["raw_response"]
    job = query(db, "SELECT params::VARCHAR AS params FROM judge_jobs")["params"][0]
    probe = json.loads(job)["probe"]
    assert probe["format"] == "json_object+schema" and probe["server_model"] == ALIAS
    assert "Input should be 'text' or 'json_object'" in probe["refused"][0]

    # A finished job asked for fewer pairs: nothing is sent, and the summary says so.
    again = _judge(tmp_path, db, live_llama, "--limit", "1")
    assert again.returncode == 0 and "nothing left to judge" in again.stdout, again.stdout + again.stderr

    # No Files/Batch API on llama.cpp: one line, exit 2, and nothing deleted first.
    before = query(db, "SELECT count(*) AS n FROM judgments WHERE source = 'llm'")["n"][0]
    started = time.monotonic()
    refused = _judge(tmp_path, db, live_llama, "--limit", "2", "--batch", "--retry-failed", timeout=180)
    assert refused.returncode == 2 and time.monotonic() - started < 180
    assert "Traceback" not in refused.stderr and 1 <= len(refused.stderr.strip().splitlines()) <= 3
    assert "no Batch API" in refused.stderr and "--batch-file" in refused.stderr
    assert query(db, "SELECT count(*) AS n FROM judgments WHERE source = 'llm'")["n"][0] == before


def test_logprobs_from_the_server_reach_the_single_token_parser(live_llama):
    """The probe finds logprobs accepted; the body the judge sends asks for them; the reply's
    top candidates are read as the parser's grade distribution (checked against the raw JSON)."""
    import openai  # the oracle: the SDK's own request, not the judge's client

    from workbench.llm.client import CallOutcome, ClientConfig, JudgeClient, read_completion
    from workbench.llm.parse import grade_probabilities
    from workbench.llm.prompts import load_prompt

    template = load_prompt("relevance_token_v1")

    async def go():
        client = JudgeClient(ClientConfig(base_url=live_llama.base_url, model=ALIAS, timeout=300), "sk-local")
        try:
            caps = await client.probe(template)
            client.use(caps)
            body = client.request_body(template, [{"role": "user", "content": "Reply with the digit 2."}])
        finally:
            await client.aclose()
        sdk = openai.AsyncOpenAI(base_url=live_llama.base_url, api_key="sk-local", timeout=300)
        try:
            reply = await sdk.chat.completions.create(**body)
        finally:
            await sdk.close()
        return caps, body, reply.model_dump()

    caps, body, reply = asyncio.run(go())
    assert caps.format == "text" and caps.logprobs
    assert body["logprobs"] is True and body["top_logprobs"] == 10 and body["max_tokens"] == 1
    first = reply["choices"][0]["logprobs"]["content"][0]
    assert len(first["top_logprobs"]) == 10
    outcome = CallOutcome(status="failed")
    parsed, raw = read_completion(template, reply, outcome)
    assert raw == reply["choices"][0]["message"]["content"] and outcome.prompt_tokens > 0
    digits = {int(t["token"].strip()): t["logprob"] for t in first["top_logprobs"]
              if t["token"].strip() in ("0", "1", "2", "3")}
    probs, _ = grade_probabilities([(t["token"], t["logprob"]) for t in first["top_logprobs"]], (0, 1, 2, 3))
    if digits:  # by hand: exp(lp_g) / sum over the grade tokens present
        total = sum(math.exp(v) for v in digits.values())
        assert probs == pytest.approx({g: math.exp(digits[g]) / total if g in digits else 0.0 for g in range(4)})
    else:
        assert probs is None
    if parsed.grade is not None:
        assert parsed.probabilities == probs


def test_a_killed_server_stops_the_job_and_a_restarted_one_resumes_it(live_llama, tmp_path):
    db = demo_project(tmp_path / "demo.duckdb")
    log_start = live_llama.log.stat().st_size if live_llama.log.exists() else 0

    def log_since_start() -> bytes:
        with open(live_llama.log, "rb") as f:
            f.seek(log_start)
            return f.read()

    def judging_a_pair() -> bool:
        """The probe has been answered and the server has begun reading a judgment's prompt
        (llama-cpp-python logs the prefix it reuses as it starts one), or 1 s has passed since."""
        log = log_since_start()
        answered = log.find(b"POST /v1/chat/completions")
        if answered < 0:
            return False
        if probe_answered[0] is None:
            probe_answered[0] = time.monotonic()
        return b"Llama.generate:" in log[answered:] or time.monotonic() - probe_answered[0] >= 1.0

    probe_answered: list[float | None] = [None]
    killed, job_ended = threading.Event(), threading.Event()

    def kill_mid_pair():
        try:
            wait_until(lambda: job_ended.is_set() or judging_a_pair(), timeout=600, interval=0.02,
                       what="the probe's answer")
        finally:
            live_llama.stop()
            killed.set()

    # The job runs in this process (the server is what dies, not the job); a thread kills the
    # server under it while the first pair's ~600 prompt tokens are being read.
    args = ("--db", str(db), "judge", "--pool", "demo", "--base-url", live_llama.base_url, "--model", ALIAS,
            "--prompt", "relevance_token_v1", "--limit", "2")
    killer = threading.Thread(target=kill_mid_pair, daemon=True)
    killer.start()
    try:
        stopped = run_in_process(args, cwd=tmp_path, env=_env(), timeout=600)
    finally:
        job_ended.set()
        killer.join(timeout=60)
    assert killed.is_set() and probe_answered[0] is not None
    assert stopped.returncode == 6, stopped.stdout + stopped.stderr
    assert "Traceback" not in stopped.stderr and "went away" in stopped.stdout
    judged = query(db, "SELECT count(*) AS n, count(*) FILTER (WHERE status = 'failed') AS failed "
                       "FROM judgments WHERE source = 'llm'")
    assert judged["failed"][0] == 0  # the pairs the dead server could not answer stay pending
    # Two pairs are enough to be mid-job: the server dies as it starts reading the first pair's
    # ~600 prompt tokens (a third pair cost ~250 tokens, about 3 s of server CPU with its
    # logprobs, and proved nothing more).
    assert judged["n"][0] < 2

    live_llama.start()
    done = run_in_process(args, cwd=tmp_path, env=_env(), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    table = query(db, "SELECT status FROM judgments WHERE source = 'llm'")
    assert len(table) == 2 and set(table["status"]) <= {"ok", "invalid"}


def test_batch_file_for_llama_cpp_is_written_in_the_format_it_accepts(live_llama, tmp_path):
    """`--batch-file` with llama.cpp's base URL: the probe finds json_schema refused, so every line
    asks json_object with a schema (before: json_schema, which llama.cpp answers with HTTP 500);
    the line's body, sent as written through the SDK, is answered 200 and its result is stored."""
    import openai

    db = demo_project(tmp_path / "demo.duckdb")
    requests = tmp_path / "requests.jsonl"
    done = _judge(tmp_path, db, live_llama, "--limit", "1", "--batch-file", str(requests))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "format json_object+schema" in done.stdout
    line = json.loads(requests.read_text().splitlines()[0])
    assert line["body"]["response_format"]["type"] == "json_object" and "schema" in line["body"]["response_format"]
    client = openai.OpenAI(base_url=live_llama.base_url, api_key="sk-local", max_retries=0, timeout=600)
    reply = client.chat.completions.create(**line["body"])  # raises on the HTTP 500 json_schema gets
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"id": "r0", "custom_id": line["custom_id"], "error": None,
                                   "response": {"status_code": 200, "body": reply.model_dump()}}) + "\n")
    stored = _judge(tmp_path, db, live_llama, "--limit", "1", "--batch-results", str(results))
    assert stored.returncode == 0, stored.stdout + stored.stderr
    status = query(db, "SELECT status FROM judgments WHERE source = 'llm'")["status"]
    assert list(status) in (["ok"], ["invalid"])  # a tiny model's reply; never failed for its shape
