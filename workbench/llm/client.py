"""The judge's HTTP client: any OpenAI-compatible chat-completions server.

One retry layer, here: the SDK's own retries are off (``max_retries=0``) and transient failures
— HTTP 429, 408, 409 and 5xx, timeouts and dropped connections — are retried
(:meth:`JudgeClient.retry_wait`): the first retry of an *isolated* fault (fewer than a quarter
of the last :data:`RATE_WINDOW` replies failed) goes at once, after a jitter of at most
:data:`PROMPT_RETRY_S`, since a lone fault says nothing about the server's load; later retries,
and every retry while faults are frequent, back off exponentially with full jitter (``wait =
uniform(0, min(backoff_max, backoff_initial * 2**(attempt - 1)))``). A ``Retry-After`` header
(seconds or an HTTP date, capped at ``backoff_max``) is honoured as given by the request that
got it. A 429 also holds *new*
requests, for the share of the Retry-After that 429s make up among the last
:data:`RATE_WINDOW` replies (:meth:`JudgeClient.global_hold`): a lone 429 is that request's
business, a server answering every request 429 limits the client and every new request waits.
After ``max_attempts`` calls the pair is ``failed`` with the last error. Other errors (400,
401, 404...) fail at once: retrying cannot fix them.

A reply that cannot be validated (see :mod:`workbench.llm.parse`) gets one repair attempt (the
reply and the problem are sent back); if that fails too the pair is ``invalid`` and both raw
replies are kept. A grade is never invented.

Structured output and the capability probe. Before a job's first pair, :meth:`JudgeClient.probe`
finds what the server accepts with one or two tiny requests (``max_tokens`` 8): the formats of
:data:`FORMAT_LADDER` strictest first (``json_schema``; ``json_object`` with a ``schema``, which
llama.cpp enforces as a grammar; ``json_object``; ``text``, no response format), or for
single-token prompts ``logprobs``/``top_logprobs``. A *shape rejection* (:func:`shape_rejection`:
HTTP 400 or 422, or a 500 whose body says a field is invalid, as llama-cpp-python answers
``json_schema``) moves to the next format and is never sent again; the first accepted format is
used for the whole job. ``response_format`` ``"json_schema"``, ``"json_object"`` or ``"text"``
(``"none"`` is the old name of ``"text"``) force one, and a server that refuses it stops the job
with one line. A shape rejection during the job fails that pair at once (no retry).

Concurrency. :class:`AdaptiveLimit` bounds the requests in flight (every attempt, retries
included, takes a slot): it starts at the configured concurrency and halves when a quarter of the
recent replies carry the server's load signals — 429, 503, 504, 529, a timeout, a dropped
connection, or a latency past three times the best seen *after subtracting the client's own
event-loop lag* during the request (:class:`LoopLag`, a 20 ms ticker: a busy client, or one
whose process waits for a CPU, must not read its own delay as the server's). Latencies under
:data:`CALM_LATENCY_S` always count as calm (at a few milliseconds jitter would look like
overload). An isolated fault does not halve it; it grows by one after a limit's worth of calm
replies. A timed-out request is retried only once fewer than the limit are in flight.

Errors are kept whole (the server's full message, at most :data:`ERROR_CHARS` characters).

Secrets: the API key is passed to the SDK and nowhere else; every error text and raw reply
kept by this module goes through :meth:`JudgeClient.scrub`, which replaces the key.
"""

from __future__ import annotations

import asyncio
import collections
import email.utils
import json
import os
import random
import time
from dataclasses import dataclass, field

import openai
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

try:  # the SDK's own HTTP client library (openai 3.x): the judge's lean POST uses it directly
    import httpx2
except ImportError:  # pragma: no cover - another SDK generation: the SDK's generic POST is used
    httpx2 = None

from workbench.llm.outcome import CANNOT_CONNECT, RESPONSE_FORMATS, CallOutcome  # noqa: F401 - re-exported
from workbench.llm.parse import Parsed, json_schema, parse_reply, repair_message
from workbench.llm.prompts import PromptTemplate

