"""The lead routes the calibration work: the active sample and who labels which pair.

- :func:`set_active` / :func:`active_sample`: the sample SMEs open by default on the Label page
  (``workbench calibrate activate SAMPLE``, the Calibration page). Leads only.
- :func:`assign`: per sample, which annotators label it, how many pairs each at most and how
  many annotators per pair (the overlap); the pairs are handed out by
  :func:`workbench.core.calibration.routing.assign` in a seeded random order (the seed is
  stored with the assignment). Leads only. A sample with an assignment is served to each SME as
  their own pairs only (:func:`assigned_to`, used by the Label page's queue), and the services
  refuse an answer to a pair not assigned to its annotator (:func:`check_assigned`, an
  :class:`~workbench.errors.InputError`: a kept Label page answer is refused for good and told).
  Without an assignment every SME may label every pair, as before (``[calibration] overlap``).
  Re-assigning replaces the assignment; labels given already stay. A query-design sample is
  assigned by whole queries: all pairs of a query go to the same annotators.
- :func:`is_new_annotator`: an id that has no label anywhere and that no assignment names;
  :func:`needs_confirmation`: such an id while the project knows other annotators: the Label
  page asks to confirm before labelling under it (a mistyped id silently starts a new
  annotator otherwise).

Blind rules are untouched: an assignment holds ids and positions, no grade.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

import numpy as np

from workbench.core.calibration import routing as core_routing
from workbench.errors import InputError
from workbench.services import access
from workbench.services.calibration.reference import ADJUDICATION
from workbench.store import calibration as store
from workbench.store import calibration_routing as routes
from workbench.store.database import Database


def _id(name: str) -> str:
    return core_routing.annotator_identity(name)


def _existing(db: Database, sample: str) -> dict:
    info = store.read_sample(db, sample) if isinstance(sample, str) and sample else None
    if info is None:
        raise InputError(f"there is no calibration sample named {sample!r}; check the name (the Calibration "
                         f"page lists the samples) or draw one with {{command}}", command="calibrate sample --pool POOL")
    return info


# -- the active sample ---------------------------------------------------------------------------

def set_active(db: Database, sample: str | None) -> str | None:
    """Make ``sample`` the one SMEs open by default (None: no active sample). Leads only."""
    access.require("sample")
    if sample is not None:
        _existing(db, sample)
    with db.transaction() as tx:
        routes.write_active(tx, sample)
    return sample


def active_sample(db: Database) -> str | None:
    """The active sample (None when none is set or it is gone). Any role may read it."""
    name = routes.read_active(db)
    return name if name is not None and store.read_sample(db, name) is not None else None


# -- assignments ---------------------------------------------------------------------------------

def assign(db: Database, sample: str, annotators: Sequence[str], *, overlap: int = 1,
           per_annotator: int | None = None, seed: int = 0, lead: str | None = None) -> dict:
    """Assign the pairs of ``sample`` to ``annotators`` (ids as typed: trimmed and case-folded,
    as labels keep them), ``overlap`` annotators per pair, at most ``per_annotator`` pairs each
    (None: as many as the overlap needs). The order the pairs are handed out in is a permutation
    drawn with ``seed``. A query-design sample (``calibrate sample --design queries``) is handed
    out by whole queries (:func:`workbench.core.calibration.routing.assign_queries`: every pair
    of a query to the same ``overlap`` annotators, the queries in a seeded order); its record adds
    ``unit = "queries"``, ``queries_covered``, ``queries_total`` and ``assigned_queries``
    (``{annotator: [query_id]}``). Replaces an earlier assignment of the sample. Returns the stored
    assignment with ``covered`` (pairs with their ``overlap`` annotators) and ``total``."""
    actor = access.require("sample")
    info = _existing(db, sample)
    ids = []
    for name in annotators:
        if not isinstance(name, str) or not name.strip():
            raise InputError("an annotator id is empty; list ids separated by commas, e.g. {field:annotators ann,bob}")
        ids.append(_id(name))

    if ADJUDICATION in ids:
        raise InputError(f"{ADJUDICATION!r} is reserved for resolved labels; it cannot be assigned pairs")
    by_query = (info.get("spec") or {}).get("design") == "queries"
    if by_query:  # whole queries per SME: every pair of a query to the same annotators
        groups: dict[str, list[int]] = {}
        for position, query_id in store.item_queries(db, info["name"]):
            groups.setdefault(query_id, []).append(position)
        order = np.random.default_rng(int(seed)).permutation(len(groups)).tolist()
        plan = core_routing.assign_queries(list(groups.values()), ids, overlap=int(overlap),
                                           per_annotator=per_annotator, order=order)
        names = list(groups)
        extra = {"unit": "queries", "queries_covered": plan.queries_covered, "queries_total": plan.queries_total,
                 "assigned_queries": {a: [names[q] for q in qs] for a, qs in plan.queries.items()}}
    else:
        total = store.count_items(db, info["name"])
        order = np.random.default_rng(int(seed)).permutation(total).tolist()
        plan = core_routing.assign(total, ids, overlap=int(overlap), per_annotator=per_annotator, order=order)
        extra = {"unit": "pairs"}
    record = {"annotators": ids, "overlap": plan.overlap, "per_annotator": plan.per_annotator, "seed": int(seed),
              "covered": plan.covered, "total": plan.total, **extra, "assigned": plan.positions,
              "set_by": lead or actor.name, "set_at": datetime.now(UTC).isoformat(timespec="seconds")}
    with db.transaction() as tx:
        routes.write_routing(tx, info["name"], record)
    return {"sample": info["name"], **record}


def clear_assignment(db: Database, sample: str) -> None:
    """Drop the sample's assignment: every SME may label every pair again. Leads only."""
    access.require("sample")
    _existing(db, sample)
    with db.transaction() as tx:
        routes.write_routing(tx, sample, None)


