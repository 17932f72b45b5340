"""The sign-in cookie's HTTP routes (ui.session_routes) on their own, through Starlette's test
client: the cookie's attributes (Secure only behind TLS), a ticket good once and only from the
browser it was made for, sign-out clearing the cookie, and no redirect to another site."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from streamlit.web.server.starlette.starlette_app_utils import generate_xsrf_token_string

from workbench.services import sessions
from workbench.ui import session_routes

BROWSER = bytes(range(16))


@pytest.fixture
def client(monkeypatch):
    monkeypatch.setattr(sessions, "TICKETS", sessions.Tickets())
    return TestClient(Starlette(routes=session_routes.routes()), base_url="http://localhost:8501",
                      follow_redirects=False)


def _set_cookie(response) -> str:
    return "; ".join(response.headers.get_list("set-cookie"))


def _visit(client, ticket, browser=BROWSER, next_="/label", headers=None):
    client.cookies.clear()
    client.cookies.set(session_routes.XSRF_COOKIE, generate_xsrf_token_string(browser, 1))
    return client.get(session_routes.SIGN_IN_PATH, params={"ticket": ticket, "next": next_}, headers=headers or {})


def test_a_ticket_sets_an_httponly_lax_cookie_once_and_sends_the_browser_back(client):
    name = session_routes.cookie_name()
    ticket = sessions.TICKETS.issue("TOKEN.A.B", 43200, BROWSER)
    response = _visit(client, ticket)
    assert response.status_code == 303 and response.headers["location"] == "/label"
    cookie = _set_cookie(response)
    assert cookie.startswith(f"{name}=TOKEN.A.B;")
    attributes = {part.strip().split("=")[0].lower(): part.strip() for part in cookie.split(";")}
    assert {"httponly", "path", "max-age", "samesite"} <= set(attributes)
    assert attributes["max-age"] == "Max-Age=43200" and attributes["samesite"].lower() == "samesite=lax"
    assert attributes["path"] == "Path=/" and "secure" not in attributes  # plain http: not Secure
    assert response.headers["cache-control"] == "no-store"
    again = _visit(client, ticket)  # used: back to the page, no cookie
    assert again.status_code == 303 and not _set_cookie(again)


def test_behind_a_tls_proxy_the_cookie_is_secure(client):
    ticket = sessions.TICKETS.issue("TOKEN.A.B", 60, BROWSER)
    response = _visit(client, ticket, headers={"X-Forwarded-Proto": "https"})
    assert "secure" in [part.strip().lower() for part in _set_cookie(response).split(";")]


def test_a_ticket_from_another_browser_or_an_unknown_one_sets_nothing(client):
    ticket = sessions.TICKETS.issue("TOKEN.A.B", 60, BROWSER)
    assert not _set_cookie(_visit(client, ticket, browser=bytes(16)))  # someone else's link
    assert not _set_cookie(_visit(client, ticket))  # burnt by that try
    assert not _set_cookie(_visit(client, "made-up"))
    assert not _set_cookie(_visit(client, None))


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/\\evil.example", "evil",
                                    "", "/a\r\nSet-Cookie: x=1"])
def test_the_routes_never_send_the_browser_to_another_site(client, target):
    for path in (session_routes.SIGN_IN_PATH, session_routes.SIGN_OUT_PATH):
        response = client.get(path, params={"next": target})
        assert response.status_code == 303 and response.headers["location"] == "/", (path, target)


def test_sign_out_clears_the_cookie(client):
    response = client.get(session_routes.SIGN_OUT_PATH, params={"next": "/data"})
    assert response.status_code == 303 and response.headers["location"] == "/data"
    cookie = _set_cookie(response)
    assert cookie.startswith(f"{session_routes.cookie_name()}=") and "Max-Age=0" in cookie and "HttpOnly" in cookie
