"""The judge's HTTP client: any OpenAI-compatible chat-completions server.

One retry layer, here: the SDK's own retries are off (``max_retries=0``) and tenacity retries
transient failures — HTTP 429, 408, 409 and 5xx, timeouts and dropped connections — with
exponential backoff and full jitter (``wait = uniform(0, min(backoff_max, backoff_initial *
2**attempt))``), except that a ``Retry-After`` header (seconds or an HTTP date, capped at
``backoff_max``) is honoured as given, and after a 429 that carries one no new request starts
before that time. After ``max_attempts`` calls the pair is ``failed`` with
the last error. Other errors (400, 401, 404...) fail at once: retrying cannot fix them.

A reply that cannot be validated (see :mod:`workbench.llm.parse`) gets one repair attempt (the
reply and the problem are sent back); if that fails too the pair is ``invalid`` and both raw
replies are kept. A grade is never invented.

Structured output: ``response_format = "auto"`` asks for a ``json_schema`` response; a server
that refuses it (HTTP 400/422 naming the response format) is asked again with JSON mode and then
with no response format (the tolerant parser reads the reply); the working mode is remembered
for the rest of the run. ``"json_schema"``, ``"json_object"`` or ``"none"`` fix the mode.

Secrets: the API key is passed to the SDK and nowhere else; every error text and raw reply
kept by this module goes through :meth:`JudgeClient.scrub`, which replaces the key.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from dataclasses import dataclass, field

import openai
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from workbench.llm.parse import Parsed, json_schema, parse_reply, repair_message
from workbench.llm.prompts import PromptTemplate

RESPONSE_FORMATS = ("auto", "json_schema", "json_object", "none")


@dataclass(frozen=True)
class ClientConfig:
    """Everything the client needs except the key. ``params`` are the sampling parameters that
    change answers (part of the cache key)."""

    base_url: str
    model: str
    temperature: float = 0.0
    max_tokens: int = 200
    timeout: float = 60.0
    max_attempts: int = 4
    backoff_initial: float = 0.5
    backoff_max: float = 60.0
    response_format: str = "auto"
    requests_per_minute: int = 0
    tokens_per_minute: int = 0


@dataclass
class CallOutcome:
    """What one pair (one sample) came to. ``grade`` is None unless ``status == "ok"``."""

    status: str
    grade: int | None = None
    reason: str | None = None
    raw_response: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float | None = None
    http_calls: int = 0
    probabilities: dict[int, float] | None = None
    expected_grade: float | None = None
    extra: dict = field(default_factory=dict)


class RateLimiter:
    """Requests- and tokens-per-minute token buckets (0 = unlimited).

    Each bucket holds at most five seconds of its rate (at least one request's worth), refills
    continuously, and may go negative for one oversized request so that it is never refused.
    """

    def __init__(self, requests_per_minute: int = 0, tokens_per_minute: int = 0):
        self._rates = {"req": requests_per_minute / 60.0, "tok": tokens_per_minute / 60.0}
        self._cap = {k: max(r * 5.0, 1.0) for k, r in self._rates.items()}
        self._level = dict(self._cap)
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self, tokens: int) -> None:
        if not any(self._rates.values()):
            return
        need = {"req": 1.0, "tok": float(tokens)}
        async with self._lock:
            while True:
                now = time.monotonic()
                for k, rate in self._rates.items():
                    self._level[k] = min(self._cap[k], self._level[k] + (now - self._stamp) * rate)
                self._stamp = now
                short = [k for k, rate in self._rates.items()
                         if rate and self._level[k] < min(need[k], self._cap[k])]
                if not short:
                    for k, rate in self._rates.items():
                        if rate:
                            self._level[k] -= need[k]
                    return
                wait = max((min(need[k], self._cap[k]) - self._level[k]) / self._rates[k] for k in short)
                await asyncio.sleep(min(wait, 5.0))


def _transient(exc: BaseException) -> bool:
    # A body cut short or garbled on the wire reads as invalid JSON: like a dropped connection.
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, openai.APIResponseValidationError,
                        json.JSONDecodeError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


def retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds asked for by a ``Retry-After`` (or ``retry-after-ms``) header, if any."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        if when is None:
            return None
        return max(0.0, when.timestamp() - time.time())


def _format_refused(exc: BaseException) -> bool:
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422):
        return False
    text = str(exc).lower()
    return any(word in text for word in ("response_format", "json_schema", "json_object", "response format",
                                         "structured output", "not supported"))


class JudgeClient:
    """An AsyncOpenAI client with the retry, repair and rate-limit rules of the module doc."""

    def __init__(self, config: ClientConfig, api_key: str | None, *, rng: random.Random | None = None):
        self.config = config
        self._key = api_key or ""
        self._client = openai.AsyncOpenAI(
            api_key=api_key or "no-key-needed", base_url=config.base_url, max_retries=0,
            timeout=config.timeout,
        )
        self._mode = "json_schema" if config.response_format == "auto" else config.response_format
        self._limiter = RateLimiter(config.requests_per_minute, config.tokens_per_minute)
        self._rng = rng or random.Random()
        self.http_calls = 0
        self._paused_until = 0.0

    # -- secrets ---------------------------------------------------------------------------
    def scrub(self, text: str | None) -> str | None:
        """``text`` with the API key (and its long fragments) replaced by ``***``."""
        if text is None or not self._key or len(self._key) < 6:
            return text
        out = text.replace(self._key, "***")
        if len(self._key) >= 16:
            # Servers echo masked keys ("sk-abc...wxyz"); drop any 12-character fragment too.
            for i in range(len(self._key) - 11):
                frag = self._key[i:i + 12]
                if frag in out:
                    out = out.replace(frag, "***")
        return out

    async def aclose(self) -> None:
        await self._client.close()

    async def check_server(self) -> str | None:
        """Before a run: can the server be reached, and does it accept the key? ``GET /models``
        (with the retry rules above); None when fine or when the server has no such endpoint,
        else one line saying what is wrong."""
        try:
            await self._create_get("/models")
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            return self.scrub(f"the judge server at {self.config.base_url} refused the API key "
                              f"(HTTP {exc.status_code}); check OPENAI_API_KEY")
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            return self.scrub(f"cannot reach the judge server at {self.config.base_url} "
                              f"({describe_error(exc)}); check --base-url and that the server runs")
        except openai.APIStatusError:
            return None  # no /models endpoint (or not allowed): the requests will tell
        return None

    async def _create_get(self, path: str):
        retrying = AsyncRetrying(stop=stop_after_attempt(max(1, min(self.config.max_attempts, 3))),
                                 wait=self._wait, retry=retry_if_exception(_transient), reraise=True)
        async for attempt in retrying:
            with attempt:
                return await self._client.get(path, cast_to=dict)
        return None

    # -- one request -----------------------------------------------------------------------
    def _wait(self, state) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = retry_after_seconds(exc) if exc is not None else None
        if asked is not None:
            asked = min(asked, self.config.backoff_max)
            if isinstance(exc, openai.RateLimitError):
                # The server is rate limiting this client, not one request: hold every new
                # request until the time it asked for has passed.
                self._paused_until = max(self._paused_until, time.monotonic() + asked)
            return asked
        ceiling = min(self.config.backoff_max, self.config.backoff_initial * 2 ** (state.attempt_number - 1))
        return self._rng.uniform(0, ceiling)

    def request_body(self, template: PromptTemplate, messages: list[dict]) -> dict:
        """The chat-completions request body for ``messages`` (also used for batch files)."""
        body: dict = {"model": self.config.model, "messages": messages,
                      "temperature": self.config.temperature}
        if template.output == "single_token":
            body.update(max_tokens=1, logprobs=True, top_logprobs=10)
        else:
            body["max_tokens"] = self.config.max_tokens
            if self._mode == "json_schema":
                body["response_format"] = json_schema(template)
            elif self._mode == "json_object":
                body["response_format"] = {"type": "json_object"}
        return body

    async def _create(self, body: dict, calls: list[int]):
        """One chat completion with retries; falls back on response formats the server refuses.
        ``calls[0]`` counts the HTTP requests made."""
        while True:
            try:
                return await self._create_retrying(body, calls)
            except openai.APIStatusError as exc:
                if (self.config.response_format == "auto" and "response_format" in body
                        and _format_refused(exc)):
                    self._mode = "json_object" if self._mode == "json_schema" else "none"
                    body = dict(body)
                    if self._mode == "json_object":
                        body["response_format"] = {"type": "json_object"}
                    else:
                        body.pop("response_format", None)
                    continue
                raise

    async def _create_retrying(self, body: dict, calls: list[int]):
        retrying = AsyncRetrying(stop=stop_after_attempt(max(1, self.config.max_attempts)),
                                 wait=self._wait, retry=retry_if_exception(_transient), reraise=True)
        async for attempt in retrying:
            with attempt:
                self.http_calls += 1
                calls[0] += 1
                started = time.perf_counter()
                # The SDK's generic POST (its HTTP client, errors, timeout) with the JSON body as
                # built here and the reply as a plain dict: `chat.completions.create` would walk
                # the request and build pydantic models for every reply, which costs more CPU per
                # judgment than everything else together at high concurrency.
                response = await self._client.post("/chat/completions", body=body, cast_to=dict)
                if not isinstance(response, dict):
                    raise json.JSONDecodeError("the reply is not a JSON object", str(response)[:200], 0)
                return response, (time.perf_counter() - started) * 1000.0
        return None  # unreachable: reraise=True

    # -- one judgment ----------------------------------------------------------------------
    async def judge(self, template: PromptTemplate, messages: list[dict], *, estimated_tokens: int = 0
                    ) -> CallOutcome:
        """Grade one pair: request, validate, one repair attempt, outcome (never raises for
        server or network trouble; those become ``failed``)."""
        outcome = CallOutcome(status="failed")
        body = self.request_body(template, messages)
        calls = [0]
        try:
            pause = self._paused_until - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)
            await self._limiter.acquire(estimated_tokens)
            response, outcome.latency_ms = await self._create(body, calls)
            parsed, raw = self._read(template, response, outcome)
            if parsed.grade is None:
                first_raw, problem = raw, parsed.problem
                repair = dict(body)
                repair["messages"] = list(body["messages"]) + [
                    {"role": "assistant", "content": raw or ""},
                    {"role": "user", "content": repair_message(template, problem)},
                ]
                await self._limiter.acquire(estimated_tokens)
                response, latency = await self._create(repair, calls)
                outcome.latency_ms = (outcome.latency_ms or 0.0) + latency
                parsed, raw = self._read(template, response, outcome)
                if parsed.grade is None:
                    outcome.status = "invalid"
                    outcome.raw_response = self.scrub(f"{first_raw}\n--- repair attempt ---\n{raw}")
                    outcome.error = self.scrub(
                        f"invalid reply: {problem}; after one repair attempt: {parsed.problem}")
                    outcome.reason = parsed.reason
                    return outcome
            outcome.status = "ok"
            outcome.grade = parsed.grade
            outcome.reason = self.scrub(parsed.reason)
            outcome.raw_response = self.scrub(raw)
            outcome.probabilities = parsed.probabilities
            outcome.expected_grade = parsed.expected_grade
            return outcome
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is recorded, never raised
            outcome.status = "failed"
            outcome.error = self.scrub(describe_error(exc))
            return outcome
        finally:
            outcome.http_calls = calls[0]

    def _read(self, template: PromptTemplate, response: dict, outcome: CallOutcome) -> tuple[Parsed, str | None]:
        return read_completion(template, response, outcome)


def read_completion(template: PromptTemplate, body: dict, outcome: CallOutcome) -> tuple[Parsed, str | None]:
    """Validate a chat.completion JSON object (online reply or batch output line); adds its usage
    to ``outcome``; returns the parsed reply and the raw message text."""
    usage = body.get("usage") or {}
    outcome.prompt_tokens += int(usage.get("prompt_tokens") or 0)
    outcome.completion_tokens += int(usage.get("completion_tokens") or 0)
    choices = body.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return Parsed(None, problem="the response has no choices"), None
    message = choices[0].get("message") or {}
    raw = message.get("content")
    if not isinstance(raw, str):
        if message.get("refusal"):
            return Parsed(None, problem=f"the model refused: {message['refusal']}"), str(message["refusal"])
        raw = None if raw is None else json.dumps(raw)
    top = None
    content = (choices[0].get("logprobs") or {}).get("content") or []
    if content and isinstance(content[0], dict):
        top = [(c.get("token"), c.get("logprob")) for c in (content[0].get("top_logprobs") or [])]
        if not top:
            top = [(content[0].get("token"), content[0].get("logprob"))]
    return parse_reply(template, raw, top), raw


def describe_error(exc: BaseException) -> str:
    """One line naming the kind of failure (status code, timeout, connection) and its text."""
    if isinstance(exc, openai.APITimeoutError):
        return "timeout: the server did not answer in time"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return f"connection error: {cause or exc}".splitlines()[0][:500]
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}".splitlines()[0][:500]
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
