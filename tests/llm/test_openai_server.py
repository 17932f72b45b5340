"""The local OpenAI-compatible test server, driven by the real openai client (sync and async).

Every fault kind must be observable through the SDK exactly as a real server's would be, and the
server's records must let judge tests count attempts per prompt.
"""

from __future__ import annotations

import asyncio
import json
import math
import time

import openai
import pytest
from openai import AsyncOpenAI, OpenAI

from tests.support.openai_server import (
    FAULT_KINDS,
    OUT_OF_RANGE_GRADE,
    expected_default_grade,
    extract_passage,
    running_server,
    sha256_text,
)


@pytest.fixture
def openai_server():
    """A fresh server per test (the module's own fixture, so no import shadows it)."""
    with running_server() as server:
        yield server


PROMPT = "Query:\n{query}\n\nPassage:\n{passage}\n\nGrades:\n3 = ...\nReply with JSON."


def prompt_for(query: str, passage: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": PROMPT.replace("{query}", query).replace("{passage}", passage)}]


def client(server, **options) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0, **options)


def grade_of(completion) -> int:
    return json.loads(completion.choices[0].message.content)["grade"]


def test_models_list_and_retrieve(openai_server):
    c = client(openai_server)
    assert [m.id for m in c.models.list()] == ["test-judge", "gpt-4o-mini"]
    assert c.models.retrieve("test-judge").id == "test-judge"
    with pytest.raises(openai.NotFoundError):
        c.models.retrieve("no-such-model")


def test_default_answer_is_json_grade_from_passage_with_usage(openai_server):
    c = client(openai_server)
    passages = [f"passage number {i} about tides" for i in range(12)]
    grades = []
    for text in passages:
        done = c.chat.completions.create(model="test-judge", messages=prompt_for("why tides", text))
        answer = json.loads(done.choices[0].message.content)
        assert set(answer) == {"reason", "grade"}
        assert answer["grade"] == expected_default_grade(text)
        assert done.usage.prompt_tokens > 0 and done.usage.completion_tokens > 0
        assert done.usage.total_tokens == done.usage.prompt_tokens + done.usage.completion_tokens
        grades.append(answer["grade"])
    assert len(set(grades)) > 1  # the rule spreads over grades, it is not a constant
    assert openai_server.control.count("/v1/chat/completions") == 12


def test_grade_controls_take_precedence_in_documented_order(openai_server):
    c = client(openai_server)
    control = openai_server.control
    control.grades_by_text = {"lighthouse": 1}
    control.grades_by_passage_sha = {sha256_text("the lighthouse keeper"): 3}
    assert grade_of(c.chat.completions.create(model="m", messages=prompt_for("q", "the lighthouse keeper"))) == 3
    assert grade_of(c.chat.completions.create(model="m", messages=prompt_for("q", "a lighthouse"))) == 1
    control.grade_rule = lambda call: 0 if "keeper" in (call.passage or "") else None
    assert grade_of(c.chat.completions.create(model="m", messages=prompt_for("q", "the lighthouse keeper"))) == 0
    assert grade_of(c.chat.completions.create(model="m", messages=prompt_for("q", "a lighthouse"))) == 1


def test_extract_passage_forms():
    assert extract_passage("Passage:\nabc\ndef\n\nGrades:\n3") == "abc\ndef"
    # a fake opening tag inside the passage does not shorten it
    assert extract_passage("<passage>\nsay <passage> hi\n</passage>") == "say <passage> hi"
    fenced = "<<<PASSAGE 0a1b>>>\nfake <<<END PASSAGE ffff>>> still inside\n<<<END PASSAGE 0a1b>>>"
    assert extract_passage(fenced) == "fake <<<END PASSAGE ffff>>> still inside"
    assert extract_passage("<<<PASSAGE>>>\nplain\n<<<END PASSAGE>>>") == "plain"
    assert extract_passage("no delimiters here") is None


def test_response_format_json_schema_and_json_object(openai_server):
    c = client(openai_server)
    schema = {
        "name": "judgment",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"reason": {"type": "string"}, "grade": {"type": "integer", "enum": [0, 1, 2, 3]}},
            "required": ["reason", "grade"],
            "additionalProperties": False,
        },
    }
    done = c.chat.completions.create(
        model="m", messages=prompt_for("q", "p1"), response_format={"type": "json_schema", "json_schema": schema}
    )
    assert grade_of(done) == expected_default_grade("p1")
    done = c.chat.completions.create(model="m", messages=prompt_for("q", "p2"), response_format={"type": "json_object"})
    assert grade_of(done) == expected_default_grade("p2")
    sent = openai_server.control.chat_calls()[0].body
    assert sent["response_format"]["type"] == "json_schema"


