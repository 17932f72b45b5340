"""``workbench import corpus`` of a JSONL file imports neither pandas nor numpy nor pyarrow (issue 21).

The streamed import (:mod:`workbench.services.ingest.corpus_stream`) hands the file to DuckDB;
importing pandas alone (and the numpy and pyarrow it pulls in) was about 0.5 s of CPU at start-up,
a third of a bare DuckDB load of 200k documents. The whole command runs in a fresh interpreter
with ``-X importtime``, which names every module the process imported.
"""

from __future__ import annotations

import subprocess
import sys

from tests.support.prerequisites import REPO
from workbench.services.project.lifecycle import open_project

HEAVY = {"pandas", "numpy", "pyarrow"}


def _import_corpus(db, corpus) -> tuple[str, set[str]]:
    """stdout of ``python -X importtime -m workbench --db DB import corpus FILE`` and the
    top-level packages it imported."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "workbench", "--db", str(db), "import",
                          "corpus", str(corpus)], capture_output=True, text=True, cwd=REPO, check=True,
                         timeout=120)
    # "import time:   self |  cumulative | <indent>module.name"
    modules = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in out.stderr.splitlines()
               if line.startswith("import time:") and "|" in line}
    return out.stdout, modules


def test_a_streamed_jsonl_import_imports_no_pandas(tmp_path):
    db = tmp_path / "p.duckdb"
    open_project(db, create=True).close()
    first = tmp_path / "corpus.jsonl"
    first.write_text('{"_id": "d1", "title": "Alpha", "text": "cats"}\n{"_id": "d2", "text": "dogs"}\n')
    more = tmp_path / "more.jsonl"  # onto stored documents: equal rows are compared, not written again
    more.write_text('{"_id": "d2", "text": "dogs"}\n{"_id": "d3", "text": "eels", "lang": "en"}\n')
    for corpus, said in ((first, "imported 2 documents"), (more, "1 rows were already stored"),
                         (first, "already imported")):
        stdout, modules = _import_corpus(db, corpus)
        assert said in stdout, stdout
        assert "workbench" in modules  # the probe saw the command's own imports
        assert not modules & HEAVY, f"{corpus.name}: imported {sorted(modules & HEAVY)}"


def test_the_probe_sees_pandas_when_the_general_importer_runs(tmp_path):
    # a SMART corpus is parsed into a DataFrame by the general importer: the probe must say so
    db = tmp_path / "p.duckdb"
    open_project(db, create=True).close()
    corpus = tmp_path / "cran.all"
    corpus.write_text(".I 1\n.T\nwings\n.W\nlift and drag\n.I 2\n.W\nboundary layers\n")
    stdout, modules = _import_corpus(db, corpus)
    assert "imported 2 documents" in stdout and "format smart" in stdout, stdout
    assert "pandas" in modules
