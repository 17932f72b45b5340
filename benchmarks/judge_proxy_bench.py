"""The judge behind a proxy: LiteLLM in front of a real llama.cpp server, against a bare client.

Starts llama-cpp-python's server (SmolLM2-135M Q4_1, as ``judge_servers_bench.py``) and a LiteLLM
proxy (``litellm --model openai/smollm2 --api_base <llama>``, a master key set, as LiteLLM
requires) in front of it, then alternates, ``--rounds`` times, on a fresh demo project each:

- **judge**: the README's contract command, ``workbench judge --pool demo --limit N --base-url
  <proxy> --model openai/smollm2``, built-in defaults (the probe picks the format);
- **bare**: a plain ``AsyncOpenAI`` loop sending the judge's own requests for the same N pairs
  (the bodies ``--batch-file`` writes for this base URL) at the same concurrency limit
  (``[judge] concurrency``), through the same proxy.

Prints one JSON line per run (statuses, wall seconds, pairs/s, the probe's format) and a summary:
the judge's pairs/s over the bare loop's, median and min-max over the rounds, the load average.
The judge's wall time includes its start-up and its probe (three requests), which the bare loop
does not make: with a server this slow the probe is a large share of a small run.

    .venv/bin/python benchmarks/judge_proxy_bench.py [--pairs 6] [--rounds 2] [--litellm PATH]

Needs the llama.cpp wheel and weights ``make test`` installs and a ``litellm`` executable
(``pip install 'litellm[proxy]'`` into any virtual environment; ``--litellm`` names it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.llama_server import ALIAS, LlamaServer, model_file  # noqa: E402

MASTER_KEY = "sk-bench-proxy-0123456789"
MODEL = f"openai/{ALIAS}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_proxy(litellm: str, upstream: str, log: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = {**os.environ, "OPENAI_API_KEY": "sk-local", "LITELLM_MASTER_KEY": MASTER_KEY}
    process = subprocess.Popen([litellm, "--model", MODEL, "--api_base", upstream, "--host", "127.0.0.1",
                                "--port", str(port)], stdout=log.open("w"), stderr=subprocess.STDOUT, env=env,
                               start_new_session=True)
    import httpx

    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"litellm exited with {process.returncode}; see {log}")
        try:
            if httpx.get(f"{base}/models", headers={"Authorization": f"Bearer {MASTER_KEY}"},
                         timeout=2).status_code == 200:
                return process, base
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"litellm did not answer within 300 s; see {log}")


def _workbench(db: Path) -> list[str]:
    return [sys.executable, "-m", "workbench", "--db", str(db)]


def judge_round(base: str, pairs: int, env: dict) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "demo.duckdb"
        subprocess.run(_workbench(db) + ["init", "--demo"], cwd=folder, env=env, check=True, capture_output=True)
        started = time.perf_counter()
        done = subprocess.run(_workbench(db) + ["judge", "--pool", "demo", "--limit", str(pairs), "--base-url", base,
                                                "--model", MODEL], cwd=folder, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        out = Path(folder) / "j.jsonl"
        subprocess.run(_workbench(db) + ["export", "judgments", "--out", str(out), "--source", "llm"], cwd=folder,
                       env=env, check=True, capture_output=True)
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    statuses = {s: sum(r["status"] == s for r in rows) for s in ("ok", "invalid", "failed")}
    fmt = next((line.split("format ", 1)[1] for line in done.stdout.splitlines() if "format " in line), "?")
    return {"client": "judge", "exit": done.returncode, "pairs": len(rows), "seconds": round(seconds, 2),
            "pairs_per_s": round(len(rows) / seconds, 4), "format": fmt, **statuses,
            **({"stderr": done.stderr.strip()[-300:]} if done.returncode else {})}


def request_bodies(base: str, pairs: int, env: dict) -> list[dict]:
    """The judge's own requests for ``pairs`` pairs of the demo pool, as --batch-file writes them."""
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "demo.duckdb"
        subprocess.run(_workbench(db) + ["init", "--demo"], cwd=folder, env=env, check=True, capture_output=True)
        requests = Path(folder) / "requests.jsonl"
        subprocess.run(_workbench(db) + ["judge", "--pool", "demo", "--limit", str(pairs), "--base-url", base,
                                         "--model", MODEL, "--batch-file", str(requests)], cwd=folder, env=env,
                       check=True, capture_output=True)
        return [json.loads(line)["body"] for line in requests.read_text().splitlines()]


def bare_round(base: str, bodies: list[dict], concurrency: int) -> dict:
    from openai import AsyncOpenAI

    async def run() -> tuple[int, int]:
        client = AsyncOpenAI(base_url=base, api_key=MASTER_KEY, max_retries=0, timeout=900)
        limit = asyncio.Semaphore(concurrency)
        ok = failed = 0

        async def one(body: dict) -> None:
            nonlocal ok, failed
            async with limit:
                try:
                    await client.chat.completions.create(**body)
                    ok += 1
                except Exception:  # noqa: BLE001 - counted, as the judge counts its failures
                    failed += 1

        await asyncio.gather(*(one(b) for b in bodies))
        await client.close()
        return ok, failed

    started = time.perf_counter()
    ok, failed = asyncio.run(run())
    seconds = time.perf_counter() - started
    return {"client": "bare", "pairs": len(bodies), "seconds": round(seconds, 2),
            "pairs_per_s": round(len(bodies) / seconds, 4), "ok": ok, "failed": failed}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--litellm", default=shutil.which("litellm") or "/tmp/litellm-venv/bin/litellm")
    args = parser.parse_args(argv)
    if not Path(args.litellm).exists():
        raise SystemExit(f"no litellm executable at {args.litellm}; pip install 'litellm[proxy]' and pass --litellm")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")}
    env["OPENAI_API_KEY"] = MASTER_KEY
    from workbench.config import DEFAULTS  # the built-in default concurrency, as the judge uses

    concurrency = int(DEFAULTS["judge"]["concurrency"])
    server = LlamaServer(model_file()).start()
    proxy = None
    try:
        proxy, base = start_proxy(args.litellm, server.base_url, Path(tempfile.gettempdir()) / "litellm-bench.log")
        bodies = request_bodies(base, args.pairs, env)
        ratios = []
        for round_ in range(args.rounds):
            order = ("judge", "bare") if round_ % 2 == 0 else ("bare", "judge")
            got = {}
            for client in order:
                got[client] = judge_round(base, args.pairs, env) if client == "judge" else \
                    bare_round(base, bodies, concurrency)
                print(json.dumps({"round": round_ + 1, **got[client], "load": round(os.getloadavg()[0], 1)}),
                      flush=True)
            ratios.append(got["judge"]["pairs_per_s"] / got["bare"]["pairs_per_s"])
        print(json.dumps({"server": "LiteLLM proxy -> llama-cpp-python / SmolLM2-135M Q4_1",
                          "litellm": subprocess.run([args.litellm, "--version"], capture_output=True,
                                                    text=True).stdout.strip()[-40:],
                          "judge_over_bare": {"median": round(statistics.median(ratios), 3),
                                              "min": round(min(ratios), 3), "max": round(max(ratios), 3)},
                          "rounds": args.rounds, "pairs": args.pairs, "concurrency": concurrency,
                          "load_average": round(os.getloadavg()[0], 1)}))
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait(timeout=30)
        server.stop()


if __name__ == "__main__":
    main()
