"""The Label page's write-ahead store: every answer is on disk before the card moves on.

One process writes a DuckDB file at a time, so while an import, a judge job or a CLI command
holds the project, the Label page cannot store an answer. It must not keep the answer only in
the page session either (a reload or a closed tab would lose it). So :func:`keep` writes
each answer, with a unique id, into a folder next to the project, ``<project>.pending/``, one
file per answer (written to a hidden temporary name, ``fsync``'d, renamed into place, the
folder ``fsync``'d: a file is there whole or not at all), and the answers are *drained* into the
project (:func:`drain`) whenever it is free: by the page on its next run (every open for
labelling drains, :func:`workbench.services.calibration.label_page.open_for_labelling`), by a
background thread of the app (:func:`kick`) and by any later open for labelling in any process.

Exactly once: the answer's id is stored with it (table ``label_answers``, in the transaction
that stores the answer, :func:`workbench.services.calibration.labelling.store_accepted`), and a
stored id is never stored again, so a drain interrupted between the commit and removing the file,
or two drains racing, store each answer once. The file goes only once its answer is stored (or
refused for good: then it moves to ``refused/`` with the reason, for the page to tell its
annotator, :func:`refused`).

Order: files are named ``<sequence>-<id>.json``, the sequence the acceptance time in
nanoseconds (strictly increasing within a process), and drained in name order, so an answer, a
later answer to the same pair and an undo are applied in the order given.

Blind: :func:`waiting` and :func:`merge_states` give only the asked annotator's answers; the
page never shows another annotator's pending answers. Who may label was checked when the answer
was accepted (:func:`workbench.services.calibration.label_page.keep_answer` runs in the page
session, as the signed-in user); the drain stores what was accepted, whoever runs it.

Pure parts (no I/O): :func:`new_answer`, :func:`checked_guidelines`, :func:`encode`,
:func:`decode`, :func:`file_name`, :func:`merge_states`.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from workbench.errors import InputError, StoreError, WorkbenchError

ACTIONS = ("label", "skip", "cant_judge", "undo")
SUFFIX = ".pending"
REFUSED = "refused"
#: The fields of one pending answer (a JSON object, one per file).
FIELDS = ("id", "seq", "sample", "annotator", "action", "position", "grade", "evidence", "comment",
          "seconds", "reveal", "given_at", "guidelines_sha256")
#: ``guidelines_sha256`` not given: the answer records the guidelines in force when it is stored
#: (the key is left out of the answer).
IN_FORCE = "in force"
#: Seconds between the background drainer's attempts while answers wait.
DRAIN_EVERY = 0.5

_ANSWER_ID = re.compile(r"[0-9a-f]{32}")
_seq_lock = threading.Lock()
_last_seq = 0
_drain_locks: dict[str, threading.Lock] = {}
_drain_locks_guard = threading.Lock()
#: What drains of this process did with recent answers: ``{answer id: outcome}`` (bounded), so a
#: page learns the fate of its answers whichever thread drained them.
_OUTCOMES: OrderedDict[str, dict] = OrderedDict()
_OUTCOMES_KEPT = 5000
_drainers: dict[str, threading.Thread] = {}


# -- pure parts ------------------------------------------------------------------------------

def new_answer(*, sample: str, annotator: str, action: str, position: int | None = None, grade: int | None = None,
               evidence=None, comment: str | None = None, seconds: float | None = None, reveal: bool = False,
               answer_id: str | None = None, seq: int, given_at: float, guidelines_sha256: str | None = IN_FORCE) -> dict:
    """One answer as it is kept until stored, checked as far as can be without the project:
    ``action`` one of :data:`ACTIONS`; a position (≥ 0) for every action but ``undo``; a label's
    grade one of 0–3 (grades 2–3 with at least one evidence span ``[start, end]``, start < end);
    no grade for the others. ``answer_id``: a new random id when not given; given (the Label
    card names each answer in the browser, so an answer sent again after a reload is stored
    once), 32 lowercase hexadecimal digits, as the new ones are. ``guidelines_sha256``: the
    version of the sample's labelling guidelines the card showed when the answer was given
    (None: none were shown), recorded with the answer when it is stored; :data:`IN_FORCE`
    (not known): those in force when it is stored. Raises :class:`InputError`."""
    if answer_id is not None and not (isinstance(answer_id, str) and _ANSWER_ID.fullmatch(answer_id)):
        raise InputError(f"answer id {str(answer_id)[:40]!r} is not 32 hexadecimal digits")
    if action not in ACTIONS:
        raise InputError(f"unknown labelling action {action!r}; use one of {', '.join(ACTIONS)}")
    if not isinstance(sample, str) or not sample:
        raise InputError("an answer needs the sample it belongs to")
    if action != "undo":
        if isinstance(position, bool) or not isinstance(position, int) or position < 0:
            raise InputError(f"position {position!r} is not a pair of the sample")
    else:
        position = None
    if action == "label":
        if isinstance(grade, bool) or grade not in (0, 1, 2, 3):
            raise InputError(f"grade {grade!r} is not one of 0, 1, 2, 3")
    elif grade is not None:
        raise InputError(f"a {action} has no grade")
    spans = None
    if evidence is not None:
        spans = []
        for span in evidence:
            if not isinstance(span, (list, tuple)) or len(span) != 2 or not all(
                    isinstance(v, int) and not isinstance(v, bool) for v in span):
                raise InputError(f"evidence span {span!r} is not [start, end] (two whole numbers)")
            s, e = span
            if s < 0 or e <= s:
                raise InputError(f"evidence span [{s}, {e}) is empty or negative")
            spans.append([s, e])
        spans = spans or None
    if action == "label" and grade >= 2 and not spans:
        raise InputError("grades 2 and 3 need evidence: mark the sentence(s) that support the grade")
    shown = {} if guidelines_sha256 == IN_FORCE else {"guidelines_sha256": checked_guidelines(guidelines_sha256)}
    return {**shown, "id": answer_id or uuid.uuid4().hex, "seq": int(seq), "sample": sample, "annotator": annotator,
            "action": action, "position": position, "grade": None if grade is None else int(grade),
            "evidence": spans, "comment": comment or None,
            "seconds": None if seconds is None else float(seconds), "reveal": bool(reveal),
            "given_at": float(given_at)}


def checked_guidelines(value) -> str | None:
    """A guidelines version as an answer carries it: None or 64 lowercase hexadecimal digits."""
    if value is None:
        return None
    if not (isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)):
        raise InputError(f"guidelines version {str(value)[:70]!r} is not a SHA-256 (64 hexadecimal digits)")
    return value


def encode(answer: dict) -> bytes:
    """The file content of one answer: one JSON line (UTF-8) of its :data:`FIELDS` (and the
    ``reason`` of a refused one)."""
    keep = {k: answer.get(k) for k in FIELDS if k in answer or k != "guidelines_sha256"}
    if answer.get("reason") is not None:
        keep["reason"] = str(answer["reason"])
    return (json.dumps(keep, ensure_ascii=False, sort_keys=True) + "\n").encode()


def decode(data: bytes) -> dict:
    """The answer in a file's content; :class:`ValueError` when it is not one."""
    answer = json.loads(data.decode("utf-8"))
    if not isinstance(answer, dict) or not isinstance(answer.get("id"), str) or answer.get("action") not in ACTIONS:
        raise ValueError("not a pending answer")
    return answer


