"""Longest modules first: how ``make test`` and ``make check`` hand the tests to the xdist workers.

xdist's ``worksteal`` gives each worker an equal *count* of tests in collection order, so the
workers get the alphabet in thirds: whichever third holds the long browser walks (``tests/ui``)
ends a minute after the others, with its cores idle meanwhile (2 cores, 3 workers, 1,762 tests:
the three workers ended at 324, 353 and 378 s, 53 CPU-s idle). This scheduler hands out whole
test modules instead, longest first, each to the worker whose queue is shortest in *seconds*
(longest-processing-time-first: a worker's load is at most the ideal share plus one module), from
the seconds each module took in a measured run (``tests/module_seconds.txt``, written by
``python -m tests.support.durations --modules``). Each worker's queue is its modules, longest first;
work stealing then works as in ``worksteal``: a worker that runs dry takes the second half of the
longest queue, which is now its short modules, so the run ends on short tests.

Whole modules, in collection order inside each one, so a module-scoped fixture (a served app, an
ONNX export) is built once per worker that runs the module, as before. A module the file does not
know (new, renamed) is estimated at ``UNKNOWN_TEST_S`` per test; a stale file only makes the plan
less even, never wrong: every test is sent exactly once, whatever the estimates.
"""

from __future__ import annotations

from pathlib import Path

from xdist.scheduler import WorkStealingScheduling

TESTS = Path(__file__).resolve().parents[1]
#: seconds per test module of a measured whole run, one ``seconds<TAB>module path`` per line
MODULE_SECONDS = TESTS / "module_seconds.txt"
#: the estimate for a test of a module the file does not list (the suite's median is ~0.1 s)
UNKNOWN_TEST_S = 0.3


def module_of(node_id: str) -> str:
    """The file part of a pytest node id: ``tests/a/test_b.py::test_c[x]`` -> ``tests/a/test_b.py``."""
    return node_id.split("::", 1)[0]


MODULE_SECONDS_HEADER = """\
# Seconds each test module took in a whole `make test` run (its tests' setup + call + teardown,
# summed; xdist workers on a busy 2-core machine, so a relative figure), written by
# `python -m tests.support.durations JUNIT --modules`. tests/support/scheduling.py hands the
# longest modules to the workers first. One `seconds<TAB>module path` per line.
"""


def module_seconds(measured: dict[str, float]) -> dict[str, float]:
    """Seconds per test module from seconds per node id (summed by :func:`module_of`), longest
    first, ties by path."""
    totals: dict[str, float] = {}
    for node_id, seconds in measured.items():
        module = module_of(node_id)
        totals[module] = totals.get(module, 0.0) + seconds
    return dict(sorted(totals.items(), key=lambda item: (-item[1], item[0])))


def write_module_seconds(seconds: dict[str, float], path: Path = MODULE_SECONDS) -> None:
    """The file :func:`read_module_seconds` reads: the header, then ``seconds<TAB>module`` lines."""
    path.write_text(MODULE_SECONDS_HEADER + "".join(f"{s:.1f}\t{m}\n" for m, s in seconds.items()),
                    encoding="utf-8")


def read_module_seconds(path: Path = MODULE_SECONDS) -> dict[str, float]:
    """``{module path: seconds}`` from a file of ``seconds<TAB>module`` lines (``#`` lines are
    comments); an absent file is an empty mapping (every module then gets the per-test estimate).
    A line of another shape is a ValueError naming the file and line."""
    if not path.is_file():
        return {}
    seconds: dict[str, float] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip() and not line.startswith("#"):
            value, tab, module = line.partition("\t")
            try:
                seconds[module.strip()] = float(value)
            except ValueError:
                tab = ""
            if not tab or not module.strip():
                raise ValueError(f"{path}:{number}: expected 'seconds<TAB>module path', got {line!r}; "
                                 "regenerate it with `python -m tests.support.durations JUNIT --modules`")
    return seconds


def plan(collection: list[str], seconds: dict[str, float], workers: int) -> list[list[int]]:
    """One queue of collection indices per worker: modules (their tests contiguous, in collection
    order) given longest first to the worker with the least estimated seconds so far; ties go to the
    lower worker and, among modules, to the one collected first, so the plan is deterministic.

    A module's estimate is ``seconds[module]`` when listed, else ``UNKNOWN_TEST_S`` per test.
    Every index appears exactly once; with more workers than modules some queues are empty."""
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    modules: dict[str, list[int]] = {}
    for index, node_id in enumerate(collection):
        modules.setdefault(module_of(node_id), []).append(index)

    def estimate(module: str) -> float:
        return seconds.get(module, UNKNOWN_TEST_S * len(modules[module]))

    order = sorted(modules, key=lambda module: (-estimate(module), modules[module][0]))
    queues: list[list[int]] = [[] for _ in range(workers)]
    loads = [0.0] * workers
    for module in order:
        least = min(range(workers), key=lambda worker: (loads[worker], worker))
        queues[least].extend(modules[module])
        loads[least] += estimate(module)
    return queues


class LongestModulesFirst(WorkStealingScheduling):
    """``worksteal`` with a first distribution by :func:`plan` instead of equal counts in
    collection order; stealing, shutdown and a crashed worker's tests are handled as in
    ``worksteal``."""

    def __init__(self, config, log=None, seconds: dict[str, float] | None = None):
        super().__init__(config, log)
        self.seconds = read_module_seconds() if seconds is None else seconds

    def schedule(self) -> None:
        collections = list(self.node2collection.values())
        # Later calls (a worker added) and differing collections (reported and aborted by
        # worksteal itself) are worksteal's business.
        if self.collection is not None or any(c != collections[0] for c in collections[1:]):
            super().schedule()
            return
        self.collection = collections[0]
        if not self.collection:
            return
        for node, queue in zip(self.nodes, plan(self.collection, self.seconds, len(self.nodes))):
            if queue:
                self.node2pending[node].extend(queue)
                node.send_runtest_some(queue)
        # A worker left with fewer than two tests steals now, as worksteal does after its split.
        self.check_schedule()
