"""``make install`` (and ``install-test``, ``run``) leaves the package's modules compiled.

An editable install does not compile the sources; where PYTHONDONTWRITEBYTECODE is set every
``workbench`` process would then compile each module it imports again (docs/performance.md,
"Bytecode written at install"). The Makefile's recipe runs ``compileall``; these tests check that
the targets run it and that it writes the bytecode with that variable set.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _planned(*targets: str) -> str:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    # -n: print the recipes without running them; -W: as if pyproject.toml had changed, so the
    # install recipes are printed even where the virtual environment is up to date
    done = subprocess.run([make, "-n", "-W", "pyproject.toml", "--no-print-directory", *targets],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("target", ["install", "install-test", "run"])
def test_each_setup_target_compiles_the_package(target):
    lines = [line for line in _planned(target).splitlines() if "compileall" in line]
    assert lines, f"make {target} does not run compileall"
    assert all(shlex.split(line)[-1] == "workbench" for line in lines)


def test_the_compile_step_writes_bytecode_although_the_environment_forbids_it(tmp_path):
    (line,) = {line for line in _planned("install").splitlines() if "compileall" in line}
    argv = shlex.split(line)
    argv[0] = sys.executable  # the recipe names the venv's python; this is the same interpreter
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(tmp_path)}
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.pyc")}
    for module in ("workbench/cli/evaluation.py", "workbench/core/metrics/readers.py",
                   "workbench/core/metrics/ranking.py"):
        source = (REPO / module).resolve()
        cached = Path(source.relative_to("/").parent) / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
        assert cached.as_posix() in written, f"no bytecode for {module}"
    # every module of the package, not only those named above
    sources = sum(1 for _ in (REPO / "workbench").rglob("*.py"))
    assert sum(1 for p in written if "/workbench/" in f"/{p}") == sources
