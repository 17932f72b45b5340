"""Which tests are slow, from a measured run: writes ``tests/slow_tests.txt``.

``make check`` runs everything but the browser tests and the slow ones (``-m "not browser and not
slow"``). A test is slow when a decorator says so (``@pytest.mark.slow``, a module's
``pytestmark``) or when it is listed in ``tests/slow_tests.txt``; :mod:`tests.conftest` adds the
mark to the listed ones at collection. The list is measured, not guessed: run the whole suite with
``--junitxml``, then

    python -m tests.support.durations var/junit.xml [--over 1.0]

lists every test whose setup + call + teardown took more than ``--over`` seconds (default 1.0),
sorted by node id, and prints what ``make check`` is left with. A test that is slow only because
the machine was busy is listed too; rerun on a quiet machine to trim the list. ``--merge`` keeps
the listed tests and adds the new ones: run it on the junit file of a ``make check`` run too, since
a module's shared fixture is timed on the first test that uses it, which changes when that test is
left out. (Tests
marked in code may be listed as well; the mark is the same.)
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
LIST = TESTS / "slow_tests.txt"

HEADER = """\
# Tests that take more than {over:g} s each (setup + call + teardown), measured by a whole run of
# `make test` with --junitxml and written by `python -m tests.support.durations` (see its docstring).
# tests/conftest.py marks each as `slow`, so `make check` leaves them out; `make test` runs them all.
# One pytest node id per line; an id without [parameters] stands for every parameter set.
"""


def node_id(case: ET.Element) -> str:
    """The pytest node id of a junit ``testcase``: ``classname`` is the dotted module path, with a
    class name appended for tests in a class."""
    parts = case.get("classname", "").split(".")
    name = case.get("name", "")
    for cut in range(len(parts), 0, -1):  # the longest prefix that is a test file
        path = Path(*parts[:cut]).with_suffix(".py")
        if (REPO / path).is_file():
            return "::".join([path.as_posix(), *parts[cut:], name])
    return "::".join([*parts, name])


def durations(junit: Path) -> dict[str, float]:
    """Seconds per node id; a test that failed or was skipped counts too (its time was spent)."""
    out: dict[str, float] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        out[node_id(case)] = out.get(node_id(case), 0.0) + float(case.get("time") or 0.0)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path, help="a junit XML file of a whole `make test` run")
    parser.add_argument("--over", type=float, default=1.0, help="seconds above which a test is slow (default 1.0)")
    parser.add_argument("--merge", action="store_true", help="keep the tests already listed, add the new ones")
    args = parser.parse_args(argv)
    if not args.junit.is_file():
        print(f"durations: {args.junit} not found; run `make test PYTEST_ARGS=--junitxml={args.junit}`", file=sys.stderr)
        return 2
    measured = durations(args.junit)
    listed = set()
    if args.merge and LIST.is_file():
        listed = {line.strip() for line in LIST.read_text(encoding="utf-8").splitlines()
                  if line.strip() and not line.startswith("#")}
    slow = sorted(listed | {n for n, s in measured.items() if s > args.over})
    LIST.write_text(HEADER.format(over=args.over) + "".join(f"{n}\n" for n in slow), encoding="utf-8")
    kept = [s for n, s in measured.items() if n not in slow]
    print(f"{len(slow)} tests over {args.over:g} s listed in {LIST.relative_to(REPO)}; "
          f"make check keeps {len(kept)} tests, {sum(kept):.0f} s of test time (before collection, on 1 core)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
