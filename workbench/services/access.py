"""Who may do what: roles, the permission check every write calls, password hashes.

Roles (``[app] auth`` in ``config/workbench.toml`` says how people sign in to the app):

- ``annotator``: gives, skips and undoes their own labels; sees only their own human labels;
- ``lead``: everything an annotator may do, plus draws calibration samples, starts, stops and
  retries judge jobs, adjudicates, imports data, builds chunkings, runs and pools, deletes;
- ``viewer``: reads only.

Every service function that writes starts with :func:`require`, so a page that forgets to hide a
button still cannot write (the check is on the server, not in the browser). The actor is passed
explicitly (``actor=``) or, when omitted, comes from :func:`current_actor`: the app registers a
source (:func:`set_actor_source`) that reads the signed-in user of the page session running the
call; outside a page session (the CLI, scripts, the judge subprocess the app starts) the caller is
the local operator, :data:`LOCAL_OPERATOR`, a lead: whoever can run commands on the server can
already read and write the project file.

Password hashes (``auth = "password"``) are scrypt (RFC 7914, standard library
:func:`hashlib.scrypt`) with a random 16-byte salt, stored as
``scrypt$<n>$<r>$<p>$<salt base64>$<hash base64>``; ``python -m workbench.services.access``
prints one for a password typed without echo. No plaintext password is stored anywhere.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from workbench import lazylibs
from workbench.errors import ConfigError, WorkbenchError

ROLES = ("annotator", "lead", "viewer")
AUTH_MODES = ("none", "password", "oidc")

#: action -> roles allowed to perform it.
PERMISSIONS: dict[str, frozenset[str]] = {
    "label": frozenset({"annotator", "lead"}),            # save / skip / can't judge / undo own labels
    "sample": frozenset({"lead"}),                        # draw a calibration sample
    "adjudicate": frozenset({"lead"}),                    # resolve SME disagreements
    "judge": frozenset({"lead"}),                         # start / stop / retry judge jobs
    "delete": frozenset({"lead"}),                        # delete runs, pools, chunkings
    "import": frozenset({"lead"}),                        # import files; create the project
    "build": frozenset({"lead"}),                         # chunkings, retrieval runs, pools
    "see_all_labels": frozenset({"lead", "viewer"}),      # other people's human labels, judge output
}

#: What each action is called in a refusal (page words, not function names).
ACTION_WORDS = {
    "label": "give labels",
    "sample": "draw a calibration sample",
    "adjudicate": "resolve disagreements",
    "judge": "start, stop or retry judge jobs",
    "delete": "delete runs, pools or chunkings",
    "import": "import data",
    "build": "build chunkings, runs or pools",
    "see_all_labels": "see other people's labels",
}


class PermissionDenied(WorkbenchError):
    """The signed-in user's role does not allow the action."""

    exit_code = 5


@dataclass(frozen=True)
class Actor:
    """Who performs an action: a name (recorded with labels) and one of :data:`ROLES`."""

    name: str
    role: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ConfigError(f"unknown role {self.role!r} for {self.name!r}; use one of {', '.join(ROLES)}")


#: The CLI and any code outside an app page session.
LOCAL_OPERATOR = Actor("local operator", "lead")

_source: Callable[[], Actor | None] | None = None


def set_actor_source(source: Callable[[], Actor | None] | None) -> Callable[[], Actor | None] | None:
    """Register where :func:`current_actor` finds the actor (the app's page session); the
    source returns ``None`` when the call does not come from a page session. Returns the source
    it replaces (so a caller can put it back)."""
    global _source
    previous, _source = _source, source
    return previous


def current_actor() -> Actor:
    """The actor of the running call: the page session's user, else :data:`LOCAL_OPERATOR`."""
    found = _source() if _source is not None else None
    return LOCAL_OPERATOR if found is None else found


def allowed(actor: Actor, action: str) -> bool:
    """Whether ``actor``'s role permits ``action`` (an unknown action is a programming error)."""
    if action not in PERMISSIONS:
        raise KeyError(f"unknown action {action!r}")
    return actor.role in PERMISSIONS[action]


def require(action: str, actor: Actor | None = None) -> Actor:
    """Raise :class:`PermissionDenied` unless the actor (default: :func:`current_actor`) may do
    ``action``; return the actor."""
    actor = current_actor() if actor is None else actor
    if not allowed(actor, action):
        who = f"{actor.name} ({actor.role})" if actor.name else f"this session ({actor.role})"
        leads = " or ".join(sorted(PERMISSIONS[action]))
        article = "an" if leads[0] in "aeiou" else "a"  # roles are lower-case words: "an annotator"
        raise PermissionDenied(f"{who} may not {ACTION_WORDS[action]}; ask {article} {leads} to do it")
    return actor


LOOPBACK = ("127.0.0.1", "localhost", "::1")


