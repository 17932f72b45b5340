"""The judge client against a real local OpenAI-compatible server over HTTP (real openai SDK)."""

from __future__ import annotations

import asyncio
import math
import random
import time

import pytest

from tests.support.openai_server import expected_default_grade, running_server
from workbench.llm.client import ClientConfig, JudgeClient, retry_after_seconds
from workbench.llm.prompts import load_prompt

RUBRIC = load_prompt("relevance_v1")
TOKEN = load_prompt("relevance_token_v1")
PASSAGE = "Engineering laptops are refreshed every 36 months."


def _judge(server, template=RUBRIC, passage=PASSAGE, key="sk-test", **config):
    async def go():
        client = JudgeClient(ClientConfig(base_url=server.base_url, model="gpt-4o-mini", backoff_initial=0.01,
                                          backoff_max=2.0, timeout=config.pop("timeout", 5.0), **config), key)
        try:
            return await client.judge(template, template.render("laptop refresh?", passage))
        finally:
            await client.aclose()
    return asyncio.run(go())


def test_ok_reply_gives_the_servers_grade_reason_and_usage():
    with running_server() as server:
        out = _judge(server)
        assert out.status == "ok"
        assert out.grade == expected_default_grade(PASSAGE)
        assert out.reason.startswith("Deterministic test grade")
        assert out.prompt_tokens > 0 and out.completion_tokens > 0 and out.http_calls == 1
        body = server.control.chat_calls()[0].body
        assert body["response_format"]["type"] == "json_schema"
        assert server.control.count("/v1/chat/completions") == 1


def test_429_honours_retry_after_then_succeeds():
    with running_server(retry_after=0.4) as server:
        server.control.script("429", "ok")
        started = time.monotonic()
        out = _judge(server)
        assert out.status == "ok" and out.http_calls == 2
        assert time.monotonic() - started >= 0.4  # waited what the server asked, not the 0.01 s backoff


@pytest.mark.parametrize("fault", ["500", "drop", "malformed_body"])
def test_transient_faults_are_retried(fault):
    with running_server() as server:
        server.control.script(fault, fault, "ok")
        out = _judge(server)
        assert out.status == "ok" and out.http_calls == 3
        assert server.control.count("/v1/chat/completions") == 3


def test_exhausted_retries_fail_with_the_error_and_no_grade():
    with running_server() as server:
        server.control.fault_rates = {"500": 1.0}
        out = _judge(server, max_attempts=3)
        assert (out.status, out.grade) == ("failed", None)
        assert "HTTP 500" in out.error
        assert out.http_calls == 3 == server.control.count("/v1/chat/completions")


def test_a_hang_past_the_timeout_is_a_timeout_failure():
    with running_server(hang_seconds=5) as server:
        server.control.fault_rates = {"hang": 1.0}
        started = time.monotonic()
        out = _judge(server, timeout=0.3, max_attempts=2)
        assert out.status == "failed" and "timeout" in out.error and out.http_calls == 2
        assert time.monotonic() - started < 4


def test_malformed_output_gets_one_repair_attempt():
    with running_server() as server:
        server.control.script("malformed", "ok")
        out = _judge(server)
        assert out.status == "ok" and out.http_calls == 2
        repair = server.control.chat_calls()[1].body["messages"]
        assert repair[-2]["role"] == "assistant" and repair[-1]["role"] == "user"
        assert "not usable" in repair[-1]["content"]


def test_out_of_range_twice_is_invalid_with_the_raw_text_kept():
    with running_server() as server:
        server.control.script("out_of_range", "out_of_range")
        out = _judge(server)
        assert (out.status, out.grade) == ("invalid", None)
        assert '"grade": 7' in out.raw_response and "repair attempt" in out.raw_response
        assert "grade 7" in out.error
        assert out.http_calls == 2


def test_single_token_prompt_stores_grade_probabilities():
    with running_server() as server:
        out = _judge(server, template=TOKEN)
        grade = expected_default_grade(PASSAGE)
        body = server.control.chat_calls()[0].body
        assert body["max_tokens"] == 1 and body["logprobs"] is True and "response_format" not in body
        # The server's rule: weight 0.7 on the grade, 0.3 / 2^|g - grade| elsewhere, normalised.
        weights = {g: 0.7 if g == grade else 0.3 / 2 ** abs(g - grade) for g in range(4)}
        total = sum(weights.values())
        assert out.grade == grade
        assert out.probabilities == pytest.approx({g: w / total for g, w in weights.items()})
        assert out.expected_grade == pytest.approx(sum(g * w / total for g, w in weights.items()))
        assert math.isclose(sum(out.probabilities.values()), 1.0)


