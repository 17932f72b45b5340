"""The operator's key goes only where the operator sent it (issue 37, defect 2), on the Judge page.

Two real loopback servers log the Authorization header of every request: the configured one
(``WORKBENCH_JUDGE_BASE_URL``) and another a lead types as the Server URL. Before the fix the
page sent the app's ``OPENAI_API_KEY`` to the typed URL (``GET /v1/models`` for the estimate, and
the job it starts inherited the key too). Now the typed URL gets no key, or the one typed in the
page's password field; the configured server still gets the app's key (so the check is real).
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.llm.judge_project import demo_project
from tests.support.header_log_server import header_log_server
from tests.support.polling import wait_until
from workbench.services import processes

OPERATOR_KEY = "sk-operator-secret-0123456789"
TYPED_KEY = "sk-typed-for-this-server-42"


def _page():
    from workbench.ui.views import judge

    judge.render()


@pytest.fixture
def servers(tmp_path, monkeypatch):
    path = demo_project(tmp_path / "demo.duckdb")
    with header_log_server() as configured, header_log_server() as other:
        monkeypatch.setenv("WORKBENCH_DB", str(path))
        monkeypatch.setenv("OPENAI_API_KEY", OPERATOR_KEY)
        monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
        monkeypatch.delenv("WORKBENCH_JUDGE_ALLOWED_HOSTS", raising=False)
        monkeypatch.setenv("WORKBENCH_JUDGE_BASE_URL", configured.base_url)
        monkeypatch.setenv("WORKBENCH_JUDGE_MAX_ATTEMPTS", "1")
        monkeypatch.setenv("WORKBENCH_JUDGE_FLUSH_SECONDS", "0.2")
        yield configured, other


def _with_url(at: AppTest, url: str) -> AppTest:
    at.radio[0].set_value("LLM on an OpenAI-compatible server").run()
    at.text_input(key="judge_model").set_value("test-judge")
    at.text_input(key="judge_url").set_value(url)
    at.number_input(key="judge_limit").set_value(2).run()
    assert not at.exception, at.exception
    return at


def _operator_key_in(log) -> bool:
    return any(OPERATOR_KEY in (auth or "") for auth in log.authorizations)


def test_a_typed_server_url_never_gets_the_apps_key(servers):
    configured, other = servers
    at = _with_url(AppTest.from_function(_page, default_timeout=60).run(), other.base_url)
    assert other.requests, "the page's estimate asks the typed server for its models"
    assert not _operator_key_in(other), other.authorizations
    warnings = [w.value for w in at.warning]
    assert any("not to this Server URL" in w and "[judge] allowed_hosts" in w for w in warnings), warnings
    field = at.text_input(key="judge_typed_key")
    assert field.label == "API key for this server" and field.proto.type == field.proto.PASSWORD

    # the configured server gets the app's key: the header is logged, the rule is what differs
    _with_url(at, configured.base_url)
    assert f"Bearer {OPERATOR_KEY}" in configured.authorizations
    assert not [k for k in at.text_input if k.key == "judge_typed_key"]  # nothing to type there

    # a key typed for the other server goes there, and only that key
    _with_url(at, other.base_url)
    at.text_input(key="judge_typed_key").set_value(TYPED_KEY).run()
    assert not at.exception, at.exception
    assert f"Bearer {TYPED_KEY}" in other.authorizations
    assert not _operator_key_in(other)
    assert all(TYPED_KEY not in (auth or "") for auth in configured.authorizations)
    shown = " ".join(str(e.proto) for e in at.main)  # the key is not on the page (the field is a password)
    assert OPERATOR_KEY not in shown


def test_the_job_the_page_starts_does_not_inherit_the_apps_key(servers):
    """Start launches ``workbench judge --base-url OTHER`` in its own process: that process must
    not find the app's OPENAI_API_KEY in its environment."""

    _, other = servers
    at = _with_url(AppTest.from_function(_page, default_timeout=60).run(), other.base_url)
    before = len(other.requests)
    next(b for b in at.button if b.label == "Start").click().run()
    assert not at.exception, at.exception
    started = at.session_state["judge_launch"]
    assert processes.wait(started["pid"], timeout=120) is not None  # one this process started
    wait_until(lambda: len(other.requests) > before, timeout=10, what="a request from the job's process")
    assert not _operator_key_in(other), other.authorizations
