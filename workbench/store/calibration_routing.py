"""The lead's routing of calibration work, kept in ``project_meta`` (no table of its own):

- ``calibration_active_sample``: the sample SMEs open by default on the Label page;
- ``calibration_routing:<sample>``: the sample's assignment as JSON (annotators, overlap, labels
  per annotator, seed, ``assigned``: ``{annotator: [positions]}``, who set it and when);
- ``calibration_guidelines:<sample>``: the labelling guidelines as JSON (Markdown ``text``, its
  ``sha256``, the file it came from, who set it and when, and ``history``: the earlier
  versions' hashes and times), so they are versioned with the sample they were given for.

Reads take a :class:`~workbench.store.database.Database` or a cursor (a check inside a storing
transaction reads what that transaction sees).
"""

from __future__ import annotations

import json

from workbench.store.database import Cursor, Database

ACTIVE_KEY = "calibration_active_sample"
ROUTING_PREFIX = "calibration_routing:"
GUIDELINES_PREFIX = "calibration_guidelines:"


def _value(db_or_cur, key: str) -> str | None:
    if isinstance(db_or_cur, Database):
        rows = db_or_cur.query_all("SELECT value FROM project_meta WHERE key = ?", [key])
    else:
        rows = db_or_cur.execute("SELECT value FROM project_meta WHERE key = ?", [key]).fetchall()
    return rows[0][0] if rows else None


def _put(cur: Cursor, key: str, value: str | None) -> None:
    cur.execute("DELETE FROM project_meta WHERE key = ?", [key])
    if value is not None:
        cur.execute("INSERT INTO project_meta (key, value) VALUES (?, ?)", [key, value])


def read_active(db_or_cur) -> str | None:
    return _value(db_or_cur, ACTIVE_KEY)


def write_active(cur: Cursor, sample: str | None) -> None:
    _put(cur, ACTIVE_KEY, sample)


def read_routing(db_or_cur, sample: str) -> dict | None:
    raw = _value(db_or_cur, ROUTING_PREFIX + sample)
    return None if raw is None else json.loads(raw)


def write_routing(cur: Cursor, sample: str, routing: dict | None) -> None:
    _put(cur, ROUTING_PREFIX + sample, None if routing is None else json.dumps(routing))


def read_guidelines(db_or_cur, sample: str) -> dict | None:
    raw = _value(db_or_cur, GUIDELINES_PREFIX + sample)
    return None if raw is None else json.loads(raw)


def write_guidelines(cur: Cursor, sample: str, guidelines: dict | None) -> None:
    _put(cur, GUIDELINES_PREFIX + sample, None if guidelines is None else json.dumps(guidelines))


def known_annotators(db: Database) -> set[str]:
    """Every annotator id with a label event in some sample, and every id some sample's
    assignment names (adjudication left out)."""
    known = {str(r[0]) for r in db.query_all(
        "SELECT DISTINCT annotator FROM label_events WHERE annotator <> 'adjudication'")}
    for (raw,) in db.query_all("SELECT value FROM project_meta WHERE starts_with(key, ?)", [ROUTING_PREFIX]):
        known.update(json.loads(raw).get("annotators", []))
    return known
