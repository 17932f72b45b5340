"""Signing in to the app and the signed-in user's role (``[app] auth``; rules in
:mod:`workbench.services.access`).

- ``none`` (local use): no sign-in; whoever opens the app is a lead named by the "Annotator" field.
- ``password``: a sign-in form checked against Streamlit secrets
  ``[auth.users.<name>]`` (``role``, ``hash`` from ``python -m workbench.services.access``); the
  password is never stored (the form clears it) and a wrong one gets one message that does not
  say whether the name exists; after five failures for one name, that name must wait before
  each further try (:class:`workbench.services.access.SignInThrottle`).
- ``oidc``: ``st.login()`` with the identity provider configured in secrets ``[auth]``; the role
  comes from ``[auth.roles]`` (``"alice@example.com" = "annotator"``); a signed-in address with
  no role there may not use the app.

A password sign-in lasts ``[app] session_hours`` (default 12) in the browser: the sign-in signs a
token (:mod:`workbench.services.sessions`, key ``[auth] session_secret`` or a key file beside the
project) and, when ``workbench app`` serves the cookie route (:mod:`workbench.ui.session_routes`),
sends the browser through it once to store the token in an HttpOnly cookie; a reload or another
tab reads the cookie. Every run checks the token again (signature, expiry, and the user's hash
and role in the secrets as at sign-in), so an expired, forged or outdated token signs nobody in.
Signing out clears the cookie and revokes its token in this server process, so another tab
running on it is signed out at its next click and a copy of the cookie is worthless.

The signed-in user is kept in the page session; :func:`session_actor` is registered with
:func:`workbench.services.access.set_actor_source`, so every service the page calls checks the
session's role itself.
"""

from __future__ import annotations

import logging
import math
import os
import secrets
import threading
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import streamlit as st
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime.scriptrunner import get_script_run_ctx

from workbench.config import load_settings
from workbench.services import access, sessions
from workbench.services.access import Actor
from workbench.ui import session_routes
from workbench.ui.project_path import served_project

_ACTOR_KEY = "_auth_actor"
_TOKEN_KEY = "_auth_token"  # this page session's signed sign-in (the cookie's twin)
_SIGNED_OUT = "_auth_signed_out"  # signed out in this page session: its cookie no longer counts
_LOG = logging.getLogger(__name__)


_MODES: dict[tuple, str] = {}  # what `mode` read, by where it read it from (see there)


def mode() -> str:
    """``[app] auth``. Asked several times per key press (every service call checks the
    session's role), so the configuration is read again only when what it is read from
    changed: the working folder, ``WORKBENCH_CONFIG`` / ``WORKBENCH_APP_AUTH``, or the config
    file's modification time (reading it costs a few milliseconds each time)."""

    config = os.environ.get("WORKBENCH_CONFIG") or "config/workbench.toml"
    try:
        stamp = os.stat(config).st_mtime_ns
    except OSError:
        stamp = None
    key = (os.getcwd(), os.environ.get("WORKBENCH_CONFIG"), os.environ.get("WORKBENCH_APP_AUTH"), config, stamp)
    found = _MODES.get(key)
    if found is None:
        found = _MODES[key] = str(load_settings().get("app", "auth"))
        if len(_MODES) > 32:  # tests switch configurations many times in one process
            _MODES.clear()
            _MODES[key] = found
    return found


def _secrets_auth() -> dict:
    """The ``[auth]`` table of Streamlit secrets as plain dicts ({} when there are no secrets)."""
    try:
        found = st.secrets.get("auth", {})
    except Exception:  # noqa: BLE001 - a missing or unreadable secrets file means "no users"
        return {}
    return _plain(found)


def _plain(value):
    if hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def oidc_actor(user: dict, roles: dict) -> Actor | None:
    """The actor for a signed-in identity (``st.user``): its email's role in ``[auth.roles]``
    (compared case-insensitively); None when not signed in, without an email or without a role."""
    if not user.get("is_logged_in"):
        return None
    email = str(user.get("email") or "").strip()
    by_email = {str(k).strip().lower(): v for k, v in roles.items()}
    role = by_email.get(email.lower()) if email else None
    return Actor(email, role) if role in access.ROLES else None


def _oidc_actor() -> Actor | None:
    return oidc_actor(st.user.to_dict(), _secrets_auth().get("roles", {}))


def session_actor() -> Actor | None:
    """The actor of the page session running now; None outside a page session (the CLI, a
    thread the app started), which :func:`access.current_actor` treats as the local operator."""

    if get_script_run_ctx(suppress_warning=True) is None:
        return None
    how = mode()
    if how == "none":
        return Actor(str(st.session_state.get("annotator", "")).strip(), "lead")
    if how == "oidc":
        return _oidc_actor() or Actor("", "viewer")
    return st.session_state.get(_ACTOR_KEY) or Actor("", "viewer")


