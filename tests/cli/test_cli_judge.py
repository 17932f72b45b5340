"""``workbench judge`` and ``workbench export judgments`` against a local server.

A job that is killed or stopped by SIGTERM runs as a real process (a job that shares the project
with another process runs here: that other process saves labels meanwhile); the loopback server
holds the job's requests at the moment the test acts on it (``control.hold``), so the job is
mid-run then by construction, not by slowness. Every other command runs in this process
(:mod:`tests.support.cli_runner`), as ``workbench.cli.main(argv)``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import pandas as pd
import pytest

from tests.llm.judge_project import demo_project, judgment_calls, query
from tests.support.cli_runner import run_cli, run_in_process
from tests.support.openai_server import running_server
from tests.support.polling import wait_until
from tests.support.prerequisites import REPO
from workbench.errors import StoreLockedError

KEY = "sk-cli-test-0123456789abcdef"
COLUMNS = ["query_id", "doc_id", "chunk_id", "start", "end", "grade", "status", "reason", "error", "source",
           "assessor", "model", "prompt_hash", "prompt_tokens", "completion_tokens", "cost_usd"]


def _config(tmp_path, **judge) -> str:
    values = {"backoff_initial": 0.01, "backoff_max": 0.5, "flush_seconds": 0.2, "poll_seconds": 0.2,
              "timeout": 30.0, **judge}
    lines = ["[judge]"] + [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    path = tmp_path / "judge.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _env():
    env = dict(os.environ)
    env.pop("WORKBENCH_DB", None)
    env["OPENAI_API_KEY"] = KEY
    return env


def _judge_cmd(config, db, *args):
    return ["--config", config, "--db", str(db), "judge", "--pool", "demo", *args]


def _run(args, timeout=300):
    """The command in this process (observed as a process: exit code, stdout, stderr)."""
    return run_cli(*args, cwd=REPO, env={"OPENAI_API_KEY": KEY}, timeout=timeout)


def _popen(args, **kwargs):
    """The command as a real ``python -m workbench`` process (to kill, to signal, to run beside)."""
    return subprocess.Popen([sys.executable, "-m", "workbench", *args], cwd=REPO, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def _stored_llm(path) -> int:
    """Judgments stored so far (read while a job process may hold the file this instant)."""
    return int(query(path, "SELECT count(*) AS n FROM judgments WHERE source = 'llm'")["n"][0])


def _table(path) -> pd.DataFrame:
    cols = ", ".join(f'"{c}"' for c in COLUMNS)
    return query(path, f"SELECT {cols} FROM judgments WHERE source = 'llm' ORDER BY query_id, doc_id, chunk_id")


def _wait_for(predicate, timeout=120):
    return wait_until(predicate, timeout=timeout, interval=0.02)


def test_sigkill_mid_job_then_resume_gives_exactly_the_uninterrupted_table(tmp_path):
    killed, reference = tmp_path / "killed.duckdb", tmp_path / "reference.duckdb"
    demo_project(killed)
    demo_project(reference)
    with running_server(latency=0.02) as server:
        config = _config(tmp_path, concurrency=8, batch_size=25)
        done = _run(_judge_cmd(config, reference, "--base-url", server.base_url, "--limit", "400"))
        assert done.returncode == 0, done.stderr
        calls = judgment_calls(server)
        assert calls == 400

        # The killed job's judgments after its 150th wait at the server: the job is mid-run, with
        # 150 answered and stored and its next requests waiting there, when it is killed.
        release = server.control.hold(after=150, only=lambda call: call.passage is not None)
        proc = _popen(_judge_cmd(config, killed, "--base-url", server.base_url, "--limit", "400"))
        assert _wait_for(lambda: server.control.held >= 1)
        wait_until(lambda: _stored_llm(killed) == 150, timeout=120, interval=0.05, tolerate=(StoreLockedError,),
                   what=lambda: f"the 150 answers to be stored ({_stored_llm(killed)} are)")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        release.set()
        sent_before_kill = judgment_calls(server) - calls
        assert proc.returncode == -signal.SIGKILL and sent_before_kill < 400
        partial = _table(killed)
        assert 0 < len(partial) < 400  # some batches were written before the kill
        from workbench.services.judge.jobs import list_jobs

        assert list_jobs(killed)[0]["state"] == "interrupted"  # stored "running", its process is gone

        done = _run(_judge_cmd(config, killed, "--base-url", server.base_url, "--limit", "400"))
        assert done.returncode == 0, done.stderr
        resent = judgment_calls(server) - calls - sent_before_kill
        # Only what was not stored is sent again (a retry on a loaded machine may add one or two).
        assert 400 - len(partial) <= resent <= 400 - len(partial) + 2
    final, expected = _table(killed), _table(reference)
    assert len(final) == 400 and not final.duplicated(["query_id", "doc_id", "chunk_id"]).any()
    pd.testing.assert_frame_equal(final, expected)


def test_the_project_stays_writable_while_a_job_runs(tmp_path):
    project = demo_project(tmp_path / "project.duckdb")
    writer = tmp_path / "writer.py"
    writer.write_text(
        "import sys, time\n"
        "import pandas as pd\n"
        "from workbench.services.judge.jobs import open_briefly\n"
        "from workbench.store.judgments import write_judgments\n"
        "for i in range(int(sys.argv[2])):\n"
        "    db = open_briefly(sys.argv[1], wait=20)\n"
        "    with db.transaction() as tx:\n"
        "        write_judgments(tx, pd.DataFrame([{'query_id': 'q001', 'doc_id': 'it-laptops', 'start': i,\n"
        "            'end': i + 10, 'grade': 2, 'source': 'human', 'assessor': 'sme-during-job', 'status': 'ok'}]))\n"
        "    db.close()\n"
        "    time.sleep(0.15)\n"
        "print('saved', flush=True)\n"
    )
    with running_server(latency=0.05) as server:
        # The job writes a batch every 50 answers (about every 0.6 s) while the labels are saved;
        # its last 20 requests wait at the server until they are, so it is running throughout;
        # then the rest is answered at once. The job runs in this process and the labels are
        # saved by another one (started from a thread while the job runs).
        release = server.control.hold(after=480, only=lambda call: call.passage is not None)
        config = _config(tmp_path, concurrency=4, batch_size=50, flush_seconds=1.0)
        job_ended = threading.Event()
        seen: dict = {}

        def save_labels():
            try:
                assert _wait_for(lambda: judgment_calls(server) >= 20 or job_ended.is_set())
                seen["labels"] = subprocess.run([sys.executable, str(writer), str(project), "8"], cwd=REPO,
                                                env=_env(), capture_output=True, text=True, timeout=120,
                                                check=False)
                seen["still_running"] = not job_ended.is_set()
            finally:
                server.control.latency = 0.0
                release.set()

        saver = threading.Thread(target=save_labels, daemon=True)
        saver.start()
        try:
            job = _run(_judge_cmd(config, project, "--base-url", server.base_url, "--limit", "500"))
        finally:
            job_ended.set()
            saver.join(timeout=150)
    labels, still_running = seen["labels"], seen["still_running"]
    assert labels.returncode == 0 and "saved" in labels.stdout, labels.stderr
    assert still_running  # the labels were saved while the job was running
    assert job.returncode == 0, job.stderr
    saved = query(project, "SELECT count(*) AS n FROM judgments WHERE assessor = 'sme-during-job'")["n"][0]
    assert saved == 8
    assert query(project, "SELECT count(*) AS n FROM judgments WHERE source = 'llm'")["n"][0] == 500


def test_estimate_sends_nothing_and_the_summary_fits_one_screen(tmp_path):
    project = demo_project(tmp_path / "project.duckdb")
    with running_server() as server:
        config = _config(tmp_path)
        done = _run(_judge_cmd(config, project, "--base-url", server.base_url, "--limit", "30", "--estimate"))
        assert done.returncode == 0, done.stderr
        assert "30 pairs" in done.stdout and "estimated cost $" in done.stdout
        assert judgment_calls(server) == 0
        done = _run(_judge_cmd(config, project, "--base-url", server.base_url, "--limit", "30", "--progress"))
        assert done.returncode == 0, done.stderr
        assert "judging" in done.stderr and "30/30" in done.stderr and "cost $" in done.stderr
        lines = done.stdout.strip().splitlines()
        assert lines[0].startswith("judge job 1 on pool demo: finished") and len(lines) <= 12
        assert "30 of 30 judged: 30 ok" in done.stdout
        assert judgment_calls(server) == 30
        # Not a terminal and no --progress: no bar.
        done = _run(_judge_cmd(config, project, "--base-url", server.base_url, "--limit", "30"))
        assert "judging" not in done.stderr and judgment_calls(server) == 30


def test_budget_stop_exits_6_and_says_so(tmp_path):
    project = demo_project(tmp_path / "project.duckdb")
    with running_server() as server:
        config = _config(tmp_path, concurrency=1)
        done = _run(_judge_cmd(config, project, "--base-url", server.base_url, "--budget", "0.0005"))
        assert done.returncode == 6, done.stderr
        assert "budget of $0.00 is reached" in done.stdout or "budget" in done.stdout
        assert 0 < judgment_calls(server) < 880


@pytest.mark.parametrize("args,needle,code", [
    (["--pool", "nope"], "no pool named 'nope'", 3),
    (["--pool", "demo", "--prompt", "nope"], "unknown prompt 'nope'", 3),
    (["--pool", "demo", "--limit", "0"], "--limit", 3),
    (["--pool", "demo", "--samples", "0"], "judge.samples", 2),
    (["--pool", "demo", "--model", "my-llama", "--budget", "1"], "judge.prices", 2),
    (["--pool", "demo", "--limit", "-1", "--estimate"], "--limit must be at least 1", 3),
    (["--pool", "demo", "--budget", "-5"], "--budget must be", 3),
])
def test_bad_input_is_one_line_and_an_exit_code(tmp_path, args, needle, code):
    project = demo_project(tmp_path / "project.duckdb")
    with running_server() as server:
        cmd = ["--config", _config(tmp_path), "--db", str(project), "judge", "--base-url", server.base_url, *args]
        done = _run(cmd)
        assert done.returncode == code, done.stderr
        assert needle in done.stderr and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert judgment_calls(server) == 0


def test_batch_mode_submits_once_and_resumes_by_batch_id(tmp_path):
    project = demo_project(tmp_path / "project.duckdb")
    with running_server(batch_seconds=3600.0) as server:  # in progress until complete_batches()
        config = _config(tmp_path)
        cmd = _judge_cmd(config, project, "--base-url", server.base_url, "--limit", "40", "--batch")
        proc = _popen(cmd)
        assert _wait_for(lambda: any(r.method == "POST" and r.path == "/v1/batches"
                                     for r in server.control.requests), timeout=60)
        # the batch id is stored right after it is created; the job then polls the batch
        assert _wait_for(lambda: any(r.method == "GET" and r.path.startswith("/v1/batches/")
                                     for r in server.control.requests), timeout=60)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        stored = query(project, "SELECT batch_id, state FROM judge_jobs")
        assert stored["batch_id"][0] and stored["state"][0] == "batch"
        server.control.complete_batches()
        done = _run(cmd)
        assert done.returncode == 0, done.stderr
        assert "40 of 40 judged: 40 ok" in done.stdout
        creates = [r for r in server.control.requests if r.method == "POST" and r.path == "/v1/batches"]
        assert len(creates) == 1  # resumed by its id, not submitted again
        assert judgment_calls(server) == 0
        table = _table(project)
        assert len(table) == 40 and set(table["status"]) == {"ok"}
        assert query(project, "SELECT batch_id FROM judge_jobs")["batch_id"].isna().all()
        # Re-running sends nothing more.
        done = _run(cmd)
        assert done.returncode == 0 and len([r for r in server.control.requests
                                             if r.method == "POST" and r.path == "/v1/batches"]) == 1


def test_export_judgments_cli(tmp_path):
    project = demo_project(tmp_path / "project.duckdb")
    with running_server() as server:
        config = _config(tmp_path)
        assert _run(_judge_cmd(config, project, "--base-url", server.base_url, "--limit", "12")).returncode == 0
    out = tmp_path / "judgments.jsonl"
    base = ["--config", config, "--db", str(project), "export", "judgments"]
    done = _run(base + ["--out", str(out), "--pool", "demo", "--source", "llm"])
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 12 and {r["source"] for r in rows} == {"llm"}
    assert list(rows[0]) == ["query_id", "doc_id", "chunk_id", "start", "end", "grade", "status", "source",
                             "assessor", "model", "prompt_version", "reason", "error", "prompt_tokens",
                             "completion_tokens", "latency_ms", "cost_usd", "evidence", "guidelines_sha256",
                             "raw_response"]
    assert all(r["raw_response"] for r in rows)  # the reply each grade was parsed from
    done = _run(base + ["--out", str(out)])
    assert done.returncode == 3 and "--force" in done.stderr and "Traceback" not in done.stderr
    assert _run(base + ["--out", str(out), "--force", "--source", "human"]).returncode == 0
    assert {json.loads(line)["source"] for line in out.read_text().splitlines()} == {"human"}
    done = _run(base + ["--out", str(project), "--force"])
    assert done.returncode == 3 and "DuckDB database" in done.stderr and "Traceback" not in done.stderr


def test_sigterm_cancels_cleanly_and_the_job_resumes(tmp_path):
    from workbench.services.judge.jobs import list_jobs

    project = demo_project(tmp_path / "project.duckdb")
    with running_server(latency=0.05) as server:
        # after 60 answers the job's requests wait at the server: SIGTERM arrives mid-run, with
        # requests in flight (answered once it has been sent)
        release = server.control.hold(after=60, only=lambda call: call.passage is not None)
        config = _config(tmp_path, concurrency=4, batch_size=20)
        cmd = _judge_cmd(config, project, "--base-url", server.base_url, "--limit", "300")
        proc = _popen(cmd, text=True)
        assert _wait_for(lambda: server.control.held >= 1)
        proc.send_signal(signal.SIGTERM)
        release.set()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 6, err
        assert "cancelled" in out and "run the same command again" in out
        job = list_jobs(project)[0]
        assert job["state"] == "cancelled" and 0 < job["judged"] < 300
        # Everything answered before the stop was written: only the rest is sent again.
        sent = judgment_calls(server)
        assert job["judged"] >= sent - 4 - 1
        done = _run(cmd)
        assert done.returncode == 0, done.stderr
        assert "300 of 300 judged: 300 ok" in done.stdout
        resent = judgment_calls(server) - sent
        assert 300 - job["judged"] <= resent <= 300 - job["judged"] + 4  # + abandoned in-flight ones


def test_a_model_named_without_a_key_is_refused_not_replaced(tmp_path):
    """`--model gpt-x` with no key and the OpenAI URL: refused (exit 2), never graded by the
    offline baseline instead of the model the user asked for; nothing is stored."""
    project = demo_project(tmp_path / "project.duckdb")
    env = {k: v for k, v in _env().items() if k != "OPENAI_API_KEY"}
    cmd = ("--db", str(project), "judge", "--pool", "demo", "--model", "gpt-x")
    done = run_in_process(cmd, cwd=REPO, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == ("workbench judge: error: --model gpt-x needs OPENAI_API_KEY (or --base-url "
                                   "pointing at your own server); for the offline baseline pass --model "
                                   "offline-lexical")
    assert query(project, "SELECT count(*) AS n FROM judge_jobs")["n"][0] == 0
