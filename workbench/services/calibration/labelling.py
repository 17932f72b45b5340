"""One SME's labelling of a calibration sample: who is labelling, what is next, and each action.

- :func:`annotator_id`, :func:`checked_annotator`: the annotator's identity and whether the
  caller may act or read as them (:mod:`workbench.services.access`).
- :func:`next_item`, :func:`item`, :func:`my_state`, :func:`my_states`, :func:`progress`,
  :func:`progress_of`, :func:`throughput`, :func:`latest_sample`, :func:`query_places`: what the
  annotator sees.
- :func:`save_label`, :func:`save_labels`, :func:`skip`, :func:`cant_judge`, :func:`undo`,
  :func:`store_accepted`: each action is one transaction (:func:`record_action`), stored at once.
  A label is written to ``judgments`` (source ``human``, the SME as assessor) and to
  ``label_events`` (time on task, comment, evidence spans, whether the judge's output was shown
  after submitting, and the SHA-256 of the sample's labelling guidelines in force:
  :mod:`workbench.services.calibration.guidelines`).
- :func:`judge_output`: nothing here returns the judge's grade or reason before the SME labelled
  the item; it refuses until then.
"""

from __future__ import annotations

import json

import pandas as pd

from workbench.core.calibration.query_place import query_places as places
from workbench.core.calibration.routing import annotator_identity
from workbench.errors import InputError
from workbench.services import access, lazy, visibility
from workbench.services.calibration import pending, routing
from workbench.services.calibration.pending import checked_guidelines
from workbench.services.calibration.reference import ADJUDICATION
from workbench.store import calibration as store
from workbench.store import calibration_routing as routes
from workbench.store.database import Database

GRADES = (0, 1, 2, 3)
ACTIONS = ("label", "skip", "cant_judge")
#: ``record_action(guidelines=IN_FORCE)``: record the sample's guidelines in force as the
#: storing transaction sees them (the default for an answer given now).
IN_FORCE = "in force"


def _guidelines_in_force(cur, sample: str) -> str | None:
    """The SHA-256 of ``sample``'s guidelines as ``cur`` sees them (None: it has none)."""

    record = routes.read_guidelines(cur, sample)
    return None if record is None else record["sha256"]


def annotator_id(annotator: str) -> str:
    """The identity of an annotator id as typed: trimmed and case-folded, so ``"SME-Anna "`` and
    ``"sme-anna"`` are one person (labels, progress and agreement are kept under this form; the
    page shows what was typed, trimmed)."""

    return annotator_identity(annotator)


def checked_annotator(annotator: str, action: str | None = None) -> str:
    """The checked annotator id (:func:`annotator_id`). ``action``: the permission the call needs
    (:mod:`workbench.services.access`); an annotator acts and reads only as themselves, a lead or
    viewer may read anyone's labels (``None``: a read)."""
    if not isinstance(annotator, str) or not annotator.strip():
        raise InputError("labels need an annotator id; enter yours first")
    identity = annotator_id(annotator)
    if identity == ADJUDICATION:
        raise InputError(f"{ADJUDICATION!r} is reserved for resolved labels; choose another annotator id")
    actor = access.require(action) if action else access.current_actor()
    # The local operator (CLI, scripts) may act for anyone; a signed-in person only as themselves.
    if actor is not access.LOCAL_OPERATOR and annotator_id(actor.name) != identity and (
            action == "label" or not access.allowed(actor, "see_all_labels")):
        raise access.PermissionDenied(f"{actor.name} ({actor.role}) may only give and see their own labels, "
                                      f"not {annotator.strip()}'s")
    return identity


def latest_sample(db: Database, annotator: str) -> str | None:
    """The sample the annotator last labelled in (None when they have not labelled yet, or that
    sample is gone): the Label page opens on it rather than on the newest sample."""
    name = store.latest_sample_of(db, checked_annotator(annotator))
    return name if name is not None and store.read_sample(db, name) is not None else None


