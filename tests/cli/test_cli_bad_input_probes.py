"""Hostile inputs through the real ``python -m workbench`` process: each one is refused with the
documented exit code and exactly one line on stderr, never a traceback, and the project database
is left byte for byte as it was (issue 19's probes, plus the ones found after it)."""

from __future__ import annotations

import codecs
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.templates import demo_project

BAD_INPUT, BAD_CONFIG = 3, 2  # workbench.cli.common.EXIT_CODES


def _workbench(args: list, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "WORKBENCH_"))}
    return subprocess.run([sys.executable, "-m", "workbench", *args], cwd=cwd, env=env,
                          capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    # what `init --demo` builds: a copy of the worker's template (the probes are the processes)
    return demo_project(tmp_path_factory.mktemp("demo") / "demo.duckdb")


def _files(folder: Path) -> None:
    w = lambda name, data: (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())  # noqa: E731
    w("surrogate_corpus.jsonl", '{"doc_id": "x1", "text": "bad \\ud800 here"}\n')
    w("surrogate_queries.jsonl", '{"query_id": "qx", "text": "bad \\ud800"}\n')
    w("surrogate_spans.jsonl", '{"query_id": "q001", "doc_id": "it-laptop-refresh", "start": 0, "end": 10, '
                               '"grade": 2, "assessor": "a\\ud800"}\n')
    w("surrogate_labels.jsonl", '{"query_id": "q\\udfff", "doc_id": "d", "grade": 1}\n')
    w("deep.jsonl", '{"doc_id": "x1", "text": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    w("deep_labels.jsonl", '{"query_id": "q1", "relevant": {"d": ' + "[" * 50_000 + "]" * 50_000 + "}}\n")
    w("latencies_latin1.jsonl", '{"query_id": "q001", "latency_ms": 5, "note": "\u00e9"}\n'.encode("latin-1"))
    w("config_latin1.toml", '[project]\ndb = "\u00e9.duckdb"\n'.encode("latin-1"))
    w("prompt_latin1.md", '+++\nid = "x"\n+++\n\u00e9'.encode("latin-1"))
    w("utf16_corpus.jsonl", '{"doc_id": "u1", "text": "utf16"}\n'.encode("utf-16"))
    w("nan_run.txt", "q001 Q0 it-laptop-refresh 1 nan r\n")
    w("labels.qrels", "q001 0 it-laptop-refresh 3\nq001 0 it-vpn 0\n")
    w("empty.txt", "")
    (folder / "a_folder").mkdir()


PROBES = {
    # issue 19
    "lone surrogate in a corpus": (["import", "corpus", "surrogate_corpus.jsonl"], BAD_INPUT, "surrogate_corpus.jsonl:1"),
    "lone surrogate in queries": (["import", "queries", "surrogate_queries.jsonl"], BAD_INPUT, "surrogate_queries.jsonl:1"),
    "lone surrogate in a span assessor": (["import", "qrels", "--format", "spans", "surrogate_spans.jsonl"],
                                          BAD_INPUT, "surrogate_spans.jsonl:1"),
    "deeply nested JSON": (["import", "corpus", "deep.jsonl"], BAD_INPUT, "deep.jsonl:1"),
    "chunk size beyond 64 bits": (["chunk", "--name", "big", "--strategy", "fixed", "--size", "9" * 20],
                                  BAD_CONFIG, "size must be at most"),
    "latency file not UTF-8": (["latency", "import", "--run", "bm25", "latencies_latin1.jsonl"], BAD_INPUT,
                               "latencies_latin1.jsonl:1: not UTF-8"),
    "config file not UTF-8": (["--config", "config_latin1.toml", "status"], BAD_CONFIG, "config_latin1.toml: not UTF-8"),
    "unknown prompt with the offline judge": (["judge", "--pool", "demo", "--prompt", "nosuch", "--limit", "3"],
                                              BAD_INPUT, "unknown prompt 'nosuch'"),
    # found after it
    "prompt template not UTF-8": (["judge", "--pool", "demo", "--prompt", "prompt_latin1.md", "--limit", "1"],
                                  BAD_INPUT, "prompt_latin1.md: not UTF-8"),
    "lone surrogate in agree labels": (["agree", "surrogate_labels.jsonl", "surrogate_labels.jsonl"], BAD_INPUT,
                                       "surrogate_labels.jsonl:1"),
    "deeply nested qrels for eval": (["eval", "-m", "P@5", "deep_labels.jsonl", "nan_run.txt"], BAD_INPUT,
                                     "deep_labels.jsonl:1"),
    "bootstrap resamples beyond 64 bits": (["agree", "--resamples", "9" * 20, "labels.qrels", "labels.qrels"],
                                           BAD_INPUT, "at most 100,000"),
    "pool depth beyond 32 bits": (["pool", "--name", "big", "--runs", "bm25", "--depth", "9" * 20], BAD_INPUT,
                                  "pool depth must be at most"),
    "argument not UTF-8": (["import", "corpus", "--name", os.fsdecode(b"\xff"), "utf16_corpus.jsonl"], BAD_CONFIG,
                           "not UTF-8"),
    "UTF-16 corpus": (["import", "corpus", "utf16_corpus.jsonl"], BAD_INPUT, "utf16_corpus.jsonl:1: not UTF-8"),
    "NaN score in a run": (["import", "run", "nan_run.txt"], BAD_INPUT, "must be a finite number"),
    "empty qrels file": (["import", "qrels", "--format", "trec", "empty.txt"], BAD_INPUT, "is empty"),
    "folder as a run": (["import", "run", "a_folder"], BAD_INPUT, "is a directory"),
    "export into a folder": (["export", "qrels", "--out", "a_folder"], BAD_INPUT, "is a directory"),
}


@pytest.mark.parametrize("probe", sorted(PROBES))
def test_bad_input_is_one_line_an_exit_code_and_no_change(probe, demo_db, tmp_path):
    args, code, needle = PROBES[probe]
    _files(tmp_path)
    db = tmp_path / "project.duckdb"
    shutil.copyfile(demo_db, db)
    before = db.read_bytes()
    done = _workbench(["--db", str(db), *args], tmp_path)
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode == code, stderr
    assert "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert needle in stderr, stderr
    assert db.read_bytes() == before, "the project database changed"


def test_a_document_with_empty_text_is_reported_and_chunks_stay_done(demo_db, tmp_path):
    db = tmp_path / "project.duckdb"
    shutil.copyfile(demo_db, db)
    (tmp_path / "more.jsonl").write_bytes(codecs.BOM_UTF8 + b'{"doc_id": "e1", "text": "some text"}\r\n'
                                          b'{"doc_id": "e2", "text": ""}\r\n')
    done = _workbench(["--db", str(db), "import", "corpus", "more.jsonl"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert b"1 of them have an empty text" in done.stdout and b"more.jsonl:2 doc_id 'e2'" in done.stdout
    status = _workbench(["--db", str(db), "status"], tmp_path).stdout.decode()
    chunks = next(line for line in status.splitlines() if "Chunks" in line)
    # 41 demo documents + 2 new; e2 has nothing to chunk and does not keep the step partial.
    assert "done" in chunks and "over 42 of 43 documents (1 with an empty text" in chunks, chunks
