"""Which API key goes to which judge server (:func:`workbench.services.judge.spec.key_for`, issue 37).

The server's key (``OPENAI_API_KEY``) goes to the configured ``[judge] base_url``, to
``OPENAI_BASE_URL`` and to the hosts in ``[judge] allowed_hosts``; any other URL gets the key typed
for it or none. Hand-worked cases, including URLs made to look like the configured one.
"""

from __future__ import annotations

import pytest

from workbench.config import load_settings
from workbench.services.judge import launch
from workbench.services.judge.spec import key_for, server_key_goes_to

SERVER_KEY = "sk-server-0123456789"


def _settings(base_url: str = "https://api.openai.com/v1", allowed: str = ""):
    return load_settings(None, {"judge": {"base_url": base_url, "allowed_hosts": allowed}}, env={})


@pytest.fixture(autouse=True)
def _no_openai_base_url(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("WORKBENCH_JUDGE_ALLOWED_HOSTS", raising=False)
    monkeypatch.delenv("WORKBENCH_JUDGE_BASE_URL", raising=False)


@pytest.mark.parametrize("url, goes", [
    ("https://api.openai.com/v1", True),
    ("https://API.openai.com:443/v1/", True),           # same origin, spelled differently
    ("https://api.openai.com/other/path", True),        # the path is not the server
    ("http://api.openai.com/v1", False),                # not over plain http
    ("https://api.openai.com:8443/v1", False),          # another port is another server
    ("https://api.openai.com.evil.test/v1", False),
    ("https://api.openai.com@evil.test/v1", False),     # user info: the host is evil.test
    ("https://evil.test/api.openai.com/v1", False),
    ("http://127.0.0.1:8080/v1", False),                # loopback is not trusted by default
    ("ftp://api.openai.com/v1", False),
    ("https://api.openai.com:notaport/v1", False),
    ("", False),
    (None, False),
])
def test_the_servers_key_goes_only_to_the_configured_server(url, goes):
    assert server_key_goes_to(url, _settings()) is goes
    assert key_for(url, _settings(), server_key=SERVER_KEY) == (SERVER_KEY if goes else None)


def test_allowed_hosts_name_hosts_ports_and_subdomains():
    settings = _settings(allowed="gateway.corp.test, 127.0.0.1:8080, *.models.test, [::1]:9000")
    cases = {
        "https://gateway.corp.test/v1": True, "http://gateway.corp.test:9999/v1": True,  # any port
        "http://127.0.0.1:8080/v1": True, "http://127.0.0.1:8081/v1": False,
        "https://eu.models.test/v1": True, "https://models.test/v1": False,
        "https://evilmodels.test/v1": False, "http://[::1]:9000/v1": True, "http://[::1]:9001/v1": False,
        "https://corp.test/v1": False,
    }
    assert {url: server_key_goes_to(url, settings) for url in cases} == cases


def test_openai_base_url_counts_as_configured(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://10.0.0.5:8000/v1")
    assert key_for("http://10.0.0.5:8000/v1", _settings(), server_key=SERVER_KEY) == SERVER_KEY
    assert key_for("http://10.0.0.6:8000/v1", _settings(), server_key=SERVER_KEY) is None


def test_a_typed_key_goes_with_its_url_and_the_environment_is_the_default(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    assert key_for("https://evil.test/v1", _settings(), "  sk-typed  ") == "sk-typed"
    assert key_for("https://evil.test/v1", _settings(), "   ") is None
    assert key_for("https://api.openai.com/v1", _settings()) == SERVER_KEY  # OPENAI_API_KEY
    assert key_for("https://api.openai.com/v1", _settings(), "sk-typed") == "sk-typed"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert key_for("https://api.openai.com/v1", _settings()) is None


def test_the_launch_service_decides_with_the_operators_settings_not_the_requests(monkeypatch):
    """The page's request carries the typed URL as an override; the rule compares it with the
    configuration the app was started with, so a request cannot allow its own URL."""
    monkeypatch.setenv("WORKBENCH_JUDGE_BASE_URL", "http://127.0.0.1:7001/v1")
    monkeypatch.setenv("OPENAI_API_KEY", SERVER_KEY)
    mine = launch.JobRequest("p", model="m", base_url="http://127.0.0.1:7001/v1")
    theirs = launch.JobRequest("p", model="m", base_url="http://127.0.0.1:7002/v1")
    assert launch.job_key(mine) == SERVER_KEY and not launch.server_key_refused(mine)
    assert launch.job_key(launch.JobRequest("p", model="m")) == SERVER_KEY  # the configured URL
    assert launch.job_key(theirs) is None and launch.server_key_refused(theirs)
    assert launch.job_key(theirs, typed_key="sk-t") == "sk-t"
    assert launch.job_key(launch.JobRequest("p", offline=True)) is None
    monkeypatch.setenv("WORKBENCH_JUDGE_ALLOWED_HOSTS", "127.0.0.1:7002")
    assert launch.job_key(theirs) == SERVER_KEY
    # the spec the page resolves carries the decided key, never the environment's as a fallback
    monkeypatch.delenv("WORKBENCH_JUDGE_ALLOWED_HOSTS")
    assert launch.resolve("unused.duckdb", theirs).api_key is None
    assert launch.resolve("unused.duckdb", mine).api_key == SERVER_KEY