def throughput(db: Database, sample: str, annotator: str | None = None) -> list[dict]:
    """Per annotator of ``sample``: ``labels``, ``answers`` (labels, skips, can't judge),
    ``hours`` of time on task (the seconds each pair was on screen before its answer, summed) and
    ``labels_per_hour`` (labels / hours; None before any timed answer). ``annotator``: only that
    one (their own pace); every annotator's needs the right to see all labels."""
    who = checked_annotator(annotator) if annotator is not None else None
    if who is None:
        access.require("see_all_labels")
    out = []
    for row in store.time_on_task(db, sample).itertuples(index=False):
        if who is not None and row.annotator != who:
            continue
        hours = float(row.seconds) / 3600.0
        out.append({"annotator": str(row.annotator), "labels": int(row.labels), "answers": int(row.answers),
                    "hours": hours, "labels_per_hour": (int(row.labels) / hours) if hours > 0 else None})
    return out


def next_item(db: Database, sample: str, annotator: str, *, after: int = -1,
              overlap: int | None = None) -> dict | None:
    """The next item the annotator has not labelled (skipped ones come back last), or None.
    ``overlap = k``: only items fewer than ``k`` other SMEs have answered (0 or None: all)."""
    if overlap is not None and overlap < 0:
        raise InputError(f"the overlap must be 0 (every SME labels every pair) or more, got {overlap}")

    who = checked_annotator(annotator)
    mine = routing.assigned_to(db, sample, who)
    if mine is not None:  # the lead's assignment decides who labels which pair (overlap included)

        total = store.count_items(db, sample)
        found = lazy.core_calibration_label_order.open_in_order(total, {p: s["action"] for p, s in my_states(db, sample, who).items()},
                                                                after=after, full=set(range(total)) - mine)
        return item(db, sample, found[0]) if found else None
    position = store.next_open_position(db, sample, who, after=after, overlap=overlap or None)
    return None if position is None else item(db, sample, position)


def item(db: Database, sample: str, position: int) -> dict:
    """One item as an SME sees it, without the judge's output."""
    found = store.read_item(db, sample, position)
    if found is None:
        raise InputError(f"sample {sample!r} has no item at position {position}")
    return found


def my_state(db: Database, sample: str, annotator: str, position: int) -> dict | None:
    """The annotator's current state of one item (None when untouched or cleared)."""
    return my_states(db, sample, annotator).get(int(position))


def my_states(db: Database, sample: str, annotator: str) -> dict[int, dict]:
    """``{position: state}``: the annotator's current state of every item they answered
    (``action``, ``grade``, ``comment``, ``evidence``, ``revealed``); untouched and cleared
    (undone) items are absent. Answers the Label page kept and has not stored yet (the
    project was busy, :mod:`workbench.services.calibration.pending`) count: this annotator's
    only, applied on top in order (:func:`~workbench.services.calibration.pending.merge_states`,
    their states marked ``pending``)."""

    annotator = checked_annotator(annotator)
    states = {int(position): {"action": action, "grade": None if grade is None else int(grade), "comment": comment,
                              "evidence": None if evidence is None else json.loads(evidence),
                              "revealed": bool(revealed)}
              for position, action, grade, comment, evidence, revealed in store.answered(db, sample, annotator)}
    kept = pending.waiting(db.path, annotator=annotator, sample=sample)
    return pending.merge_states(states, kept) if kept else states


def query_places(db: Database, sample: str) -> dict | None:
    """For a query-design sample (``calibrate sample --design queries``), where each pair stands
    in its query: ``{position: QueryPlace}`` (:mod:`workbench.core.calibration.query_place`,
    ``place.words()`` is "query 3 of 12 · pair 5 of 40 of this query"); None for a pair-design
    sample. Items never change once drawn, so a caller reads it once per sample (the Label page
    does, outside its key-press path). Ids only, no grade: any role may read it."""

    info = store.read_sample(db, sample)
    if info is None:
        raise InputError(f"there is no calibration sample named {sample!r}")
    if info["spec"].get("design") != "queries":
        return None
    return places(store.item_queries(db, sample))


