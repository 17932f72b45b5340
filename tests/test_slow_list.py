"""``tests/slow_tests.txt`` (the measured slow tests ``make check`` leaves out) names tests that
exist: a renamed or deleted test must leave the list, or the list silently stops meaning anything."""

from __future__ import annotations

import re

from tests.conftest import SLOW_LIST, listed_slow
from tests.support.prerequisites import REPO


def missing_tests(nodes: set[str]) -> list[str]:
    """The node ids whose file, or whose function / class in that file, does not exist."""
    missing = []
    for node in sorted(nodes):
        path, *names = node.split("[", 1)[0].split("::")
        file = REPO / path
        text = file.read_text(encoding="utf-8") if file.is_file() else ""
        if not names or not all(re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(n)}\b", text, re.M)
                                for n in names):
            missing.append(node)
    return missing


def test_every_listed_test_exists():
    listed = listed_slow()
    assert listed, f"{SLOW_LIST} lists no test"
    missing = missing_tests(listed)
    assert not missing, f"not found (regenerate with `python -m tests.support.durations`): {missing[:5]}"


def test_a_missing_test_is_found():
    here = "tests/test_slow_list.py"
    assert missing_tests({f"{here}::test_a_missing_test_is_found", f"{here}::test_every_listed_test_exists[x]"}) == []
    assert missing_tests({f"{here}::test_no_such_test", "tests/no_such_file.py::test_x"}) == [
        "tests/no_such_file.py::test_x", f"{here}::test_no_such_test"]