#: Structured-output modes, strictest first; what the probe tries in this order.
FORMAT_LADDER = ("json_schema", "json_object+schema", "json_object", "text")
#: The modes a forced ``response_format`` may use.
FORCED_MODES = {"json_schema": ("json_schema",), "json_object": ("json_object+schema", "json_object"),
                "text": ("text",), "none": ("text",)}
ERROR_CHARS = 2000
REASON_MAX_CHARS = 300  # json_object+schema only: the longest reason the grammar allows
PROBE_MESSAGES = [{"role": "system", "content": "You answer with JSON only."},
                  {"role": "user", "content": 'Reply with this JSON object: {"reason": "probe", "grade": 0}'}]
PROBE_TOKEN_MESSAGES = [{"role": "user", "content": "Reply with the digit 0."}]
PROBE_SEED_MESSAGES = [{"role": "user", "content": "Write five random words."}]


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
    concurrency: int = 0  # 0: no adaptive limit (the caller bounds the requests in flight)
    logprobs: bool = True


@dataclass
class Capabilities:
    """What the probe found: the mode used for the whole job, whether logprobs are accepted,
    the probe's latency (seconds), the model as the server lists it, and each refusal seen."""

    format: str
    logprobs: bool = True
    latency_s: float = 0.0
    server_model: str | None = None
    refused: list[str] = field(default_factory=list)
    seed: bool | None = None

    def as_dict(self) -> dict:
        return {"format": self.format, "logprobs": self.logprobs, "latency_s": round(self.latency_s, 4),
                "server_model": self.server_model, "refused": self.refused, "seed": self.seed}

    @classmethod
    def from_dict(cls, d: dict) -> "Capabilities":
        return cls(format=d["format"], logprobs=bool(d.get("logprobs", True)),
                   latency_s=float(d.get("latency_s") or 0.0), server_model=d.get("server_model"),
                   refused=list(d.get("refused") or []), seed=d.get("seed"))


#: seconds: a reply this fast is never a sign of overload, whatever the best seen (see the module doc)
CALM_LATENCY_S = 0.05
#: seconds between the ticks that measure the client's own event-loop lag
TICK_S = 0.02
#: HTTP statuses that mean "too much load" (rate limited, overloaded, gateway gave up)
CONGESTION_STATUSES = (429, 503, 504, 529)
#: replies over which the share of 429s sets the hold of new requests (:meth:`JudgeClient.global_hold`)
RATE_WINDOW = 16
#: seconds: the most a prompt first retry of an isolated fault waits (uniform jitter below it)
PROMPT_RETRY_S = 0.02


class LoopLag:
    """The event loop's own lateness, measured by a ticker that asks to wake every
    :data:`TICK_S`: each tick's overshoot (woken at ``t`` instead of ``due``) is time the loop
    could not run a ready callback (it was busy with other callbacks, or the process was not
    scheduled). ``total()`` is the overshoot summed since the start, including the current
    tick's lateness so far (``now - due`` when positive). The lag a request suffered is
    ``total()`` at its end minus ``total()`` at its start: an upper bound of the delay the client
    added to the server's answer, since any moment the loop is late a reply waits too."""

    def __init__(self):
        self._total = 0.0
        self._due = 0.0
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._due = time.perf_counter() + TICK_S
            self._task = asyncio.get_running_loop().create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            self._due = time.perf_counter() + TICK_S
            await asyncio.sleep(TICK_S)
            self._total += max(0.0, time.perf_counter() - self._due)

    def total(self) -> float:
        return self._total + max(0.0, time.perf_counter() - self._due) if self._task is not None else 0.0

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None