def progress_of(states: dict[int, dict], total: int) -> dict:
    """One annotator's progress from :func:`my_states`: ``total``, ``labelled``, ``skipped``,
    ``cant_judge`` and ``open`` (items with no answer yet; skipped ones count as answered)."""
    actions = [s["action"] for s in states.values()]
    return {"total": int(total), "labelled": actions.count("label"), "skipped": actions.count("skip"),
            "cant_judge": actions.count("cant_judge"), "open": int(total) - len(actions)}


def _check_evidence(evidence, doc_len: int | None) -> list[list[int]] | None:
    if evidence is None:
        return None
    spans = []
    for span in evidence:
        if not isinstance(span, (list, tuple)) or len(span) != 2:
            raise InputError(f"evidence span {span!r} is not [start, end]")
        s, e = int(span[0]), int(span[1])
        if s < 0 or e <= s or (doc_len is not None and e > doc_len):
            raise InputError(f"evidence span [{s}, {e}) is not inside the document (0..{doc_len})")
        spans.append([s, e])
    return spans


def record_action(db: Database, sample: str, annotator: str, position: int, action: str, *, grade=None,
                  comment=None, evidence=None, seconds=None, reveal=False, undoes=None,
                  assessor: str | None = None, check_evidence: bool = False, require_evidence: bool = False,
                  answer_id: str | None = None, guidelines: str | None = IN_FORCE) -> int:
    """Store one action in one transaction. ``check_evidence``: ``evidence`` as given, checked
    against the document's length here (one look-up by id in the same transaction, not a read
    of the whole item); ``require_evidence``: grades 2–3 refused without a span. ``answer_id``:
    the answer's unique id (the Label page's kept answers): recorded in the same transaction,
    and an id stored already stores nothing again (returns the event it made). ``guidelines``:
    the SHA-256 of the labelling guidelines the answer was given under, recorded with the event
    (:data:`IN_FORCE`: the sample's current ones, read in the storing transaction; a ``clear``
    records none)."""
    with db.transaction() as tx:
        if answer_id is not None:
            done = store.answer_event(tx, answer_id)
            if done is not None:
                return done["event_id"]
        keys = store.item_keys(tx, sample, position)
        if keys is None:
            raise InputError(f"sample {sample!r} has no item at position {position}")
        if check_evidence and evidence is not None:
            evidence = _check_evidence(evidence, store.document_length(tx, keys["doc_id"]))
        if require_evidence and grade is not None and grade >= 2 and not evidence:
            raise InputError("grades 2 and 3 need evidence: mark the sentence(s) that support the grade")
        before = store.current_state(tx, sample, annotator, position)
        if before is not None and before["judgment_id"] is not None:
            store.delete_human_judgment(tx, before["judgment_id"])
        judgment_id = None
        if action == "label":
            judgment_id = store.write_human_judgment(
                tx, **keys, grade=int(grade), assessor=assessor or annotator, reason=comment)
        if action == "clear":
            guidelines = None
        elif guidelines == IN_FORCE:
            guidelines = _guidelines_in_force(tx, sample)
        event_id = store.write_event(
            tx, sample=sample, position=position, annotator=annotator, action=action,
            grade=None if grade is None else int(grade), judgment_id=judgment_id, comment=comment,
            evidence=evidence, seconds=seconds, revealed=reveal, undoes=undoes, guidelines_sha256=guidelines)
        if answer_id is not None:
            store.write_answer_id(tx, answer_id, event_id, position)
        return event_id


