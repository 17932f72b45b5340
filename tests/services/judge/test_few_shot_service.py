"""The few-shot decision both front ends call (:mod:`workbench.services.judge.few_shot`): K >= 1,
no offline judge, which sample, K within the tuning part's labels; errors as data (the CLI says
``--few-shot``, the page its label); the launch service passes the choice to the job so the job
the page starts is the job ``workbench judge --few-shot`` runs."""

from __future__ import annotations

import json
import os

import pytest

from tests.support import templates
from tests.support.calibration_project import build_project
from tests.llm.judge_project import probe_calls
from tests.support.openai_server import running_server
from tests.support.polling import wait_until
from workbench.cli.common import error_text
from workbench.config import load_settings
from workbench.errors import ConfigError
from workbench.services.calibration import workflow as cal
from workbench.services.judge import launch
from workbench.services.judge.few_shot import apply_few_shot, few_shot_sources
from workbench.services.judge.spec import resolve_spec, with_few_shot
from workbench.store import calibration as store
from workbench.ui.words import Field, page_message


def _llm_spec(base_url: str = "http://127.0.0.1:9/v1"):
    return resolve_spec(load_settings(overrides={"judge": {"model": "m2", "base_url": base_url}}), api_key="sk-t")


@pytest.fixture
def project(tmp_path):
    """A judged pool, sample 'old' labelled on its tuning part only, then a newer sample 'new'
    with no label at all (so 'the newest' and 'the newest with tuning labels' differ)."""
    path = tmp_path / "p.duckdb"
    # built once per test process (a label is a transaction each) and copied per test
    return path, templates.copy_of(("few-shot-old-new",), _build_old_new, path)


def _build_old_new(path) -> int:
    db, truth = build_project(path)
    cal.create_sample(db, "old", "p", seed=1)
    items = store.read_sample_items(db, "old")
    tuning = items[items["part"] == "tuning"]
    for row in tuning.itertuples(index=False):
        cal.save_label(db, "old", "sme", int(row.position), truth[(row.query_id, row.doc_id)])
    with db.transaction() as tx:
        tx.execute("UPDATE calibration_samples SET created_at = created_at - INTERVAL 1 DAY WHERE name = 'old'")
    cal.create_sample(db, "new", "p", seed=2)
    db.close()
    return len(tuning)


def test_sources_list_only_samples_with_tuning_labels(project):
    path, tuning = project
    assert [(s.sample, s.labelled) for s in few_shot_sources(path)] == [("old", tuning)]


def test_default_sample_is_the_newest_with_tuning_labels_and_the_spec_is_the_examples(project):
    path, _ = project
    spec = apply_few_shot(path, _llm_spec(), 4, seed=2)
    from workbench.store.database import Database

    with Database(path) as db:
        examples = cal.few_shot_examples(db, "old", seed=2, total=4)
    expected = with_few_shot(_llm_spec(), examples, sample="old", seed=2)
    assert spec.few_shot == expected.few_shot and spec.few_shot["sample"] == "old"
    assert spec.prompt_hash == expected.prompt_hash != _llm_spec().prompt_hash
    assert spec.config_key == expected.config_key != _llm_spec().config_key


@pytest.mark.parametrize("call, field, words", [
    (lambda path, spec: apply_few_shot(path, spec, 0), "few_shot", "at least 1 example, got 0"),
    (lambda path, spec: apply_few_shot(path, spec, 2, sample="new"), "few_shot_sample", "no SME labels on its tuning"),
    (lambda path, spec: apply_few_shot(path, spec, 2, sample="nope"), "few_shot_sample", "no calibration sample named"),
    (lambda path, spec: apply_few_shot(path, spec, 10_000), "few_shot", "asks for 10000 examples"),
])
def test_refusals_name_their_field(project, call, field, words):
    path, _ = project
    with pytest.raises(ConfigError, match=words) as caught:
        call(path, _llm_spec())
    assert caught.value.field == field
    flag = "--" + field.replace("_", "-")
    assert flag in error_text(caught.value)
    labels = {"--few-shot": Field("Examples from the tuning part of old (0 = none)", "number"),
              "--few-shot-sample": Field("Sample to take them from", "choice")}
    shown = page_message(caught.value, labels)
    assert "--" not in shown and labels[flag].label in shown


def test_offline_judge_is_refused_before_the_project_is_read(tmp_path):
    offline = resolve_spec(load_settings(overrides={"judge": {"model": "offline-lexical"}}))
    with pytest.raises(ConfigError, match="needs an LLM judge") as caught:
        apply_few_shot(tmp_path / "missing.duckdb", offline, 2)  # no project: the judge is refused first
    assert caught.value.field == "few_shot"


def test_no_sample_with_tuning_labels_says_how_to_get_one(tmp_path):
    path = tmp_path / "p.duckdb"
    db, _ = build_project(path)
    cal.create_sample(db, "s", "p", seed=1)
    db.close()
    assert few_shot_sources(path) == []
    with pytest.raises(ConfigError) as caught:
        apply_few_shot(path, _llm_spec(), 2)
    assert "`workbench calibrate sample --pool POOL`" in error_text(caught.value)
    assert "--few-shot" in error_text(caught.value)


def test_request_options_and_resolve_match_the_job_the_cli_stores(project):
    """The page's route: JobRequest -> resolve (the config key the page looks the job up by) and
    start (the CLI in its own process). The stored job has that key and the examples' record."""
    path, _ = project
    request = launch.JobRequest("p", model="m2", limit=6, few_shot=3, few_shot_sample="old", few_shot_seed=5)
    from workbench.cli import build_parser
    from workbench.services.judge.request import from_namespace

    args = build_parser().parse_args(["judge", "--pool", "p", "--model", "m2", "--few-shot", "3", "--few-shot-seed",
                                      "5", "--few-shot-sample", "old", "--limit", "6"])
    assert from_namespace(args) == request  # the CLI builds the very request the page builds
    assert launch.JobRequest("p", offline=True, few_shot=3).overrides() == {"model": launch.OFFLINE}
    env_key = os.environ.pop("OPENAI_API_KEY", None)
    try:
        with running_server() as server:
            request = launch.JobRequest("p", model="m2", base_url=server.base_url, limit=6, few_shot=3,
                                        few_shot_sample="old", few_shot_seed=5)
            spec = launch.resolve(path, request, api_key="sk-test")
            assert spec.few_shot["k"] == 3 and spec.few_shot["seed"] == 5
            started = launch.start(path, request, spec.config_key, api_key="sk-test")
            job = wait_until(lambda: (j := launch.latest_job(path, "p", spec.config_key)) and
                             j["state"] == "finished" and j, timeout=120,
                             what=lambda: f"the job to finish: {launch.problem(started)}")
            sent = [json.dumps(r.body) for r in server.control.chat_calls()]
            probes = probe_calls(server)
    finally:
        if env_key is not None:
            os.environ["OPENAI_API_KEY"] = env_key
    assert job["judged"] == 6 and job["prompt_hash"] == spec.prompt_hash
    params = json.loads(job["params"]) if isinstance(job["params"], str) else job["params"]
    assert params["few_shot"] == spec.few_shot
    # every judgment request carries the examples (the others are the capability probe's requests)
    assert sum("Examples graded by subject-matter experts" in b for b in sent) == 6 == len(sent) - probes
