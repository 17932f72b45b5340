"""``workbench synth`` end to end (issue 14): the real openai client (inside a real CLI process)
against the local OpenAI-compatible server, whose replies this module scripts; the offline
template baseline; what is stored; the cache; failures."""

from __future__ import annotations

import json
import re
import uuid

import pytest

import tests.support.openai_server as server_module
from tests.support.openai_server import running_server
from tests.support.templates import demo_project
from workbench.core import synthetic_queries as sq
from workbench.store.database import Database

_original = server_module.chat_completion


def _passage(prompt: str) -> str:
    found = re.search(r"<passage>\n(.*?)\n</passage>", prompt, re.DOTALL)
    return found.group(1) if found else ""


def _scripted(control, call, fault):
    """Synth prompts get questions: the first copies the chunk's first content words verbatim; the
    rewrite answers with questions that copy nothing (made-up words). Other prompts: the server's."""
    prompt = call.prompt
    if "You write the questions a user" in prompt and "exactly" in prompt:
        k = int(re.search(r"exactly (\d+) questions", prompt).group(1))
        words = sq.content_words(_passage(prompt))
        content = json.dumps({"questions": [f"What about {' '.join(words[i:i + 4])}?" for i in range(k)]})
    elif "Rewrite each question" in prompt:
        k = int(re.search(r"exactly (\d+) questions", prompt).group(1))
        content = json.dumps({"questions": [f"How do zorbly quimbles number {i} behave?" for i in range(k)]})
    else:
        return _original(control, call, fault)
    return {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": 0,
            "model": call.model or "test-judge",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": None},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(content) // 4,
                      "total_tokens": len(prompt) // 4 + len(content) // 4}}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    path = tmp_path_factory.mktemp("synth") / "demo.duckdb"
    demo_project(path)  # a copy of the worker's init --demo template
    return path


@pytest.fixture
def project(demo, tmp_path):
    copy = tmp_path / "project.duckdb"
    copy.write_bytes(demo.read_bytes())
    return copy


ENV = {"OPENAI_API_KEY": "sk-test-synth", "WORKBENCH_JUDGE_MAX_ATTEMPTS": "2", "WORKBENCH_JUDGE_BACKOFF_INITIAL": "0.01",
       "WORKBENCH_JUDGE_BACKOFF_MAX": "0.05"}


def test_llm_synth_stores_synthetic_queries_with_grade_3_labels(project, cli, monkeypatch):
    monkeypatch.setattr(server_module, "chat_completion", _scripted)
    with running_server() as server:
        args = ("--db", str(project), "synth", "--chunking", "sections", "--per-chunk", "2", "--limit", "5",
                "--model", "test-judge", "--base-url", server.base_url, "--seed", "3", "--format", "json")
        done = cli(*args, env=ENV)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert set(report) == {"created", "overlap_before", "overlap_after", "flagged"}
        assert report["created"] == 10
        calls = server.control.count("/v1/chat/completions")
        assert calls == 10  # one generation and one rewrite per chunk
        # the same command again: the cache answers everything, nothing new is stored
        again = json.loads(cli(*args, env=ENV).stdout)
        assert again["created"] == 0 and server.control.count("/v1/chat/completions") == calls
        assert again["overlap_before"] == report["overlap_before"]
    assert report["overlap_after"] == 0.0 < report["overlap_before"]
    assert report["flagged"] == 0
    with Database(project) as db:
        rows = db.query_df("SELECT * FROM synthetic_questions ORDER BY query_id")
        queries = db.query_df("SELECT q.query_id, q.text, q.tags::VARCHAR AS tags FROM queries q "
                              "JOIN synthetic_questions s USING (query_id)")
        labels = db.query_df("SELECT j.query_id, j.doc_id, j.start, j.\"end\", j.grade, j.source, j.assessor, j.model "
                             "FROM judgments j JOIN synthetic_questions s USING (query_id)")
        chunk = db.query_df("SELECT chunk_id, doc_id, start, \"end\" FROM chunks WHERE chunking = 'sections'")
    assert b"sk-test-synth" not in project.read_bytes()  # the API key never reaches the database
    assert len(rows) == 10 and rows["seed"].eq(3).all() and rows["model"].eq("test-judge").all()
    # each original copies the chunk's words; its overlap was measured against that chunk
    assert (rows["overlap_before"] > 0.5).all() and rows["rewritten"].str.contains("zorbly").all()
    assert all(sq.is_synthetic(t) for t in queries["tags"])
    assert set(queries["text"]) == set(rows["rewritten"])
    assert (labels["grade"] == 3).all() and (labels["assessor"] == "synthetic").all() and len(labels) == 10
    spans = chunk.set_index("chunk_id").loc[rows["chunk_id"]]
    assert list(spans["start"]) == list(rows["start"]) and list(spans["doc_id"]) == list(rows["doc_id"])


def test_llm_failures_are_reported_never_made_into_questions(project, cli, monkeypatch):
    monkeypatch.setattr(server_module, "chat_completion", _original)  # replies hold a grade, no questions
    with running_server() as server:
        done = cli("--db", str(project), "synth", "--chunking", "sections", "--per-chunk", "1", "--limit", "3",
                   "--model", "test-judge", "--base-url", server.base_url, env=ENV)
        server.control.fault_rates = {"500": 1.0}
        down = cli("--db", str(project), "synth", "--chunking", "sections", "--per-chunk", "1", "--limit", "2",
                   "--seed", "9", "--model", "test-judge", "--base-url", server.base_url, env=ENV)
        assert server.control.fault_counts().get("500") == 4  # two chunks x two attempts, no rewrite asked
    assert down.returncode == 0, down.stderr
    assert "2 chunks failed" in down.stdout and "HTTP 500" in down.stdout
    assert done.returncode == 0, done.stderr
    assert "0 created" in done.stdout and "3 chunks failed" in done.stdout and 'no "questions" list' in done.stdout
    with Database(project) as db:
        assert db.query_value("SELECT count(*) FROM synthetic_questions") == 0
        assert db.query_value("SELECT count(*) FROM generation_cache") == 0  # an unusable reply is never cached


def test_offline_template_baseline_is_named_and_flags_copies(project, cli):
    env = {"OPENAI_API_KEY": "", "WORKBENCH_JUDGE_BASE_URL": "https://api.openai.com/v1"}
    done = cli("--db", str(project), "synth", "--chunking", "sections", "--per-chunk", "2", "--limit", "8",
               "--max-overlap", "0.01", "--baseline", env=env)
    assert done.returncode == 0, done.stderr
    assert "offline template baseline (not an LLM)" in done.stdout
    hit = re.search(r"hit@10 ([\d.]+) -> ([\d.]+), MRR@10 ([\d.]+) -> ([\d.]+)", done.stdout)
    assert hit, done.stdout
    # the rewrite removes copied words, so BM25 finds the source chunk less often
    assert float(hit.group(1)) >= float(hit.group(2)) and float(hit.group(3)) >= float(hit.group(4))
    assert "offline-template baseline (not an LLM)" in done.stderr
    assert "set OPENAI_API_KEY or --base-url for an LLM" in done.stderr  # the note's field, as the CLI says it
    with Database(project) as db:
        rows = db.query_df("SELECT generator, model, overlap_after, flagged FROM synthetic_questions")
    assert len(rows) == 16 and rows["model"].eq("offline-template").all()
    assert (rows["flagged"] == (rows["overlap_after"] > 0.01)).all()


def test_bad_input_is_one_line(project, cli):
    done = cli("--db", str(project), "synth", "--chunking", "nope", "--per-chunk", "1", env={"OPENAI_API_KEY": ""})
    assert done.returncode == 3 and "no chunking named 'nope'" in done.stderr and "Traceback" not in done.stderr
    bad = cli("--db", str(project), "synth", "--chunking", "sections", "--per-chunk", "0")
    assert bad.returncode == 2
