"""Judge throughput against a real llama.cpp server (llama-cpp-python 0.3.36, SmolLM2-135M Q4_1).

Runs the README's contract command on a fresh demo project with the built-in defaults (no config
file, no WORKBENCH_* variable) and prints the wall time (probe included), pairs/s, the format the
probe chose and its median latency (of three requests) with the request timeout it sets, the
statuses, the summary's rate line, and the format `--batch-file` writes for this server (its
first line sent as written must be answered 200). Needs the wheel and weights `make test`
installs.

    .venv/bin/python benchmarks/judge_servers_bench.py [--pairs 8] [--prompt relevance_v1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.llama_server import ALIAS, LlamaServer, model_file  # noqa: E402


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--prompt", default=None, help="prompt template id (default: the built-in default)")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WORKBENCH_")}
    env["OPENAI_API_KEY"] = "sk-local"
    server = LlamaServer(model_file()).start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            db = Path(folder) / "demo.duckdb"
            wb = [sys.executable, "-m", "workbench", "--db", str(db)]
            subprocess.run(wb + ["init", "--demo"], cwd=folder, env=env, check=True, capture_output=True)
            cmd = wb + ["judge", "--pool", "demo", "--limit", str(args.pairs), "--base-url", server.base_url,
                        "--model", ALIAS] + (["--prompt", args.prompt] if args.prompt else [])
            started = time.perf_counter()
            done = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
            seconds = time.perf_counter() - started
            out = Path(folder) / "j.jsonl"
            subprocess.run(wb + ["export", "judgments", "--out", str(out), "--source", "llm"], cwd=folder, env=env,
                           check=True, capture_output=True)
            rows = [json.loads(line) for line in out.read_text().splitlines()]
            from workbench.services.judge.jobs import list_jobs

            probe = (list_jobs(db, "demo")[0].get("params") or {}).get("probe") or {}
            requests = Path(folder) / "requests.jsonl"
            batch = subprocess.run(wb + ["judge", "--pool", "demo", "--limit", str(args.pairs + 1), "--base-url",
                                         server.base_url, "--model", ALIAS, "--batch-file", str(requests)],
                                   cwd=folder, env=env, capture_output=True, text=True)
            body = json.loads(requests.read_text().splitlines()[0])["body"] if requests.exists() else {}
            import httpx

            answered = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=900).status_code \
                if body else None
    finally:
        server.stop()
    statuses = {s: sum(r["status"] == s for r in rows) for s in ("ok", "invalid", "failed")}
    fmt = next((line.split("format ", 1)[1] for line in done.stdout.splitlines() if "format " in line), "?")
    rate = next((line.strip() for line in done.stdout.splitlines() if "this run" in line), "?")
    latency = float(probe.get("latency_s") or 0.0)
    print(json.dumps({"server": "llama-cpp-python 0.3.36 / SmolLM2-135M-Instruct Q4_1", "pairs": len(rows),
                      "exit": done.returncode, "seconds": round(seconds, 1),
                      "pairs_per_s": round(len(rows) / seconds, 4), "format": fmt, **statuses,
                      "summary_rate": rate, "probe_median_latency_s": latency,
                      "request_timeout_s": max(60.0, min(900.0, 40.0 * latency)),
                      "batch_file": (batch.stdout.strip().rsplit("; ", 1)[-1] if batch.returncode == 0
                                     else batch.stderr.strip()[:200]),
                      "batch_line_http_status": answered, "load_average": os.getloadavg()[0]}))
    if done.returncode != 0:
        sys.stderr.write(done.stderr)


if __name__ == "__main__":
    main()
