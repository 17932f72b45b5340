"""A local OpenAI-compatible HTTP server for tests and benchmarks.

Real HTTP/1.1 on 127.0.0.1 (free port), driven by the real ``openai`` client: nothing of the SDK is
mocked. Endpoints::

    GET  /v1/models, /v1/models/{id}
    POST /v1/chat/completions
    POST /v1/files (multipart upload)     GET /v1/files/{id}, /v1/files/{id}/content
    POST /v1/batches                      GET /v1/batches, /v1/batches/{id}
    POST /v1/batches/{id}/cancel

Usage::

    with running_server(latency=0.1) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        server.control.script("429", "ok")          # the next two chat calls
        server.control.fault_rates = {"500": 0.05}  # then 5 % server errors
        ...
        server.control.count("/v1/chat/completions")

or the ``openai_server`` pytest fixture (import it into the test module). ``python -m
tests.support.openai_server --latency 0.1`` runs one in the foreground and prints its base URL.

Grades. A chat completion answers ``{"reason": ..., "grade": g}`` in the message content. ``g`` is
decided, in order, by ``control.grade_rule(call)`` (a callable returning an int, or None to fall
through), ``control.grades_by_passage_sha[sha256(passage)]`` (the passage found by
``extract_passage``), ``control.grades_by_text`` (the first key found as a substring of the
prompt), and finally ``default_grade``: ``int(sha256(passage or prompt)[:8], 16) % 4``, a stable
rule that tests can recompute with ``expected_default_grade``.

Structured output: ``response_format`` json_schema and json_object are honoured (the answer is JSON
either way); ``control.refused_formats = {"json_schema"}`` makes the server refuse a type with HTTP
400 naming it, as servers without structured output do.

Faults (per chat request). Kinds: ``ok``, ``429`` (with Retry-After and retry-after-ms), ``500``,
``hang`` (no answer until ``hang_seconds`` pass or the server stops; longer than any client
timeout), ``drop`` (the connection is closed without a response), ``malformed`` (HTTP 200 whose
message content is not JSON), ``malformed_body`` (HTTP 200 whose body is not JSON), and
``out_of_range`` (a well-formed answer with grade 7). A kind is chosen, in order, by the scripted
queue (``control.script(...)``, one entry per request in arrival order), ``control.fault_rule(call)``
(a callable, None falls through), then ``control.fault_rates`` ({kind: probability}). The rate draw
is a hash of (seed, prompt, attempt number of that prompt), so the same prompt on the same attempt
always meets the same fault whatever the arrival order: a run is reproducible under concurrency.

Holding. ``release = control.hold(after=20, only=...)`` keeps chat requests after the 20th waiting
(before their answer) until ``release.set()``; ``control.held`` counts those waiting. A test that
must act while a job is mid-run (kill it, stop it, write beside it) holds it there: deterministic,
and no slower than needed. ``control.complete_batches()`` completes the batches in progress now
(create them with a long ``batch_seconds`` to keep them in progress until then).

Recording. Every request is a ``RecordedRequest`` (method, path, JSON body, fault, prompt sha,
attempt number); ``control.count(path)``, ``control.chat_calls()`` and ``control.attempts_by_prompt()``
let tests check retry budgets and that nothing was sent twice. ``record_bodies=False`` keeps only
the counts and the prompt hashes (for 50,000-request benchmarks).

Scaling. ``ThreadingHTTPServer`` with daemon threads, ``request_queue_size=1024`` and Nagle off on
the handler: without the last two a 32-way client gets about 64 % of the latency ceiling.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import math
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULT_KINDS = ("ok", "429", "500", "hang", "drop", "malformed", "malformed_body", "out_of_range")
OUT_OF_RANGE_GRADE = 7
CHAT_PATH = "/v1/chat/completions"

_PASSAGE_PATTERNS = (
    re.compile(r"<passage>\n?(.*?)\n?</passage>", re.DOTALL),
    # the judge's fences carry a code derived from the text, so the closing one must repeat it
    re.compile(r"<<<PASSAGE( [0-9a-f]+|)>>>\n(.*?)\n<<<END PASSAGE\1>>>", re.DOTALL),
    re.compile(r"Passage:\n(.*?)\n\n(?:Grades?:|Rubric|Answer|Reply|Think)", re.DOTALL),
)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def extract_passage(prompt: str) -> str | None:
    """The passage inside a rendered judge prompt, or None when no known delimiter is found.

    Known forms: ``<passage>...</passage>``, ``<<<PASSAGE code>>> ... <<<END PASSAGE code>>>`` (the
    judge's fences; the code is optional) and the v1
    ``Passage:\\n...\\n\\nGrades:`` layout. The last match wins for tag forms, because a passage may
    itself contain a fake opening tag before the real one closes.
    """
    for pattern in _PASSAGE_PATTERNS:
        found = pattern.findall(prompt)
        if found:
            last = found[-1]
            return last[-1] if isinstance(last, tuple) else last
    return None


def expected_default_grade(text: str) -> int:
    """The default grade for a passage (or, without a recognisable passage, the whole prompt)."""
    return int(sha256_text(text)[:8], 16) % 4


@dataclass(frozen=True)
class ChatCall:
    """What a grade or fault rule sees of one chat request."""

    body: dict[str, Any]
    prompt: str  # every message's text content joined by "\n"
    passage: str | None
    prompt_sha: str
    attempt: int  # 1 for the first time this exact prompt arrives, 2 for the second, ...

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: Any  # parsed JSON, raw bytes for uploads, None when not recorded
    fault: str | None = None  # the fault applied (chat only), "ok" for a normal answer
    prompt_sha: str | None = None
    attempt: int = 0
    status: int | None = None
    at: float = field(default_factory=time.monotonic)
    authorized: bool = True
    headers: dict[str, str] = field(default_factory=dict)  # Authorization value never kept


@dataclass
class _File:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
        }


@dataclass
class _Batch:
    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    metadata: dict[str, Any] | None
    created_at: int
    ready_at: float  # monotonic time at which it completes
    status: str = "in_progress"
    output_file_id: str | None = None
    error_file_id: str | None = None
    counts: dict[str, int] = field(default_factory=lambda: {"total": 0, "completed": 0, "failed": 0})
    completed_at: int | None = None
    cancelled_at: int | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "errors": {"object": "list", "data": self.errors} if self.errors else None,
            "input_file_id": self.input_file_id,
            "completion_window": self.completion_window,
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "in_progress_at": self.created_at,
            "completed_at": self.completed_at,
            "cancelled_at": self.cancelled_at,
            "request_counts": dict(self.counts),
            "metadata": self.metadata,
        }


class ServerControl:
    """Everything a test configures on, or reads back from, a running server. Thread-safe."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        seed: int = 0,
        retry_after: float = 0.05,
        hang_seconds: float = 30.0,
        record_bodies: bool = True,
        models: tuple[str, ...] = ("test-judge", "gpt-4o-mini"),
        api_key: str | None = None,
        batch_seconds: float = 0.0,
    ) -> None:
        self.latency = latency  # seconds before every chat answer (and every fault but drop)
        self.seed = seed
        self.retry_after = retry_after  # seconds, sent as Retry-After and retry-after-ms
        self.hang_seconds = hang_seconds
        self.record_bodies = record_bodies
        self.models = list(models)
        self.api_key = api_key  # when set, a request without "Bearer <api_key>" gets 401
        self.batch_seconds = batch_seconds  # a batch completes this long after creation
        self.grade_rule: Callable[[ChatCall], int | None] | None = None
        self.grades_by_passage_sha: dict[str, int] = {}
        self.grades_by_text: dict[str, int] = {}
        # response_format types this server refuses with HTTP 400 (as older vLLM/llama.cpp builds do)
        self.refused_formats: set[str] = set()
        self.fault_rule: Callable[[ChatCall], str | None] | None = None
        self.fault_rates: dict[str, float] = {}
        self.batch_fault_rates: dict[str, float] = {}  # only "malformed"/"out_of_range" per line
        self._script: collections.deque[str] = collections.deque()
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._path_counts: collections.Counter[str] = collections.Counter()
        self._attempts: collections.Counter[str] = collections.Counter()
        self._fault_counts: collections.Counter[str] = collections.Counter()
        self.files: dict[str, _File] = {}
        self.batches: dict[str, _Batch] = {}
        self.stopping = threading.Event()
        self.in_flight = 0
        self.connections = 0  # TCP connections accepted: keep-alive reuses them
        self.connection_errors = 0  # connections a client reset or abandoned mid-request
        self.max_in_flight = 0
        self._hold: tuple[int, Callable[[ChatCall], bool] | None, threading.Event] | None = None
        self._hold_seen = 0
        self.held = 0  # chat requests waiting at the hold now

    # -- configuration -------------------------------------------------------------------------
    def script(self, *kinds: str) -> None:
        """Queue faults for the next chat requests, in arrival order ("ok" for a normal answer)."""
        for kind in kinds:
            _check_kind(kind)
        with self._lock:
            self._script.extend(kinds)

    def hold(self, after: int = 0, only: Callable[[ChatCall], bool] | None = None) -> threading.Event:
        """Hold chat requests (those ``only`` accepts; all without it) after the first ``after`` of
        them: each waits, before it is answered, until the returned event is set or the server
        stops. ``held`` counts the requests waiting now. A test that needs a job mid-run holds it
        there, instead of slowing every answer down and hoping to act in time."""
        release = threading.Event()
        with self._lock:
            self._hold, self._hold_seen = (after, only, release), 0
        return release

    def complete_batches(self) -> None:
        """Batches still in progress complete now (the next look at them settles them)."""
        with self._lock:
            for batch in self.batches.values():
                batch.ready_at = min(batch.ready_at, time.monotonic())

    def _wait_at_hold(self, call: ChatCall) -> None:
        with self._lock:
            if self._hold is None:
                return
            after, only, release = self._hold
            if only is not None and not only(call):
                return
            self._hold_seen += 1
            if self._hold_seen <= after or release.is_set():
                return
            self.held += 1
        try:
            while not release.wait(0.05) and not self.stopping.is_set():
                pass
        finally:
            with self._lock:
                self.held -= 1

    def reset(self) -> None:
        """Forget recorded requests, attempt counts and the scripted queue (keeps configuration)."""
        with self._lock:
            self._script.clear()
            self._requests.clear()
            self._path_counts.clear()
            self._attempts.clear()
            self._fault_counts.clear()
            self.max_in_flight = self.in_flight

    # -- read back -----------------------------------------------------------------------------
    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def count(self, path: str | None = None) -> int:
        """Requests received, all or for one path (``/v1/chat/completions``)."""
        with self._lock:
            return sum(self._path_counts.values()) if path is None else self._path_counts[path]

    def chat_calls(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == CHAT_PATH]

    def attempts_by_prompt(self) -> dict[str, int]:
        """sha256 of the prompt -> how many chat requests carried it."""
        with self._lock:
            return dict(self._attempts)

    def fault_counts(self) -> dict[str, int]:
        """Fault kind -> how many chat requests got it ("ok" included)."""
        with self._lock:
            return dict(self._fault_counts)

    def scripted_left(self) -> int:
        with self._lock:
            return len(self._script)

    # -- decisions (used by the handler) -------------------------------------------------------
    def _register_chat(self, body: dict[str, Any]) -> ChatCall:
        prompt = _prompt_text(body)
        prompt_sha = sha256_text(prompt)
        with self._lock:
            self._attempts[prompt_sha] += 1
            attempt = self._attempts[prompt_sha]
        return ChatCall(body, prompt, extract_passage(prompt), prompt_sha, attempt)

    def _choose_fault(self, call: ChatCall) -> str:
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.fault_rule is not None:
            kind = self.fault_rule(call)
            if kind is not None:
                _check_kind(kind)
                return kind
        return self._draw(self.fault_rates, f"{call.prompt_sha}:{call.attempt}")

    def _draw(self, rates: dict[str, float], key: str) -> str:
        if not rates:
            return "ok"
        digest = hashlib.sha256(f"{self.seed}:{key}".encode()).digest()
        u = struct.unpack(">Q", digest[:8])[0] / 2**64
        edge = 0.0
        for kind, rate in sorted(rates.items()):
            edge += rate
            if u < edge:
                return kind
        return "ok"

    def grade_for(self, call: ChatCall) -> int:
        if self.grade_rule is not None:
            grade = self.grade_rule(call)
            if grade is not None:
                return int(grade)
        if call.passage is not None:
            grade = self.grades_by_passage_sha.get(sha256_text(call.passage))
            if grade is not None:
                return grade
        for text, grade in self.grades_by_text.items():
            if text in call.prompt:
                return grade
        return expected_default_grade(call.passage if call.passage is not None else call.prompt)

    def _record(self, request: RecordedRequest) -> None:
        """Counted on arrival (so a hanging request is visible while it hangs), filled in later."""
        with self._lock:
            self._path_counts[request.path] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self.record_bodies or request.path == CHAT_PATH:
                self._requests.append(request)

    def _note_fault(self, kind: str) -> None:
        with self._lock:
            self._fault_counts[kind] += 1

    def _done(self, request: RecordedRequest) -> None:
        with self._lock:
            self.in_flight -= 1
        if not self.record_bodies:
            request.body = None