def file_name(answer: dict) -> str:
    """``<sequence, 20 digits>-<id>.json``: names sort in the order answers were accepted."""
    return f"{int(answer['seq']):020d}-{answer['id']}.json"


def merge_states(states: dict[int, dict], answers: list[dict]) -> dict[int, dict]:
    """An annotator's states (as :func:`workbench.services.calibration.labelling.my_states` reads
    them) with their pending ``answers`` (one sample, in order) applied on top: a label, skip or
    can't judge becomes the pair's state; an undo takes back the latest pending answer before
    it (restoring the pair's state before that answer). An undo with no pending answer before
    it reverts a stored one, which is not known here: it changes nothing until it is stored."""
    merged = dict(states)
    taken: list[tuple[int, dict | None]] = []  # (position, its state before the pending answer)
    for answer in answers:
        if answer["action"] == "undo":
            if taken:
                position, before = taken.pop()
                if before is None:
                    merged.pop(position, None)
                else:
                    merged[position] = before
            continue
        position = int(answer["position"])
        taken.append((position, merged.get(position)))
        merged[position] = {"action": answer["action"], "grade": answer.get("grade"),
                            "comment": answer.get("comment"), "evidence": answer.get("evidence"),
                            "revealed": bool(answer.get("reveal")), "pending": True}
    return merged


