"""The judge service end to end: real DuckDB files, the real openai client, a local HTTP server."""

from __future__ import annotations

import json
import threading

import pytest

from tests.llm.judge_project import (
    demo_project,
    empty_config,
    judge_settings,
    judgment_calls,
    judgment_prompts,
    pair_texts,
    query,
)
from tests.support.openai_server import expected_default_grade, running_server
from workbench.errors import ConfigError, InputError
from workbench.services.judge import jobs as judge
from workbench.services.judge.export import KEYS, export_judgments
from workbench.store.database import Database

KEY = "sk-test-KEEPTHISSECRET-9f8e7d6c5b4a"


@pytest.fixture
def project(tmp_path):
    return demo_project(tmp_path / "project.duckdb")


def _spec(server, **judge_values):
    return judge.resolve_spec(judge_settings(server.base_url, **judge_values), api_key=KEY)


def _judgments(path, job_id=None):
    where = "WHERE job_id = ?" if job_id is not None else "WHERE source = 'llm'"
    return query(path, f"""SELECT query_id, doc_id, chunk_id, start, "end", grade, status, reason, error, job_id,
                                  cached, samples, grade_spread, probabilities, expected_grade, raw_response
                           FROM judgments {where} ORDER BY query_id, doc_id, chunk_id""",
                 [job_id] if job_id is not None else None)


def test_a_job_grades_every_pair_as_the_server_says_and_a_rerun_sends_nothing(project):
    with running_server() as server:
        spec = _spec(server, concurrency=8)
        report = judge.run_job(project, "demo", spec, limit=60)
        assert report.state == "finished"
        assert judgment_calls(server) == 60
        stored = _judgments(project)
        assert len(stored) == 60 and set(stored["status"]) == {"ok"}
        # Oracle: the server's grade rule recomputed from the passage text read from the project.
        texts = pair_texts(project).set_index(["query_id", "doc_id", "chunk_id"])["passage"]
        checked = 0
        for row in stored.itertuples():
            assert row.grade == expected_default_grade(texts[(row.query_id, row.doc_id, row.chunk_id)])
            checked += 1
        assert checked == 60
        assert not stored.duplicated(["query_id", "doc_id", "chunk_id"]).any()
        job = judge.job_status(project, report.job_id)
        assert (job["total"], job["judged"], job["ok"], job["state"]) == (60, 60, 60, "finished")
        assert job["prompt_tokens"] > 0 and job["cost_usd"] > 0

        again = judge.run_job(project, "demo", spec, limit=60)
        assert again.job_id == report.job_id and again.units_run == 0
        assert judgment_calls(server) == 60
        assert len(_judgments(project)) == 60


def test_the_cache_answers_the_same_texts_in_another_pool_without_a_request(project, tmp_path, cli):
    done = cli("--config", str(empty_config(tmp_path)), "--db", str(project), "pool", "--name", "small", "--runs", "bm25", "--depth", "3")
    assert done.returncode == 0, done.stderr
    with running_server() as server:
        spec = _spec(server, concurrency=8)
        judge.run_job(project, "demo", spec)
        sent = judgment_calls(server)
        assert judgment_prompts(server) == 880  # distinct prompts (a retry is no new one)
        report = judge.run_job(project, "small", spec)
        assert judgment_calls(server) == sent  # nothing sent again
        small = _judgments(project, report.job_id)
        pairs = query(project, "SELECT count(*) AS n FROM pool_pairs WHERE pool = 'small'")["n"][0]
        assert len(small) == pairs > 0
        assert (small["cached"] == 1).all()
        demo = _judgments(project, report.job_id - 1).set_index(["query_id", "doc_id", "chunk_id"])
        for row in small.itertuples():
            assert row.grade == demo.loc[(row.query_id, row.doc_id, row.chunk_id), "grade"]
        provenance = query(project, "SELECT count(*) AS n FROM judge_samples WHERE job_id = ? AND from_cache "
                                    "AND cached_from IS NOT NULL", [report.job_id])["n"][0]
        assert provenance == pairs
        # A different prompt is a different cache key: it is sent.
        binary = _spec(server, prompt="relevance_token_v1")
        judge.run_job(project, "small", binary)
        assert judgment_calls(server) == sent + pairs


