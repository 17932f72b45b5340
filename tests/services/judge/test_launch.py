"""The judge-job launch service the Judge page uses: the command it runs is one the CLI parses
to the request's values, a launched job runs and is followed through the project, a failed
launch's output is reported, and a caller who may not judge launches nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.polling import wait_until
from workbench.errors import WorkbenchError
from workbench.services import access
from workbench.services.judge import launch


def test_the_job_reads_the_request_as_data_not_a_command_line():
    """The job's process gets the request and the launcher's settings as JSON on stdin: every
    option comes back as it was built (a budget of 0 included: no cap), and nothing of it is a
    command-line flag for the job to parse again."""
    import json

    from workbench.services.judge.worker import payload
    from workbench.services.settings import project_settings

    request = launch.JobRequest("demo", model="m-1", base_url="http://127.0.0.1:9/v1", prompt="umbrela",
                                concurrency=3, samples=2, limit=40, budget=0.0, retry_failed=True,
                                few_shot=2, few_shot_sample="s", few_shot_seed=7, temperature=0.5)
    data = json.loads(payload(request, project_settings("/p/x.duckdb")))
    assert launch.JobRequest.from_json(json.dumps(data["request"])) == request
    assert data["settings"]["project"]["db"] == "/p/x.duckdb" and data["request"]["budget"] == 0.0
    assert not any(str(v).startswith("--") for v in data["request"].values())
    offline = launch.JobRequest.from_json(launch.JobRequest("demo", offline=True).to_json())
    assert (offline.offline, offline.model, offline.limit, offline.budget, offline.retry_failed) == (
        True, None, None, None, False)
    assert offline.overrides() == {"model": launch.OFFLINE}


@pytest.fixture
def demo(demo_project):
    return demo_project  # a copy of the worker's demo template (tests/conftest.py)


def test_a_launched_offline_job_finishes_and_is_read_back(demo):
    from workbench.services.judge.jobs import resolve_spec
    from workbench.config import load_settings

    spec = resolve_spec(load_settings(overrides={"judge": {"model": launch.OFFLINE}}), api_key=None)
    started = launch.start(demo, launch.JobRequest("demo", offline=True, limit=12), spec.config_key)
    assert started.pool == "demo" and started.config_key == spec.config_key

    def finished():
        launch.collect()
        job = launch.latest_job(demo, "demo", spec.config_key)
        return job if job and job["state"] == "finished" else None

    job = wait_until(finished, timeout=120, what="the launched job to finish", tolerate=(Exception,))
    assert (job["judged"], job["ok"]) == (12, 12)
    assert launch.problem(started) is None and launch.problem(started.as_dict()) is None


def test_a_failed_launch_says_why(demo):
    started = launch.start(demo, launch.JobRequest("no-such-pool", offline=True), "key")

    def ended():
        launch.collect()
        return launch.problem(started)

    said = wait_until(ended, timeout=60, what="the failed launch's message")
    # the job's process hands its error over as data, for the page to word (not the CLI's text)
    assert isinstance(said, WorkbenchError) and "no-such-pool" in str(said) and "Traceback" not in str(said)
    assert str(said) in Path(started.log).read_text()  # the same error the CLI printed
    assert launch.latest_job(demo, "no-such-pool", "key") is None


def test_a_caller_who_may_not_judge_launches_nothing(demo):
    previous = access.set_actor_source(lambda: access.Actor("ann", "annotator"))
    try:
        with pytest.raises(access.PermissionDenied):
            launch.start(demo, launch.JobRequest("demo", offline=True), "key")
    finally:
        access.set_actor_source(previous)
    assert launch.latest_job(demo, "demo", "key") is None