access.set_actor_source(session_actor)


def check_password(users: dict, name: str, password: str) -> Actor | None:
    """The actor for ``name`` when ``password`` matches its stored hash, else None."""
    entry = users.get(name.strip()) if name else None
    if not isinstance(entry, dict) or not password:
        return None
    if not access.verify_password(password, str(entry.get("hash", ""))):
        return None
    role = entry.get("role")
    return Actor(name.strip(), role) if role in access.ROLES else None


_KEYS: dict[tuple, bytes] = {}
_KEYS_LOCK = threading.Lock()


def signing_key() -> bytes:
    """The key that signs sign-in tokens: ``[auth] session_secret`` from the secrets when set
    (ValueError when it is too short), else the key kept beside the project
    (``<project>.session-key``, created on first use, owner-only). When that file can be neither
    read nor created, a key for this server process only (sign-ins then end when it stops)."""
    secret = _secrets_auth().get("session_secret")
    if secret is not None:
        return sessions.key_from_secret(secret)
    path = Path(f"{st.session_state.get('db_path') or served_project()}.session-key")
    with _KEYS_LOCK:  # page sessions run in threads: one key file, created once
        found = _KEYS.get(("file", str(path)))
        if found is None:
            try:
                found = sessions.load_or_create_key(path)
            except OSError as exc:
                _LOG.warning("cannot keep the session key in %s (%s); sign-ins end when the app stops",
                             path, exc.strerror or exc)
                found = _KEYS.setdefault(("process",), secrets.token_bytes(32))
            _KEYS[("file", str(path))] = found
        return found


def session_seconds() -> float:
    """``[app] session_hours`` in seconds (at least one minute)."""
    return max(60.0, float(load_settings().get("app", "session_hours")) * 3600.0)


def _cookie_token() -> str | None:
    try:
        return st.context.cookies.get(session_routes.cookie_name())
    except Exception:  # noqa: BLE001 - no request (a test run of the script): no cookie
        return None


def _password_actor(users: dict) -> Actor | None:
    """The actor of this page session's sign-in, else of the browser's session cookie, when the
    token is still good (signature, expiry, the user's hash and role as at sign-in); None
    otherwise (an outdated token of this page session is dropped)."""
    key = signing_key()
    token = st.session_state.get(_TOKEN_KEY)
    if token:
        actor = None if sessions.REVOKED.holds(token) else sessions.actor_for(key, sessions.read(key, token), users)
        if actor is not None:
            return actor
        st.session_state.pop(_TOKEN_KEY, None)
    cookie = _cookie_token()
    if st.session_state.get(_SIGNED_OUT) or sessions.REVOKED.holds(cookie):
        return None
    return sessions.actor_for(key, sessions.read(key, cookie), users)


def _redirect(url: str) -> None:
    """Send the browser to ``url`` (a route of this server): the message ``st.login`` and
    ``st.logout`` use to leave the page."""

    message = ForwardMsg()
    message.auth_redirect.url = url
    get_script_run_ctx().enqueue(message)


def _here() -> str:
    """The path of the page the browser shows (to come back to after the cookie route)."""

    try:
        return session_routes.safe_next(urlsplit(st.context.url or "/").path or "/")
    except Exception:  # noqa: BLE001 - no request: the app's first page
        return "/"


def _keep_in_browser(token: str) -> bool:
    """Send the browser through the cookie route with a one-time ticket for ``token``; False
    when this server does not serve the route (the sign-in then lasts for this page session)."""
    if not session_routes.SERVED[0]:
        return False

    xsrf = st.context.cookies.get(session_routes.XSRF_COOKIE)
    ticket = sessions.TICKETS.issue(token, session_seconds(), sessions.xsrf_binding(xsrf))
    _redirect(f"{session_routes.SIGN_IN_PATH}?{urlencode({'ticket': ticket, 'next': _here()})}")
    return True