def test_faults_end_ok_invalid_or_failed_never_lost_or_duplicated(project):
    with running_server(seed=7) as server:
        server.control.fault_rates = {"429": 0.03, "500": 0.03, "drop": 0.02, "malformed": 0.02,
                                      "malformed_body": 0.01, "out_of_range": 0.02}
        spec = _spec(server, concurrency=16, max_attempts=3)
        report = judge.run_job(project, "demo", spec, limit=300)
        stored = _judgments(project)
        assert len(stored) == 300 and not stored.duplicated(["query_id", "doc_id", "chunk_id"]).any()
        assert set(stored["status"]) <= {"ok", "invalid", "failed"}
        assert stored.loc[stored["status"] != "ok", "grade"].isna().all()
        assert stored.loc[stored["status"] == "ok", "grade"].between(0, 3).all()
        assert stored.loc[stored["status"] != "ok", "error"].notna().all()
        calls = judgment_calls(server)
        # Retry budget: at most max_attempts per request and one repair request per pair.
        assert 300 < calls <= 300 * 3 * 2
        job = judge.job_status(project, report.job_id)
        assert job["http_calls"] == calls
        assert job["ok"] + job["invalid"] + job["failed"] == 300


def test_invalid_and_failed_pairs_keep_their_text_and_retry_failed_judges_them_again(project):
    texts = pair_texts(project)
    with running_server() as server:
        ranked = query(project, """SELECT p.query_id, p.doc_id, p.chunk_id FROM pool_pairs p WHERE pool = 'demo'
                                   ORDER BY priority, query_id, doc_id, chunk_id LIMIT 20""")
        first = texts.merge(ranked)["passage"].tolist()
        broken, invalid = first[0], first[1]
        bad = {broken: "500", invalid: "out_of_range"}
        server.control.fault_rule = lambda call: bad.get(call.passage)
        spec = _spec(server, max_attempts=2)
        first_run = judge.run_job(project, "demo", spec, limit=20)
        # the retry command is data in the stored message; the CLI says it in backticks
        assert "{command:judge --pool demo --retry-failed} judges them again" in first_run.message
        assert "`workbench judge --pool demo --retry-failed` judges them again" in first_run.summary()
        stored = _judgments(project)
        by_status = stored["status"].value_counts().to_dict()
        n_broken = sum(p == broken for p in first)
        n_invalid = sum(p == invalid for p in first)
        assert by_status.get("failed", 0) == n_broken and by_status.get("invalid", 0) == n_invalid
        bad_rows = stored[stored["status"] == "invalid"]
        assert bad_rows["raw_response"].str.contains('"grade": 7').all()
        assert bad_rows["grade"].isna().all()
        failures = judge.list_failures(project, int(stored["job_id"][0]))
        assert len(failures) == n_broken + n_invalid

        server.control.fault_rule = None
        before = judgment_calls(server)
        report = judge.run_job(project, "demo", spec, limit=20, retry_failed=True)
        assert judgment_calls(server) - before == n_broken + n_invalid
        stored = _judgments(project)
        assert len(stored) == 20 and set(stored["status"]) == {"ok"}
        assert report.job["failed"] == report.job["invalid"] == 0


