"""Sign-in sessions that outlast a page: a signed, expiring token the browser keeps in an
HttpOnly cookie after a password sign-in (``[app] session_hours``), so a reload or a second tab
stays signed in.

Token format (``v1.<payload>.<signature>``, all URL-safe base64 without padding)::

    payload   = b64(JSON {"d": user digest, "e": expires, "i": issued, "r": role, "u": name})
                (compact: no spaces, keys sorted)
    signature = b64(HMAC-SHA256(key, "v1." + payload))
    digest    = b64(HMAC-SHA256(key, "user" 0x00 hash 0x00 role)[:12])

- ``issued`` and ``expires`` are whole Unix seconds; a token is good while
  ``issued - 60 <= now < expires`` (a minute of clock skew for a token from the future).
- The digest binds the token to the user's entry in the secrets *as it was at sign-in*: a new
  hash (a changed password) or a new role makes every earlier token of that user worthless, and
  so does removing the user. It is keyed, so the cookie tells nothing about the hash.
- The payload is signed, not encrypted: it holds the name and role, nothing secret.
- Anything else (a bad signature, a malformed token, another version, a token made with another
  key) is refused the same way: :func:`read` returns None, never an exception.

A one-time :class:`Tickets` store carries a freshly signed token from the page session (which
cannot set an HttpOnly cookie: it talks over a WebSocket) to the HTTP route that sets the
cookie: the ticket is random, lives 60 s, is good once and only from the browser it was made
for (the binding: the token inside Streamlit's XSRF cookie, :func:`xsrf_binding`; the route is
``workbench.ui.session_routes``). :class:`Revoked` keeps signed-out tokens until they expire.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from workbench.services.access import ROLES, Actor

VERSION = "v1"
#: seconds a token issued "in the future" is still accepted (clocks of one machine; a margin)
SKEW = 60
#: shortest accepted ``[auth] session_secret`` (characters)
MIN_SECRET = 32


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def user_digest(key: bytes, hashed: str, role: str) -> str:
    """What ties a token to a user's entry in the secrets (see the module docstring)."""
    return _b64(_mac(key, b"user\x00" + str(hashed).encode("utf-8") + b"\x00" + str(role).encode("utf-8"))[:12])


@dataclass(frozen=True)
class Session:
    """What a valid token says: who, in which role, bound to which secrets entry, and when."""

    name: str
    role: str
    digest: str
    issued: int
    expires: int


def issue(key: bytes, name: str, role: str, hashed: str, *, lifetime: float, now: float | None = None) -> str:
    """A token for ``name`` (role ``role``, stored hash ``hashed``) good for ``lifetime`` seconds."""
    if lifetime <= 0:
        raise ValueError("a session lifetime must be positive")
    issued = int(time.time() if now is None else now)
    payload = {"u": name, "r": role, "d": user_digest(key, hashed, role), "i": issued,
               "e": issued + max(1, int(lifetime))}
    body = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8"))
    signed = f"{VERSION}.{body}"
    return f"{signed}.{_b64(_mac(key, signed.encode('ascii')))}"