def _check_kind(kind: str) -> None:
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")


def _prompt_text(body: dict[str, Any]) -> str:
    parts: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "\n".join(parts)


def _approx_tokens(text: str) -> int:
    # ~4 characters per token, as the judge's estimate assumes; never 0 for non-empty text
    return max(1, math.ceil(len(text) / 4)) if text else 0


def _wants_single_token(body: dict[str, Any]) -> bool:
    """A logprobs request without a response format: answer the bare grade digit."""
    return bool(body.get("logprobs")) and not body.get("response_format")


def _grade_logprobs(grade: int, top: int) -> list[dict[str, Any]]:
    """Top log-probabilities for the grade token: 0.7 on the grade, the rest spread by distance."""
    weights = {g: (0.7 if g == grade else 0.3 / (2 ** abs(g - grade))) for g in range(4)}
    total = sum(weights.values())
    ranked = sorted(weights.items(), key=lambda kv: -kv[1])[: max(1, top)]
    return [
        {"token": str(g), "logprob": math.log(w / total), "bytes": list(str(g).encode())}
        for g, w in ranked
    ]


def chat_completion(control: ServerControl, call: ChatCall, fault: str) -> dict[str, Any]:
    """The chat.completion object for a call (fault is "ok", "malformed" or "out_of_range")."""
    body = call.body
    grade = OUT_OF_RANGE_GRADE if fault == "out_of_range" else control.grade_for(call)
    single = _wants_single_token(body)
    if fault == "malformed":
        content = '{"reason": "The passage mentions the topic but the answer was cut'
    elif single:
        content = str(grade)
    else:
        reason = f"Deterministic test grade {grade} for this passage."
        content = json.dumps({"reason": reason, "grade": grade})
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
    if body.get("logprobs"):
        top = int(body.get("top_logprobs") or 0)
        tokens = _tokenise_answer(content)
        entries = []
        # the grade token is the last digit of the answer ("grade" is the last JSON key)
        grade_at = max((i for i, t in enumerate(tokens) if t == str(grade)), default=-1)
        for i, token in enumerate(tokens):
            if fault != "malformed" and i == grade_at:
                tops = _grade_logprobs(grade, top) if 0 <= grade <= 3 else []
                logprob = next((t["logprob"] for t in tops if t["token"] == token), 0.0)
            else:
                tops, logprob = [], 0.0
            entries.append(
                {"token": token, "logprob": logprob, "bytes": list(token.encode()), "top_logprobs": tops}
            )
        choice["logprobs"] = {"content": entries, "refusal": None}
    prompt_tokens = _approx_tokens(call.prompt)
    completion_tokens = _approx_tokens(content)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": call.model or control.models[0],
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
        "system_fingerprint": "fp_local_test",
    }