def test_budget_stops_cleanly_and_a_larger_budget_resumes(project):
    with running_server() as server:
        spec = _spec(server, concurrency=2)
        estimate = judge.estimate(project, "demo", spec, limit=100)
        assert estimate.to_send == 100 and estimate.cost_usd > 0
        report = judge.run_job(project, "demo", spec, limit=100, budget_usd=estimate.cost_usd / 4)
        assert report.state == "budget" and "raise {field:budget} and run again" in report.message
        assert "raise {field:budget}" in judge.job_status(project, report.job_id)["message"]  # stored as data
        assert "raise --budget and run again" in report.summary() and "{" not in report.summary()
        assert report.message in report.summary(data=True)
        job = judge.job_status(project, report.job_id)
        assert 0 < job["judged"] < 100
        assert job["cost_usd"] <= estimate.cost_usd / 4
        # Resumed with the same budget it stops again at once; a larger one goes further.
        again = judge.run_job(project, "demo", spec, limit=100, budget_usd=estimate.cost_usd / 4)
        assert again.state == "budget" and again.job["judged"] <= job["judged"] + 1
        larger = judge.run_job(project, "demo", spec, limit=100, budget_usd=estimate.cost_usd / 2)
        assert larger.state == "budget" and job["judged"] < larger.job["judged"] < 100
        assert judge.job_status(project, larger.job_id)["budget_usd"] == pytest.approx(estimate.cost_usd / 2)
        # Resumed without --budget, the earlier budget is dropped: the job runs to the end (issue 19).
        report = judge.run_job(project, "demo", spec, limit=100)
        assert report.state == "finished" and report.job["judged"] == 100
        assert judge.job_status(project, report.job_id)["budget_usd"] is None
        assert judgment_calls(server) == 100
        after = judge.estimate(project, "demo", spec, limit=100)
        assert (after.to_send, after.already_judged) == (0, 100)


def test_budget_without_a_price_is_refused(project):
    with running_server() as server:
        spec = _spec(server, model="my-local-llama")
        assert spec.price is None and judge.estimate(project, "demo", spec, limit=5).cost_usd is None
        with pytest.raises(ConfigError, match="judge.prices"):
            judge.run_job(project, "demo", spec, budget_usd=1.0)


def test_samples_are_stored_and_aggregated_by_majority_with_the_spread(project):
    with running_server() as server:
        # The n-th time the same prompt arrives it gets grade [2, 3, 2][n - 1].
        server.control.grade_rule = lambda call: [2, 3, 2][(call.attempt - 1) % 3]
        spec = _spec(server, samples=3, concurrency=1, temperature=0.7)
        report = judge.run_job(project, "demo", spec, limit=5)
        stored = _judgments(project, report.job_id)
        assert len(stored) == 5
        assert (stored["grade"] == 2).all() and (stored["grade_spread"] == 1.0).all()
        assert all(sorted(json.loads(s)) == [2, 2, 3] for s in stored["samples"])
        samples = query(project, "SELECT count(*) AS n FROM judge_samples WHERE job_id = ?", [report.job_id])
        assert samples["n"][0] == 15 == judgment_calls(server)


def test_single_token_prompt_stores_probabilities_and_expected_grade(project):
    with running_server() as server:
        spec = _spec(server, prompt="relevance_token_v1")
        report = judge.run_job(project, "demo", spec, limit=5)
        stored = _judgments(project, report.job_id)
        for row in stored.itertuples():
            probs = {int(k): v for k, v in json.loads(row.probabilities).items()}
            assert max(probs, key=probs.get) == row.grade
            assert row.expected_grade == pytest.approx(sum(g * p for g, p in probs.items()))


def test_cancel_from_another_thread_stops_and_resume_completes(project):
    with running_server(latency=0.05) as server:
        spec = _spec(server, concurrency=2)
        cancel = threading.Event()
        seen = []

        def progress(p):
            seen.append(p.done)
            if p.done >= 10:
                cancel.set()

        report = judge.run_job(project, "demo", spec, limit=200, on_progress=progress, cancel=cancel)
        assert report.state == "cancelled"
        judged = report.job["judged"]
        assert 10 <= judged < 200
        server.control.latency = 0.005  # the slow answers were for the cancel; the resume needs none
        report = judge.run_job(project, "demo", spec, limit=200)
        assert report.state == "finished" and report.job["judged"] == 200
        # Every pair was asked once; only requests abandoned at the cancel (at most the two in
        # flight, after the grace period under a loaded machine) may have been asked again.
        assert judgment_prompts(server) == 200
        assert judgment_calls(server) <= 200 + 2


