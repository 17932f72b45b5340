"""A wheel carries its data: built from a copy of the source, installed into a fresh virtual
environment, and used from a directory that has no ``prompts/``, ``data/`` or ``config/``.

The fresh environment reaches the heavy dependencies (pandas, duckdb, bm25s, ...) through a
``.pth`` line naming the project venv's site-packages, so nothing is downloaded; the workbench
package itself must come from the wheel, which the test checks by asking the installed
interpreter where ``workbench`` and its demo data live. (A ``.pth`` line only adds a path: the
editable-install hook in that site-packages is not run, so the source tree stays invisible.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.support.prerequisites import REPO

pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "WORKBENCH_DB", "VIRTUAL_ENV"}}
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The ``bin`` directory of a fresh venv with the wheel installed."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    # Build from a copy so the source tree gets no build/ or egg-info from this test.
    shutil.copytree(REPO / "workbench", src / "workbench", symlinks=False,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    dist = root / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
          str(src)], cwd=root)
    wheels = list(dist.glob("relevance_workbench-*.whl"))
    assert len(wheels) == 1, wheels
    names = set(zipfile.ZipFile(wheels[0]).namelist())
    for needed in ("workbench/resources/demo/documents.jsonl", "workbench/resources/demo/queries.jsonl",
                   "workbench/resources/demo/labels.jsonl", "workbench/resources/prompts/relevance_v1.md",
                   "workbench/ui/app.py", "workbench/py.typed"):
        assert needed in names, needed

    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=root)
    python = venv / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=root).stdout.strip())
    (site / "project_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--ignore-installed",
          "-q", str(wheels[0])], cwd=root)
    return venv / "bin"


def test_the_installed_package_comes_from_the_wheel(installed, tmp_path):
    where = _run([str(installed / "python"), "-c",
                  "import workbench, workbench.resources as r; print(workbench.__file__); print(r.DEMO_DIR)"],
                 cwd=tmp_path).stdout.split()
    venv = installed.parent.resolve()
    assert all(Path(p).resolve().is_relative_to(venv) for p in where), where
    assert not any(Path(p).resolve().is_relative_to(REPO.resolve()) for p in where), where


def test_init_demo_status_and_eval_from_another_directory(installed, tmp_path):
    workbench = str(installed / "workbench")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    db = elsewhere / "demo.duckdb"

    init = _run([workbench, "--db", str(db), "init", "--demo"], cwd=elsewhere)
    assert "41 documents" in init.stdout and "44 queries" in init.stdout

    status = _run([workbench, "--db", str(db), "status"], cwd=elsewhere)
    assert "documents" in status.stdout and "41" in status.stdout

    _run([workbench, "--db", str(db), "export", "qrels", "--out", str(elsewhere / "qrels.txt")], cwd=elsewhere)
    qrels = [line.split() for line in (elsewhere / "qrels.txt").read_text().splitlines()]
    assert len(qrels) > 50
    # A run that ranks each query's judged documents by grade: a perfect ranking, so nDCG@10 = 1.
    by_query: dict[str, list[tuple[int, str]]] = {}
    for query_id, _, doc_id, grade in qrels:
        by_query.setdefault(query_id, []).append((int(grade), doc_id))
    lines = []
    for query_id, docs in by_query.items():
        for rank, (grade, doc_id) in enumerate(sorted(docs, key=lambda d: (-d[0], d[1])), start=1):
            lines.append(f"{query_id} Q0 {doc_id} {rank} {100 - rank} perfect")
    (elsewhere / "perfect.run").write_text("\n".join(lines) + "\n")

    scored = _run([workbench, "eval", "qrels.txt", "perfect.run", "-m", "ndcg@10", "--format", "json"],
                  cwd=elsewhere)
    assert json.loads(scored.stdout)["perfect"]["aggregate"]["ndcg@10"] == pytest.approx(1.0), scored.stdout

    # The demo's own BM25 run, exported from the project and scored against chunk-level qrels.
    _run([workbench, "--db", str(db), "export", "run", "bm25", "--out", "bm25.trec"], cwd=elsewhere)
    _run([workbench, "--db", str(db), "export", "qrels", "--level", "chunk", "--chunking", "sections",
          "--out", "chunks.qrels"], cwd=elsewhere)
    bm25 = _run([workbench, "eval", "chunks.qrels", "bm25.trec", "-m", "ndcg@10", "--format", "json"], cwd=elsewhere)
    assert 0 < json.loads(bm25.stdout)["bm25"]["aggregate"]["ndcg@10"] < 1, bm25.stdout