def _tokenise_answer(content: str) -> list[str]:
    """Crude tokens: the grade digit is always a token of its own (as in real BPE vocabularies)."""
    return re.findall(r"\d|[A-Za-z]+|\s+|[^\w\s]+", content) or [content]


def _error(message: str, kind: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: every answer carries Content-Length
    disable_nagle_algorithm = True  # small answers must not wait for the peer's delayed ACK
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        with self.server.control._lock:
            self.server.control.connections += 1

    # -- plumbing ------------------------------------------------------------------------------
    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, status: int, payload: bytes, content_type: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        record = getattr(self, "_record", None)
        if record is not None:
            # before the client can read the answer: a test that looks at the recorded calls as
            # soon as its request returns must find them complete (status; body dropped if asked)
            record.status = status
            if not self.server.control.record_bodies:
                record.body = None
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:16]}")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()

    def _json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> int:
        self._send(status, json.dumps(obj).encode(), headers=headers)
        return status

    def _drop(self) -> None:
        """Close the connection with no response (RST, like a crashed upstream)."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _authorized(self, control: ServerControl) -> bool:
        if control.api_key is None:
            return True
        return self.headers.get("Authorization") == f"Bearer {control.api_key}"

    # -- dispatch ------------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        control = self.server.control
        raw = self._read_body()
        path = self.path.split("?", 1)[0].rstrip("/")
        headers = {k.lower(): ("<redacted>" if k.lower() == "authorization" else v)
                   for k, v in self.headers.items()}
        record = RecordedRequest(method, path, None, authorized=self._authorized(control), headers=headers)
        self._record = record
        control._record(record)
        try:
            if not record.authorized:
                record.status = self._json(401, _error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"))
            elif method == "POST" and path == CHAT_PATH:
                self._chat(control, raw, record)
            elif method == "POST" and path == "/v1/files":
                record.body = raw if control.record_bodies else None
                record.status = self._upload(control, raw)
            else:
                record.body = self._body = _maybe_json(raw)
                record.status = self._route(control, method, path)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            control._done(record)

    def _route(self, control: ServerControl, method: str, path: str) -> int:
        parts = path.strip("/").split("/")
        if method == "GET" and path == "/v1/models":
            return self._json(200, {"object": "list", "data": [_model(m) for m in control.models]})
        if method == "GET" and len(parts) == 3 and parts[:2] == ["v1", "models"]:
            if parts[2] in control.models:
                return self._json(200, _model(parts[2]))
            return self._json(404, _error(f"The model '{parts[2]}' does not exist", "invalid_request_error", "model_not_found"))
        if parts[:2] == ["v1", "files"] and len(parts) >= 3:
            found = control.files.get(parts[2])
            if found is None:
                return self._json(404, _error(f"No such File object: {parts[2]}", "invalid_request_error"))
            if method == "GET" and len(parts) == 3:
                return self._json(200, found.as_json())
            if method == "GET" and len(parts) == 4 and parts[3] == "content":
                self._send(200, found.content, "application/octet-stream")
                return 200
            if method == "DELETE" and len(parts) == 3:
                del control.files[parts[2]]
                return self._json(200, {"id": found.id, "object": "file", "deleted": True})
        if parts[:2] == ["v1", "batches"]:
            return self._batches(control, method, parts, self._body)
        return self._json(404, _error(f"Unknown endpoint {method} {path}", "invalid_request_error"))

    # -- chat ----------------------------------------------------------------------------------
    def _chat(self, control: ServerControl, raw: bytes, record: RecordedRequest) -> None:
        try:
            body = json.loads(raw)
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ValueError("messages must be a list")  # noqa: TRY004 - reported as a 400 below
        except ValueError as exc:
            record.body = raw
            record.status = self._json(400, _error(f"Invalid request body: {exc}", "invalid_request_error"))
            return
        wanted = (body.get("response_format") or {}).get("type") if isinstance(body.get("response_format"), dict) else None
        if wanted in control.refused_formats:
            record.body = body
            record.status = self._json(400, _error(f"response_format type '{wanted}' is not supported by this server",
                                                   "invalid_request_error", "unsupported_response_format"))
            return
        call = control._register_chat(body)
        fault = control._choose_fault(call)
        record.body = body
        record.fault, record.prompt_sha, record.attempt = fault, call.prompt_sha, call.attempt
        control._note_fault(fault)
        control._wait_at_hold(call)
        if fault == "drop":
            self._drop()
            return
        if fault == "hang":
            control.stopping.wait(control.hang_seconds)
            self._drop()
            return
        if control.latency > 0:
            control.stopping.wait(control.latency)
        if fault == "429":
            wait = control.retry_after
            headers = {"Retry-After": f"{wait:g}", "retry-after-ms": str(int(wait * 1000))}
            record.status = self._json(429, _error("Rate limit reached; retry later.", "requests", "rate_limit_exceeded"), headers)
        elif fault == "500":
            record.status = self._json(500, _error("The server had an error while processing your request.", "server_error"))
        elif fault == "malformed_body":
            self._send(200, b'{"id": "chatcmpl-broken", "choices": [{"message": {"content": "{\\"gra')
            record.status = 200
        else:
            record.status = self._json(200, chat_completion(control, call, fault))

    # -- files and batches ---------------------------------------------------------------------
    def _upload(self, control: ServerControl, raw: bytes) -> int:
        fields = _parse_multipart(self.headers.get("Content-Type") or "", raw)
        if "file" not in fields:
            return self._json(400, _error("Upload needs a 'file' field.", "invalid_request_error"))
        filename, content = fields["file"]
        purpose = fields.get("purpose", (None, b"batch"))[1].decode()
        created = _File(f"file-{uuid.uuid4().hex[:24]}", filename or "upload.jsonl", purpose, content, int(time.time()))
        control.files[created.id] = created
        return self._json(200, created.as_json())

    def _batches(self, control: ServerControl, method: str, parts: list[str], body: Any) -> int:
        if method == "POST" and len(parts) == 2:
            return self._create_batch(control, body if isinstance(body, dict) else {})
        if method == "GET" and len(parts) == 2:
            data = [b.as_json() for b in _settle_all(control)]
            return self._json(200, {"object": "list", "data": data, "has_more": False,
                                    "first_id": data[0]["id"] if data else None,
                                    "last_id": data[-1]["id"] if data else None})
        batch = control.batches.get(parts[2]) if len(parts) >= 3 else None
        if batch is None:
            return self._json(404, _error("No such batch.", "invalid_request_error"))
        if method == "GET" and len(parts) == 3:
            _settle(control, batch)
            return self._json(200, batch.as_json())
        if method == "POST" and len(parts) == 4 and parts[3] == "cancel":
            _settle(control, batch)
            if batch.status == "in_progress":
                batch.status, batch.cancelled_at = "cancelled", int(time.time())
            return self._json(200, batch.as_json())
        return self._json(404, _error("Unknown batch operation.", "invalid_request_error"))

    def _create_batch(self, control: ServerControl, body: dict[str, Any]) -> int:
        input_id = str(body.get("input_file_id", ""))
        if input_id not in control.files:
            return self._json(400, _error(f"Input file {input_id!r} not found.", "invalid_request_error"))
        endpoint = str(body.get("endpoint", CHAT_PATH))
        if endpoint != CHAT_PATH:
            return self._json(400, _error(f"Endpoint {endpoint} is not supported here.", "invalid_request_error"))
        batch = _Batch(
            id=f"batch_{uuid.uuid4().hex[:24]}",
            input_file_id=input_id,
            endpoint=endpoint,
            completion_window=str(body.get("completion_window", "24h")),
            metadata=body.get("metadata"),
            created_at=int(time.time()),
            ready_at=time.monotonic() + control.batch_seconds,
        )
        control.batches[batch.id] = batch
        return self._json(200, batch.as_json())


def _settle_all(control: ServerControl) -> list[_Batch]:
    batches = list(control.batches.values())
    for batch in batches:
        _settle(control, batch)
    return batches


def _settle(control: ServerControl, batch: _Batch) -> None:
    """Complete a batch whose time has come: run every input line through the chat logic."""
    with control._lock:
        if batch.status != "in_progress" or time.monotonic() < batch.ready_at:
            return
        batch.status = "finalizing"
    out_lines, err_lines = [], []
    lines = control.files[batch.input_file_id].content.decode("utf-8").splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        batch.counts["total"] += 1
        try:
            item = json.loads(line)
            custom_id, body = item["custom_id"], item["body"]
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ValueError("body.messages must be a list")  # noqa: TRY004 - an error line, as above
        except (ValueError, KeyError, TypeError) as exc:
            batch.counts["failed"] += 1
            err_lines.append({"id": f"batch_req_{uuid.uuid4().hex[:16]}", "custom_id": None,
                              "response": None,
                              "error": {"code": "invalid_line", "message": f"line {number}: {exc}"}})
            continue
        call = control._register_chat(body)
        fault = control._draw(control.batch_fault_rates, f"batch:{call.prompt_sha}:{call.attempt}")
        if fault not in ("malformed", "out_of_range"):
            fault = "ok"
        completion = chat_completion(control, call, fault)
        batch.counts["completed"] += 1
        out_lines.append({"id": f"batch_req_{uuid.uuid4().hex[:16]}", "custom_id": custom_id,
                          "response": {"status_code": 200, "request_id": f"req_{uuid.uuid4().hex[:16]}",
                                       "body": completion},
                          "error": None})
    now = int(time.time())
    if out_lines:
        out = _File(f"file-{uuid.uuid4().hex[:24]}", f"{batch.id}_output.jsonl", "batch_output",
                    "".join(json.dumps(x) + "\n" for x in out_lines).encode(), now)
        control.files[out.id] = out
        batch.output_file_id = out.id
    if err_lines:
        err = _File(f"file-{uuid.uuid4().hex[:24]}", f"{batch.id}_errors.jsonl", "batch_output",
                    "".join(json.dumps(x) + "\n" for x in err_lines).encode(), now)
        control.files[err.id] = err
        batch.error_file_id = err.id
    batch.status, batch.completed_at = "completed", now


def _maybe_json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _model(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 1_700_000_000, "owned_by": "local-test"}


def _parse_multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """name -> (filename, bytes) for a multipart/form-data body."""
    match = re.search(r'boundary="?([^";]+)"?', content_type)
    if not match:
        return {}
    boundary = b"--" + match.group(1).encode()
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in raw.split(boundary)[1:]:
        if part.startswith(b"--"):
            break
        head, _, data = part.lstrip(b"\r\n").partition(b"\r\n\r\n")
        if data.endswith(b"\r\n"):
            data = data[:-2]
        header_text = head.decode("utf-8", "replace")
        name = re.search(r'name="([^"]*)"', header_text)
        filename = re.search(r'filename="([^"]*)"', header_text)
        if name:
            fields[name.group(1)] = (filename.group(1) if filename else None, data)
    return fields


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # a 32-way client opens connections in bursts
    allow_reuse_address = True
    control: ServerControl

    def handle_error(self, request, client_address) -> None:
        # a client that goes away mid-request (killed, timed out) is expected here: count it quietly
        with self.control._lock:
            self.control.connection_errors += 1


@dataclass
class RunningServer:
    base_url: str  # ends in /v1, as the openai client expects
    control: ServerControl
    port: int


@contextlib.contextmanager
def running_server(**control_options: Any) -> Iterator[RunningServer]:
    """Start a server on 127.0.0.1 (free port) in a background thread; stop it on exit."""
    control = ServerControl(**control_options)
    server = _Server(("127.0.0.1", 0), _Handler)
    server.control = control
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        yield RunningServer(f"http://127.0.0.1:{port}/v1", control, port)
    finally:
        control.stopping.set()  # releases hanging handlers
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


try:  # the fixture is optional: benchmarks import this module without pytest
    import pytest
except ImportError:  # pragma: no cover
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture
    def openai_server() -> Iterator[RunningServer]:
        """A fresh server per test; import this name into a test module to use it."""
        with running_server() as server:
            yield server


def main(argv: list[str] | None = None) -> None:
    """Run a server in the foreground (for manual trials and subprocess-based tests)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per chat answer")
    parser.add_argument("--fault-rate", action="append", default=[], metavar="KIND=P",
                        help="e.g. 429=0.02 (repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rates = {}
    for item in args.fault_rate:
        kind, _, p = item.partition("=")
        _check_kind(kind)
        rates[kind] = float(p)
    with running_server(latency=args.latency, seed=args.seed, record_bodies=False) as server:
        server.control.fault_rates = rates
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