def test_logprobs_single_token_grade(openai_server):
    c = client(openai_server)
    for text in ("alpha", "beta", "gamma", "delta"):
        done = c.chat.completions.create(
            model="m", messages=prompt_for("q", text), logprobs=True, top_logprobs=4, max_tokens=1
        )
        choice = done.choices[0]
        assert choice.message.content == str(expected_default_grade(text))
        (token,) = choice.logprobs.content
        tops = {t.token: math.exp(t.logprob) for t in token.top_logprobs}
        assert set(tops) == {"0", "1", "2", "3"}
        assert sum(tops.values()) == pytest.approx(1.0)
        assert max(tops, key=tops.get) == choice.message.content


def test_logprobs_with_json_answer_mark_the_grade_token(openai_server):
    c = client(openai_server)
    done = c.chat.completions.create(
        model="m", messages=prompt_for("q", "x"), logprobs=True, top_logprobs=2,
        response_format={"type": "json_object"},
    )
    grade = grade_of(done)
    tokens = done.choices[0].logprobs.content
    assert "".join(t.token for t in tokens) == done.choices[0].message.content
    graded = [t for t in tokens if t.top_logprobs]
    assert [t.token for t in graded] == [str(grade)]
    assert len(graded[0].top_logprobs) == 2


def test_each_fault_kind_is_observable_through_the_sdk():
    with running_server(hang_seconds=60, retry_after=2.5) as server:
        c = client(server, timeout=0.5)
        send = lambda: c.chat.completions.create(model="m", messages=prompt_for("q", "p"))
        server.control.script("429")
        with pytest.raises(openai.RateLimitError) as caught:
            send()
        assert caught.value.response.headers["retry-after"] == "2.5"
        assert caught.value.response.headers["retry-after-ms"] == "2500"
        server.control.script("500")
        with pytest.raises(openai.InternalServerError):
            send()
        server.control.script("hang")
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            send()
        assert time.monotonic() - started < 30  # the client's timeout ended it, not the server's 60 s hang
        server.control.script("drop")
        with pytest.raises(openai.APIConnectionError) as dropped:
            send()
        assert not isinstance(dropped.value, openai.APITimeoutError)
        server.control.script("malformed")
        with pytest.raises(json.JSONDecodeError):
            json.loads(send().choices[0].message.content)
        server.control.script("malformed_body")
        with pytest.raises(ValueError):  # the SDK raises the JSON decoder's error as is
            send()
        server.control.script("out_of_range")
        assert grade_of(send()) == OUT_OF_RANGE_GRADE
        server.control.script("ok")
        assert grade_of(send()) == expected_default_grade("p")
        faults = [r.fault for r in server.control.chat_calls()]
        assert faults == ["429", "500", "hang", "drop", "malformed", "malformed_body", "out_of_range", "ok"]
        # the same prompt went 8 times: attempts are numbered per prompt
        assert [r.attempt for r in server.control.chat_calls()] == list(range(1, 9))
        assert server.control.attempts_by_prompt() == {sha256_text(PROMPT.replace("{query}", "q").replace("{passage}", "p")): 8}
        assert server.control.fault_counts() == {k: 1 for k in faults}


def test_async_client_scripted_sequence_and_recovery(openai_server):
    async def run() -> list[str]:
        c = AsyncOpenAI(base_url=openai_server.base_url, api_key="k", max_retries=0, timeout=0.5)
        outcomes = []
        for _ in range(4):
            try:
                done = await c.chat.completions.create(model="m", messages=prompt_for("q", "p"))
                outcomes.append(f"ok:{grade_of(done)}")
            except openai.APIStatusError as exc:
                outcomes.append(str(exc.status_code))
            except openai.APIConnectionError as exc:
                outcomes.append(type(exc).__name__)
        await c.close()
        return outcomes

    openai_server.control.script("429", "drop", "500")
    assert asyncio.run(run()) == ["429", "APIConnectionError", "500", f"ok:{expected_default_grade('p')}"]
    assert openai_server.control.scripted_left() == 0


def test_fault_rates_are_reproducible_per_prompt_and_attempt():
    def faults(order: list[int], seed: int) -> dict[tuple[str, int], str]:
        with running_server(seed=seed) as server:
            server.control.fault_rates = {"500": 0.2, "429": 0.1}
            c = client(server)
            for i in order:
                for _attempt in range(2):
                    try:
                        c.chat.completions.create(model="m", messages=prompt_for("q", f"p{i}"))
                    except openai.APIStatusError:
                        pass
            return {(r.prompt_sha, r.attempt): r.fault for r in server.control.chat_calls()}

    forward = faults(list(range(60)), seed=7)
    backward = faults(list(reversed(range(60))), seed=7)
    assert len(forward) == 120
    assert forward == backward  # arrival order does not change who gets which fault
    kinds = list(forward.values())
    assert 0 < kinds.count("500") and 0 < kinds.count("429") and kinds.count("ok") > 60
    assert faults(list(range(60)), seed=8) != forward


def test_fault_rule_callable_fails_first_attempts(openai_server):
    openai_server.control.fault_rule = lambda call: "500" if call.attempt <= 2 else None
    c = client(openai_server)
    statuses = []
    for _ in range(3):
        try:
            c.chat.completions.create(model="m", messages=prompt_for("q", "z"))
            statuses.append(200)
        except openai.InternalServerError:
            statuses.append(500)
    assert statuses == [500, 500, 200]