class AdaptiveLimit:
    """AIMD bound on requests in flight (module doc). ``limit`` is a float; a request may start
    while ``inflight < max(1, floor(limit))``.

    Every completed attempt is a *signal*, congested or calm: congested are the server's load
    signals (:data:`CONGESTION_STATUSES`, a timeout, a dropped connection) and a server latency
    ``latency - loop_lag > 3 * max(best, CALM_LATENCY_S)``, where ``loop_lag`` is the client's
    own event-loop lag during the request (:class:`LoopLag`) and ``best`` the fastest raw latency
    seen. The limit halves (``floor(limit / 2)``, at least 1) when at least a quarter of the last
    ``window = max(8, 2 * floor(limit))`` signals are congested (and at least 2 of them), counting
    only signals of requests started after the previous decrease (one decrease per round trip);
    it grows by one after ``floor(limit)`` calm signals since it last changed. A congested
    signal that does not halve it does not restart that count: a server that fails one request
    in ten at random (a dropped connection, a hung request, one 429 among many replies) is not
    a loaded one, and with the count restarted at each such fault a limit halved once would
    seldom see ``floor(limit)`` calm replies in a row again. A server that sheds load or queues
    fills a quarter of the window and halves it."""

    def __init__(self, start: int):
        self.ceiling = max(1, int(start))
        self.limit = float(self.ceiling)
        self.inflight = 0
        self.best: float | None = None
        self.calm = 0
        self.timeouts = 0
        self.decreases = 0
        self.lag = LoopLag()
        self._signals: collections.deque[bool] = collections.deque()
        self._epoch = 0  # bumped at each decrease; signals of requests started before it are ignored
        self._waiters: collections.deque[asyncio.Future] = collections.deque()

    @property
    def window(self) -> int:
        return max(8, 2 * int(self.limit))

    async def acquire(self) -> tuple[int, float]:
        """Wait for a slot; returns the ticket to give back to :meth:`release`."""
        self.lag.start()
        while self.inflight >= max(1, int(self.limit)):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
                self._wake()  # a wake-up meant for this waiter goes to the next one
                raise
        self.inflight += 1
        return self._epoch, self.lag.total()

    async def release(self, latency_s: float | None, *, timed_out: bool = False, congested: bool = False,
                      ticket: tuple[int, float] | None = None) -> None:
        """Give the slot back with what the attempt showed: its latency (None when it failed),
        a timeout, or another congestion signal (``congested``: a 429/503, a dropped connection)."""
        self.inflight -= 1
        epoch, lag_before = ticket if ticket is not None else (self._epoch, self.lag.total())
        if timed_out:
            self.timeouts += 1
            congested = True
        elif latency_s is not None and not congested:
            self.best = latency_s if self.best is None else min(self.best, latency_s)
            server_latency = latency_s - max(0.0, self.lag.total() - lag_before)
            congested = server_latency > 3.0 * max(self.best, CALM_LATENCY_S)
        if latency_s is not None or timed_out or congested:
            self._signal(congested, epoch)
        self._wake()

    def _wake(self) -> None:
        free = max(1, int(self.limit)) - self.inflight
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1

    def _signal(self, congested: bool, epoch: int) -> None:
        if epoch != self._epoch:
            return  # started before the last decrease: its news is already acted on
        self._signals.append(congested)
        while len(self._signals) > self.window:
            self._signals.popleft()
        if congested:
            if sum(self._signals) >= max(2, self.window / 4):
                self._decrease()
            return  # an isolated fault: the calm count goes on (class docstring)
        self.calm += 1
        if self.calm >= int(self.limit) and self.limit < self.ceiling:
            self.limit = min(self.ceiling, self.limit + 1.0)
            self.calm = 0

    def _decrease(self) -> None:
        self.limit = max(1.0, float(int(self.limit) // 2))
        self.calm = 0
        self.decreases += 1
        self._epoch += 1
        self._signals.clear()

    def close(self) -> None:
        self.lag.stop()


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
        if shape_rejection(exc):
            return False  # the same request would be refused again
        return exc.status_code in (408, 409, 429) or exc.status_code >= 500
    return False


_SHAPE_WORDS = ("response_format", "json_schema", "json_object", "logprobs", "top_logprobs", "seed",
                "validation error", "literal_error", "input should be", "extra inputs", "extra_forbidden",
                "unrecognized request argument", "unknown field", "unsupported", "not supported",
                "invalid type", "invalid value")


def error_body(exc: BaseException) -> str:
    """The server's whole error text for an HTTP error: the JSON body's ``error.message`` (or
    ``detail``) when it has one, else the body as sent, else the exception's text."""
    response = getattr(exc, "response", None)
    try:
        text = response.text if response is not None else ""
    except Exception:  # noqa: BLE001 - a streamed or closed body
        text = ""
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        inner = parsed.get("error") if isinstance(parsed.get("error"), dict) else parsed
        message = inner.get("message") or inner.get("detail") or parsed.get("detail")
        if isinstance(message, str) and message:
            return message
    return text or str(exc)


def shape_rejection(exc: BaseException) -> bool:
    """Did the server refuse the request's shape (a field or value it does not accept)? HTTP 400
    or 422, or a 500 whose body names a field as invalid (llama-cpp-python's validation errors)."""
    if not isinstance(exc, openai.APIStatusError):
        return False
    if exc.status_code in (400, 422):
        return True
    if exc.status_code == 500:
        text = error_body(exc).lower()
        return any(word in text for word in _SHAPE_WORDS)
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


def _plain_http_client(base_url: str):
    """For a plain ``http://`` server reached without a proxy, the SDK's HTTP client without a
    certificate store: nothing is encrypted, so there is nothing to verify, and loading the
    store is most of the CPU a new client costs (a judge run makes three). None otherwise (the
    SDK's default client, which verifies TLS)."""
    if not base_url.lower().startswith("http://"):
        return None
    if any(k.lower() in ("http_proxy", "https_proxy", "all_proxy") and v for k, v in os.environ.items()):
        return None  # a proxy may be reached over TLS: keep the default verification
    return openai.DefaultAsyncHttpxClient(verify=False)


class JudgeClient:
    """An AsyncOpenAI client with the retry, repair and rate-limit rules of the module doc."""

    def __init__(self, config: ClientConfig, api_key: str | None, *, rng: random.Random | None = None):
        self.config = config
        self._key = api_key or ""
        self._client = openai.AsyncOpenAI(
            api_key=api_key or "no-key-needed", base_url=config.base_url, max_retries=0,
            timeout=config.timeout, http_client=_plain_http_client(config.base_url),
        )
        forced = FORCED_MODES.get(config.response_format)
        self._mode = forced[0] if forced else "json_schema"
        self._logprobs = config.logprobs
        self.limit = AdaptiveLimit(config.concurrency) if config.concurrency > 0 else None
        self._limiter = RateLimiter(config.requests_per_minute, config.tokens_per_minute)
        self._rng = rng or random.Random()
        self.http_calls = 0
        self._paused_until = 0.0
        self._replies: collections.deque[bool] = collections.deque(maxlen=RATE_WINDOW)  # True: a 429
        self._faults: collections.deque[bool] = collections.deque(maxlen=RATE_WINDOW)  # True: retryable
        self._formats: dict[tuple[str, int], dict | None] = {}
        self._lean = self._lean_post()

    def _lean_post(self):
        """What the lean POST of chat completions needs, built once: the SDK's own HTTP client
        (its connection pool, proxies and TLS settings), the URL, the headers and the timeout;
        None when this SDK is not built that way (then its generic ``post`` is used).

        Why: the SDK's ``post`` rebuilds the request options, headers, URL and an idempotency
        key for every request and runs each reply through its response processing: that is
        most of the client's CPU per judgment. The lean POST sends the same JSON body with the
        same headers over the same client, and raises the SDK's own errors (status errors made
        by the SDK from the response, :class:`openai.APITimeoutError`,
        :class:`openai.APIConnectionError`), so everything after it reads errors as before."""
        http = getattr(self._client, "_client", None)
        status_error = getattr(self._client, "_make_status_error_from_response", None)
        if httpx2 is None or not isinstance(http, httpx2.AsyncClient) or not callable(status_error):
            return None
        try:
            headers = {**self._client.default_headers, **self._client.auth_headers}
            url = httpx2.URL(str(self._client.base_url).rstrip("/") + "/chat/completions")
            timeout = httpx2.Timeout(self.config.timeout).as_dict()
        except Exception:  # noqa: BLE001 - anything unexpected: the SDK's own path
            return None
        headers = {k: v for k, v in headers.items() if isinstance(v, str)}  # Omit() marks "not sent"
        headers.update({"Content-Type": "application/json", "Accept": "application/json"})
        return http, url, headers, timeout, status_error

    async def _post_chat(self, body: dict) -> dict:
        """POST ``body`` to ``/chat/completions``; the reply's JSON object (see :meth:`_lean_post`)."""
        if self._lean is None:
            return await self._client.post("/chat/completions", body=body, cast_to=dict)
        http, url, headers, timeout, status_error = self._lean
        request = httpx2.Request("POST", url, headers=headers, content=json.dumps(body).encode(),
                                 extensions={"timeout": timeout})
        try:
            response = await http.send(request)
        except httpx2.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc
        except Exception as exc:  # noqa: BLE001 - as the SDK: any transport failure is a connection error
            raise openai.APIConnectionError(request=request) from exc
        if response.status_code >= 400:
            raise status_error(response)
        try:
            return json.loads(response.content)
        except ValueError as exc:  # a body cut short or garbled on the wire (incl. bad UTF-8)
            raise json.JSONDecodeError(f"the reply is not JSON ({exc})", response.text[:200], 0) from None

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
        if self.limit is not None:
            self.limit.close()
        await self._client.close()

    async def check_server(self) -> str | None:
        """Before a run: can the server be reached, and does it accept the key? ``GET /models``
        (with the retry rules above); None when fine or when the server has no such endpoint,
        else one line saying what is wrong (options as placeholders, as :class:`ServerProblem`'s)."""
        try:
            await self._create_get("/models")
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            return self.scrub(f"the judge server at {self.config.base_url} refused the API key "
                              f"(HTTP {exc.status_code}); check OPENAI_API_KEY")
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            return self.scrub(f"cannot reach the judge server at {self.config.base_url} "
                              f"({describe_error(exc).splitlines()[0][:300]}); check {{field:base_url}} and that the server runs")
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
        return self.retry_wait(exc, state.attempt_number)

    def isolated(self) -> bool:
        """Are faults isolated now: at most one, or fewer than a quarter, of the last
        :data:`RATE_WINDOW` replies were retryable failures?"""
        faults = sum(self._faults)
        return faults < 2 or 4 * faults < len(self._faults)

    def retry_wait(self, exc: BaseException | None, attempt: int) -> float:
        """Seconds before retrying after the ``attempt``-th call failed with ``exc``.

        A ``Retry-After`` is waited as asked (capped at ``backoff_max``). Otherwise the first
        retry of an *isolated* fault (:meth:`isolated`: a dropped connection, a 500, a timeout
        among mostly good replies) goes at once, after a jitter of at most
        ``min(backoff_initial, PROMPT_RETRY_S)``: waiting longer only leaves a slot idle, since a
        lone fault says nothing about the server's load. Later retries, and every retry while a
        quarter of the recent replies fail, back off exponentially with full jitter:
        ``uniform(0, min(backoff_max, backoff_initial * 2 ** (attempt - 1)))``."""
        asked = self.hold_new_requests(exc)
        if asked is not None:
            return asked
        if attempt <= 1 and self.isolated():
            return self._rng.uniform(0, min(self.config.backoff_initial, PROMPT_RETRY_S))
        ceiling = min(self.config.backoff_max, self.config.backoff_initial * 2 ** (attempt - 1))
        return self._rng.uniform(0, ceiling)

    def hold_new_requests(self, exc: BaseException | None) -> float | None:
        """The Retry-After ``exc`` asks for (capped at ``backoff_max``), None without one. For a
        429, new requests are held for the share of it that the recent 429s make up
        (:meth:`global_hold`), whether or not the request that got it is retried: one 429 among
        many replies is that request's problem; a server answering only 429s is limiting this
        client, and then every new request waits the whole time."""
        asked = retry_after_seconds(exc) if exc is not None else None
        if asked is None:
            return None
        asked = min(asked, self.config.backoff_max)
        if isinstance(exc, openai.RateLimitError):
            self._paused_until = max(self._paused_until, time.monotonic() + self.global_hold(asked))
        return asked

    def global_hold(self, asked: float) -> float:
        """Seconds every new request waits after a 429 asking ``asked`` seconds:
        ``asked * n429 / max(RATE_WINDOW, n)`` over the last ``n`` (at most
        :data:`RATE_WINDOW`) replies, so a lone 429 among 16 replies holds new requests for a
        sixteenth of ``asked``, and 429s to every request hold them for all of it."""
        replies = list(self._replies)
        return asked * sum(replies) / max(RATE_WINDOW, len(replies))

    @property
    def mode(self) -> str:
        return self._mode

    def use(self, caps: Capabilities) -> None:
        """Send every later request in the mode the probe chose."""
        self._mode = caps.format
        self._logprobs = caps.logprobs

    def request_body(self, template: PromptTemplate, messages: list[dict], *, seed: int | None = None) -> dict:
        """The chat-completions request body for ``messages`` (also used for batch files)."""
        body: dict = {"model": self.config.model, "messages": messages,
                      "temperature": self.config.temperature}
        if template.output == "single_token":
            body["max_tokens"] = 1
            if self._logprobs:
                body.update(logprobs=True, top_logprobs=10)
        else:
            body["max_tokens"] = self.config.max_tokens
            key = (self._mode, id(template))
            if key not in self._formats:  # built once per mode and template, not per request
                self._formats[key] = response_format_body(self._mode, template)
            format_body = self._formats[key]
            if format_body is not None:
                body["response_format"] = format_body
        if seed is not None:
            body["seed"] = int(seed)
        return body

    # -- the capability probe ----------------------------------------------------------------
    async def server_models(self) -> list[str] | None:
        """The model ids ``GET /models`` lists (None when the server has no such endpoint).
        Raises :class:`ConnectionError`-like one-line problems via :meth:`check_server`."""
        try:
            reply = await self._create_get("/models")
        except openai.APIStatusError as exc:
            if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
                raise
            return None
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list):
            return None
        return [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id") is not None]

    async def server_info(self, *, batch: bool = False) -> str | None:
        """Before a job: ``GET /models`` (reachable? key accepted?) and, for ``batch``, ``GET
        /batches`` (is there a Batch API?). Returns the model as the server reports it; raises
        :class:`ServerProblem` with one line saying what is wrong."""
        url = self.config.base_url
        try:
            models = await self.server_models()
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise ServerProblem(self.scrub(f"the judge server at {url} refused the API key "
                                           f"(HTTP {exc.status_code}); check OPENAI_API_KEY")) from None
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise ServerProblem(self.scrub(f"cannot reach the judge server at {url} ({first_line(describe_error(exc))}); "
                                           f"check {{field:base_url}} and that the server runs")) from None
        if batch:
            try:
                await self._client.get("/batches", cast_to=dict, options={"params": {"limit": 1}})
            except openai.APIStatusError as exc:
                if exc.status_code in (404, 405, 501):
                    raise ServerProblem(
                        f"the judge server at {url} has no Batch API (GET /batches: HTTP {exc.status_code}); "
                        f"judge online without {{field:batch}}, or write the requests with {{field:batch_file FILE}} "
                        f"and store the results with {{field:batch_results FILE}}") from None
                raise ServerProblem(self.scrub(f"the judge server at {url} refused the Batch API "
                                               f"({first_line(describe_error(exc))})")) from None
            except (openai.APIConnectionError, openai.APITimeoutError) as exc:
                raise ServerProblem(f"cannot reach the judge server at {url} ({first_line(describe_error(exc))})") \
                    from None
        return self.reported_model(models)

    def reported_model(self, models: list[str] | None) -> str | None:
        """The model as the server reports it: the configured name when listed, else the only
        model a one-model server (llama.cpp) lists, else None."""
        if not models:
            return None
        if self.config.model in models:
            return self.config.model
        return models[0] if len(models) == 1 else None

    async def probe(self, template: PromptTemplate, *, seed: bool = False, latency_samples: int = 1,
                    settled_below_s: float = 0.0) -> Capabilities:
        """Find the strictest accepted mode (module doc) with one tiny request per mode tried
        (and with ``seed``, whether the server honours seeds: :meth:`probe_seed`). The latency is
        the median of ``latency_samples`` requests in the accepted mode (the first, then the
        rest sent together): one probe can meet a cold cache or a busy moment
        (docs/performance.md has a llama.cpp server's spread). A first latency of at most
        ``settled_below_s`` is kept without more requests (the caller's use of it cannot change).
        Raises :class:`ServerProblem` (one line) when the server accepts none, refuses a forced
        one, or fails the probe."""
        try:
            caps = await self._probe(template, max(1, int(latency_samples)), settled_below_s)
            if seed:
                caps.seed = await self.probe_seed()
            return caps
        except openai.APIError as exc:
            raise ProbeInconclusive(self.scrub(
                f"the judge server at {self.config.base_url} failed the capability probe "
                f"({first_line(describe_error(exc))}); check the server, then run again")) from None
        except json.JSONDecodeError as exc:
            raise ServerProblem(f"the judge server at {self.config.base_url} answered the capability probe "
                                f"with something that is not JSON ({exc.msg})") from None

    async def _probe_latency(self, body: dict, first_ms: float, samples: int, calls: list[int],
                             settled_below_s: float = 0.0) -> float:
        """Seconds: the median of ``first_ms`` and ``samples - 1`` more requests of ``body``
        (just ``first_ms`` when it is at most ``settled_below_s``)."""
        if first_ms / 1000.0 <= settled_below_s:
            return first_ms / 1000.0
        # The others together, in one round trip: on a server that answers one request at a
        # time one of them waits for the other, so the median can only err towards a longer
        # timeout, never a shorter one.
        more = await asyncio.gather(*[self._create_retrying(body, calls) for _ in range(samples - 1)])
        latencies = [first_ms] + [latency for _, latency in more]
        latencies.sort()
        mid = len(latencies) // 2
        median = latencies[mid] if len(latencies) % 2 else (latencies[mid - 1] + latencies[mid]) / 2
        return median / 1000.0

    async def _probe(self, template: PromptTemplate, samples: int = 1, settled_below_s: float = 0.0) -> Capabilities:
        refused: list[str] = []
        calls = [0]
        if template.output == "single_token":
            for logprobs in (True, False):
                body = {"model": self.config.model, "messages": PROBE_TOKEN_MESSAGES, "temperature": 0.0,
                        "max_tokens": 1}
                if logprobs:
                    body.update(logprobs=True, top_logprobs=10)
                try:
                    _, latency = await self._create_retrying(body, calls)
                except openai.APIStatusError as exc:
                    if not shape_rejection(exc):
                        raise
                    refused.append(f"logprobs: {self.scrub(describe_error(exc))[:300]}")
                    continue
                return Capabilities(format="text", logprobs=logprobs, refused=refused,
                                    latency_s=await self._probe_latency(body, latency, samples, calls, settled_below_s))
            raise ServerProblem(self.scrub("the judge server refused even a plain one-token request: "
                                           + first_line(refused[-1])))
        modes = FORCED_MODES.get(self.config.response_format) or FORMAT_LADDER
        for mode in modes:
            body = {"model": self.config.model, "messages": PROBE_MESSAGES, "temperature": 0.0, "max_tokens": 8}
            format_body = response_format_body(mode, template)
            if format_body is not None:
                body["response_format"] = format_body
            try:
                _, latency = await self._create_retrying(body, calls)
            except openai.APIStatusError as exc:
                if not shape_rejection(exc):
                    raise
                refused.append(f"{mode}: {self.scrub(describe_error(exc))[:300]}")
                continue
            return Capabilities(format=mode, latency_s=await self._probe_latency(body, latency, samples, calls,
                                                                                   settled_below_s),
                                refused=refused)
        if self.config.response_format in ("auto",):
            raise ServerProblem(self.scrub("the judge server refused every request format (json_schema, "
                                           "json_object, text); last answer: " + first_line(refused[-1])))
        raise ServerProblem(self.scrub(f"the judge server refuses response_format {self.config.response_format} "
                                       f"({first_line(refused[-1])}); use {{field:response_format auto}}"))

    async def probe_seed(self) -> bool:
        """Does the server honour ``seed``? Two identical sampled requests (temperature 1) with the
        same seed must answer the same text; a shape rejection of ``seed`` means no."""
        body = {"model": self.config.model, "temperature": 1.0, "max_tokens": 12, "seed": 12345,
                "messages": PROBE_SEED_MESSAGES}
        calls = [0]
        texts = []
        for _ in range(2):
            try:
                reply, _ = await self._create_retrying(body, calls)
            except openai.APIStatusError as exc:
                if shape_rejection(exc):
                    return False
                raise
            choices = reply.get("choices") or [{}]
            texts.append(((choices[0] or {}).get("message") or {}).get("content"))
        return texts[0] == texts[1]

    async def _create(self, body: dict, calls: list[int]):
        """One chat completion with retries. ``calls[0]`` counts the HTTP requests made."""
        return await self._create_retrying(body, calls)

    async def _create_retrying(self, body: dict, calls: list[int]):
        """One chat completion: up to ``max_attempts`` calls, retrying what :func:`_transient`
        allows after :meth:`retry_wait`. Returns the reply (a dict) and its latency in ms."""
        attempts = max(1, self.config.max_attempts)
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._attempt(body, calls)
            except Exception as exc:
                if attempt >= attempts or not _transient(exc):
                    self.hold_new_requests(exc)
                    raise
                wait = self.retry_wait(exc, attempt)
            if wait > 0:
                await asyncio.sleep(wait)

    async def _attempt(self, body: dict, calls: list[int]):
        self.http_calls += 1
        calls[0] += 1
        ticket = await self.limit.acquire() if self.limit is not None else None
        started = time.perf_counter()
        # The reply as a plain dict: `chat.completions.create` would walk the request and build
        # pydantic models for every reply, which costs more CPU per judgment than everything
        # else together at high concurrency (and see `_lean_post`).
        latency, timed_out, congested, limited, fault = None, False, False, False, True
        try:
            response = await self._post_chat(body)
            latency = time.perf_counter() - started
            fault = False
        except openai.APITimeoutError:
            timed_out = True
            raise
        except openai.APIConnectionError:
            congested = True  # dropped or refused: a server shedding load does that
            raise
        except openai.APIStatusError as exc:
            congested = exc.status_code in CONGESTION_STATUSES
            limited = exc.status_code == 429
            fault = _transient(exc)
            raise
        finally:
            self._replies.append(limited)
            self._faults.append(fault)
            if self.limit is not None:
                await self.limit.release(latency, timed_out=timed_out, congested=congested, ticket=ticket)
        if not isinstance(response, dict):
            raise json.JSONDecodeError("the reply is not a JSON object", str(response)[:200], 0)
        return response, (time.perf_counter() - started) * 1000.0

    # -- one judgment ----------------------------------------------------------------------
    async def judge(self, template: PromptTemplate, messages: list[dict], *, estimated_tokens: int = 0,
                    seed: int | None = None) -> CallOutcome:
        """Grade one pair: request, validate, one repair attempt, outcome (never raises for
        server or network trouble; those become ``failed``)."""
        outcome = CallOutcome(status="failed")
        body = self.request_body(template, messages, seed=seed)
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


def response_format_body(mode: str, template: PromptTemplate) -> dict | None:
    """The ``response_format`` field of ``mode`` (:data:`FORMAT_LADDER`); None for ``text``."""
    if mode == "json_schema":
        return json_schema(template)
    if mode == "json_object+schema":
        # llama.cpp compiles this schema into a grammar; a bounded reason keeps a rambling small
        # model's object complete within max_tokens (an unclosed object is no answer at all).
        schema = json.loads(json.dumps(json_schema(template)["json_schema"]["schema"]))
        schema["properties"]["reason"]["maxLength"] = REASON_MAX_CHARS
        return {"type": "json_object", "schema": schema}
    if mode == "json_object":
        return {"type": "json_object"}
    return None


class ServerProblem(Exception):
    """The server cannot be used as asked (unreachable, key refused, no Batch API, no accepted
    format); the message is one line, naming the options it concerns as placeholders
    (``{field:base_url}``, :mod:`workbench.errors`) for the caller's error to carry."""


class ProbeInconclusive(ServerProblem):
    """The probe's requests failed for a reason that is not their shape (a 5xx, a timeout)."""


def first_line(text: str, limit: int = 300) -> str:
    return (str(text).splitlines() or [""])[0][:limit]


def describe_error(exc: BaseException) -> str:
    """The kind of failure (status code, timeout, connection) and the server's whole text, at
    most :data:`ERROR_CHARS` characters (it starts with the kind: ``HTTP 500: ...``)."""
    if isinstance(exc, openai.APITimeoutError):
        return "timeout: the server did not answer in time"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        if type(cause).__name__ == "ConnectError":  # nothing listens: the server is down or gone
            return f"{CANNOT_CONNECT} ({cause})"[:ERROR_CHARS]
        return f"connection error: {cause or exc}"[:ERROR_CHARS]
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {error_body(exc)}"[:ERROR_CHARS]
    return f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]
