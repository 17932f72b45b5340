"""``workbench jobs list|stop|resume``: the background jobs the pages started, from the shell."""

from __future__ import annotations

import json
import os
import signal

from tests.support.polling import wait_until
from workbench.services import jobs


def test_the_kind_choices_are_the_services_kinds():
    from workbench.cli.jobs import KIND_NAMES

    assert KIND_NAMES == tuple(sorted(jobs.KINDS))


def test_list_stop_and_resume_a_job_from_the_command_line(demo_project, cli):
    db = str(demo_project)
    empty = cli("--db", db, "jobs", "list")
    assert empty.returncode == 0 and "no background jobs yet" in empty.stdout

    launch = jobs.start(demo_project, jobs.ChunkRequest("cut", "sentences", 2))
    os.kill(launch.pid, signal.SIGKILL)
    wait_until(lambda: jobs.job(demo_project, launch.job_id)["state"] == "interrupted", timeout=60,
               what="the killed job to read interrupted")
    listed = cli("--db", db, "jobs", "list")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()
    assert header.split() == ["job", "kind", "state", "progress", "what"]
    assert row.split()[:3] == [str(launch.job_id), "chunk", "interrupted"] and "chunking cut (sentences)" in row

    stopped = cli("--db", db, "jobs", "stop", str(launch.job_id))
    assert stopped.returncode == 0 and stopped.stdout.strip() == f"job {launch.job_id} (chunking cut (sentences)): stopped"
    resumed = cli("--db", db, "jobs", "resume", str(launch.job_id))
    assert resumed.returncode == 0 and "restarted from the beginning in process" in resumed.stdout
    wait_until(lambda: jobs.job(demo_project, launch.job_id)["state"] == "finished", timeout=120,
               what="the resumed job to finish")
    shown = json.loads(cli("--db", db, "jobs", "list", "--format", "json").stdout)
    assert [(j["job_id"], j["state"], j["request"]["name"]) for j in shown] == [(launch.job_id, "finished", "cut")]

    again = cli("--db", db, "jobs", "resume", str(launch.job_id))
    assert again.returncode == 3 and "has finished; start a new one instead" in again.stderr
    missing = cli("--db", db, "jobs", "stop", "99")
    assert missing.returncode == 3 and "no background job 99" in missing.stderr and "Traceback" not in missing.stderr
