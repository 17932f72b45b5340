"""The Python API words its errors for Python callers: keyword arguments and Project methods,
never a CLI flag (as tests/test_error_messages.py checks the services' own texts); and a budget
means one thing in every front end (0 = no cap)."""

from __future__ import annotations

import re

import pytest

from workbench.api import Project
from workbench.errors import WorkbenchError

FLAG = re.compile(r"(?<![\w-])--[a-z]")


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    from tests.support.templates import demo_project

    path = tmp_path_factory.mktemp("api-errors") / "demo.duckdb"
    demo_project(path)
    return Project.open(path)


def _message(call) -> str:
    with pytest.raises(WorkbenchError) as caught:
        call()
    return str(caught.value)


def test_bad_calls_name_keyword_arguments_and_methods_not_flags(project, tmp_path):
    cases = {
        "pool exists": (lambda: project.pool("demo", ["bm25"]), ["name=", "add=True", "Project.pool("]),
        "run exists": (lambda: project.retrieve("bm25", name="bm25", chunking="sections"), ["name="]),
        "retrieve needs chunking": (lambda: project.retrieve("bm25", name="x"), ["chunking="]),
        "budget": (lambda: project.judge("demo", budget_usd=-1), ["budget_usd"]),
        "no sample": (lambda: project.calibration_report(), ["Project.calibration_sample(pool='POOL')"]),
        "no project": (lambda: Project.open(tmp_path / "missing.duckdb"), ["Project.create("]),
        "model without key": (lambda: project.judge("demo", model="gpt-x"), ["base_url=", "model='offline-lexical'"]),
    }
    for what, (call, words) in cases.items():
        text = _message(call)
        assert not FLAG.search(text), (what, text)
        for word in words:
            assert word in text, (what, word, text)


def test_the_same_error_keeps_the_cli_words_on_the_command_line(cli, tmp_path):
    from tests.support.templates import demo_project

    path = tmp_path / "d.duckdb"
    demo_project(path)
    done = cli("--db", str(path), "pool", "--name", "demo", "--runs", "bm25")
    assert "`workbench pool --name demo --runs NEW --add`" in done.stderr and "another --name" in done.stderr


def test_a_budget_of_zero_means_no_cap_everywhere_and_a_negative_one_is_refused_alike(project, cli, tmp_path):
    from workbench.services.judge.jobs import check_budget

    assert check_budget(0) is None and check_budget(0.0) is None and check_budget(2.5) == 2.5
    assert check_budget(None) is None
    api = _message(lambda: project.judge("demo", budget_usd=-1))
    done = cli("--db", str(project.path), "judge", "--pool", "demo", "--model", "offline-lexical", "--budget", "-1")
    assert done.returncode == 3
    # one rule, one message, each in its front end's words
    assert api == "budget_usd= must be a number of dollars (0 for no cap), got -1"
    assert "--budget must be a number of dollars (0 for no cap), got -1.0" in done.stderr
    zero = cli("--db", str(project.path), "judge", "--pool", "demo", "--model", "offline-lexical", "--budget", "0",
               "--limit", "2")
    assert zero.returncode == 0, zero.stderr  # 0 = no cap, as on the Judge page and in [judge] budget_usd


#: What a CLI user is told and a Python caller must never be: a flag, or a `workbench ...` command.
CLI_WORDS = re.compile(r"(?<![\w-])--[a-z]|`workbench ")


@pytest.fixture(scope="module")
def empty(tmp_path_factory):
    return Project.create(tmp_path_factory.mktemp("api-errors-empty") / "empty.duckdb")