def check_serving(host: str, auth: str, *, allow_public_without_auth: bool = False) -> None:
    """Refuse to serve the app without sign-in on an address other people can reach."""
    if auth not in AUTH_MODES:
        raise ConfigError(f"[app] auth = {auth!r} is not one of {', '.join(AUTH_MODES)}")
    if auth == "none" and host not in LOOPBACK and not allow_public_without_auth:
        raise ConfigError(f"[app] host = {host!r} with auth = \"none\" lets anyone who reaches the app act as a "
                          f"lead; set [app] auth to password or oidc, or allow_public_without_auth = true")


#: The host names served when ``[app] allowed_hosts`` names none.
DEFAULT_ALLOWED_HOSTS = ("127.0.0.1", "localhost", "::1")
_ANY_ADDRESS = ("", "0.0.0.0", "::", "[::]")


def allowed_hosts(configured: str | None, host: str | None = None) -> list[str]:
    """The host names the app serves (DNS rebinding: a page on another site that resolves its
    own name to this server must not reach the app): ``[app] allowed_hosts`` (comma-separated;
    empty: :data:`DEFAULT_ALLOWED_HOSTS`) plus ``[app] host`` when it names one address."""
    names = [part.strip().lower().rstrip(".") for part in str(configured or "").split(",") if part.strip()]
    names = names or list(DEFAULT_ALLOWED_HOSTS)
    if host and host.strip() not in _ANY_ADDRESS:
        names.append(host.strip().lower().strip("[]").rstrip("."))
    return list(dict.fromkeys(names))


def host_allowed(header: str | None, allowed: list[str] | tuple[str, ...]) -> bool:
    """Whether a request's ``Host`` header (a name or address, with an optional port) names
    one of ``allowed`` (a leading ``*.`` allows subdomains); a missing or malformed header never
    matches."""

    if not header:
        return False
    try:
        parts = urlsplit(f"//{header.strip()}")
        _ = parts.port  # a port that is not a number is malformed
    except ValueError:
        return False
    name = parts.hostname
    if not name or parts.username is not None or parts.password is not None or parts.path or parts.query:
        return False
    name = name.lower().rstrip(".")
    for pattern in allowed:
        pattern = str(pattern).strip().lower().rstrip(".")
        if pattern == name or (pattern.startswith("*.") and name.endswith(pattern[1:])):
            return True
    return False


def data_folders(data_dirs: str, base: Path | None = None) -> list[Path]:
    """The folders ``[app] data_dirs`` names (comma-separated; relative to ``base``, default the
    working directory), symlinks resolved."""
    base = Path.cwd() if base is None else base
    return [(base / part.strip()).resolve() for part in str(data_dirs).split(",") if part.strip()]


def check_data_path(path: str | Path, data_dirs: str, base: Path | None = None) -> Path:
    """The resolved ``path`` when it lies inside one of the data folders; else
    :class:`PermissionDenied`. Symlinks and ``..`` are resolved first, so a link inside a data
    folder that points outside it is refused too."""
    folders = data_folders(data_dirs, base)
    given = Path(path).expanduser()
    resolved = ((Path.cwd() if base is None else base) / given).resolve()
    if not any(resolved == folder or resolved.is_relative_to(folder) for folder in folders):
        # The allowed folders are not listed: the page must not map the server's file system.
        raise PermissionDenied(f"{path} is outside the folders this app may import from; put the file in "
                               f"the project's data folder, or upload it")
    return resolved


# ---- password hashes -------------------------------------------------------------------------

_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


def _b64(data: bytes) -> str:
    return lazylibs.base64.b64encode(data).decode("ascii")


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """A salted scrypt hash of ``password`` in the stored form (see the module docstring)."""
    if not password:
        raise ConfigError("an empty password cannot be used; choose a password")
    salt = lazylibs.secrets.token_bytes(16) if salt is None else salt
    digest = lazylibs.hashlib.scrypt(password.encode("utf-8"), salt=salt, dklen=32, **_SCRYPT)
    return f"scrypt${_SCRYPT['n']}${_SCRYPT['r']}${_SCRYPT['p']}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, stored: str) -> bool:
    """Whether ``password`` matches ``stored`` (constant-time comparison); a malformed stored
    hash never matches."""
    try:
        scheme, n, r, p, salt, digest = str(stored).split("$")
        if scheme != "scrypt":
            return False
        expected = lazylibs.base64.b64decode(digest, validate=True)
        got = lazylibs.hashlib.scrypt(password.encode("utf-8"), salt=lazylibs.base64.b64decode(salt, validate=True),
                                      n=int(n), r=int(r), p=int(p), dklen=len(expected), maxmem=2**26)
    except (ValueError, TypeError):
        return False
    return lazylibs.hmac.compare_digest(got, expected)


# ---- failed sign-ins -------------------------------------------------------------------------

