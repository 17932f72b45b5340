"""The xdist scheduler of ``make test`` (:mod:`tests.support.scheduling`): a hand-worked plan, the
plan's guarantees on random collections, the module-seconds file, and a real ``pytest -n 2`` run
that starts the longest modules first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.support import scheduling
from tests.support.prerequisites import REPO


def test_a_hand_worked_plan_on_two_workers():
    # a 10 s, b 6, c 5, d 4, e unknown (3 tests x 0.3 = 0.9 s). Longest first to the least loaded:
    # a -> w0 (10); b -> w1 (6); c -> w1 (11); d -> w0 (14); e -> w1 (11.9).
    collection = ["a.py::t1", "a.py::t2", "b.py::t", "c.py::t1", "c.py::t2", "d.py::t",
                  "e.py::t1", "e.py::t2[x]", "e.py::t2[y]"]
    seconds = {"a.py": 10, "b.py": 6, "c.py": 5, "d.py": 4}
    assert scheduling.plan(collection, seconds, 2) == [[0, 1, 5], [2, 3, 4, 6, 7, 8]]
    # one worker: every module, longest first; more workers than modules: empty queues
    assert scheduling.plan(collection, seconds, 1) == [[0, 1, 2, 3, 4, 5, 6, 7, 8]]
    assert scheduling.plan(collection[:3], seconds, 4) == [[0, 1], [2], [], []]
    with pytest.raises(ValueError, match="workers must be at least 1"):
        scheduling.plan(collection, seconds, 0)


def test_random_plans_send_every_test_once_keep_modules_whole_and_balance_the_seconds():
    rng = np.random.default_rng(17)
    for case in range(300):
        modules = [f"tests/m{m}.py" for m in range(int(rng.integers(1, 40)))]
        collection = [f"{module}::test_{t}" for module in modules for t in range(int(rng.integers(1, 12)))]
        listed = [m for m in modules if rng.random() < 0.8]
        seconds = {m: float(rng.choice([rng.exponential(2.0), rng.exponential(60.0)])) for m in listed}
        workers = int(rng.integers(1, 6))
        queues = scheduling.plan(collection, seconds, workers)

        assert len(queues) == workers
        assert sorted(i for q in queues for i in q) == list(range(len(collection))), case
        estimate = {m: seconds.get(m, scheduling.UNKNOWN_TEST_S * sum(n.startswith(m + "::") for n in collection))
                    for m in modules}
        loads = []
        for queue in queues:
            in_order = [scheduling.module_of(collection[i]) for i in queue]
            runs = [m for k, m in enumerate(in_order) if k == 0 or in_order[k - 1] != m]
            assert len(runs) == len(set(runs)), f"case {case}: a module split inside a queue"
            assert queue == sorted(queue, key=lambda i: (runs.index(scheduling.module_of(collection[i])), i))
            assert [estimate[m] for m in runs] == sorted((estimate[m] for m in runs), reverse=True), case
            loads.append(sum(estimate[m] for m in runs))
        # longest-processing-time-first: no worker exceeds the ideal share by more than one module
        assert max(loads) <= sum(estimate.values()) / workers + max(estimate.values()) + 1e-9, case


def test_the_module_seconds_file_round_trips_and_lists_only_existing_modules(tmp_path):
    totals = scheduling.module_seconds({"tests/a.py::t1": 1.0, "tests/a.py::t2[x]": 2.5, "tests/b.py::t": 7.25,
                             "tests/c.py::t": 2.5})
    assert totals == {"tests/b.py": 7.25, "tests/a.py": 3.5, "tests/c.py": 2.5}
    assert list(totals) == ["tests/b.py", "tests/a.py", "tests/c.py"]
    path = tmp_path / "seconds.txt"
    path.write_text("# a comment\n7.2\ttests/b.py\n3.5\ttests/a.py\n\n", encoding="utf-8")
    assert scheduling.read_module_seconds(path) == {"tests/b.py": 7.2, "tests/a.py": 3.5}
    scheduling.write_module_seconds(totals, path)
    assert scheduling.read_module_seconds(path) == {"tests/b.py": 7.2, "tests/a.py": 3.5, "tests/c.py": 2.5}
    for bad in ("7.2 tests/b.py", "fast\ttests/b.py", "7.2\t"):
        path.write_text(f"# header\n{bad}\n", encoding="utf-8")
        with pytest.raises(ValueError, match=f"{path.name}:2: expected 'seconds<TAB>module path'"):
            scheduling.read_module_seconds(path)
    assert scheduling.read_module_seconds(tmp_path / "absent.txt") == {}

    listed = scheduling.read_module_seconds()
    assert listed, f"{scheduling.MODULE_SECONDS} lists no module"
    missing = [m for m in listed if not (REPO / m).is_file()]
    assert not missing, f"not test modules (regenerate with `python -m tests.support.durations JUNIT --modules`): {missing[:5]}"


def test_a_real_xdist_run_starts_the_longest_modules_first_and_runs_every_test_once(tmp_path):
    """Two workers, modules listed as long, mid and short (sleep-free tests that log where and when
    they ran): each worker starts with one of the two longest modules, and every test runs once."""
    log = tmp_path / "ran.jsonl"
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f"""
        import json, os, time
        from tests.support.scheduling import LongestModulesFirst

        SECONDS = {{"test_long.py": 100.0, "test_mid.py": 60.0, "test_short_a.py": 1.0}}

        def pytest_xdist_make_scheduler(config, log):
            return LongestModulesFirst(config, log, seconds=SECONDS)

        def pytest_runtest_call(item):
            with open({str(log)!r}, "a") as out:
                out.write(json.dumps({{"worker": os.environ["PYTEST_XDIST_WORKER"], "id": item.nodeid,
                                       "at": time.monotonic()}}) + "\\n")
        """), encoding="utf-8")
    for name, count in [("test_short_a", 4), ("test_short_b", 4), ("test_long", 3), ("test_mid", 3)]:
        (tmp_path / f"{name}.py").write_text(
            "".join(f"def test_{k}():\n    pass\n\n" for k in range(count)), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                           "--dist", "worksteal", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "14 passed" in done.stdout, done.stdout
    ran = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert sorted(r["id"] for r in ran) == sorted(
        f"{m}.py::test_{k}" for m, n in [("test_short_a", 4), ("test_short_b", 4), ("test_long", 3),
                                         ("test_mid", 3)] for k in range(n))
    first = {}
    for r in sorted(ran, key=lambda r: r["at"]):
        first.setdefault(r["worker"], r["id"])
    assert sorted(first.values()) == ["test_long.py::test_0", "test_mid.py::test_0"], first
