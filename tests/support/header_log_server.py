"""A loopback HTTP server that logs the Authorization header of every request it receives.

Real HTTP on 127.0.0.1 (free port); it answers ``GET /v1/models`` with one model (``test-judge``)
and anything else with 404, which is enough for a judge to look the server up (the Judge page's
estimate, a job's first request) before it gives up. A test reads ``server.authorizations`` (the
header's values, in arrival order) to see which key went where.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class HeaderLog:
    base_url: str
    requests: list[tuple[str, str, str | None]] = field(default_factory=list)  # method, path, Authorization
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def authorizations(self) -> list[str | None]:
        with self.lock:
            return [auth for _, _, auth in self.requests]


class _Handler(BaseHTTPRequestHandler):
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _answer(self) -> None:
        log: HeaderLog = self.server.log  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        with log.lock:
            log.requests.append((self.command, self.path, self.headers.get("Authorization")))
        if self.command == "GET" and self.path.rstrip("/").endswith("/models"):
            status, body = 200, {"object": "list", "data": [{"id": "test-judge", "object": "model"}]}
        else:
            status, body = 404, {"error": {"message": "not here", "type": "not_found"}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


@contextlib.contextmanager
def header_log_server() -> Iterator[HeaderLog]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.log = HeaderLog(f"http://127.0.0.1:{server.server_address[1]}/v1")  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.log  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
