"""The Label page: one read per key press, and answers kept on disk while the project is busy.

- :func:`open_for_labelling`: the project, opened for one unit of page work (draining the kept
  answers, :mod:`workbench.services.calibration.pending`).
- :func:`keep_answer`, :func:`drain_kept`, :func:`drain_in_background`, :func:`stored_answer`:
  the page's write-ahead answers and their storing, each exactly once.
- :func:`labelling_view`: everything the page shows for a pair and the pairs after it, in a
  handful of reads.

Functions named here without a module (:func:`next_item`, :func:`item`, :func:`my_states`,
:func:`progress_of`, :func:`save_label`, :func:`store_accepted`) are in
:mod:`workbench.services.calibration.labelling`.
"""

from __future__ import annotations

from pathlib import Path

from workbench.core.calibration.label_order import open_in_order
from workbench.errors import InputError, StoreError
from workbench.services.calibration import pending, routing
from workbench.services.calibration.labelling import IN_FORCE, checked_annotator, my_states, progress_of, store_accepted
from workbench.store import calibration as store
from workbench.store.database import WRITER_WAIT, Database


def open_for_labelling(path: str | Path, *, wait: float | None = None, migrate: bool = False) -> Database:
    """The project, opened for one unit of Label page work and closed by the caller at its end.

    The page never keeps the file open between key presses: DuckDB lets one process write a
    file at a time, and the judge job and CLI commands in other processes must get it between
    two presses. It waits (with backoff, up to ``wait`` seconds; ``None``: the store's
    ``WRITER_WAIT``) while another process holds the file, so a judge job writing a batch
    delays an SME's label by a moment instead of refusing it. ``migrate``: apply pending migrations (the page's first open does; the key
    presses after it need not, and open the file as a visit: attached to the process's DuckDB
    instance for the press and detached after it, see :mod:`workbench.store.database`, so the
    lock is held as before without starting a DuckDB instance per press). A missing project is
    an error, never created.

    Opening drains the answers the Label page kept while the project was busy
    (:func:`workbench.services.calibration.pending.drain`, each stored exactly once); one that
    cannot be stored now stays kept for the next open."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"no project database at {path}; create one with {{command}}", command=f"--db {path} init")
    db = Database(path, migrate=migrate, wait=WRITER_WAIT if wait is None else max(0.0, float(wait)),
                  visit=not migrate)
    drain_kept(db)
    return db


def drain_kept(db: Database, *, annotator: str | None = None) -> list[dict]:
    """Store the answers the Label page kept for ``db``'s project (:func:`store_accepted` each,
    in order; only ``annotator``'s when given): :func:`workbench.services.calibration.pending.drain`."""

    return pending.drain(db, lambda answer: store_accepted(db, answer), annotator=annotator)


def keep_answer(path: str | Path, *, sample: str, annotator: str, action: str, position: int | None = None,
                grade: int | None = None, evidence=None, comment: str | None = None, seconds: float | None = None,
                reveal: bool = False, answer_id: str | None = None, guidelines_sha256: str | None = IN_FORCE) -> dict:
    """Keep one Label page answer on disk next to the project until it can be stored
    (:func:`workbench.services.calibration.pending.keep`), checked first: the caller may label as
    ``annotator`` (as :func:`save_label` requires) and the answer is well formed. Returns the
    kept answer (its ``id``). ``action``: ``label``, ``skip``, ``cant_judge`` or ``undo``.
    ``answer_id``: the id the browser gave the answer (an answer sent again is stored once).
    ``guidelines_sha256``: the guidelines version the card showed (None: none), recorded with
    the answer; left out: those in force when it is stored."""

    return pending.keep(path, sample=sample, annotator=checked_annotator(annotator, "label"), action=action,
                        position=position, grade=grade, evidence=evidence, comment=comment, seconds=seconds,
                        reveal=reveal, answer_id=answer_id, guidelines_sha256=guidelines_sha256)


def stored_answer(db: Database, answer_id: str) -> dict | None:
    """The stored answer with id ``answer_id`` (``{"event_id", "position"}``, both None for an
    undo that found nothing to undo), None when it is not stored."""
    cur = db.cursor()
    try:
        return store.answer_event(cur, answer_id)
    finally:
        cur.close()