def save_label(db: Database, sample: str, annotator: str, position: int, grade: int, *,
               comment: str | None = None, evidence: list | None = None, seconds: float | None = None,
               reveal: bool = False, require_evidence: bool = False) -> int:
    """Store one SME grade at once (replacing the SME's earlier label of the item).

    ``evidence``: document character spans ``[[start, end], ...]`` supporting the grade;
    ``require_evidence`` makes them mandatory for grades 2–3. ``reveal``: the judge's output
    will be shown now that the label is in (recorded with the label).
    """
    annotator = checked_annotator(annotator, "label")
    if isinstance(grade, bool) or grade not in GRADES:
        raise InputError(f"grade {grade!r} is not one of 0, 1, 2, 3")
    _check_assigned(db, sample, annotator, [position])
    # The position, the spans (bounded by the document's length) and the required evidence are
    # checked in the storing transaction: a refusal stores nothing.
    return record_action(db, sample, annotator, position, "label", grade=grade, comment=comment or None,
                         evidence=evidence, seconds=seconds, reveal=reveal, check_evidence=True,
                         require_evidence=require_evidence)


def save_labels(db: Database, sample: str, annotator: str, grades, *, seconds: float | None = None) -> list[int]:
    """:func:`save_label` of each ``{position: grade}`` in turn, all in one transaction (all or
    nothing) and a handful of statements instead of six per label: the same ``judgments`` rows
    and ``label`` events, numbered in the same order (each replacing the annotator's earlier
    label of the item), stored at one moment. For labels given elsewhere and entered at once (a
    spreadsheet of SME grades, a simulated SME); no comment, evidence or reveal. Returns the
    event ids."""
    annotator = checked_annotator(annotator, "label")
    labels = [(int(position), grade) for position, grade in grades.items()]
    for _, grade in labels:
        if isinstance(grade, bool) or grade not in GRADES:
            raise InputError(f"grade {grade!r} is not one of 0, 1, 2, 3")
    if not labels:
        return []
    positions = [p for p, _ in labels]
    _check_assigned(db, sample, annotator, positions)
    with db.transaction() as tx:
        keys = store.items_keys(tx, sample, positions)
        missing = [p for p in positions if p not in keys]
        if missing:
            raise InputError(f"sample {sample!r} has no item at position {missing[0]}")
        store.delete_human_judgments(tx, store.current_judgment_ids(tx, sample, annotator, positions))
        frame = pd.DataFrame([{**keys[p], "position": p, "grade": int(g), "seconds": seconds} for p, g in labels])
        return store.write_labels(tx, sample=sample, annotator=annotator, labels=frame,
                                  guidelines_sha256=_guidelines_in_force(tx, sample))


def _check_assigned(db: Database, sample: str, annotator: str, positions) -> None:
    """Refuse answers to pairs the lead did not assign to ``annotator``
    (:func:`workbench.services.calibration.routing.check_assigned`)."""

    routing.check_assigned(db, sample, annotator, positions)


def skip(db: Database, sample: str, annotator: str, position: int, *, seconds: float | None = None,
         comment: str | None = None) -> int:
    annotator = checked_annotator(annotator, "label")
    _check_assigned(db, sample, annotator, [position])
    return record_action(db, sample, annotator, position, "skip", seconds=seconds, comment=comment or None)


def cant_judge(db: Database, sample: str, annotator: str, position: int, *, seconds: float | None = None,
               comment: str | None = None) -> int:
    annotator = checked_annotator(annotator, "label")
    _check_assigned(db, sample, annotator, [position])
    return record_action(db, sample, annotator, position, "cant_judge", seconds=seconds, comment=comment or None)


def undo(db: Database, sample: str, annotator: str, *, answer_id: str | None = None) -> int | None:
    """Revert the annotator's latest action in the sample; returns the position it touched
    (None when there is nothing to undo). Stored as a new event: nothing is erased from history.
    ``answer_id``: as in :func:`record_action` (an undo stored already reverts nothing more)."""
    return _undo(db, sample, checked_annotator(annotator, "label"), answer_id=answer_id)