def test_the_api_key_never_appears_in_an_outcome():
    key = "sk-proj-SECRETSECRETSECRET-0123456789abcdef"
    with running_server(api_key="sk-the-right-one") as server:
        out = _judge(server, key=key)
        assert out.status == "failed" and "HTTP 401" in out.error
        for text in (out.error, out.raw_response, out.reason):
            assert text is None or (key not in text and key[8:20] not in text)


def test_retry_after_parsing():
    class Resp:
        def __init__(self, headers):
            self.headers = headers

    class Exc(Exception):
        def __init__(self, headers):
            self.response = Resp(headers)

    assert retry_after_seconds(Exc({"retry-after": "3"})) == 3.0
    assert retry_after_seconds(Exc({"retry-after-ms": "250", "retry-after": "9"})) == 0.25
    assert retry_after_seconds(Exc({})) is None
    assert retry_after_seconds(Exc({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0


def test_requests_per_minute_limit_spaces_the_requests():
    # 120 per minute = 2 per second with a burst of 10 (five seconds' worth): 16 requests need at
    # least (16 - 10) / 2 = 3 s, however fast the server is.
    with running_server() as server:
        async def go():
            client = JudgeClient(ClientConfig(base_url=server.base_url, model="gpt-4o-mini",
                                              requests_per_minute=120), "sk-test")
            try:
                started = time.monotonic()
                outs = await asyncio.gather(*(client.judge(RUBRIC, RUBRIC.render("q", f"p{i}")) for i in range(16)))
                return time.monotonic() - started, outs
            finally:
                await client.aclose()
        elapsed, outs = asyncio.run(go())
        assert all(o.status == "ok" for o in outs)
        assert elapsed >= 2.9
        assert server.control.count("/v1/chat/completions") == 16


# llama-cpp-python 0.3.36 answers a json_schema response format like this (HTTP 500, its
# pydantic validation error in the body): seen against the real server.
LLAMA_CPP_REFUSAL = (500, {"error": {"message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                                                "'response_format', 'type'), 'msg': \"Input should be 'text' or "
                                                "'json_object'\", 'input': 'json_schema'}", "type": "internal_server_error"}})


@pytest.mark.parametrize("refusal", ["400", "500-validation"])
def test_the_probe_walks_the_formats_and_the_job_never_sends_a_refused_one(refusal):
    """Each refused format is tried once by the probe (a 400, or a 500 whose body says a field is
    invalid, as llama.cpp answers), never retried; the judgments then use the format that
    worked; and a shape refusal during the job fails the pair at once with the whole message."""
    import json as _json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen = []
    refuse_all = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = _json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            fmt = body.get("response_format") or {}
            seen.append(fmt.get("type", "text") + ("+schema" if "schema" in fmt else ""))
            if fmt or refuse_all:
                if refusal == "400":
                    code, payload = 400, {"error": {"message": f"response_format {fmt.get('type')} "
                                                               "is not supported by this server"}}
                else:
                    code, payload = LLAMA_CPP_REFUSAL
            else:
                code, payload = 200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                      "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                          "role": "assistant", "content": 'Here: {"reason": "ok", "grade": 1}'}}],
                                      "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}}
            data = _json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        async def go():
            client = JudgeClient(ClientConfig(base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1",
                                              model="m", backoff_initial=0.01), None)
            try:
                caps = await client.probe(RUBRIC)
                client.use(caps)
                first = await client.judge(RUBRIC, RUBRIC.render("q", "p"))
                second = await client.judge(RUBRIC, RUBRIC.render("q", "p2"))
                refuse_all.append(True)
                third = await client.judge(RUBRIC, RUBRIC.render("q", "p3"))
                return caps, first, second, third
            finally:
                await client.aclose()
        caps, first, second, third = asyncio.run(go())
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert caps.format == "text" and [r.split(":")[0] for r in caps.refused] == [
        "json_schema", "json_object+schema", "json_object"]
    assert (first.status, first.grade, second.grade) == ("ok", 1, 1)
    # one probe request per format, then every judgment plain; the refused judgment is sent once
    assert seen == ["json_schema", "json_object+schema", "json_object", "text", "text", "text", "text"]
    assert third.status == "failed" and third.http_calls == 1
    if refusal == "500-validation":
        assert third.error.startswith("HTTP 500: ") and "Input should be 'text' or 'json_object'" in third.error
        assert "\n" in third.error  # the whole message, not its first line


def test_errors_are_kept_whole_but_bounded():
    from workbench.llm.client import ERROR_CHARS, describe_error
    import httpx
    import openai

    long_body = "x" * 5000
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    exc = openai.InternalServerError("boom", response=httpx.Response(503, text="line one\nline two " + long_body,
                                                                     request=request), body=None)
    text = describe_error(exc)
    assert text.startswith("HTTP 503: line one\nline two") and len(text) == ERROR_CHARS


def test_a_lone_429_pauses_only_its_own_request_not_the_unrelated_ones():
    """One 429 asking 3 s among replies to 8 concurrent requests: that request waits the 3 s it
    was asked; requests started after it are held at most a sixteenth of it (one 429 in 16
    replies), not the whole Retry-After (before: every new request waited until the 3 s passed).
    The margin (half the Retry-After) keeps a busy machine's slower replies from deciding it."""
    with running_server(retry_after=3.0, latency=0.02) as server:
        server.control.script("429")

        async def go():
            client = JudgeClient(ClientConfig(base_url=server.base_url, model="gpt-4o-mini", concurrency=8), "sk-test")
            try:
                started = time.monotonic()
                limited = asyncio.create_task(client.judge(RUBRIC, RUBRIC.render("q", "limited")))
                while server.control.count("/v1/chat/completions") < 1:
                    await asyncio.sleep(0.005)
                await asyncio.sleep(0.15)  # the 429 (20 ms) has arrived
                others_started = time.monotonic()
                others = await asyncio.gather(*[client.judge(RUBRIC, RUBRIC.render("q", f"other {i}"))
                                                for i in range(8)])
                others_took = time.monotonic() - others_started
                first = await limited
                return first, time.monotonic() - started, others, others_took, client.limit.limit
            finally:
                await client.aclose()

        first, first_took, others, others_took, limit = asyncio.run(go())
    assert first.status == "ok" and first.http_calls == 2 and first_took >= 3.0
    assert all(o.status == "ok" and o.http_calls == 1 for o in others)
    assert others_took < 1.5  # at most 3 / 16 held, plus 20 ms answers; not the whole 3 s
    assert limit == 8  # one 429 is not a congested window


def test_429s_to_every_request_hold_new_requests_for_the_retry_after():
    """A server answering every request 429 limits the client, not one request: a new request
    waits the whole Retry-After before it is sent (hold = asked x 16 / 16)."""
    with running_server(retry_after=0.4) as server:
        server.control.script(*["429"] * 16)

        async def go():
            client = JudgeClient(ClientConfig(base_url=server.base_url, model="gpt-4o-mini", max_attempts=2,
                                              concurrency=16), "sk-test")
            try:
                firsts = [asyncio.create_task(client.judge(RUBRIC, RUBRIC.render("q", f"p{i}"))) for i in range(8)]
                while server.control.count("/v1/chat/completions") < 16:  # 8 requests, 8 retries: 16 429s
                    await asyncio.sleep(0.005)
                await asyncio.sleep(0.02)  # the last 429 has arrived
                held_from = time.monotonic()
                sent_before = server.control.count("/v1/chat/completions")
                late = await client.judge(RUBRIC, RUBRIC.render("q", "late"))
                await asyncio.gather(*firsts)
                return late, time.monotonic() - held_from, sent_before
            finally:
                await client.aclose()

        late, waited, sent_before = asyncio.run(go())
    assert sent_before == 16 and late.status == "ok" and late.http_calls == 1
    assert waited >= 0.3  # held back (0.4 s asked) instead of hitting the rate-limited server at once


def test_event_loop_lag_alone_does_not_halve_the_limit():
    """A server answering in 20 ms, a client whose event loop is blocked for 150 ms at a time by
    CPU-bound work of its own (here a coroutine that does not yield): every request looks 5-10x
    slower than the best, but the lag is the client's, measured by its ticker and subtracted, so
    the limit stays at 8 (before: it halved to 1). The same client halves it when the server
    itself slows down (600 ms replies, 30x the best, and lag on top)."""
    with running_server(latency=0.02) as server:
        async def go():
            client = JudgeClient(ClientConfig(base_url=server.base_url, model="gpt-4o-mini", concurrency=8), "sk-test")
            running = True

            async def busy():
                while running:
                    time.sleep(0.15)  # the loop is blocked, as by a CPU-heavy callback
                    await asyncio.sleep(0.1)

            hog = asyncio.create_task(busy())
            try:
                calm = await asyncio.gather(*[client.judge(RUBRIC, RUBRIC.render("q", f"p{i}")) for i in range(80)])
                after_lag = client.limit.limit
                server.control.latency = 0.6
                slow = await asyncio.gather(*[client.judge(RUBRIC, RUBRIC.render("q", f"s{i}")) for i in range(40)])
                return calm + slow, after_lag, client.limit.limit
            finally:
                running = False
                await hog
                await client.aclose()

        outcomes, after_lag, after_slow = asyncio.run(go())
    assert all(o.status == "ok" for o in outcomes)
    # 8 on a quiet machine; a machine busy with other programs may slow the server's own replies
    # enough for one genuine halving, never the repeated halvings the loop's lag caused (to 1)
    assert after_lag >= 4
    assert after_slow < after_lag


def test_a_one_at_a_time_server_makes_the_limit_back_off_instead_of_piling_up_timeouts():
    """A real loopback server that answers one request at a time (as llama.cpp on a CPU does):
    with 4 in flight the last ones time out; the adaptive limit halves, the retries wait for a
    free slot, and every pair ends ok with fewer requests in flight at the server."""
    import json as _json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    serving = threading.Lock()
    state = {"open": 0, "max_open_after_backoff": 0, "backed_off": False}
    count = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            with count:
                state["open"] += 1
                if state["backed_off"]:
                    state["max_open_after_backoff"] = max(state["max_open_after_backoff"], state["open"])
            with serving:
                time.sleep(0.25)
            with count:
                state["open"] -= 1
            payload = {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop", "message": {
                           "role": "assistant", "content": '{"reason": "ok", "grade": 2}'}}]}
            data = _json.dumps(payload).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (timeout)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        async def go():
            client = JudgeClient(ClientConfig(base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", model="m",
                                              timeout=0.6, max_attempts=8, backoff_initial=0.01, backoff_max=0.05,
                                              concurrency=4), None)
            try:
                first = await asyncio.gather(*[client.judge(RUBRIC, RUBRIC.render("q", f"p{i}")) for i in range(4)])
                state["backed_off"] = client.limit.limit < 4
                rest = await asyncio.gather(*[client.judge(RUBRIC, RUBRIC.render("q", f"r{i}")) for i in range(6)])
                return first + rest, client.limit
            finally:
                await client.aclose()
        outcomes, limit = asyncio.run(go())
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert all(o.status == "ok" for o in outcomes)
    assert limit.timeouts >= 1 and state["backed_off"]  # 4 at once on a 0.25 s serial server: the 3rd+ time out
    assert limit.limit < 4