def assignment(db: Database, sample: str) -> dict | None:
    """The sample's assignment as stored (None without one). Ids and positions, no grade."""
    return routes.read_routing(db, sample)


def assigned_to(db_or_cur, sample: str, annotator: str) -> frozenset[int] | None:
    """The positions of ``sample`` assigned to ``annotator`` (an empty set when the sample's
    assignment leaves them out); None when the sample has no assignment (every pair is open to
    everyone)."""
    record = routes.read_routing(db_or_cur, sample)
    if record is None:
        return None
    return frozenset(int(p) for p in record["assigned"].get(_id(annotator), []))


def check_assigned(db_or_cur, sample: str, annotator: str, positions: Iterable[int]) -> None:
    """Refuse (:class:`InputError`) an answer of ``annotator`` to a pair of ``sample`` the lead
    did not assign to them; nothing to check when the sample has no assignment."""
    mine = assigned_to(db_or_cur, sample, annotator)
    if mine is None:
        return
    for position in positions:
        if int(position) not in mine:
            who = _id(annotator)
            raise InputError(
                f"pair {int(position) + 1} of sample {sample!r} is not assigned to {who}"
                + (f" ({who} has {len(mine)} pairs of it)" if mine else " (no pair of it is assigned to them)")
                + "; the lead assigns pairs on the Calibration page")


def progress(db: Database, sample: str) -> list[dict]:
    """Per assigned annotator of ``sample``: ``assigned`` pairs, ``answered`` (labelled or can't
    judge) and ``open``. Counts only, no grade; leads and viewers (it tells about others)."""
    access.require("see_all_labels")
    record = routes.read_routing(db, sample)
    if record is None:
        return []
    states = store.current_states(db, sample)
    done = states[states["action"].isin(["label", "cant_judge"])]
    out = []
    for name in record["annotators"]:
        mine = set(record["assigned"].get(name, []))
        answered = int(done[(done["annotator"] == name) & done["position"].isin(mine)].shape[0])
        out.append({"annotator": name, "assigned": len(mine), "answered": answered, "open": len(mine) - answered})
    return out


# -- annotator ids -------------------------------------------------------------------------------

def is_new_annotator(db: Database, sample: str | None, annotator: str) -> bool:
    """Whether ``annotator`` (as typed) is an id the project has never seen: no label event in
    any sample and named by no assignment (``sample``'s included). Ids only; any role may ask."""
    who = _id(annotator)
    if not who:
        return False
    if sample is not None:
        record = routes.read_routing(db, sample)
        if record is not None and who in record["annotators"]:
            return False
    return who not in routes.known_annotators(db)


def needs_confirmation(db: Database, sample: str | None, annotator: str) -> bool:
    """Whether the Label page asks to confirm ``annotator`` before labelling under it: the id is
    new (:func:`is_new_annotator`) while the project knows other annotators (a label or an
    assignment). In a project nobody labelled yet there is no one to split labels with: the
    first id is taken as typed."""
    if not is_new_annotator(db, sample, annotator):
        return False
    return bool(routes.known_annotators(db))