def test_cancel_job_marks_a_job_whose_process_is_gone(project):
    with running_server() as server:
        spec = _spec(server)
        report = judge.run_job(project, "demo", spec, limit=3)
    with Database(project) as db, db.transaction() as tx:
        tx.execute("UPDATE judge_jobs SET state = 'running', pid = 999999999 WHERE job_id = ?", [report.job_id])
    assert judge.cancel_job(project, report.job_id)["state"] == "cancelled"
    with pytest.raises(InputError):
        judge.cancel_job(project, 12345)


def test_the_api_key_never_reaches_the_database_or_the_output(project, capsys, caplog):
    caplog.set_level("DEBUG")
    with running_server(api_key=KEY) as server:
        spec = _spec(server)
        assert KEY not in repr(spec)
        report = judge.run_job(project, "demo", spec, limit=10)
        print(report.summary())
        assert report.job["ok"] == 10
        wrong = judge.resolve_spec(judge_settings(server.base_url, model="gpt-4.1-mini"), api_key=KEY + "x")
        with pytest.raises(ConfigError, match="refused the API key") as err:
            judge.run_job(project, "demo", wrong, limit=3)
        print(err.value)
        assert judgment_calls(server) == 10  # refused before any judgment request
    captured = capsys.readouterr()
    data = project.read_bytes()
    wal = project.with_name(project.name + ".wal")
    if wal.exists():
        data += wal.read_bytes()
    for secret in (KEY, KEY + "x", KEY[8:24]):
        assert secret.encode() not in data
        assert secret not in captured.out + captured.err + caplog.text


def test_offline_judge_without_key_grades_every_pair_named_as_such(project):
    from workbench.core.judging.offline import grade_pair

    spec = judge.resolve_spec(judge_settings(), api_key="")
    assert spec.offline and spec.model == "offline-lexical"
    report = judge.run_job(project, "demo", spec, limit=30)
    stored = query(project, """SELECT j.query_id, j.grade, j.model, j.assessor, j.reason, q.text, q.description,
                                      substr(d.text, j.start + 1, j."end" - j.start) AS passage
                               FROM judgments j JOIN queries q USING (query_id) JOIN documents d USING (doc_id)
                               WHERE j.job_id = ?""", [report.job_id])
    assert len(stored) == 30
    assert set(stored["model"]) == {"offline-lexical"} == set(stored["assessor"])
    for row in stored.itertuples():
        assert row.grade == grade_pair(row.text, row.passage, description=row.description).grade
    assert "not an LLM" in report.summary()


def test_export_judgments_has_exactly_the_keys_and_refuses_foreign_files(project, tmp_path):
    ranked = query(project, """SELECT p.query_id, p.doc_id, p.chunk_id FROM pool_pairs p WHERE pool = 'demo'
                               ORDER BY priority, query_id, doc_id, chunk_id LIMIT 15""")
    passages = pair_texts(project).merge(ranked)["passage"].tolist()
    failing = sum(p in passages[:2] for p in passages)
    with running_server() as server:
        server.control.fault_rule = lambda call: "500" if call.passage in passages[:2] else None
        judge.run_job(project, "demo", _spec(server, max_attempts=1), limit=15)
    out = tmp_path / "j.jsonl"
    with Database(project) as db:
        result = export_judgments(db, out, pool="demo", source="all")
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert result.rows == len(rows) > 15
        assert all(tuple(r) == KEYS for r in rows)
        llm = [r for r in rows if r["source"] == "llm"]
        assert len(llm) == 15
        assert all((r["grade"] is None) == (r["status"] != "ok") for r in rows)
        assert {r["source"] for r in rows} == {"llm", "human"}
        with pytest.raises(InputError, match="already exists"):
            export_judgments(db, out, source="llm")
        again = export_judgments(db, out, source="llm", force=True)
        assert again.rows == 15 and again.replaced
        assert sum(r["status"] == "failed" for r in llm) == failing
        database = tmp_path / "other.duckdb"
        database.write_bytes(project.read_bytes()[:4096])
        for target, needle in ((database, "DuckDB database"), (tmp_path, "directory")):
            with pytest.raises(InputError, match=needle):
                export_judgments(db, target, force=True)
        assert database.read_bytes() == project.read_bytes()[:4096]