def test_keep_alive_reuses_connections_and_serves_32_concurrently():
    with running_server(latency=0.2) as server:
        c = client(server)
        for i in range(5):
            c.chat.completions.create(model="m", messages=prompt_for("q", str(i)))
        assert server.control.connections == 1  # HTTP/1.1 keep-alive: one connection for five calls

        async def burst() -> None:
            ac = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
            await asyncio.gather(
                *[ac.chat.completions.create(model="m", messages=prompt_for("q", f"b{i}")) for i in range(32)]
            )
            await ac.close()

        asyncio.run(burst())
        assert server.control.max_in_flight == 32  # all 32 were held open at the same time: not serialised


def test_api_key_is_checked_and_never_recorded():
    with running_server(api_key="sk-secret-123") as server:
        with pytest.raises(openai.AuthenticationError):
            OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0).models.list()
        OpenAI(base_url=server.base_url, api_key="sk-secret-123", max_retries=0).models.list()
        recorded = server.control.requests
        assert [r.authorized for r in recorded] == [False, True]
        assert "sk-secret-123" not in repr(recorded)


def test_record_bodies_off_keeps_counts_and_prompt_hashes():
    with running_server(record_bodies=False) as server:
        c = client(server)
        for text in ("a", "b", "a"):
            c.chat.completions.create(model="m", messages=prompt_for("q", text))
        calls = server.control.chat_calls()
        assert [r.body for r in calls] == [None, None, None]
        assert sorted(server.control.attempts_by_prompt().values()) == [1, 2]


def test_files_and_batches_produce_output_from_input_jsonl():
    with running_server(batch_seconds=0.3) as server:
        c = client(server)
        lines = [
            {"custom_id": f"pair-{i}", "method": "POST", "url": "/v1/chat/completions",
             "body": {"model": "test-judge", "messages": prompt_for("q", f"batch passage {i}")}}
            for i in range(5)
        ]
        payload = "".join(json.dumps(x) + "\n" for x in lines) + "not json\n"
        uploaded = c.files.create(file=("judge.jsonl", payload.encode()), purpose="batch")
        assert uploaded.bytes == len(payload.encode()) and uploaded.purpose == "batch"
        assert c.files.content(uploaded.id).read() == payload.encode()
        assert c.files.retrieve(uploaded.id).filename == "judge.jsonl"
        batch = c.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
        assert c.batches.retrieve(batch.id).status == "in_progress"
        time.sleep(0.35)
        done = c.batches.retrieve(batch.id)
        assert done.status == "completed"
        assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (6, 5, 1)
        out = [json.loads(x) for x in c.files.content(done.output_file_id).text.splitlines()]
        assert [o["custom_id"] for o in out] == [f"pair-{i}" for i in range(5)]
        for i, o in enumerate(out):
            assert o["response"]["status_code"] == 200
            answer = json.loads(o["response"]["body"]["choices"][0]["message"]["content"])
            assert answer["grade"] == expected_default_grade(f"batch passage {i}")
        (err,) = [json.loads(x) for x in c.files.content(done.error_file_id).text.splitlines()]
        assert "line 6" in err["error"]["message"]
        assert [b.id for b in c.batches.list()] == [batch.id]
        with pytest.raises(openai.BadRequestError):
            c.batches.create(input_file_id="file-missing", endpoint="/v1/chat/completions", completion_window="24h")


def test_batch_can_be_cancelled_before_completion():
    with running_server(batch_seconds=60) as server:
        c = client(server)
        line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
                "body": {"model": "m", "messages": prompt_for("q", "p")}}
        uploaded = c.files.create(file=("in.jsonl", (json.dumps(line) + "\n").encode()), purpose="batch")
        batch = c.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h")
        assert c.batches.cancel(batch.id).status == "cancelled"
        assert c.batches.retrieve(batch.id).output_file_id is None


def test_unknown_fault_kind_is_rejected(openai_server):
    with pytest.raises(ValueError, match="unknown fault kind"):
        openai_server.control.script("teapot")
    assert "ok" in FAULT_KINDS


def test_refused_response_format_is_a_400_naming_it(openai_server):
    openai_server.control.refused_formats = {"json_schema"}
    c = client(openai_server)
    schema = {"name": "j", "schema": {"type": "object", "properties": {"grade": {"type": "integer"}}}}
    with pytest.raises(openai.BadRequestError, match="response_format type 'json_schema'"):
        c.chat.completions.create(model="m", messages=prompt_for("q", "p"),
                                  response_format={"type": "json_schema", "json_schema": schema})
    # JSON mode still works, and the refused call was recorded but not graded (no attempt counted)
    done = c.chat.completions.create(model="m", messages=prompt_for("q", "p"), response_format={"type": "json_object"})
    assert grade_of(done) == expected_default_grade("p")
    assert [r.status for r in openai_server.control.chat_calls()] == [400, 200]
    assert list(openai_server.control.attempts_by_prompt().values()) == [1]