def test_the_adaptive_limit_grows_back_through_isolated_faults():
    """Ceiling 16, halved once to 8 (8 timeouts: a quarter of the window of 32). Then one reply
    in eight fails (a timeout after 7 calm replies): 2 congested signals in a window of 16 to
    18, below the quarter that halves it. The limit grows by one per ``floor(limit)`` calm
    replies whatever faults fall between them: 8 -> 9 after 8 calm replies, 9 -> 10 after 9
    more, ... 15 -> 16 after 15 more: 92 calm replies reach the ceiling, within 14 blocks of
    (7 calm + 1 timeout) = 98 calm replies. (Restarting the count at each fault, it never grew:
    7 calm replies in a row never reach 8.)"""
    from workbench.llm.client import AdaptiveLimit

    async def go():
        limit = AdaptiveLimit(16)
        for _ in range(8):
            ticket = await limit.acquire()
            await limit.release(None, timed_out=True, ticket=ticket)
        assert limit.limit == 8 and limit.decreases == 1
        for block in range(14):
            for _ in range(7):
                ticket = await limit.acquire()
                await limit.release(1.0, ticket=ticket)
            ticket = await limit.acquire()
            await limit.release(None, timed_out=True, ticket=ticket)
            assert limit.decreases == 1, block  # isolated faults never halve it
        assert limit.limit == 16

    asyncio.run(go())


