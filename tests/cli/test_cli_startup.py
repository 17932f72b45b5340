"""The CLI starts fast: building the parser imports no heavy library (issue 7).

Each command group is registered alone in a fresh interpreter so that an offender is named.
A command imports what it needs when it runs, never when ``workbench --help`` builds the parser.
"""

from __future__ import annotations

import json
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


@pytest.mark.parametrize("module", [m.__name__ for m in COMMAND_GROUPS])
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
