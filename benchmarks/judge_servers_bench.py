"""Judge throughput against a real llama.cpp server (llama-cpp-python 0.3.36, SmolLM2-135M Q4_1).

Runs the README's contract command on a fresh demo project with the built-in defaults (no config
file, no WORKBENCH_* variable) and prints the wall time (probe included), pairs/s, the format the
probe chose and the statuses. Needs the wheel and weights `make test` installs.

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
    finally:
        server.stop()
    statuses = {s: sum(r["status"] == s for r in rows) for s in ("ok", "invalid", "failed")}
    fmt = next((line.split("format ", 1)[1] for line in done.stdout.splitlines() if "format " in line), "?")
    print(json.dumps({"server": "llama-cpp-python 0.3.36 / SmolLM2-135M-Instruct Q4_1", "pairs": len(rows),
                      "exit": done.returncode, "seconds": round(seconds, 1),
                      "pairs_per_s": round(len(rows) / seconds, 4), "format": fmt, **statuses,
                      "load_average": os.getloadavg()[0]}))
    if done.returncode != 0:
        sys.stderr.write(done.stderr)


if __name__ == "__main__":
    main()