def test_the_adaptive_limit_halves_on_a_congested_window_and_grows_after_calm_replies():
    """Limit 4, window 8: a lone timeout among calm replies leaves it at 4; a quarter of the
    window congested (2 of 8) halves it; requests started before a decrease do not halve it
    again; calm replies grow it by one per limit of them."""
    from workbench.llm.client import AdaptiveLimit

    async def go():
        limit = AdaptiveLimit(4)
        for _ in range(3):  # calm, then 1 timeout: still 4
            ticket = await limit.acquire()
            await limit.release(1.0, ticket=ticket)
        ticket = await limit.acquire()
        await limit.release(None, timed_out=True, ticket=ticket)
        assert limit.limit == 4 and limit.timeouts == 1 and limit.window == 8
        tickets = [await limit.acquire() for _ in range(3)]
        await limit.release(None, congested=True, ticket=tickets[0])  # a 429/503: the 2nd bad of 8
        assert limit.limit == 2 and limit.decreases == 1
        for ticket in tickets[1:]:  # started before the decrease: already acted on
            await limit.release(None, timed_out=True, ticket=ticket)
        assert limit.limit == 2 and limit.inflight == 0
        for _ in range(2):  # a new window, 2 congested: halve again
            ticket = await limit.acquire()
            await limit.release(None, timed_out=True, ticket=ticket)
        assert limit.limit == 1
        held = await limit.acquire()
        blocked = asyncio.create_task(limit.acquire())
        await asyncio.sleep(0.05)
        assert not blocked.done()  # a second request waits while one is in flight at limit 1
        await limit.release(1.0, ticket=held)  # calm: 1 -> 2
        await limit.release(1.0, ticket=await asyncio.wait_for(blocked, 1))
        for _ in range(10):  # calm replies: 2 -> 3 after 2, 3 -> 4 after 3, then the ceiling
            ticket = await limit.acquire()
            await limit.release(1.0, ticket=ticket)
        assert limit.limit == 4
        for _ in range(3):  # latency past 3x the best (no loop lag here): back off once
            ticket = await limit.acquire()
            await limit.release(10.0, ticket=ticket)
        assert limit.limit == 2

    asyncio.run(go())


