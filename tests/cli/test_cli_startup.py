"""The CLI starts fast: building the parser imports no heavy library (issue 7).

Each command group is registered alone in a fresh interpreter so that an offender is named.
A command imports what it needs when it runs, never when ``workbench --help`` builds the parser.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from tests.support.prerequisites import REPO
from workbench.cli import COMMAND_GROUPS

HEAVY = ("numpy", "pandas", "scipy", "pyarrow", "duckdb", "openai", "streamlit", "sklearn",
         "sentence_transformers", "torch", "bm25s", "workbench.core.documents.chunking")

PROBE = """
import argparse, importlib, json, sys
module = importlib.import_module(sys.argv[1])
parser = argparse.ArgumentParser()
module.register(parser.add_subparsers())
heavy = json.loads(sys.argv[2])
print(json.dumps(sorted(m for m in sys.modules if m in heavy)))
"""


@pytest.mark.parametrize("module", [f"workbench.cli.{name}" for name in COMMAND_GROUPS])
def test_registering_a_command_group_imports_nothing_heavy(module):
    out = subprocess.run([sys.executable, "-c", PROBE, module, json.dumps(HEAVY)], capture_output=True,
                         text=True, cwd=REPO, check=True, timeout=60)
    assert json.loads(out.stdout) == [], f"{module}.register imports heavy modules"


def test_the_probe_sees_a_heavy_import():
    # the checker must be able to fail: a module that imports numpy at the top is reported
    code = PROBE.replace("module = importlib.import_module(sys.argv[1])",
                         "import numpy\nmodule = importlib.import_module(sys.argv[1])")
    out = subprocess.run([sys.executable, "-c", code, "workbench.cli.evaluation", json.dumps(HEAVY)],
                         capture_output=True, text=True, cwd=REPO, check=True, timeout=60)
    assert json.loads(out.stdout) == ["numpy"]


def test_compare_lists_the_tests_the_engine_has():
    from workbench.cli.compare import TESTS
    from workbench.core.metrics.significance import TESTS as ENGINE_TESTS

    assert tuple(TESTS) == tuple(ENGINE_TESTS)


def test_eval_help_explains_conventions_in_words():
    out = subprocess.run([sys.executable, "-m", "workbench", "eval", "--help"], capture_output=True,
                         text=True, cwd=REPO, check=True, timeout=60).stdout
    for words in ("ties", "descending", "grade", "excluded", "scores 0", "exit status", "--format",
                  "default: table", "byte-order mark"):
        assert words in " ".join(out.split()), words
    assert "workbench.core" not in out and "see module" not in out


BLAS_PROBE = """
import json, os, sys
import workbench.cli.lean
from workbench.cli import main
if len(sys.argv) > 3:  # inputs of this many bytes keep huge pages
    workbench.cli.lean._HUGE_PAGES_FROM_BYTES = int(sys.argv[3])