def drain_in_background(path: str | Path, *, wait: float = 5.0, every: float | None = None) -> None:
    """Have a background thread of this process store the kept answers of the project at
    ``path`` as soon as it is free (:func:`workbench.services.calibration.pending.kick`; each
    attempt opens it for labelling, waiting up to ``wait`` seconds, which drains)."""

    def attempt(project: Path) -> None:
        open_for_labelling(project, wait=wait).close()

    pending.kick(path, attempt, **({} if every is None else {"every": every}))


def labelling_view(db: Database, sample: str, annotator: str, *, position: int | None = None,
                   after: int | None = None, overlap: int | None = None, have=(), depth: int = 2) -> dict:
    """What the Label page needs to show ``position`` and answer the next key press without
    another read, in one go:

    - ``position``: the pair to show (``None`` given: the first pair the annotator has not
      answered after ``after``, as :func:`next_item` picks it; ``None`` returned: every pair is
      answered);
    - ``next``: the pair that comes after ``position`` once it is answered (the page moves
      there at the key press; the pair on screen itself is never ``next``, so ``None`` means
      it is the last open pair; after a skip, the skipped pair itself comes back);
    - ``ahead``: the ``depth`` pairs that come after ``position`` when each is answered in
      turn, as far as can be told now (``next`` is the first, ``then`` the second); the browser
      holds them, so the key presses after this one draw their pair at once;
    - ``items``: the items at ``position``, those ``ahead`` and the two neighbours (previous / next
      buttons) that are not in ``have`` (positions the caller holds already; items never
      change once drawn), as :func:`item` gives them, without the judge's output;
    - ``states``, ``total``, ``progress``: :func:`my_states`, the sample's size, :func:`progress_of`.

    ``overlap``: as in :func:`next_item`. When the lead assigned the sample's pairs
    (:mod:`workbench.services.calibration.routing`), only the annotator's assigned pairs are
    served (``overlap`` is the assignment's then; a ``position`` not theirs is replaced by their
    first open pair), ``assigned`` lists them (None without an assignment) and ``progress``
    counts them only.

    Three small reads (the annotator's answers, the sample's size, the items not held; a fourth,
    the pairs others filled, only with an overlap): the queue order is worked out from the
    answers (:func:`workbench.core.calibration.label_order.open_in_order`, the order of
    :func:`next_item`), not queried again per pair."""

    if overlap is not None and overlap < 0:
        raise InputError(f"the overlap must be 0 (every SME labels every pair) or more, got {overlap}")
    annotator = checked_annotator(annotator)
    states = my_states(db, sample, annotator)
    total = store.count_items(db, sample)
    actions = {p: s["action"] for p, s in states.items()}

    mine = routing.assigned_to(db, sample, annotator)
    if mine is not None:
        full = set(range(total)) - mine
        if position is not None and int(position) not in mine:
            position = None  # not theirs (another id's pair, say): their first open pair instead
    else:
        full = store.filled_by_others(db, sample, annotator, overlap) if overlap else ()
    if position is None:
        first = open_in_order(total, actions, after=-1 if after is None else int(after), full=full)
        position = first[0] if first else None
    elif not 0 <= int(position) < total:
        raise InputError(f"sample {sample!r} has no item at position {position}")
    following, ahead = None, []
    if position is not None:
        position = int(position)
        ahead = open_in_order(total, actions, after=position, besides=position, full=full, limit=max(1, int(depth)))
        following = ahead[0] if ahead else None
    held = {int(p) for p in have}
    wanted = {p for p in (position, *ahead, None if position is None else position - 1,
                          None if position is None else position + 1)
              if p is not None and 0 <= p < total and p not in held}
    done = progress_of(states, total) if mine is None else progress_of(
        {p: s for p, s in states.items() if p in mine}, len(mine))
    return {"total": total, "states": states, "progress": done, "position": position,
            "assigned": None if mine is None else sorted(mine),
            "next": following, "then": ahead[1] if len(ahead) > 1 else None, "ahead": ahead,
            "items": store.read_items(db, sample, wanted)}
