"""A small OpenAI-compatible HTTP server for the judge's tests (real HTTP on 127.0.0.1).

Answers are deterministic: the grade of a chat request is ``sha256(user message) % 4`` unless
the passage carries a directive. Directives are words in the *passage* text, so a test decides
per pair what happens (a directive repeats on every call for that pair, or only on the first N):

- ``@fault:429`` / ``@fault:500`` / ``@fault:drop`` / ``@fault:hang`` / ``@fault:badjson`` /
  ``@fault:range`` / ``@fault:nojson`` - that fault on every call for the pair;
- ``@once:KIND`` - that fault on the first call of the pair only.

``faults`` (list) also applies faults to the next requests in arrival order, whatever the pair.
``refuse_schema`` makes the server refuse ``json_schema`` response formats with HTTP 400.
Records every chat request body (``requests``) and the Authorization headers (``auth``).
Also serves ``/v1/models``, ``/v1/files`` and ``/v1/batches`` (a batch completes on its first
retrieval, computing every line like a chat request).
"""

from __future__ import annotations

import email.parser
import hashlib
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def grade_for(user_text: str) -> int:
    return int(hashlib.sha256(user_text.encode("utf-8")).hexdigest(), 16) % 4


class _State:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.auth: list[str] = []
        self.faults: list[str] = []
        self.seen: dict[str, int] = {}
        self.latency = 0.0
        self.refuse_schema = False
        self.retry_after = "0"
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.hang_seconds = 30.0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    @property
    def state(self) -> _State:
        return self.server.state  # type: ignore[attr-defined]

    def _send(self, code: int, payload, headers: dict | None = None, raw: bytes | None = None):
        body = raw if raw is not None else json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/v1/models":
            return self._send(200, {"object": "list", "data": [{"id": "fake-judge", "object": "model"}]})
        m = re.fullmatch(r"/v1/files/([\w-]+)/content", path)
        if m and m.group(1) in self.state.files:
            return self._send(200, None, raw=self.state.files[m.group(1)])
        m = re.fullmatch(r"/v1/batches/([\w-]+)", path)
        if m and m.group(1) in self.state.batches:
            batch = self.state.batches[m.group(1)]
            if batch["status"] != "completed":
                self._complete(batch)
            return self._send(200, batch)
        self._send(404, {"error": {"message": "not found"}})

    def do_POST(self):
        path = self.path.split("?")[0]
        self.state.auth.append(self.headers.get("Authorization", ""))
        body = self._body()
        if path == "/v1/chat/completions":
            return self._chat(json.loads(body))
        if path == "/v1/files":
            ctype = self.headers.get("Content-Type", "")
            msg = email.parser.BytesParser().parsebytes(b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
            data = b""
            for part in msg.walk():
                if part.get_filename():
                    data = part.get_payload(decode=True)
            fid = f"file-{len(self.state.files) + 1}"
            self.state.files[fid] = data
            return self._send(200, {"id": fid, "object": "file", "bytes": len(data), "created_at": 0,
                                    "filename": "input.jsonl", "purpose": "batch", "status": "processed"})
        if path == "/v1/batches":
            req = json.loads(body)
            bid = f"batch-{len(self.state.batches) + 1}"
            batch = {"id": bid, "object": "batch", "endpoint": req["endpoint"], "input_file_id": req["input_file_id"],
                     "completion_window": req["completion_window"], "status": "validating", "created_at": 0,
                     "output_file_id": None, "error_file_id": None}
            self.state.batches[bid] = batch
            return self._send(200, batch)
        self._send(404, {"error": {"message": "not found"}})

    def _complete(self, batch: dict):
        lines = self.state.files[batch["input_file_id"]].decode().splitlines()
        out = []
        for line in lines:
            req = json.loads(line)
            code, payload = self._answer(req["body"])
            out.append(json.dumps({"id": "r", "custom_id": req["custom_id"],
                                   "response": {"status_code": code, "body": payload}, "error": None}))
        fid = f"file-{len(self.state.files) + 1}"
        self.state.files[fid] = ("\n".join(out) + "\n").encode()
        batch.update(status="completed", output_file_id=fid,
                     request_counts={"total": len(lines), "completed": len(lines), "failed": 0})

    def _fault_for(self, user: str) -> str | None:
        with self.state.lock:
            if self.state.faults:
                return self.state.faults.pop(0)
            key = hashlib.sha256(user.encode()).hexdigest()
            n = self.state.seen.get(key, 0)
            self.state.seen[key] = n + 1
        m = re.search(r"@fault:(\w+)", user)
        if m:
            return m.group(1)
        m = re.search(r"@once:(\w+)", user)
        if m and n == 0:
            return m.group(1)
        return None

    def _answer(self, req: dict) -> tuple[int, dict]:
        user = next((m["content"] for m in req["messages"] if m["role"] == "user"), "")
        grade = grade_for(user)
        repairing = req["messages"][-1]["role"] == "user" and len(req["messages"]) > 2
        if "@fault:range" in user:
            content = json.dumps({"reason": "bad", "grade": 7})
        elif "@fault:nojson" in user:
            content = "I think it is quite relevant."
        elif req.get("max_tokens") == 1:
            content = str(grade)
        elif req.get("response_format", {}).get("json_schema", {}).get("schema", {}).get("properties", {}).get("relevant"):
            content = json.dumps({"reason": "binary", "relevant": grade >= 2})
        else:
            content = json.dumps({"reason": f"graded {grade}" + (" after repair" if repairing else ""),
                                  "grade": grade})
        choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
        if req.get("logprobs"):
            top = [{"token": str(g), "logprob": -0.1 if g == grade else -2.5 - g, "bytes": None} for g in range(4)]
            choice["logprobs"] = {"content": [{"token": str(grade), "logprob": -0.1, "bytes": None, "top_logprobs": top}]}
        prompt_tokens = sum(len(m["content"]) for m in req["messages"]) // 4
        return 200, {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": req["model"],
                     "choices": [choice],
                     "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 12,
                               "total_tokens": prompt_tokens + 12}}

    def _chat(self, req: dict):
        with self.state.lock:
            self.state.requests.append(req)
        if self.state.latency:
            time.sleep(self.state.latency)
        if self.state.refuse_schema and req.get("response_format", {}).get("type") == "json_schema":
            return self._send(400, {"error": {"message": "response_format json_schema is not supported",
                                              "type": "invalid_request_error"}})
        user = next((m["content"] for m in req["messages"] if m["role"] == "user"), "")
        fault = self._fault_for(user)
        if fault == "429":
            return self._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": self.state.retry_after})
        if fault == "500":
            return self._send(500, {"error": {"message": "server exploded"}})
        if fault == "drop":
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return None
        if fault == "hang":
            time.sleep(self.state.hang_seconds)
            self.close_connection = True
            return None
        if fault == "badjson":
            return self._send(200, None, raw=b'{"id": "x", "choices": [')
        if fault == "401":
            key = self.headers.get("Authorization", "")[7:]
            return self._send(401, {"error": {"message": f"Incorrect API key provided: {key}"}})
        code, payload = self._answer(req)
        return self._send(code, payload)


class FakeOpenAI:
    """``with FakeOpenAI() as server: server.base_url``; see the module doc."""

    def __init__(self, latency: float = 0.0):
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.state = _State()
        self.server.state.latency = latency
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def state(self) -> _State:
        return self.server.state

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def chat_requests(self) -> list[dict]:
        return self.state.requests

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":  # a server for a subprocess test: prints its base URL, serves until killed
    import sys

    fake = FakeOpenAI(latency=float(sys.argv[1]) if len(sys.argv) > 1 else 0.0)
    fake.thread.start()
    print(fake.base_url, flush=True)
    fake.thread.join()