code = main(["eval", sys.argv[1], sys.argv[2], "-m", "P@2", "--format", "json"])
import threadpoolctl
from numpy._core.multiarray import _get_madvise_hugepage
blas = sorted({p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"})
print(json.dumps({"code": code, "blas": blas, "env": os.environ.get("OPENBLAS_NUM_THREADS"),
                  "huge pages": _get_madvise_hugepage(), "huge env": os.environ.get("NUMPY_MADVISE_HUGEPAGE")}))
"""


def _probe_after_eval(tmp_path, probe: str, *extra: str, env: dict | None = None):
    """Run ``probe`` (a script that runs ``eval`` in-process on argv 1-2, then prints JSON as its
    last line) on a two-row qrels and run; its JSON."""
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    run.write_text("q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\n")
    out = subprocess.run([sys.executable, "-c", probe, str(qrels), str(run), *extra], capture_output=True,
                         text=True, cwd=REPO, check=True, timeout=60, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _blas_threads_after_eval(tmp_path, env_value: str | None, huge_value: str | None = None,
                             huge_from: int | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "NUMPY_MADVISE_HUGEPAGE")}
    if env_value is not None:
        env["OPENBLAS_NUM_THREADS"] = env_value
    if huge_value is not None:
        env["NUMPY_MADVISE_HUGEPAGE"] = huge_value
    extra = [] if huge_from is None else [str(huge_from)]
    return _probe_after_eval(tmp_path, BLAS_PROBE, *extra, env=env)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS starts one thread on one core anyway")
def test_eval_loads_numpy_with_one_blas_thread_and_leaves_the_environment_alone(tmp_path):
    # eval does no linear algebra: OpenBLAS's pool (one thread per core) would only cost start-up CPU;
    # and no huge pages, whose compaction can double a short eval's system CPU
    assert _blas_threads_after_eval(tmp_path, None) == {"code": 0, "blas": [1], "env": None,
                                                        "huge pages": False, "huge env": None}


@pytest.mark.parametrize(("huge_from", "huge"), [(1, True), (10**6, False)])
def test_eval_keeps_huge_pages_for_large_inputs(tmp_path, huge_from, huge):
    # the two files are 64 bytes together: at or above the threshold huge pages stay on
    got = _blas_threads_after_eval(tmp_path, None, huge_from=huge_from)
    assert (got["huge pages"], got["huge env"]) == (huge, None)


def test_eval_keeps_the_users_blas_threads_and_huge_pages(tmp_path):
    assert _blas_threads_after_eval(tmp_path, "2", "1") == {"code": 0, "blas": [2], "env": "2",
                                                            "huge pages": True, "huge env": "1"}


THP_PROBE = """
import ctypes, json, os, sys
prctl = ctypes.CDLL(None).prctl
PR_SET_THP_DISABLE, PR_GET_THP_DISABLE = 41, 42
if "preset" in sys.argv[3:]:  # the caller had turned huge pages off itself
    prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)
seen = []
def hook(event, args):  # the flag at the moment eval opens the run file
    if event == "open" and args and str(args[0]) == sys.argv[2]:
        seen.append(prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0))
sys.addaudithook(hook)
import workbench.cli.lean
if "large" in sys.argv[3:]:  # the inputs count as large enough for huge pages
    workbench.cli.lean._HUGE_PAGES_FROM_BYTES = 1
from workbench.cli import main
code = main(["eval", sys.argv[1], sys.argv[2], "-m", "P@2", "--format", "json"])
print(json.dumps({"code": code, "while reading": sorted(set(seen)), "after": prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0)}))
"""


def _thp_during_eval(tmp_path, *extra: str, env_add: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMPY_MADVISE_HUGEPAGE", "MIMALLOC_ALLOW_THP")}
    return _probe_after_eval(tmp_path, THP_PROBE, *extra, env={**env, **(env_add or {})})


@pytest.mark.skipif(sys.platform != "linux", reason="Linux's PR_SET_THP_DISABLE")
@pytest.mark.parametrize(("extra", "env_add", "expected"), [
    # small inputs: off while eval reads and scores, back on for an in-process caller
    ((), None, {"code": 0, "while reading": [1], "after": 0}),
    # inputs of a GiB or more keep huge pages (they paid off at 10^8 rows)
    (("large",), None, {"code": 0, "while reading": [0], "after": 0}),
    # a user who asked a library for huge pages keeps them
    ((), {"MIMALLOC_ALLOW_THP": "1"}, {"code": 0, "while reading": [0], "after": 0}),
    ((), {"NUMPY_MADVISE_HUGEPAGE": "1"}, {"code": 0, "while reading": [0], "after": 0}),
    # a caller that had turned them off keeps them off: eval does not undo what it did not do
    (("preset",), None, {"code": 0, "while reading": [1], "after": 1}),
])
def test_eval_runs_without_transparent_huge_pages_on_small_inputs(tmp_path, extra, env_add, expected):
    # pyarrow's allocator madvises huge pages for its arena; right after a large process exited,
    # their first touches wait for the kernel's compaction (docs/performance.md)
    assert _thp_during_eval(tmp_path, *extra, env_add=env_add) == expected


def test_input_bytes_sums_the_files_a_command_reads(tmp_path):
    import argparse

    from workbench.cli.lean import input_bytes

    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"x" * 10)
    b.write_bytes(b"y" * 32)
    assert input_bytes(argparse.Namespace(qrels=str(a), runs=[str(b), str(b)])) == 74
    assert input_bytes(argparse.Namespace(qrels=None, runs=[str(tmp_path / "missing"), str(b)])) == 32
    assert input_bytes(argparse.Namespace()) == 0


HEAP_PROBE = """
import json, resource, sys
from workbench.cli import main
main(["eval", sys.argv[1], sys.argv[2], "-m", "P@2", "--format", "json"])
import numpy as np

def fill():  # page faults of making and filling a 40 MB array
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a = np.empty(5_000_000)
    a[:] = 1.0
    return a, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