def read(key: bytes, token: str | None, *, now: float | None = None) -> Session | None:
    """The session ``token`` holds when its signature is ``key``'s and it has not expired;
    else None (malformed, forged, signed with another key, expired, issued in the future)."""
    if not token or not isinstance(token, str) or len(token) > 4096:
        return None
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != VERSION:
        return None
    try:
        signature = _unb64(parts[2])
        expected = _mac(key, f"{parts[0]}.{parts[1]}".encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return None
    if not hmac.compare_digest(signature, expected):
        return None
    try:  # signed by us: malformed here would be a bug, but a token is never trusted to parse
        claims = json.loads(_unb64(parts[1]))
        found = Session(str(claims["u"]), str(claims["r"]), str(claims["d"]), int(claims["i"]), int(claims["e"]))
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    now = time.time() if now is None else now
    if not found.issued - SKEW <= now < found.expires:
        return None
    return found


def actor_for(key: bytes, session: Session | None, users: Mapping[str, object]) -> Actor | None:
    """The actor of a valid ``session`` when its user still exists in ``users`` (the secrets'
    ``[auth.users]``) with the same hash and role as at sign-in; else None."""
    if session is None:
        return None
    entry = users.get(session.name)
    if not isinstance(entry, Mapping):
        return None
    role = entry.get("role")
    if role not in ROLES or role != session.role:
        return None
    if not hmac.compare_digest(user_digest(key, str(entry.get("hash", "")), str(role)), session.digest):
        return None
    return Actor(session.name, role)


def key_from_secret(secret: object) -> bytes:
    """The signing key for ``[auth] session_secret``; ValueError (worded for the operator) when
    it is not a string of at least :data:`MIN_SECRET` characters."""
    if not isinstance(secret, str) or len(secret.strip()) < MIN_SECRET:
        raise ValueError(f"[auth] session_secret in .streamlit/secrets.toml must be a string of at least "
                         f"{MIN_SECRET} characters; generate one with "
                         f"python -c \"import secrets; print(secrets.token_urlsafe(48))\"")
    return hashlib.sha256(b"workbench-session\x00" + secret.strip().encode("utf-8")).digest()


def load_or_create_key(path: Path) -> bytes:
    """The signing key kept in ``path`` (32 random bytes, hex), created (owner-only, 0600) when
    the file does not exist. OSError when it can be neither read nor created; ValueError when
    the file exists but does not hold a key (it is never overwritten)."""
    path = Path(path)
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        text = path.read_text(encoding="ascii", errors="replace").strip()
        try:
            key = bytes.fromhex(text)
        except ValueError:
            key = b""
        if len(key) < 32:
            raise ValueError(f"{path} does not hold a session key; delete it (everyone signed in is "
                             f"signed out) and start the app again") from None
        return key
    key = secrets.token_bytes(32)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(key.hex() + "\n")
    return key


class Tickets:
    """One-time tickets: :meth:`issue` keeps a token (and the seconds it has left) for
    ``lifetime`` seconds under a random ticket, :meth:`redeem` hands it out once, only for the
    same ``binding`` (the browser the ticket was made for). Thread-safe (page sessions and the
    HTTP routes run in different threads of one process). ``clock`` is injectable for tests
    (monotonic seconds)."""

    def __init__(self, *, lifetime: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.lifetime, self.clock = lifetime, clock
        self._held: dict[str, tuple[str, float, bytes, float]] = {}  # ticket -> token, max age, binding, until
        self._lock = threading.Lock()

    def issue(self, token: str, max_age: float, binding: bytes) -> str:
        ticket = secrets.token_urlsafe(24)
        with self._lock:
            now = self.clock()
            for old in [t for t, held in self._held.items() if held[3] <= now]:
                del self._held[old]
            self._held[ticket] = (token, float(max_age), bytes(binding), now + self.lifetime)
        return ticket

    def redeem(self, ticket: str | None, binding: bytes) -> tuple[str, float] | None:
        """``(token, max_age)`` held under ``ticket`` (and forget it), or None: unknown, used,
        expired, or another binding (the ticket is burnt all the same)."""
        if not ticket:
            return None
        with self._lock:
            held = self._held.pop(ticket, None)
            now = self.clock()
        if held is None or held[3] <= now or not hmac.compare_digest(held[2], bytes(binding)):
            return None
        return held[0], held[1]


def xsrf_binding(cookie: str | None) -> bytes:
    """The token inside Streamlit's ``_streamlit_xsrf`` cookie (the same for every request of
    one browser while the cookie lives; a fresh random mask each time it is set): version 2,
    ``2|mask|masked token|timestamp`` in hex, token = masked XOR mask (repeated). Empty when
    the cookie is missing or not of that form (then only another such browser matches)."""
    try:
        version, mask_hex, masked_hex, _ = str(cookie or "").strip("\"'").split("|")
        mask, masked = bytes.fromhex(mask_hex), bytes.fromhex(masked_hex)
    except ValueError:
        return b""
    if version != "2" or not mask:
        return b""
    return bytes(b ^ mask[i % len(mask)] for i, b in enumerate(masked))


class Revoked:
    """Tokens signed out before their expiry (kept in memory until then): a copy of a signed-out
    cookie, or another tab's page session running on it, signs nobody in any more. A restart
    of the server forgets them (the cookie itself is cleared at sign-out). Thread-safe;
    ``clock`` is injectable for tests (Unix seconds, like the tokens' expiry)."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._until: dict[bytes, int] = {}  # SHA-256 of the token -> its expiry
        self._lock = threading.Lock()

    def revoke(self, key: bytes, token: str | None) -> None:
        """Sign ``token`` out (nothing happens for a token :func:`read` refuses anyway)."""
        found = read(key, token, now=self.clock())
        if found is None:
            return
        with self._lock:
            now = self.clock()
            for old in [s for s, until in self._until.items() if until <= now]:
                del self._until[old]
            self._until[hashlib.sha256(str(token).encode("utf-8")).digest()] = found.expires

    def holds(self, token: str | None) -> bool:
        if not token:
            return False
        with self._lock:
            return hashlib.sha256(str(token).encode("utf-8")).digest() in self._until


#: The app's tickets and signed-out tokens (one store each per server process).
REVOKED = Revoked()
TICKETS = Tickets()
