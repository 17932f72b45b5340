"""The signed session token behind a lasting password sign-in (services.sessions): the format the
module docstring gives, built here by hand with the standard library; expiry to the second; every
kind of forgery refused; a new hash, role or a removed user ending the session; the key file; the
one-time tickets and their binding to Streamlit's XSRF token."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat

import pytest

from workbench.services import sessions
from workbench.services.access import Actor

KEY = bytes(range(32))
HASH = "scrypt$16384$8$1$c2FsdA==$ZGlnZXN0"
USERS = {"ann": {"role": "annotator", "hash": HASH}, "lea": {"role": "lead", "hash": "scrypt$other"}}
NOW = 1_800_000_000


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _by_hand(key: bytes, claims: dict) -> str:
    """A token made from the module docstring's recipe, not from the module."""
    body = _b64(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
    return f"v1.{body}." + _b64(hmac.new(key, f"v1.{body}".encode(), hashlib.sha256).digest())


def test_a_token_is_the_documented_recipe_and_reads_back():
    digest = _b64(hmac.new(KEY, b"user\x00" + HASH.encode() + b"\x00annotator", hashlib.sha256).digest()[:12])
    expected = _by_hand(KEY, {"u": "ann", "r": "annotator", "d": digest, "i": NOW, "e": NOW + 12 * 3600})
    token = sessions.issue(KEY, "ann", "annotator", HASH, lifetime=12 * 3600, now=NOW + 0.7)
    assert token == expected
    assert sessions.read(KEY, token, now=NOW + 5) == sessions.Session("ann", "annotator", digest, NOW, NOW + 43200)
    assert sessions.actor_for(KEY, sessions.read(KEY, token, now=NOW + 5), USERS) == Actor("ann", "annotator")
    assert HASH not in token and "c2FsdA" not in token  # the cookie tells nothing about the hash


def test_a_token_is_good_from_a_minute_before_it_was_issued_until_its_expiry():
    token = sessions.issue(KEY, "ann", "annotator", HASH, lifetime=3600, now=NOW)
    good = [NOW - 60, NOW, NOW + 3599.9]
    bad = [NOW - 61, NOW + 3600, NOW + 10**6]
    assert [sessions.read(KEY, token, now=t) is not None for t in good + bad] == [True] * 3 + [False] * 3


def test_forged_tampered_and_malformed_tokens_are_refused():
    token = sessions.issue(KEY, "ann", "annotator", HASH, lifetime=3600, now=NOW)
    head, body, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    promoted = _b64(json.dumps(dict(claims, r="lead"), separators=(",", ":"), sort_keys=True).encode())
    longer = _b64(json.dumps(dict(claims, e=NOW + 10**8), separators=(",", ":"), sort_keys=True).encode())
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    forged = [
        f"{head}.{promoted}.{signature}",  # a lead's claims under an annotator's signature
        f"{head}.{longer}.{signature}",  # a later expiry
        f"{head}.{body}.{flipped}",
        sessions.issue(bytes(32), "ann", "annotator", HASH, lifetime=3600, now=NOW),  # another key
        _by_hand(bytes(32), dict(claims, r="lead")),
        f"v2.{body}.{signature}", f"{body}.{signature}", f"{token}.x", "", "v1..", "v1.e30.", "v1.!!.!!",
        "v1.é.é", "x" * 5000, _by_hand(KEY, {"u": "ann"}),  # well signed but not a session
    ]
    for token_ in forged:
        assert sessions.read(KEY, token_, now=NOW + 1) is None, token_
    assert sessions.read(KEY, None, now=NOW) is None


def test_a_new_hash_or_role_or_a_removed_user_ends_the_session():
    session = sessions.read(KEY, sessions.issue(KEY, "ann", "annotator", HASH, lifetime=60, now=NOW), now=NOW)
    assert sessions.actor_for(KEY, session, USERS) == Actor("ann", "annotator")
    assert sessions.actor_for(KEY, session, {"ann": {"role": "annotator", "hash": HASH + "x"}}) is None
    assert sessions.actor_for(KEY, session, {"ann": {"role": "lead", "hash": HASH}}) is None
    assert sessions.actor_for(KEY, session, {"ann": {"role": "boss", "hash": HASH}}) is None
    assert sessions.actor_for(KEY, session, {"lea": USERS["lea"]}) is None
    assert sessions.actor_for(KEY, session, {"ann": "annotator"}) is None
    assert sessions.actor_for(KEY, None, USERS) is None


def test_the_session_secret_must_be_long_enough():
    with pytest.raises(ValueError, match="at least 32 characters"):
        sessions.key_from_secret("short")
    with pytest.raises(ValueError):
        sessions.key_from_secret(12345678901234567890123456789012345)
    key = sessions.key_from_secret("a" * 32)
    assert len(key) == 32 and key == sessions.key_from_secret(" " + "a" * 32 + "\n")
    assert key != sessions.key_from_secret("b" * 32)


def test_the_key_file_is_made_once_owner_only_and_never_overwritten(tmp_path):
    path = tmp_path / "project.duckdb.session-key"
    key = sessions.load_or_create_key(path)
    assert len(key) == 32 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert sessions.load_or_create_key(path) == key
    other = tmp_path / "other.session-key"
    other.write_text("not a key\n")
    with pytest.raises(ValueError, match="does not hold a session key"):
        sessions.load_or_create_key(other)
    assert other.read_text() == "not a key\n"
    with pytest.raises(OSError):
        sessions.load_or_create_key(tmp_path / "missing-folder" / "k")


def test_a_ticket_is_good_once_for_its_browser_within_its_minute():
    clock = [100.0]
    tickets = sessions.Tickets(lifetime=60, clock=lambda: clock[0])
    ticket = tickets.issue("TOKEN", 3600, b"browser-1")
    assert tickets.redeem(ticket, b"browser-1") == ("TOKEN", 3600.0)
    assert tickets.redeem(ticket, b"browser-1") is None  # used
    stolen = tickets.issue("TOKEN", 3600, b"browser-1")
    assert tickets.redeem(stolen, b"browser-2") is None  # another browser: refused and burnt
    assert tickets.redeem(stolen, b"browser-1") is None
    late = tickets.issue("TOKEN", 3600, b"browser-1")
    clock[0] += 60
    assert tickets.redeem(late, b"browser-1") is None
    assert tickets.redeem("made-up", b"browser-1") is None and tickets.redeem(None, b"") is None


def test_the_binding_is_the_token_inside_streamlits_xsrf_cookie():
    from streamlit.web.server.starlette.starlette_app_utils import generate_xsrf_token_string

    token = bytes.fromhex("00112233445566778899aabbccddeeff")
    # two cookies of one browser (fresh masks) bind alike; another browser's does not
    first, second = generate_xsrf_token_string(token, NOW), generate_xsrf_token_string(token, NOW)
    assert first != second
    assert sessions.xsrf_binding(first) == sessions.xsrf_binding(second) == token
    assert sessions.xsrf_binding(generate_xsrf_token_string(bytes(16), NOW)) == bytes(16)
    # by hand: mask 01020304 over 10203040 50607080
    assert sessions.xsrf_binding("2|01020304|11223344 51627384|1".replace(" ", "")) == bytes.fromhex(
        "1020304050607080")
    for bad in (None, "", "garbage", "1|aa|bb|1", "2|zz|bb|1", "2||bb|1"):
        assert sessions.xsrf_binding(bad) == b""


def test_a_signed_out_token_stays_refused_until_it_would_have_expired():
    clock = [float(NOW)]
    revoked = sessions.Revoked(clock=lambda: clock[0])
    token = sessions.issue(KEY, "ann", "annotator", HASH, lifetime=100, now=NOW)
    other = sessions.issue(KEY, "ann", "annotator", HASH, lifetime=100, now=NOW + 1)
    assert not revoked.holds(token)
    revoked.revoke(KEY, token)
    assert revoked.holds(token) and not revoked.holds(other) and not revoked.holds(None)
    revoked.revoke(KEY, "forged.token.x")  # refused by read(): nothing kept
    revoked.revoke(bytes(32), other)  # another key's view: not a token of ours
    assert not revoked.holds(other) and len(revoked._until) == 1
    clock[0] = NOW + 100  # expired: forgotten at the next revocation (read() refuses it anyway)
    revoked.revoke(KEY, sessions.issue(KEY, "lea", "lead", HASH, lifetime=100, now=NOW + 100))
    assert not revoked.holds(token) and len(revoked._until) == 1
