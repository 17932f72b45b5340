"""Labelling guidelines, versioned with the calibration sample they are given for.

The lead writes the guidelines as a Markdown file (``workbench calibrate guidelines FILE``, or
the file named by ``[calibration] guidelines``; the Calibration page takes an upload). The text
is stored in the project with the sample (``project_meta``, :mod:`workbench.store.calibration_routing`),
with its SHA-256, the file it came from, who set it and when; setting new guidelines keeps the
earlier versions' hashes and times in ``history`` (versions are numbered 1, 2, ... in the order
they were set, :func:`versions`). Every label event records the SHA-256 of the guidelines in
force when it was given (``label_events.guidelines_sha256``), so which version each label was
given under is known: :func:`labelled_under` counts them, and where the guidelines changed
mid-sample ``calibrate routing`` and the adjudication view say "labelled under guidelines v<n>". The Label page shows them to SMEs in a panel on the card (rendered from
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


# -- which guidelines the labels were given under ------------------------------------------------

def versions(record: dict | None) -> list[dict]:
    """The versions of a sample's guidelines, oldest first: ``{"version": n, "sha256", "set_at"}``
    with ``n = 1 .. len(history) + 1`` (the current one last). None: no version."""
    if record is None:
        return []
    past = [{"sha256": h["sha256"], "set_at": h.get("set_at")} for h in record.get("history", [])]
    return [{"version": i + 1, **v} for i, v in enumerate([*past, {"sha256": record["sha256"],
                                                                  "set_at": record.get("set_at")}])]


def version_of(record: dict | None, sha256: str | None) -> int | None:
    """The version number of the guidelines with hash ``sha256`` (None for None or a hash the
    sample's versions do not hold). A text set again after another one (A, B, A) has two numbers;
    a label under it is credited to the latest (the hash alone cannot tell them apart)."""
    found = [v["version"] for v in versions(record) if sha256 is not None and v["sha256"] == sha256]
    return found[-1] if found else None


def version_words(record: dict | None, sha256: str | None) -> str:
    """``"v2"``, ``"no guidelines"`` (None) or ``"an unknown version 1a2b3c4d5e6f"``."""
    if sha256 is None:
        return "no guidelines"
    n = version_of(record, sha256)
    return f"v{n}" if n is not None else f"an unknown version {sha256[:12]}"


def labelled_under(db: Database, sample: str) -> dict:
    """Which guidelines the current labels of ``sample`` were given under (each label event
    records the SHA-256 in force, :mod:`workbench.services.calibration.labelling`):

    - ``versions``: :func:`versions` of the sample's guidelines;
    - ``by_version``: per hash, oldest first: ``version`` (None: no guidelines, or an unknown
      hash), ``words`` (:func:`version_words`), ``sha256``, ``labels`` and ``annotators``
      (``{annotator: labels}``), adjudicated labels included;
    - ``changed``: the labels were given under more than one version (no guidelines counting as
      one): the guidelines changed mid-sample, and each label's version is worth showing.

    Counts only, no grade; leads and viewers (it tells about others' labels)."""
    access.require("see_all_labels")
    record = routes.read_guidelines(db, sample)
    groups: dict[str | None, dict] = {}
    for annotator, sha, labels, first, _last in store.label_guidelines(db, sample):
        g = groups.setdefault(sha, {"version": version_of(record, sha), "words": version_words(record, sha),
                                    "sha256": sha, "labels": 0, "annotators": {}, "first": first})
        g["labels"] += labels
        g["annotators"][annotator] = labels
        g["first"] = min(g["first"], first)
    ordered = sorted(groups.values(), key=lambda g: (g["version"] is not None, g["version"] or 0, str(g["first"])))
    return {"versions": versions(record), "by_version": [{k: v for k, v in g.items() if k != "first"} for g in ordered],
            "changed": len(groups) > 1}
