"""Labelling guidelines, versioned with the calibration sample they are given for.

The lead writes the guidelines as a Markdown file (``workbench calibrate guidelines FILE``, or
the file named by ``[calibration] guidelines``; the Calibration page takes an upload). The text
is stored in the project with the sample (``project_meta``, :mod:`workbench.store.calibration_routing`),
with its SHA-256, the file it came from, who set it and when; setting new guidelines keeps the
earlier versions' hashes and times in ``history``, so which guidelines a sample was labelled
under is known. The Label page shows them to SMEs in a panel on the card (rendered from
Markdown with raw HTML escaped, :mod:`workbench.ui.markdown_html`).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

from workbench.errors import InputError
from workbench.services import access
from workbench.store import calibration as store
from workbench.store import calibration_routing as routes
from workbench.store.database import Database

#: Guidelines longer than this are refused: a panel on the card, not a manual.
MAX_BYTES = 200_000


def read_file(path: str | Path) -> str:
    """The Markdown text of a guidelines file, checked: it exists, is a file, is UTF-8 text of
    at most :data:`MAX_BYTES` bytes and is not blank."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file; check the path of the guidelines file", path=str(p)) from None
    except IsADirectoryError:
        raise InputError("is a directory; pass a Markdown file of guidelines", path=str(p)) from None
    except OSError as exc:
        raise InputError(f"cannot be read: {exc.strerror}", path=str(p)) from None
    return check_text(data, str(p))


def check_text(data: bytes | str, where: str) -> str:
    """``data`` as guidelines text (see :func:`read_file`); ``where`` names it in refusals."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if len(data) > MAX_BYTES:
        raise InputError(f"is {len(data):,} bytes; guidelines may be at most {MAX_BYTES:,} bytes", path=where)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("is not UTF-8 text", path=where, line=data[: exc.start].count(b"\n") + 1) from None
    if not text.strip():
        raise InputError("is empty; write the guidelines in Markdown", path=where)
    return text.lstrip("\ufeff")


def set_guidelines(db: Database, sample: str, text: str, *, source: str | None = None,
                   lead: str | None = None) -> dict:
    """Store ``text`` (Markdown, checked by :func:`check_text`) as the guidelines of ``sample``;
    the version before, if any, is kept in ``history`` (hash and time). Leads only. Returns the
    stored record (``sha256``: of the UTF-8 text)."""
    actor = access.require("sample")
    if store.read_sample(db, sample) is None:
        raise InputError(f"there is no calibration sample named {sample!r}")
    text = check_text(text, source or "the guidelines")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    with db.transaction() as tx:
        before = routes.read_guidelines(tx, sample)
        history = [] if before is None else [*before.get("history", []),
                                             {"sha256": before["sha256"], "set_at": before["set_at"]}]
        if before is not None and before["sha256"] == digest:
            history = before.get("history", [])  # the same text again: no new version
        record = {"sha256": digest, "text": text, "source": source, "set_by": lead or actor.name,
                  "set_at": datetime.now(UTC).isoformat(timespec="seconds"), "history": history}
        routes.write_guidelines(tx, sample, record)
    return {"sample": sample, **record}


def guidelines(db: Database, sample: str) -> dict | None:
    """The guidelines of ``sample`` (``text``, ``sha256``, ``source``, ``set_by``, ``set_at``,
    ``history``), None when none were set. Any role may read them (SMEs label by them)."""
    return routes.read_guidelines(db, sample)