def provocations(project, empty, tmp_path) -> dict:
    """Bad calls of every kind the API passes on: its own checks, the judge request's rules (one
    per option, from the declaration, plus each cross-option rule) and the services' errors."""
    from workbench.services.judge.request import OPTIONS

    llm = {"model": "m", "base_url": "http://127.0.0.1:9/v1"}  # no request is sent: refused before
    calls = {
        "pool exists": lambda: project.pool("demo", ["bm25"]),
        "pool depth with add": lambda: project.pool("demo", ["bm25"], depth=3, add=True),
        "run exists": lambda: project.retrieve("bm25", name="bm25", chunking="sections"),
        "retrieve needs chunking": lambda: project.retrieve("bm25", name="x"),
        "no sample": lambda: project.calibration_report(),
        "no project": lambda: Project.open(tmp_path / "missing.duckdb"),
        "no pool yet": lambda: empty.judge("demo", model="offline-lexical"),
        "model without key": lambda: project.judge("demo", model="gpt-x"),
        "budget": lambda: project.judge("demo", budget_usd=-1),
        "limit": lambda: project.judge("demo", limit=0),
        "few-shot k": lambda: project.judge("demo", few_shot=0),
        "few-shot sample alone": lambda: project.judge("demo", few_shot_sample="s"),
        "few-shot offline": lambda: project.judge("demo", model="offline-lexical", few_shot=2),
        "few-shot no labels": lambda: project.judge("demo", few_shot=2, **llm),
        "samples at temperature 0": lambda: project.judge("demo", samples=3, temperature=0.0, **llm),
        # pooling (services.pooling.request.PoolRequest and the pooling service)
        "pool depth 0": lambda: project.pool("new", ["bm25"], depth=0),
        "pool depth of another type": lambda: project.pool("new", ["bm25"], depth="5"),
        "pool depth beyond 32 bits": lambda: project.pool("new", ["bm25"], depth=2**40),
        "pool unknown run": lambda: project.pool("new", ["nope"]),
        "pool no runs": lambda: project.pool("new", []),
        "pool runs as one string": lambda: project.pool("new", "bm25"),
        "pool a run twice": lambda: project.pool("new", ["bm25", "bm25"]),
        "pool name against the rule": lambda: project.pool("a b", ["bm25"]),
        "pool add to no pool": lambda: project.pool("nope", ["bm25"], add=True),
        "pool add a pooled run": lambda: project.pool("demo", ["bm25"], add=True),
        # calibration samples (services.calibration.request.SampleRequest and the draw)
        "sample size 0": lambda: project.calibration_sample("demo", size=0),
        "sample size of another type": lambda: project.calibration_sample("demo", size="200"),
        "sample too small": lambda: project.calibration_sample("demo", size=5),
        "sample negative seed": lambda: project.calibration_sample("demo", seed=-1),
        "sample seed beyond 64 bits": lambda: project.calibration_sample("demo", seed=2**64),
        "sample seed of another type": lambda: project.calibration_sample("demo", seed="x"),
        "sample unknown judge": lambda: project.calibration_sample("demo", judge="nope"),
        "sample unknown pool": lambda: project.calibration_sample("nope"),
        "sample share": lambda: project.calibration_sample("demo", holdout_share=2),
        "sample queries design without queries": lambda: project.calibration_sample("demo", design="queries"),
        "sample queries with pairs": lambda: project.calibration_sample("demo", queries=5),
    }
    for option in OPTIONS:  # every keyword the judge takes, given a value of no type it accepts
        if option.kwarg and option.name != "pool":
            calls[f"type of {option.kwarg}"] = lambda kwarg=option.kwarg: project.judge("demo", **{kwarg: object()})
    return calls


def test_no_api_error_names_a_cli_flag_or_command(project, empty, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    said = {what: _message(call) for what, call in provocations(project, empty, tmp_path).items()}
    found = {what: text for what, text in said.items() if CLI_WORDS.search(text)}
    assert found == {}, found
    # each names what the caller can change in the caller's words
    assert "add=True" in said["pool depth with add"] and "depth" in said["pool depth with add"]
    assert said["limit"] == "limit= must be at least 1, got 0"
    assert "few_shot=" in said["few-shot sample alone"] and "few_shot_sample=" in said["few-shot sample alone"]
    assert "`Project.pool()`" in said["no pool yet"]
    assert "samples=3 at" in said["samples at temperature 0"] and "temperature=0.7" in said["samples at temperature 0"]
    assert said["few-shot sample alone"].endswith("add few_shot=K")
    assert said["type of budget_usd"].startswith("budget_usd= must be a number")
    assert said["type of concurrency"].startswith("concurrency= must be a whole number")
    # pooling and samples: the keyword named, never the settings' or the command line's words
    assert "depth=" in said["pool depth 0"] and "depth=" in said["pool depth of another type"]
    assert "command line" not in said["pool depth of another type"]
    assert "depth=" in said["pool depth beyond 32 bits"]
    assert said["pool no runs"] == "choose one or more runs= to pool"
    assert said["pool runs as one string"] == "runs= must be a list of run names, got 'bm25'"
    assert "unknown run 'nope'" in said["pool unknown run"]
    assert said["sample size 0"] == "size= must be at least 1, got 0"
    assert said["sample too small"] == "a calibration sample of 5 pairs is too small; ask for at least 100 with size="
    assert said["sample size of another type"] == "size= must be a whole number, got '200'"
    assert said["sample negative seed"] == "seed= must be at least 0, got -1"
    assert said["sample seed beyond 64 bits"].startswith("seed= must be at most 9,223,372,036,854,775,807")
    assert said["sample share"] == "holdout_share= must be a share in (0, 1], got 2"
    assert said["sample queries design without queries"] == (
        "design='queries' needs queries=N, the number of queries to draw (e.g. queries=30)")
    assert "no judge configuration 'nope'; choose one of" in said["sample unknown judge"]
    assert "`Project.pool()`" in said["sample unknown pool"]


def test_the_scan_sees_the_cli_words_the_same_errors_have_on_the_command_line(project, empty, tmp_path,
                                                                                monkeypatch):
    """The companion: the same errors in the CLI's words (what the API said before it worded
    them) are found by the scan, so it cannot pass by seeing nothing."""
    from workbench.cli.common import error_text

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    missed = []
    for what, call in provocations(project, empty, tmp_path).items():
        with pytest.raises(WorkbenchError) as caught:
            call()
        if caught.value.fields or caught.value.command:  # the errors with something to word
            if not CLI_WORDS.search(error_text(caught.value)):
                missed.append((what, error_text(caught.value)))
    assert missed == []
    assert CLI_WORDS.search("pools: none yet (create one with `workbench pool`)")