def test_an_ensemble_of_judge_configurations_takes_the_majority_and_keeps_the_spread(project):
    with running_server() as server:
        ids = []
        for model, grade in (("gpt-4o-mini", 1), ("gpt-4o", 3), ("gpt-4.1-mini", 1)):
            server.control.grade_rule = lambda call, g=grade: g
            ids.append(judge.run_job(project, "demo", _spec(server, model=model), limit=8).job_id)
    combined = judge.ensemble(project, ids)
    assert len(combined) == 8
    assert (combined["grade"] == 1).all() and (combined["spread"] == 2.0).all()
    assert list(combined.columns[-3:]) == [f"grade_{i}" for i in ids]
    mean = judge.ensemble(project, ids, method="mean")
    assert (mean["grade"] == 2).all()  # (1 + 3 + 1) / 3 = 1.67 -> 2
    with pytest.raises(InputError):
        judge.ensemble(project, ids[:1])


def test_an_unreachable_server_is_named_before_anything_is_sent(project):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spec = judge.resolve_spec(judge_settings(f"http://127.0.0.1:{port}/v1", max_attempts=2), api_key=KEY)
    with pytest.raises(ConfigError, match=f"cannot reach the judge server at http://127.0.0.1:{port}/v1") as caught:
        judge.run_job(project, "demo", spec, limit=5)
    assert caught.value.fields == ("base_url",) and str(caught.value).endswith("; check --base-url and that the server runs")
    assert judge.list_jobs(project) == []  # refused before a job was stored


def test_a_run_of_failures_stops_the_job_instead_of_failing_every_pair(project):
    with running_server() as server:
        server.control.fault_rule = lambda call: "500" if call.passage else None  # the probe passes
        spec = _spec(server, max_attempts=1, concurrency=2)
        report = judge.run_job(project, "demo", spec, limit=200)
        assert report.state == "stopped" and "all failed" in report.message and "HTTP 500" in report.message
        assert "({field:retry_failed} also re-judges" in report.message
        assert "(--retry-failed also re-judges" in report.summary()
        assert 20 <= report.job["failed"] < 30
        assert judgment_calls(server) < 30


def test_a_document_level_pool_is_judged_on_whole_documents(project, tmp_path, cli):
    docs = query(project, "SELECT doc_id, text FROM documents ORDER BY doc_id LIMIT 6")
    queries = query(project, "SELECT query_id FROM queries ORDER BY query_id LIMIT 2")["query_id"].tolist()
    run = tmp_path / "docs.run"
    run.write_text("".join(f"{q} Q0 {d} {r + 1} {10 - r} doc-run\n" for q in queries
                           for r, d in enumerate(docs["doc_id"])))
    config = str(empty_config(tmp_path))
    for args in (["import", "run", str(run), "--name", "docrun"],
                 ["pool", "--name", "docs", "--runs", "docrun", "--depth", "6"]):
        done = cli("--config", config, "--db", str(project), *args)
        assert done.returncode == 0, done.stderr
    with running_server() as server:
        report = judge.run_job(project, "docs", _spec(server))
    stored = _judgments(project, report.job_id)
    assert len(stored) == 12 and stored["chunk_id"].isna().all() and (stored["start"] == 0).all()
    text = docs.set_index("doc_id")["text"]
    for row in stored.itertuples():
        assert row.end == len(text[row.doc_id])
        assert row.grade == expected_default_grade(text[row.doc_id])