a, first = fill()
del a
b, second = fill()
print(json.dumps([first, second]))
"""


@pytest.mark.skipif(sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_eval_reuses_freed_memory_instead_of_faulting_it_in_again(tmp_path):
    # after eval set the allocator up, a freed 40 MB array's pages serve the next one; by default
    # (mapped afresh above glibc's mmap threshold) the kernel zero-fills them again
    first, second = _probe_after_eval(tmp_path, HEAP_PROBE)
    assert second <= first // 4, (first, second)


GC_PROBE = """
import gc, json, sys
from workbench.cli import main
started = []
gc.callbacks.append(lambda phase, info: phase == "start" and started.append(info["generation"]))
main(["eval", sys.argv[1], sys.argv[2], "-m", "P@2", "--format", "json"])
during = len(started)  # read before anything allocates: the collector, back on, may then run
print(json.dumps([during, gc.isenabled()]))
"""


def test_eval_runs_without_garbage_collections_and_gives_the_collector_back(tmp_path):
    # numpy's and pyarrow's imports alone set off collections that find nothing to free
    assert _probe_after_eval(tmp_path, GC_PROBE) == [0, True]


EXIT_PROBE = """
import atexit, sys
atexit.register(lambda: print("teardown ran", file=sys.stderr))
sys.argv = ["workbench", *sys.argv[1:]]
if sys.argv[1] == "thread":  # a thread still running when the command ends
    import threading, time
    sys.argv.pop(1)
    threading.Thread(target=time.sleep, args=(0.5,)).start()
from workbench.cli import run
run()
"""


def _many_queries(tmp_path, n: int = 3000):
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_text("".join(f"q{i} 0 d{i} 1\nq{i} 0 e{i} 0\n" for i in range(n)))
    run.write_text("".join(f"q{i} Q0 d{i} 1 {i % 7}.5 r\nq{i} Q0 e{i} 2 0.25 r\n" for i in range(n)))
    return qrels, run


def test_eval_on_files_skips_the_teardown_and_its_output_is_whole(tmp_path):
    """``workbench eval`` on files ends without the interpreter's teardown (exit handlers do
    not run), and stdout, to a pipe or to a file, holds every line the in-process command
    prints with a normal exit; an error's exit status is kept."""
    qrels, run = _many_queries(tmp_path)
    argv = ["eval", str(qrels), str(run), "-m", "P@1", "-m", "ndcg@2", "--per-query", "--format", "tsv"]
    normal = subprocess.run([sys.executable, "-c", "import sys; from workbench.cli import main; "
                             "sys.exit(main(sys.argv[1:]))", *argv], capture_output=True, cwd=REPO,
                            check=True, timeout=120)
    assert normal.stdout.count(b"\n") > 3000  # more than any pipe or stdio buffer holds
    piped = subprocess.run([sys.executable, "-c", EXIT_PROBE, *argv], capture_output=True, cwd=REPO,
                           timeout=120)
    assert (piped.returncode, piped.stdout, piped.stderr) == (0, normal.stdout, b"")
    with open(tmp_path / "out.tsv", "wb") as out:
        filed = subprocess.run([sys.executable, "-c", EXIT_PROBE, *argv], stdout=out, stderr=subprocess.PIPE,
                               cwd=REPO, timeout=120)
    assert filed.returncode == 0 and (tmp_path / "out.tsv").read_bytes() == normal.stdout
    missing = subprocess.run([sys.executable, "-c", EXIT_PROBE, "eval", str(qrels), str(tmp_path / "none.txt"),
                              "-m", "P@1"],
                             capture_output=True, cwd=REPO, timeout=120)
    assert missing.returncode != 0 and b"none.txt" in missing.stderr and b"teardown ran" not in missing.stderr


@pytest.mark.parametrize("argv", [["--version"], ["thread", "eval", "QRELS", "RUN", "-m", "P@1"]])
def test_other_commands_and_eval_beside_a_thread_exit_normally(tmp_path, argv):
    qrels, run = _many_queries(tmp_path, 3)
    argv = [str(qrels) if a == "QRELS" else str(run) if a == "RUN" else a for a in argv]
    out = subprocess.run([sys.executable, "-c", EXIT_PROBE, *argv], capture_output=True, cwd=REPO, timeout=120)
    assert out.returncode == 0 and b"teardown ran" in out.stderr, out.stderr