def _password_form() -> None:
    st.title("Sign in")
    users = _secrets_auth().get("users", {})
    if not users:
        st.error("No users are set up for this app yet; ask whoever runs it to add you.")
        return
    with st.form("sign_in", clear_on_submit=True):
        name = st.text_input("User name", key="sign_in_name")
        password = st.text_input("Password", type="password", key="sign_in_password")
        submitted = st.form_submit_button("Sign in", type="primary")
    if not submitted:
        return
    throttle = access.SIGN_IN_THROTTLE
    # One step checks and counts the attempt, so simultaneous wrong guesses cannot all be checked
    # before any is counted. During a wait the password is not checked at all.
    wait = throttle.attempt(name)
    actor = None if wait else check_password(users, name, password)
    # Only the hash comparison ever sees the password: drop it from the session at once.
    del password
    st.session_state.pop("sign_in_password", None)
    if wait:
        st.error(f"Too many failed sign-ins for this user name; wait {math.ceil(wait)} seconds and try again.")
        return
    if actor is None:  # already counted by attempt()
        st.error("That user name and password do not match; try again.")
        return
    throttle.succeeded(name)
    token = sessions.issue(signing_key(), actor.name, actor.role, str(users[actor.name].get("hash", "")),
                           lifetime=session_seconds())
    st.session_state[_TOKEN_KEY] = token
    st.session_state[_ACTOR_KEY] = actor
    st.session_state.pop(_SIGNED_OUT, None)
    if _keep_in_browser(token):
        # the browser leaves for the cookie route and comes back signed in; a rerun here could
        # clear the message that sends it there before it is delivered
        st.info("Signing in…")
        st.stop()
    st.rerun()


def _check_host() -> None:
    """Stop the page when the browser reached the app under a host name it does not serve
    (``[app] allowed_hosts``, against DNS rebinding). ``workbench app`` also has Streamlit refuse
    such a session (``server.allowedHosts``); this covers ``streamlit run`` started by hand."""
    try:
        header = st.context.headers.get("Host")
    except Exception:  # noqa: BLE001 - no request headers (a test run of the script): nothing to check
        return
    if header is None:
        return
    settings = load_settings()
    if not access.host_allowed(header, access.allowed_hosts(settings.get("app", "allowed_hosts"),
                                                              settings.get("app", "host"))):
        st.error("This app is not served under this address; open it at the address its operator gave you.")
        st.stop()


def gate() -> Actor:
    """Call first on every run: shows the sign-in (and stops the page) until someone is signed
    in; returns the actor. With auth ``none`` it returns the lead named by the Annotator field."""
    _check_host()
    how = mode()
    if how == "none":
        return session_actor() or access.LOCAL_OPERATOR
    if how == "oidc":
        if not st.user.get("is_logged_in"):
            st.title("Sign in")
            if st.button("Sign in", type="primary", key="oidc_login"):
                st.login()
            st.stop()
        actor = _oidc_actor()
        if actor is None:
            st.error("Your account has no role in this app; ask a lead to add your address.")
            if st.button("Sign out", key="oidc_logout"):
                st.logout()
            st.stop()
    else:
        try:
            actor = _password_actor(_secrets_auth().get("users", {}))
        except ValueError as exc:  # [auth] session_secret unusable, or the key file is not a key
            st.error(str(exc))
            st.stop()
        if actor is None:
            st.session_state.pop(_ACTOR_KEY, None)
            cookie = _cookie_token()
            if cookie and not st.session_state.get(_SIGNED_OUT) and not sessions.REVOKED.holds(cookie):
                st.info("Your sign-in has ended (it expired, or your password or role changed); sign in again.")
            _password_form()
            st.stop()
        st.session_state[_ACTOR_KEY] = actor
    # Labels are recorded under the signed-in name, never a name typed in the page.
    st.session_state["annotator"] = actor.name
    return actor


def sidebar_user() -> bool:
    """In the sidebar: who is signed in, their role and a sign-out button. False with auth
    ``none`` (the sidebar then asks for the annotator id, as before)."""
    how = mode()
    if how == "none":
        return False
    actor = access.current_actor()
    st.caption("Signed in as")
    st.text(f"{actor.name} · {actor.role}")
    if st.button("Sign out", key="sign_out"):
        if how == "password":  # the tokens this page knows: signed out for every tab that holds them
            key = signing_key()
            for token in (st.session_state.get(_TOKEN_KEY), _cookie_token()):
                sessions.REVOKED.revoke(key, token)
        st.session_state.pop(_ACTOR_KEY, None)
        st.session_state.pop(_TOKEN_KEY, None)
        st.session_state.pop("annotator", None)
        if how == "oidc":
            st.logout()  # Streamlit's identity cookie goes, and the browser with it
            st.stop()
        st.session_state[_SIGNED_OUT] = True  # this page's cookie no longer counts
        if session_routes.SERVED[0]:
            _redirect(f"{session_routes.SIGN_OUT_PATH}?{urlencode({'next': _here()})}")  # clears the cookie
            st.stop()
        st.rerun()
    return True


def may(action: str) -> bool:
    """Whether the session's user may ``action`` (to hide a button; services still check)."""
    return access.allowed(access.current_actor(), action)