def test_preview_prompt_renders_the_first_pair_exactly_as_sent(project):
    with running_server() as server:
        spec = _spec(server)
        preview = judge.preview_prompt(project, "demo", spec)
        judge.run_job(project, "demo", spec, limit=1)
        sent = server.control.chat_calls()[-1].body["messages"]  # the first is the capability probe
    assert preview["messages"] == sent
    first = query(project, "SELECT query_id, chunk_id FROM pool_pairs WHERE pool = 'demo' "
                           "ORDER BY priority, query_id, doc_id, chunk_id LIMIT 1")
    assert (preview["query_id"], preview["chunk_id"]) == (first["query_id"][0], first["chunk_id"][0])
    assert judge.preview_prompt(project, "demo", judge.resolve_spec(judge_settings(), api_key="")) is None


def test_example_pair_is_each_querys_first_pair_with_its_text(project):
    """The Judge page's example (offline judge) and the prompt preview read one pair: for every
    query of the pool its first pair by priority, with the passage and the query's text read
    independently here; a query without pairs gives None."""
    texts = pair_texts(project).set_index(["query_id", "chunk_id"])["passage"]
    first = query(project, "SELECT query_id, doc_id, chunk_id, row_number() OVER (PARTITION BY query_id "
                           "ORDER BY priority, doc_id, chunk_id) AS n FROM pool_pairs WHERE pool = 'demo'")
    first = first[first["n"] == 1].set_index("query_id")
    queries = query(project, "SELECT query_id, text, description FROM queries").set_index("query_id")
    assert len(first) > 10
    # the page's form: an open project (one open for the 44 queries, not 44); the path form below
    opened = Database(project)
    try:
        pairs = {str(q): judge.example_pair(opened, "demo", str(q)) for q in first.index}
    finally:
        opened.close()
    assert judge.example_pair(project, "demo", str(first.index[0])) == pairs[str(first.index[0])]
    for query_id, row in first.iterrows():
        pair = pairs[str(query_id)]
        assert (pair["query_id"], pair["doc_id"], pair["chunk_id"]) == (query_id, row["doc_id"], row["chunk_id"])
        assert pair["passage"] == texts[(query_id, row["chunk_id"])]
        assert pair["query"] == queries.loc[query_id, "text"]
        description = queries.loc[query_id, "description"]
        assert pair["description"] == (description if isinstance(description, str) else None)
    assert judge.example_pair(project, "demo", "no-such-query") is None


def test_batch_mode_validates_every_line_like_online_replies(project):
    with running_server() as server:
        server.control.batch_fault_rates = {"out_of_range": 0.2, "malformed": 0.1}
        spec = _spec(server, poll_seconds=0.05)
        report = judge.run_job(project, "demo", spec, limit=60, batch=True)
        stored = _judgments(project, report.job_id)
        assert len(stored) == 60 and report.state == "finished"
        invalid = stored[stored["status"] == "invalid"]
        assert 0 < len(invalid) < 60 and invalid["grade"].isna().all()
        assert invalid["error"].str.contains("batch mode: no repair attempt").all()
        assert judgment_calls(server) == 0
        texts = pair_texts(project).set_index(["query_id", "doc_id", "chunk_id"])["passage"]
        for row in stored[stored["status"] == "ok"].itertuples():
            assert row.grade == expected_default_grade(texts[(row.query_id, row.doc_id, row.chunk_id)])
        # The invalid ones are judged again online with --retry-failed.
        server.control.batch_fault_rates = {}
        again = judge.run_job(project, "demo", spec, limit=60, retry_failed=True)
        assert judgment_calls(server) == len(invalid)
        assert again.job["ok"] == 60


def test_batch_budget_is_checked_before_submitting(project):
    with running_server() as server:
        spec = _spec(server, poll_seconds=0.05)
        estimate = judge.estimate(project, "demo", spec, limit=50, batch=True)
        report = judge.run_job(project, "demo", spec, limit=50, batch=True, budget_usd=estimate.cost_usd / 10)
        assert report.state == "budget" and not [r for r in server.control.requests if r.path == "/v1/batches" and r.method == "POST"]
