"""One judge request for the three front ends (issue 33): the options are declared once and the
CLI's flags, the API's keywords and the page's labels come from that declaration; the request's
one check gives one message per rule; a budget of 0 is no cap everywhere, [judge] budget_usd
included."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from workbench.api import Project
from workbench.cli import build_parser
from workbench.cli.common import error_text
from workbench.errors import ConfigError, InputError, WorkbenchError
from workbench.services.judge import request as jr
from workbench.services.settings import project_settings


def _judge_parser():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "group")  # noqa: SLF001 - reading argparse's table
    return sub.choices["judge"]


def test_every_option_is_a_flag_a_keyword_a_request_field_and_a_page_label():
    flags = {a.dest: a for a in _judge_parser()._actions}  # noqa: SLF001
    signature = inspect.signature(Project.judge).parameters
    from workbench.ui.views.judge import FIELDS

    for option in jr.OPTIONS:
        if option.flag:
            assert option.flag in flags[option.name].option_strings, option.name
            assert flags[option.name].help.startswith(error_text(WorkbenchError(option.help))[:20])
        if option.kwarg and option.name != "pool":
            assert option.kwarg in signature, option.name
        if option.label:
            assert FIELDS[option.name].label == option.label
    names = [f.name for f in dataclasses.fields(jr.JudgeRequest)]
    assert names == [o.name for o in jr.OPTIONS] + ["offline"]  # the request is the options, in order
    # the API takes nothing else: a misspelt option is Python's TypeError, naming what it takes
    with pytest.raises(TypeError, match="concurency.*concurrency"):
        Project("unused.duckdb").judge("demo", concurency=2)


def test_the_cli_and_the_api_build_the_same_request():
    args = build_parser().parse_args(["judge", "--pool", "demo", "--model", "m", "--concurrency", "3", "--budget", "0",
                                      "--limit", "5", "--few-shot", "2", "--temperature", "0.5", "--retry-failed"])
    from_cli = jr.from_namespace(args)
    from_api = jr.from_keywords("demo", {"model": "m", "concurrency": 3, "budget_usd": 0, "limit": 5, "few_shot": 2,
                                         "temperature": 0.5, "retry_failed": True})
    assert from_cli == from_api
    assert from_cli.budget == 0  # kept: 0 is "no cap", not "not given"


@pytest.mark.parametrize("changes,field,kind", [
    ({"limit": 0}, "limit", InputError),
    ({"budget": -1.0}, "budget", InputError),
    ({"budget": float("nan")}, "budget", InputError),
    ({"few_shot": 0}, "few_shot", ConfigError),
    ({"few_shot_sample": "s"}, "few_shot_sample", ConfigError),
    ({"concurrency": "4"}, "concurrency", ConfigError),
    ({"retry_failed": 1}, "retry_failed", ConfigError),
])
def test_each_rule_is_one_error_naming_its_field(changes, field, kind):
    with pytest.raises(kind) as caught:
        jr.JudgeRequest("demo", **changes).check()
    assert caught.value.field == field
    assert "--" + field.replace("_", "-") in error_text(caught.value)  # the CLI says the flag


def test_a_budget_of_zero_is_no_cap_over_the_configured_budget(tmp_path, monkeypatch):
    """[judge] budget_usd = 5 configured; the page, the CLI and the API asking for 0 get no cap.
    (The page used to drop its 0 and so fell back to the configured $5.)"""
    from workbench.services.judge.jobs import check_budget
    from workbench.ui.views import judge as page

    monkeypatch.setenv("WORKBENCH_JUDGE_BUDGET_USD", "5")
    settings = project_settings(tmp_path / "p.duckdb")
    choices = {"pool": "demo", "offline": False, "model": "m", "base_url": "http://127.0.0.1:9/v1",
               "prompt": "relevance_v1", "concurrency": 2, "samples": 1, "limit": 0, "budget": 0.0}
    requests = {"page": page._request(choices),  # noqa: SLF001 - the page's own request builder
                "cli": jr.from_namespace(build_parser().parse_args(["judge", "--pool", "demo", "--budget", "0"])),
                "api": jr.from_keywords("demo", {"budget_usd": 0})}
    for where, request in requests.items():
        assert request.budget == 0, where
        spec = request.resolve(settings)
        assert check_budget(request.budget if request.budget is not None else spec.settings["budget_usd"]) is None
        assert spec.settings["budget_usd"] == 0, where
    assert page._request({**choices, "budget": 2.5}).resolve(settings).settings["budget_usd"] == 2.5  # noqa: SLF001
    unset = jr.from_keywords("demo", {}).resolve(settings)
    assert unset.settings["budget_usd"] == 5  # not given: the configured budget
    assert page._request(choices).limit is None  # noqa: SLF001 - the page's "0 = all"


def test_the_page_key_rule_is_decided_once_in_resolve(monkeypatch):
    """The page's resolution carries the key its job may send (none for a URL the operator did not
    configure) and the config key the page finds the job by; the operator's own resolution (CLI,
    API) sends the environment's key to the URL it names."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server")
    request = jr.JudgeRequest("demo", model="m", base_url="http://127.0.0.1:7002/v1")
    settings = project_settings("unused.duckdb")
    assert request.resolve(settings, page=True).api_key is None
    assert request.resolve(settings, page=True, typed_key="sk-typed").api_key == "sk-typed"
    assert request.resolve(settings).api_key == "sk-server"
    assert request.resolve(settings, page=True).config_key == request.resolve(settings).config_key


def test_a_negative_configured_budget_is_refused_by_the_same_rule_naming_the_setting(tmp_path, monkeypatch, cli):
    from tests.support.templates import demo_project

    path = demo_project(tmp_path / "d.duckdb")
    monkeypatch.setenv("WORKBENCH_JUDGE_BUDGET_USD", "-2")
    with pytest.raises(ConfigError) as caught:
        Project.open(path).judge("demo", model="offline-lexical")
    assert str(caught.value) == "[judge] budget_usd must be a number of dollars (0 for no cap), got -2.0"
    done = cli("--db", str(path), "judge", "--pool", "demo", "--model", "offline-lexical")
    assert done.returncode == 2 and str(caught.value) in done.stderr
    # an explicit budget replaces the configured one (0: no cap), so nothing is refused
    assert Project.open(path).judge("demo", model="offline-lexical", budget_usd=0, limit=2).state == "finished"