def test_millisecond_replies_with_jitter_keep_the_limit_at_the_configured_concurrency():
    """A server answering in 1-10 ms (a local cache, a loopback server) is not overloaded when one
    reply takes 8x the best: the limit stays at the configured 8 (it fell to 1 before
    CALM_LATENCY_S). Real overload above the floor still halves it."""
    from workbench.llm.client import CALM_LATENCY_S, AdaptiveLimit

    async def go():
        limit = AdaptiveLimit(8)
        for latency in [0.001, 0.008, 0.002, 0.010, 0.001, 0.009] * 20:
            ticket = await limit.acquire()
            await limit.release(latency, ticket=ticket)
        assert limit.limit == 8
        slow = AdaptiveLimit(8)
        for latency in [0.2] * 10 + [3.0] * 10:  # past 3x a best above the floor: back off
            ticket = await slow.acquire()
            await slow.release(latency, ticket=ticket)
        assert slow.limit < 8
        floor = AdaptiveLimit(8)
        for latency in [0.001] * 10 + [4 * CALM_LATENCY_S] * 10:  # past 3x the floor itself: back off
            ticket = await floor.acquire()
            await floor.release(latency, ticket=ticket)
        assert floor.limit < 8

    asyncio.run(go())


def test_the_request_timeout_comes_from_the_median_of_three_probe_latencies(tmp_path):
    """No timeout set (the default 60 s): the first probe request meets a 2 s stall, the next two
    answer at once; the probe latency is their median (a few ms), so the request timeout stays
    60 s (before: the one probe's 2 s x 40 = 80 s; on llama.cpp one probe of 16.3 s gave 653 s)."""
    from tests.llm.judge_project import demo_project, probe_calls
    from workbench.config import load_settings
    from workbench.services.judge import jobs
    from workbench.services.judge.probe import discover
    from workbench.services.judge.spec import request_timeout

    db = demo_project(tmp_path / "demo.duckdb")
    with running_server() as server:
        def stall_first(call):
            if call.attempt == 1:
                time.sleep(2.0)
            return None

        server.control.grade_rule = stall_first
        settings = load_settings(None, {"judge": {"base_url": server.base_url, "backoff_initial": 0.01,
                                                  "backoff_max": 0.5}}, env={})
        spec = discover(db, "demo", jobs.resolve_spec(settings, api_key="sk-test"))
        calls = probe_calls(server)
    assert not spec.timeout_set
    assert spec.caps["latency_s"] < 0.5
    assert request_timeout(spec) == 60.0
    assert calls == 3


