"""A password sign-in outlasts the page (issue 34): in a real ``workbench app`` driven by Debian's
chromium, signing in sets a signed, expiring, HttpOnly session cookie, so a reload (F5) and a
second tab stay signed in; signing out clears it; a forged, tampered, expired or foreign cookie
signs nobody in. Signing out also signs out another tab running on the same cookie, and a copy
of a signed-out cookie signs nobody in.

The server runs in a folder of its own holding ``.streamlit/secrets.toml`` (the project's own
hash helper) and ``config/workbench.toml`` (``auth = "password"``), as an operator's. The signing
key is the one the app keeps beside the project (``<project>.session-key``); the forged cookies
are made with :mod:`workbench.services.sessions` and that key (or another one).
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support.live_app import browser_page, serve, wait_idle
from tests.support.templates import empty_project
from workbench.services import access, sessions

pytestmark = pytest.mark.browser

LONG = 120_000
PASSWORDS = {"ann": "ann-Secret-1", "lea": "lea-Secret-3"}
ROLES = {"ann": "annotator", "lea": "lead"}
HASHES = {name: access.hash_password(pw) for name, pw in PASSWORDS.items()}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("session-app")
    (folder / ".streamlit").mkdir()
    (folder / ".streamlit" / "secrets.toml").write_text(
        "\n".join(access.secrets_entry(name, ROLES[name], HASHES[name]) for name in PASSWORDS) + "\n")
    (folder / "config").mkdir()
    (folder / "config" / "workbench.toml").write_text('[app]\nauth = "password"\n')
    db_path = empty_project(folder / "project.duckdb")
    with serve(db_path, cwd=folder) as url:
        yield url, db_path


def _cookie_name(url: str) -> str:
    return f"workbench_session_{urlsplit(url).port}"


def _signed_in(page, name: str) -> None:
    page.get_by_text(f"{name} · {ROLES[name]}", exact=True).wait_for(timeout=LONG)
    wait_idle(page, LONG, start_within=0)
    assert not page.get_by_role("textbox", name="Password").count()


def _at_the_form(page) -> None:
    page.get_by_role("textbox", name="Password").wait_for(timeout=LONG)
    wait_idle(page, LONG, start_within=0)
    assert not page.get_by_role("button", name="Sign out").count()


def _sign_in(page, name: str, password: str) -> None:
    page.get_by_role("textbox", name="User name").fill(name)
    page.get_by_role("textbox", name="Password").fill(password)
    page.get_by_role("button", name="Sign in").click()


def test_a_password_sign_in_survives_a_reload_and_a_second_tab_until_sign_out(served):
    url, _ = served
    with browser_page() as page:
        page.goto(f"{url}/labels")  # a deep link to a page an annotator has: the sign-in comes back to it
        _at_the_form(page)
        before = time.time()
        _sign_in(page, "ann", PASSWORDS["ann"])
        _signed_in(page, "ann")
        assert urlsplit(page.url).path == "/labels"

        cookies = {c["name"]: c for c in page.context.cookies()}
        session = cookies[_cookie_name(url)]
        assert session["httpOnly"] is True and session["sameSite"] == "Lax" and session["secure"] is False
        assert session["path"] == "/"
        assert before + 12 * 3600 - 60 <= session["expires"] <= time.time() + 12 * 3600 + 60  # [app] session_hours
        assert _cookie_name(url) not in page.evaluate("document.cookie")  # no script of the page reads it
        assert PASSWORDS["ann"] not in session["value"] and HASHES["ann"] not in session["value"]

        page.reload()  # F5
        _signed_in(page, "ann")

        second = page.context.new_page()  # a second tab of the same browser
        second.goto(url)
        _signed_in(second, "ann")

        page.get_by_role("button", name="Sign out").click()
        _at_the_form(page)
        assert _cookie_name(url) not in {c["name"] for c in page.context.cookies()}
        # the other tab, still open on the same token: signed out at its next click
        second.locator("[data-testid='stSidebarNav']").get_by_role("link", name="Qrels", exact=True).click()
        _at_the_form(second)
        second.reload()  # and at its next load
        _at_the_form(second)
        page.reload()
        _at_the_form(page)


def test_a_forged_tampered_expired_or_foreign_cookie_signs_nobody_in(served):
    url, db_path = served
    key = Path(f"{db_path}.session-key")
    with browser_page() as page:
        page.goto(url)
        _at_the_form(page)  # the app made its key on this first visit
        right = bytes.fromhex(key.read_text().strip())
        other = bytes(32)
        good = sessions.issue(right, "ann", "annotator", HASHES["ann"], lifetime=3600)
        head, payload, signature = good.split(".")
        promoted = sessions.issue(right, "ann", "lead", HASHES["ann"], lifetime=3600).split(".")[1]
        refused = {
            "another key": sessions.issue(other, "lea", "lead", HASHES["lea"], lifetime=3600),
            "expired": sessions.issue(right, "ann", "annotator", HASHES["ann"], lifetime=60, now=time.time() - 7200),
            "role changed, old signature": f"{head}.{promoted}.{signature}",
            "stale hash": sessions.issue(right, "ann", "annotator", access.hash_password("old"), lifetime=3600),
            "no such user": sessions.issue(right, "zed", "lead", HASHES["lea"], lifetime=3600),
            "garbage": "v1.e30.AAAA",
        }
        # a good cookie copied before its owner signed out
        page.context.add_cookies([{"name": _cookie_name(url), "value": good, "url": url}])
        page.goto(url)
        _signed_in(page, "ann")
        page.get_by_role("button", name="Sign out").click()
        _at_the_form(page)
        refused["signed out, copied"] = good
        for why, token in refused.items():
            page.context.clear_cookies()
            page.context.add_cookies([{"name": _cookie_name(url), "value": token, "url": url}])
            page.goto(url)
            _at_the_form(page)
            # the form says why, except to a signed-out cookie (signed out is what it is)
            assert page.get_by_text("Your sign-in has ended").count() == (why != "signed out, copied"), why
            assert not page.get_by_text("ann · annotator").count(), why
            assert not page.get_by_text("lea · lead").count(), why
        # the control: the same way, a good token signs in
        page.context.clear_cookies()
        fresh = sessions.issue(right, "ann", "annotator", HASHES["ann"], lifetime=3600)
        page.context.add_cookies([{"name": _cookie_name(url), "value": fresh, "url": url}])
        page.goto(url)
        _signed_in(page, "ann")


def test_a_new_password_in_the_secrets_ends_the_users_lasting_sign_in(served):
    """The operator changes lea's hash in secrets.toml while she is signed in (Streamlit watches
    the file): her cookie no longer signs her in, and her open page is back at the form at its
    next run; ann's sign-in in another browser is untouched."""
    url, db_path = served
    secrets_file = db_path.parent / ".streamlit" / "secrets.toml"
    before = secrets_file.read_text()
    new_hash = access.hash_password("lea-New-Secret-9")
    try:
        with browser_page() as page, browser_page() as other:
            for tab, name in ((page, "lea"), (other, "ann")):
                tab.goto(url)
                _at_the_form(tab)
                _sign_in(tab, name, PASSWORDS[name])
                _signed_in(tab, name)
            secrets_file.write_text(before.replace(HASHES["lea"], new_hash))
            deadline = time.monotonic() + 60
            while True:  # until the app has read the new secrets (a poll every fraction of a second)
                page.reload()
                page.get_by_role("textbox", name="Password").or_(page.get_by_text("lea · lead")).first.wait_for(
                    timeout=LONG)
                wait_idle(page, LONG, start_within=0)
                if page.get_by_role("textbox", name="Password").count() or time.monotonic() > deadline:
                    break
            _at_the_form(page)
            other.reload()
            _signed_in(other, "ann")
            _sign_in(page, "lea", "lea-New-Secret-9")  # the new password works at once
            _signed_in(page, "lea")
    finally:
        secrets_file.write_text(before)
