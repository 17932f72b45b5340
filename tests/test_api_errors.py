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