def _undo(db: Database, sample: str, annotator: str, *, answer_id: str | None = None) -> int | None:
    cur = db.cursor()
    try:
        done = store.answer_event(cur, answer_id) if answer_id is not None else None
        if done is not None:
            return done["position"]
        target = store.last_undoable_event(cur, sample, annotator)
        if target is not None:
            before = store.event_before(cur, sample, annotator, target["position"], target["event_id"])
    finally:
        cur.close()
    if target is None:
        if answer_id is not None:  # so a replay does not undo what comes after it
            with db.transaction() as tx:
                if store.answer_event(tx, answer_id) is None:
                    store.write_answer_id(tx, answer_id, None, None)
        return None
    if before is None or before["action"] == "clear":
        record_action(db, sample, annotator, target["position"], "clear", undoes=target["event_id"],
                      answer_id=answer_id)
    else:
        record_action(db, sample, annotator, target["position"], before["action"], grade=before["grade"],
                      comment=before["comment"], evidence=before["evidence"], seconds=before["seconds"],
                      reveal=before["revealed"], undoes=target["event_id"], answer_id=answer_id,
                      guidelines=before.get("guidelines_sha256"))  # the restored answer's own version
    return target["position"]


def store_accepted(db: Database, answer: dict) -> int | None:
    """Store one answer the Label page accepted and kept
    (:mod:`workbench.services.calibration.pending`), exactly once: its ``id`` is stored with it
    and an id stored already stores nothing again. Who may label was checked when it was
    accepted (in the page session of its annotator), so any drain stores it; what only the
    project can check (the pair exists, the evidence lies inside the document) is checked here
    and refused with :class:`InputError`. Returns the pair the answer touched (an undo's, None
    when there was nothing to undo)."""
    annotator = annotator_id(answer.get("annotator"))
    if not annotator or annotator == ADJUDICATION:
        raise InputError(f"answer {answer.get('id')} has no annotator id it may be stored under")
    sample, action, answer_id = answer["sample"], answer["action"], answer["id"]
    # the guidelines the card showed when the answer was given (kept with it); an answer kept
    # by an older version has none recorded: those in force now

    shown = checked_guidelines(answer["guidelines_sha256"]) if "guidelines_sha256" in answer else IN_FORCE
    if action == "undo":
        return _undo(db, sample, annotator, answer_id=answer_id)
    position = int(answer["position"])
    if action in ACTIONS:
        _check_assigned(db, sample, annotator, [position])  # refused for good: told on the page
    if action == "label":
        grade = answer.get("grade")
        if isinstance(grade, bool) or grade not in GRADES:
            raise InputError(f"grade {grade!r} is not one of 0, 1, 2, 3")
        record_action(db, sample, annotator, position, "label", grade=grade, comment=answer.get("comment") or None,
                      evidence=answer.get("evidence"), seconds=answer.get("seconds"), reveal=bool(answer.get("reveal")),
                      check_evidence=True, require_evidence=True, answer_id=answer_id, guidelines=shown)
    elif action in ("skip", "cant_judge"):
        record_action(db, sample, annotator, position, action, seconds=answer.get("seconds"),
                      comment=answer.get("comment") or None, answer_id=answer_id, guidelines=shown)
    else:
        raise InputError(f"unknown labelling action {action!r}")
    return position


def judge_output(db: Database, sample: str, annotator: str, position: int) -> dict:
    """The judge's grade and reason for an item, only once this annotator labelled it; never to a
    signed-in annotator (:mod:`workbench.services.visibility`: they label blind)."""

    visibility.require_read("judge_output")
    state = my_state(db, sample, annotator, position)
    if state is None or state["action"] != "label":
        raise InputError("the judge's label is shown only after you submit yours")
    return store.read_judge_output(db, sample, position) or {}



def progress(db: Database, sample: str, annotator: str) -> dict:
    states = store.current_states(db, sample, checked_annotator(annotator))
    counts = states["action"].value_counts().to_dict() if not states.empty else {}
    total = store.count_items(db, sample)
    seconds = states.loc[states["action"] != "clear", "seconds"].dropna()
    return {"total": total, "labelled": int(counts.get("label", 0)), "skipped": int(counts.get("skip", 0)),
            "cant_judge": int(counts.get("cant_judge", 0)),
            "open": total - int(sum(v for k, v in counts.items() if k != "clear")),
            "median_seconds": float(seconds.median()) if len(seconds) else None}
