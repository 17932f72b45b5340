"""``judge --batch-file`` / ``--batch-results``: the offline batch path, checked against the openai
SDK's own types, with the results produced by sending each request body to a loopback server
through the SDK (as ``vllm run-batch`` would), and ``--samples`` at temperature 0."""

from __future__ import annotations

import json
import os
import typing

import openai
from openai.types.chat import ChatCompletion
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

from tests.llm.judge_project import demo_project, empty_config, query
from tests.support.cli_runner import run_in_process
from tests.support.openai_server import expected_default_grade, running_server
from tests.support.prerequisites import REPO


def _run(tmp_path, db, *args, env_extra=None):
    """``workbench --config EMPTY --db DB ARGS`` in this process (:mod:`tests.support.cli_runner`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")}
    env["OPENAI_API_KEY"] = "sk-test-batch-files"
    return run_in_process(("--config", str(empty_config(tmp_path)), "--db", str(db), *args), cwd=REPO, env=env,
                          timeout=300)


def test_batch_file_then_results_store_like_the_online_path(tmp_path):
    db = demo_project(tmp_path / "demo.duckdb")
    requests = tmp_path / "requests.jsonl"
    base = ["judge", "--pool", "demo", "--base-url", "http://127.0.0.1:9/v1", "--model", "test-judge"]
    done = _run(tmp_path, db, *base, "--limit", "6", "--batch-file", str(requests))
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in requests.read_text().splitlines()]
    assert len(lines) == 6 and "wrote 6 requests" in done.stdout
    allowed = set(typing.get_type_hints(CompletionCreateParamsNonStreaming))
    for line in lines:
        assert set(line) == {"custom_id", "method", "url", "body"}
        assert line["method"] == "POST" and line["url"] == "/v1/chat/completions"
        assert set(line["body"]) <= allowed and line["body"]["model"] == "test-judge"
        assert line["body"]["response_format"]["type"] == "json_schema"  # what batch endpoints accept
    assert len({line["custom_id"] for line in lines}) == 6

    # Run the file "elsewhere": each body through the SDK to a loopback server, one failure.
    results = tmp_path / "results.jsonl"
    with running_server() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        out = []
        for i, line in enumerate(lines[:5]):  # the sixth is left out: it stays pending
            if i == 4:
                out.append({"id": f"r{i}", "custom_id": line["custom_id"],
                            "response": {"status_code": 500, "request_id": "x", "body": {"error": {
                                "message": "the worker ran out of memory\nsecond line"}}}, "error": None})
                continue
            completion = client.chat.completions.create(**line["body"])
            ChatCompletion.model_validate(completion.model_dump())  # the shape the results carry
            out.append({"id": f"r{i}", "custom_id": line["custom_id"],
                        "response": {"status_code": 200, "request_id": "x", "body": completion.model_dump()},
                        "error": None})
    results.write_text("".join(json.dumps(r) + "\n" for r in out))
    stored = _run(tmp_path, db, *base, "--limit", "6", "--batch-results", str(results))
    assert stored.returncode == 6, stored.stdout + stored.stderr  # one pair still to make
    assert "1 judgments still to make" in stored.stdout
    table = query(db, """SELECT j.status, j.grade, j.error, substr(d.text, k.start + 1, k."end" - k.start) AS passage
                         FROM judgments j JOIN chunks k ON k.chunk_id = j.chunk_id
                         JOIN documents d ON d.doc_id = k.doc_id WHERE j.source = 'llm'""")
    assert sorted(table["status"]) == ["failed", "ok", "ok", "ok", "ok"]
    for row in table.itertuples():
        if row.status == "ok":
            assert row.grade == expected_default_grade(row.passage)
        else:
            assert "HTTP 500" in row.error and "second line" in row.error  # the whole message
    # Storing the same file again adds nothing; the missing pair is what a new file asks for.
    again = _run(tmp_path, db, *base, "--limit", "6", "--batch-results", str(results))
    assert again.returncode == 6 and len(query(db, "SELECT * FROM judgments WHERE source = 'llm'")) == 5
    rest = tmp_path / "rest.jsonl"
    done = _run(tmp_path, db, *base, "--limit", "6", "--batch-file", str(rest))
    assert done.returncode == 0 and [json.loads(x)["custom_id"] for x in rest.read_text().splitlines()] == \
        [lines[5]["custom_id"]]
    # A bad results file is one line, exit 3.
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"custom_id": "x"}\nnot json\n')
    refused = _run(tmp_path, db, *base, "--batch-results", str(bad))
    assert refused.returncode == 3 and "bad.jsonl:2:" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_samples_above_temperature_zero_send_distinct_seeds(tmp_path):
    db = demo_project(tmp_path / "demo.duckdb")
    with running_server() as server:
        done = _run(tmp_path, db, "judge", "--pool", "demo", "--base-url", server.base_url, "--model", "test-judge",
                    "--samples", "3", "--temperature", "0.7", "--limit", "2")
        assert done.returncode == 0, done.stdout + done.stderr
        seeds = {}
        for call in server.control.chat_calls():
            if call.body.get("max_tokens") == 200:  # a judgment, not the probe
                assert call.body["temperature"] == 0.7
                seeds.setdefault(call.prompt_sha, []).append(call.body.get("seed"))
        assert len(seeds) == 2 and all(sorted(s) == [1, 2, 3] for s in seeds.values())


def test_samples_at_temperature_zero_are_refused_in_one_line_before_anything_is_sent(tmp_path):
    """Greedy decoding ignores seeds: 3 samples at temperature 0 would be 3 identical answers for
    3 times the cost. Refused (exit 3, one line naming --temperature) online, for --batch-file
    and for --estimate, with nothing sent and no file written (before: a note, then 3 requests
    per pair)."""
    db = demo_project(tmp_path / "demo.duckdb")
    with running_server() as server:
        base = ["judge", "--pool", "demo", "--base-url", server.base_url, "--model", "test-judge", "--samples", "3",
                "--limit", "2"]
        out = tmp_path / "requests.jsonl"
        for extra in ([], ["--batch-file", str(out)], ["--estimate"]):
            done = _run(tmp_path, db, *base, *extra)
            assert done.returncode == 3, done.stdout + done.stderr
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and "--temperature 0.7" in lines[0] and "--samples 3" in lines[0], lines
            assert "identical answers" in lines[0] and "Traceback" not in done.stderr
        assert server.control.count("/v1/chat/completions") == 0 and not out.exists()


def test_batch_file_for_a_server_that_refuses_json_schema_uses_what_it_accepts(tmp_path):
    """llama.cpp answers json_schema with an error and enforces json_object with a schema. With a
    reachable server the file is written in the format its probe chooses (before: json_schema
    always, every line of which llama.cpp rejects); a forced --response-format json_object is
    written with the schema too; the results are stored into the same job."""
    db = demo_project(tmp_path / "demo.duckdb")
    requests = tmp_path / "requests.jsonl"
    with running_server() as server:
        server.control.refused_formats = {"json_schema"}  # as llama.cpp
        base = ["judge", "--pool", "demo", "--base-url", server.base_url, "--model", "test-judge", "--limit", "3"]
        done = _run(tmp_path, db, *base, "--batch-file", str(requests))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "format json_object+schema" in done.stdout
        lines = [json.loads(line) for line in requests.read_text().splitlines()]
        assert len(lines) == 3
        assert server.control.count("/v1/chat/completions") == 2  # the probe only: json_schema refused, then taken
        for line in lines:
            fmt = line["body"]["response_format"]
            assert fmt["type"] == "json_object" and fmt["schema"]["required"] == ["reason", "grade"]
        # The server takes every line as written; the results go into the job the file was written for.
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        results = tmp_path / "results.jsonl"
        results.write_text("".join(json.dumps({
            "id": f"r{i}", "custom_id": line["custom_id"], "error": None,
            "response": {"status_code": 200, "body": client.chat.completions.create(**line["body"]).model_dump()}})
            + "\n" for i, line in enumerate(lines)))
        stored = _run(tmp_path, db, *base, "--batch-results", str(results))
        assert stored.returncode == 0, stored.stdout + stored.stderr
    assert sorted(query(db, "SELECT status FROM judgments WHERE source = 'llm'")["status"]) == ["ok"] * 3
    # Forced json_object, server unreachable: json_object with the schema (what llama.cpp enforces).
    other = demo_project(tmp_path / "other.duckdb")
    forced = tmp_path / "forced.jsonl"
    done = _run(tmp_path, other, "judge", "--pool", "demo", "--base-url", "http://127.0.0.1:9/v1", "--model",
                "test-judge", "--limit", "2", "--response-format", "json_object", "--batch-file", str(forced))
    assert done.returncode == 0, done.stdout + done.stderr
    for line in forced.read_text().splitlines():
        fmt = json.loads(line)["body"]["response_format"]
        assert fmt["type"] == "json_object" and "schema" in fmt


def test_a_results_file_whose_every_line_failed_ends_non_zero_with_the_servers_error(tmp_path):
    """8 results, all refused by the server that ran them: exit 6 with the server's message,
    nothing stored, the pairs still pending (before: 8 failed judgments stored, "finished",
    exit 0); a good file afterwards stores them."""
    db = demo_project(tmp_path / "demo.duckdb")
    requests = tmp_path / "requests.jsonl"
    base = ["judge", "--pool", "demo", "--base-url", "http://127.0.0.1:9/v1", "--model", "test-judge", "--limit", "8"]
    assert _run(tmp_path, db, *base, "--batch-file", str(requests)).returncode == 0
    lines = [json.loads(line) for line in requests.read_text().splitlines()]
    assert len(lines) == 8
    refused = tmp_path / "refused.jsonl"
    refused.write_text("".join(json.dumps({
        "id": f"r{i}", "custom_id": line["custom_id"], "error": None,
        "response": {"status_code": 500, "body": {"error": {
            "message": "1 validation error: response_format.type Input should be 'text' or 'json_object'"}}}})
        + "\n" for i, line in enumerate(lines)))
    stored = _run(tmp_path, db, *base, "--batch-results", str(refused))
    assert stored.returncode == 6, stored.stdout + stored.stderr
    assert "all 8 results in refused.jsonl failed" in stored.stdout
    assert "Input should be 'text' or 'json_object'" in stored.stdout and "Traceback" not in stored.stderr
    assert len(query(db, "SELECT * FROM judgments WHERE source = 'llm'")) == 0
    again = tmp_path / "again.jsonl"
    assert _run(tmp_path, db, *base, "--batch-file", str(again)).returncode == 0
    assert len(again.read_text().splitlines()) == 8  # still pending: written again
    with running_server() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        good = tmp_path / "good.jsonl"
        good.write_text("".join(json.dumps({
            "id": f"r{i}", "custom_id": line["custom_id"], "error": None,
            "response": {"status_code": 200, "body": client.chat.completions.create(**line["body"]).model_dump()}})
            + "\n" for i, line in enumerate(lines)))
    ok = _run(tmp_path, db, *base, "--batch-results", str(good))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert len(query(db, "SELECT * FROM judgments WHERE source = 'llm' AND status = 'ok'")) == 8