# -- the folder ------------------------------------------------------------------------------

def folder(project: str | Path) -> Path:
    """The write-ahead folder of ``project``: ``<project file>.pending`` beside it (beside the
    file itself when ``project`` is a symbolic link to it, so the answers follow the project)."""
    return Path(os.path.realpath(project) + SUFFIX)


def _next_seq() -> int:
    global _last_seq
    with _seq_lock:
        _last_seq = max(time.time_ns(), _last_seq + 1)
        return _last_seq


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(target: Path, data: bytes) -> None:
    """``data`` at ``target``, whole or not at all, on disk when this returns."""
    tmp = target.with_name(f".tmp-{os.getpid()}-{threading.get_ident()}-{target.name}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    _fsync_dir(target.parent)


def keep(project: str | Path, *, sample: str, annotator: str, action: str, position: int | None = None,
         grade: int | None = None, evidence=None, comment: str | None = None, seconds: float | None = None,
         reveal: bool = False, answer_id: str | None = None, guidelines_sha256: str | None = IN_FORCE) -> dict:
    """Keep one answer of ``annotator`` (an id the caller checked may label,
    :func:`workbench.services.calibration.label_page.keep_answer`; the answer checked here,
    :func:`new_answer`) in ``project``'s write-ahead folder, on disk when this returns; returns
    the answer (with its ``id``). The project file itself is not touched. Raises
    :class:`InputError` (a malformed answer) or :class:`StoreError` when the folder cannot be
    written (the answer is then not kept)."""
    project = Path(project)
    if not project.exists():
        raise StoreError(f"no project database at {project}; create one with {{command}}",
                         command=f"--db {project} init")
    answer = new_answer(sample=sample, annotator=annotator, action=action, position=position,
                        grade=grade, evidence=evidence, comment=comment, seconds=seconds, reveal=reveal,
                        answer_id=answer_id, seq=_next_seq(), given_at=time.time(),
                        guidelines_sha256=guidelines_sha256)
    where = folder(project)
    try:
        where.mkdir(exist_ok=True)
        _write_durably(where / file_name(answer), encode(answer))
    except OSError as exc:
        raise StoreError(f"cannot keep the answer in {where}: {exc.strerror or exc}; free disk space or make "
                         f"the project's folder writable") from None
    return answer


def _read(path: Path) -> dict | None:
    try:
        return decode(path.read_bytes())
    except (OSError, ValueError):
        return None  # removed meanwhile (a drain), or not an answer of ours: left alone


def _files(where: Path) -> list[Path]:
    try:
        names = sorted(e.name for e in os.scandir(where) if e.is_file() and e.name.endswith(".json")
                       and not e.name.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [where / n for n in names]


def waiting(project: str | Path, *, annotator: str | None = None, sample: str | None = None) -> list[dict]:
    """The answers kept and not stored yet, in the order given; only ``annotator``'s (an id as
    :func:`workbench.services.calibration.labelling.annotator_id` forms it) and only
    ``sample``'s when given."""
    out = []
    for path in _files(folder(project)):
        answer = _read(path)
        if answer is None or (annotator is not None and answer.get("annotator") != annotator) or (
                sample is not None and answer.get("sample") != sample):
            continue
        out.append(answer)
    return out


def is_waiting(project: str | Path, answer: dict) -> bool:
    """Whether ``answer`` is still kept, not stored yet."""
    return (folder(project) / file_name(answer)).exists()


def refused(project: str | Path, annotator: str) -> list[dict]:
    """``annotator``'s answers that could not be stored (each with its ``reason``), in order."""
    out = []
    for path in _files(folder(project) / REFUSED):
        answer = _read(path)
        if answer is not None and answer.get("annotator") == annotator:
            out.append(answer)
    return out


def dismiss(project: str | Path, answers: list[dict]) -> None:
    """Forget refused ``answers`` once their annotator has been told."""
    for answer in answers:
        try:
            (folder(project) / REFUSED / file_name(answer)).unlink()
        except FileNotFoundError:
            pass


def outcome(answer_id: str) -> dict | None:
    """What a drain of this process did with the answer (``{"status": "stored", "position"}`` or
    ``{"status": "refused", "reason"}``), None when no drain here has handled it."""
    return _OUTCOMES.get(answer_id)


def _remember(answer_id: str, result: dict) -> None:
    _OUTCOMES[answer_id] = result
    while len(_OUTCOMES) > _OUTCOMES_KEPT:
        _OUTCOMES.popitem(last=False)


def _lock(project: Path) -> threading.Lock:
    key = str(project.resolve())
    with _drain_locks_guard:
        return _drain_locks.setdefault(key, threading.Lock())


def drain(db, store_one: Callable[[dict], int | None], *, annotator: str | None = None) -> list[dict]:
    """Store the kept answers of ``db``'s project in order with ``store_one`` (only
    ``annotator``'s when given; ``store_one(answer)`` stores one answer exactly once and returns
    the pair it touched, :func:`workbench.services.calibration.labelling.store_accepted`),
    removing each file once its answer is stored; returns what was done with
    each, in order (``{"id", "status": "stored", "position"}``, the pair the answer touched; or
    ``{"id", "status": "refused", "reason"}``: an answer the project refuses for good, say its
    pair is gone, moved to ``refused/``). Stops at the first answer that cannot be stored now
    (the project failing to write): it and those after it stay kept."""
    project = Path(db.path)
    where = folder(project)
    files = _files(where)
    if not files:
        return []
    done = []
    with _lock(project):
        for path in _files(where):  # again, under the lock: another thread may have drained some
            answer = _read(path)
            if answer is None or (annotator is not None and answer.get("annotator") != annotator):
                continue
            try:
                position = store_one(answer)
            except InputError as exc:  # refused for good (the pair or its document changed)
                result = {"id": answer["id"], "status": "refused", "reason": str(exc)}
                try:
                    (where / REFUSED).mkdir(exist_ok=True)
                    _write_durably(where / REFUSED / path.name, encode({**answer, "reason": str(exc)}))
                    path.unlink()
                except OSError:
                    break
            except WorkbenchError:
                break  # the project cannot be written now: kept for the next drain
            else:
                result = {"id": answer["id"], "status": "stored", "position": position}
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass
            _remember(answer["id"], result)
            done.append(result)
    return done


# -- the background drainer ------------------------------------------------------------------

def kick(project: str | Path, drain_project: Callable[[Path], None], *, every: float = DRAIN_EVERY) -> None:
    """Make sure a background thread of this process drains ``project``'s kept answers: it calls
    ``drain_project(project)`` (opens the project, drains, closes it; a :class:`WorkbenchError`
    when the project is busy), and again after ``every`` seconds (a little longer each time, at
    most 5 s) until nothing is kept, then ends. At most one such thread per project per
    process."""
    project = Path(project)
    key = str(project.resolve())
    with _drain_locks_guard:
        running = _drainers.get(key)
        if running is not None and running.is_alive():
            return
        thread = threading.Thread(target=_drain_loop, args=(project, drain_project, every), daemon=True,
                                  name=f"workbench-drain-{project.name}")
        _drainers[key] = thread
        thread.start()


def _drain_loop(project: Path, drain_project: Callable[[Path], None], every: float) -> None:
    pause = every
    while project.exists() and waiting(project):
        try:
            drain_project(project)
        except WorkbenchError:
            pass
        if not waiting(project):
            return
        # still kept: the project is busy or refuses writes now; try again, less often the
        # longer it lasts (at most every 5 s)
        time.sleep(pause)
        pause = min(5.0, pause * 1.5)
