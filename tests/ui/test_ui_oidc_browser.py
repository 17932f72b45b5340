"""Signing in with OpenID Connect (``[app] auth = "oidc"``, Streamlit's ``st.login``) against a
real OpenID provider on loopback (the ``oidc-provider-mock`` package: discovery, authorization
code flow, signed ID tokens, user info, end session), in a real ``workbench app`` driven by
Debian's chromium.

The provider offers its predefined users on its authorization page; the test presses one, as a
person would pick an account. Roles come from ``[auth.roles]``: an address without a role is
refused; an annotator signed in this way labels blind exactly as a password annotator does (the
project of :mod:`tests.support.blind_project`; a lead signed in the same way is the control);
signing out ends the sign-in, and a reload keeps it until then (Streamlit's identity cookie).
"""

from __future__ import annotations

import secrets

import pytest

from tests.support import blind_project
from tests.support.live_app import browser_page, serve, wait_idle

pytestmark = pytest.mark.browser

LONG = 120_000
ROLES = {"ann@example.com": "annotator", "lea@example.com": "lead"}
STRANGER = "zed@example.com"  # signs in at the provider, has no role here
JUDGE_WORDS = "It would grade this pair"  # the offline judge's reasons (blind_project)


@pytest.fixture(scope="module")
def provider():
    oidc_provider_mock = pytest.importorskip("oidc_provider_mock")
    pytest.importorskip("authlib")  # Streamlit's st.login needs it
    users = [oidc_provider_mock.User(sub=email, claims={"email": email, "email_verified": True, "name": email})
             for email in [*ROLES, STRANGER]]
    with oidc_provider_mock.run_server_in_thread(user_claims=users) as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture(scope="module")
def served(tmp_path_factory, provider):
    folder = tmp_path_factory.mktemp("oidc-app")
    (folder / ".streamlit").mkdir()
    (folder / "config").mkdir()
    (folder / "config" / "workbench.toml").write_text('[app]\nauth = "oidc"\n')
    db_path = folder / "blind.duckdb"
    info = blind_project.copy(db_path)

    def secrets_for(port: int) -> None:
        roles = "\n".join(f'"{email}" = "{role}"' for email, role in ROLES.items())
        (folder / ".streamlit" / "secrets.toml").write_text(
            f'[auth]\nredirect_uri = "http://localhost:{port}/oauth2callback"\n'
            f'cookie_secret = "{secrets.token_urlsafe(32)}"\nclient_id = "workbench-tests"\n'
            f'client_secret = "{secrets.token_urlsafe(16)}"\n'
            f'server_metadata_url = "{provider}/.well-known/openid-configuration"\n\n[auth.roles]\n{roles}\n')

    with serve(db_path, cwd=folder, prepare=secrets_for) as url:
        # the redirect URI names localhost: the browser must use that name for the cookies to match
        yield url.replace("127.0.0.1", "localhost"), info


def _idle(page) -> None:
    wait_idle(page, LONG, start_within=0)


def _sign_in(page, url: str, email: str) -> None:
    page.goto(url)
    page.get_by_role("button", name="Sign in").click()
    # the provider's authorization page: pick the account
    page.get_by_role("button", name=email, exact=True).click()
    page.wait_for_url(f"{url}/**", timeout=LONG)


def _signed_in(page, email: str) -> None:
    page.get_by_text(f"{email} · {ROLES[email]}", exact=True).wait_for(timeout=LONG)
    _idle(page)


def _sign_out(page, url: str) -> None:
    """Press Sign out; the app sends the browser to the provider's end-session page (as a real
    provider that offers one does), where the person confirms; back at the app, signed out."""
    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("button", name="End session").click(timeout=LONG)
    page.wait_for_url(f"{url}/**", timeout=LONG)
    page.get_by_role("button", name="Sign in").wait_for(timeout=LONG)
    _idle(page)


def _visit(page, titles: list[str]) -> str:
    """Open each page through the sidebar; everything the browser received and showed."""
    frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda p: frames.append(
        p.decode("utf-8", "replace") if isinstance(p, bytes) else str(p))))
    page.reload()  # a new session, so that every frame of the pages below is seen
    page.locator("[data-testid='stSidebarNav']").wait_for(timeout=LONG)
    _idle(page)
    texts = []
    for title in titles:
        page.locator("[data-testid='stSidebarNav']").get_by_role("link", name=title, exact=True).click()
        page.get_by_role("heading", name=title, exact=True).first.wait_for(timeout=LONG)
        _idle(page)
        texts.append(page.inner_text("body"))
    return "\n".join(frames + texts)


def test_oidc_sign_in_refuses_an_unmapped_address_keeps_an_annotator_blind_and_signs_out(served):
    url, _ = served
    with browser_page() as page:
        # an address the provider knows but [auth.roles] does not: refused, no page of the app
        _sign_in(page, url, STRANGER)
        page.get_by_text("Your account has no role in this app").wait_for(timeout=LONG)
        _idle(page)
        assert not page.locator("[data-testid='stSidebarNav']").count()
        assert not page.get_by_text(" · annotator").count() and not page.get_by_text(" · lead").count()
        _sign_out(page, url)

        _sign_in(page, url, "ann@example.com")
        _signed_in(page, "ann@example.com")
        page.reload()  # Streamlit's identity cookie carries the sign-in
        _signed_in(page, "ann@example.com")
        # an annotator's navigation lists no lead-only page (Judge, Calibration); the pages it has
        # show no judge output
        nav = page.locator("[data-testid='stSidebarNav']")
        assert not nav.get_by_role("link", name="Judge", exact=True).count()
        received = _visit(page, ["Queries & Labels", "Label", "Qrels"])
        assert "ann@example.com · annotator" in received
        assert JUDGE_WORDS not in received
        for marker in blind_project.MARKERS:
            assert marker not in received, marker
        _sign_out(page, url)
        assert not page.get_by_text("ann@example.com · annotator").count()
        page.goto(url)  # still signed out on the next visit
        page.get_by_role("button", name="Sign in").wait_for(timeout=LONG)
        _idle(page)
        assert not page.get_by_role("button", name="Sign out").count()


def test_a_lead_signed_in_with_the_provider_sees_the_judges_output(served):
    """The control for the blind walk above: the same pages show a lead the judge's reasons."""
    url, _ = served
    with browser_page() as page:
        _sign_in(page, url, "lea@example.com")
        _signed_in(page, "lea@example.com")
        received = _visit(page, ["Judge", "Queries & Labels", "Calibration"])
        assert JUDGE_WORDS in received