def test_a_timeout_the_operator_set_is_used_as_given(tmp_path):
    """--timeout 2 (a command-line setting) or WORKBENCH_JUDGE_TIMEOUT=2 on a server whose probe
    takes 0.3 s: requests are abandoned after 2 s, not after 40 x 0.3 = 12 s (before, a hung
    request held its slot 6x as long as the operator asked), and one probe request is enough.
    Left at its default, the same probe grows the timeout to 60 s, and a 3 s probe to 120 s."""
    from dataclasses import replace

    from tests.llm.judge_project import demo_project, probe_calls
    from workbench.config import load_settings
    from workbench.services.judge import jobs
    from workbench.services.judge.probe import discover
    from workbench.services.judge.spec import request_timeout

    db = demo_project(tmp_path / "demo.duckdb")
    with running_server() as server:
        server.control.grade_rule = lambda call: time.sleep(0.3)
        flag = load_settings(None, {"judge": {"base_url": server.base_url, "timeout": 2.0}}, env={})
        spec = discover(db, "demo", jobs.resolve_spec(flag, api_key="sk-test"))
        calls = probe_calls(server)
    assert spec.timeout_set and spec.caps["latency_s"] >= 0.3
    assert request_timeout(spec) == 2.0
    assert calls == 1
    env = load_settings(None, {"judge": {"base_url": "http://127.0.0.1:9/v1"}},
                        env={"WORKBENCH_JUDGE_TIMEOUT": "2"})
    slow = {"latency_s": 3.0}
    assert request_timeout(replace(jobs.resolve_spec(env, api_key="sk-test"), caps=slow)) == 2.0
    default = jobs.resolve_spec(load_settings(None, {"judge": {"base_url": "http://127.0.0.1:9/v1"}}, env={}),
                                api_key="sk-test")
    assert not default.timeout_set
    assert request_timeout(replace(default, caps={"latency_s": 0.3})) == 60.0
    assert request_timeout(replace(default, caps=slow)) == 120.0


class _HighDraws(random.Random):
    """A random source whose every jitter draw is the top of its range (deterministic waits)."""

    def uniform(self, a, b):
        return b


def test_an_isolated_fault_is_retried_at_once_and_frequent_faults_back_off():
    """backoff_initial 1 s, every jitter at its top: a lone 500 among good replies is retried
    after at most PROMPT_RETRY_S (before: after the whole 1 s backoff, a slot left idle); once
    faults are frequent (4 of the last 5 replies) the first retry backs off the full 1 s again."""
    with running_server() as server:
        async def go():
            client = JudgeClient(ClientConfig(base_url=server.base_url, model="m", backoff_initial=1.0,
                                              backoff_max=1.0, max_attempts=4), None, rng=_HighDraws())
            try:
                server.control.script("500", "ok")
                started = time.monotonic()
                lone = await client.judge(RUBRIC, RUBRIC.render("q", "lone fault"))
                lone_took = time.monotonic() - started
                server.control.script("500", "500", "500", "500", "500", "ok")
                failed = await client.judge(RUBRIC, RUBRIC.render("q", "outage"))  # 4 calls, all 500
                started = time.monotonic()
                after = await client.judge(RUBRIC, RUBRIC.render("q", "after the outage"))
                return lone, lone_took, failed, after, time.monotonic() - started
            finally:
                await client.aclose()

        lone, lone_took, failed, after, after_took = asyncio.run(go())
    assert lone.status == "ok" and lone.http_calls == 2
    assert lone_took < 0.6  # not the 1 s backoff
    assert failed.status == "failed" and failed.http_calls == 4
    assert after.status == "ok" and after.http_calls == 2
    assert after_took >= 0.95  # frequent faults: the full backoff