class SignInThrottle:
    """Slows down password guessing: after ``free`` failed sign-ins for one user name, each
    further attempt for that name must wait ``base`` seconds, doubling with every further
    failure up to ``cap`` (5 failures: wait 30 s; 6: 60 s; 7: 120 s; ... at most 15 min).

    - The name is compared stripped and case-folded, and names that do not exist are counted
      the same way, so the wait never tells whether a name exists.
    - A name's failures are forgotten after ``forget`` seconds without a failure, and at once
      after a successful sign-in.
    - During a wait the password is not even checked (no scrypt work for a guesser either).
    - One instance per server process (:data:`SIGN_IN_THROTTLE`), shared by every browser
      session, so opening a new tab does not reset the count. A restart of the app does.
    ``clock`` is injectable for tests (seconds, monotonic).
    """

    def __init__(self, *, free: int = 5, base: float = 30.0, cap: float = 900.0, forget: float = 900.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.free, self.base, self.cap, self.forget, self.clock = free, base, cap, forget, clock
        self._failures: dict[str, tuple[int, float]] = {}  # name -> (count, time of the last one)
        self._lock = threading.Lock()  # page sessions run in threads of one server process

    @staticmethod
    def _key(name: str) -> str:
        return str(name).strip().casefold()

    def _count(self, key: str, now: float) -> tuple[int, float]:
        count, last = self._failures.get(key, (0, now))
        if now - last >= self.forget:
            self._failures.pop(key, None)
            return 0, now
        return count, last

    def wait_seconds(self, name: str) -> float:
        """Seconds left before ``name`` may try again (0 when it may try now)."""
        with self._lock:
            now = self.clock()
            count, last = self._count(self._key(name), now)
            if count < self.free:
                return 0.0
            wait = min(self.cap, self.base * 2 ** (count - self.free))
            return max(0.0, last + wait - now)

    def attempt(self, name: str) -> float:
        """Check and count one sign-in attempt in one step (atomic, so that simultaneous
        attempts cannot all pass the check before any failure is counted): 0 when the password
        may be checked now (the attempt is counted as a failure until :meth:`succeeded`), else
        the seconds left to wait (nothing counted, the password must not be checked)."""
        with self._lock:
            now = self.clock()
            key = self._key(name)
            count, last = self._count(key, now)
            if count >= self.free:
                wait = max(0.0, last + min(self.cap, self.base * 2 ** (count - self.free)) - now)
                if wait > 0:
                    return wait
            self._failures[key] = (count + 1, now)
            return 0.0

    def failed(self, name: str) -> None:
        with self._lock:
            now = self.clock()
            key = self._key(name)
            count, _ = self._count(key, now)
            self._failures[key] = (count + 1, now)

    def succeeded(self, name: str) -> None:
        with self._lock:
            self._failures.pop(self._key(name), None)

    def reset(self) -> None:
        with self._lock:
            self._failures.clear()


#: The app's throttle (one per server process).
SIGN_IN_THROTTLE = SignInThrottle()


def check_user_name(name: str) -> str:
    """``name`` when it can be a user name in ``secrets.toml`` (and typed in the sign-in form);
    else :class:`ConfigError` in one line. Refused: an empty name, spaces at either end (the
    form strips them), control characters, quotes and backslashes."""
    if not name or not name.strip():
        raise ConfigError("a user name cannot be empty; choose a name such as john.doe")
    if name != name.strip():
        raise ConfigError(f"the user name {name!r} starts or ends with a space; the sign-in form drops those, "
                          f"so remove them")
    bad = sorted({c for c in name if not c.isprintable() or c in '"\\'})
    if bad:
        raise ConfigError(f"the user name {name!r} holds {', '.join(map(repr, bad))}, which a user name "
                          f"cannot hold; use letters, digits, spaces and . _ - @")
    return name


def secrets_entry(name: str, role: str, hashed: str) -> str:
    """The ``[auth.users.<name>]`` table for ``secrets.toml`` (the name quoted unless it is a bare
    TOML key, so a dot or a space stays part of it); checks the name and the role first."""
    check_user_name(name)
    if role not in ROLES:
        raise ConfigError(f"unknown role {role!r}; use one of {', '.join(ROLES)}")

    key = name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else f'"{name}"'  # a bare TOML key, else quoted
    return f'[auth.users.{key}]\nrole = "{role}"\nhash = "{hashed}"'


def main(argv: list[str] | None = None) -> int:
    """``python -m workbench.services.access [NAME [ROLE]]``: read a password twice without echo
    and print the secrets entry to paste into ``.streamlit/secrets.toml``."""

    args = sys.argv[1:] if argv is None else argv
    name = args[0] if args else "name"
    role = args[1] if len(args) > 1 else "annotator"
    if role not in ROLES:
        print(f"unknown role {role!r}; use one of {', '.join(ROLES)}", file=sys.stderr)
        return 2
    try:
        check_user_name(name)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    first = lazylibs.getpass.getpass("Password: ")
    if first != lazylibs.getpass.getpass("Again: "):
        print("the two passwords differ; nothing printed", file=sys.stderr)
        return 2
    try:
        hashed = hash_password(first)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    print(secrets_entry(name, role, hashed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
