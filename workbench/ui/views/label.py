"""Label: an SME grades a calibration sample's pairs, one at a time, blind to the judge.

The page shows the query (and its description), the document's title and the judged passage
highlighted inside its document with the text around it, query terms marked.

Keyboard first. The card is a component (``st.components.v2``, :data:`CARD_JS`) with one key
listener for the whole page; keys act wherever the focus is except inside a text box (comment,
annotator id), where they type (Escape leaves the box for the card):

- evidence: every line and every sentence of the judged passage is an evidence unit
  (:func:`sentences`); ``↓``/``↑`` (or ``j``/``k``) move the evidence cursor, which starts on
  the first sentence holding a query term, headings skipped (else the first sentence that is no
  heading; :mod:`workbench.ui.views.label_routing`); ``n`` / ``Shift+N`` jump to the next /
  previous sentence holding a query term; ``Space`` (or a click) chooses or drops the unit
  under it and ``Shift+↓``/``Shift+↑`` extend the chosen run; the chosen units are
  highlighted and listed. A grade-2 label with one sentence of evidence is ``Space`` then ``2``.
  Nothing chooses "all sentences" by default; the stored evidence spans are exactly the chosen
  units' document spans;
- ``0``–``3`` grade, ``S`` skip, ``X`` can't judge, ``U`` undo, ``←``/``→`` previous / next.

No misfiled key: a grade (or skip / can't judge) key is taken only once its pair has been visible
in the browser for ``[calibration] min_visible_ms`` (300 ms) and only once per pair; an earlier
press, a second one, or grade 2–3 without evidence is refused, the card says why, and the pair's
one answer is not used up. The browser sends one action at a time (a key pressed while the last
one travels waits for it), numbered, so a repeated message is never applied twice, and the
server checks again which pair it is for. An action the server has not acknowledged after a
few seconds is sent again (same number and answer id), so a message or a run lost on a busy
machine does not hold the key presses queued behind it. Enter in the annotator box moves the focus to the card.

No accepted answer is lost (issue 37). The key press's callback first keeps the answer on the
server's disk, in a write-ahead folder beside the project with a unique answer id
(:func:`workbench.services.calibration.workflow.keep_answer`, :mod:`workbench.services.calibration.pending`:
``fsync``'d before the card moves on; a failure to keep it refuses the key and says so). The
answer is stored in the project in the script run its key press starts, right after the next
pair is drawn; while another process holds the project (an import, a judge job, a CLI command)
it stays kept, "N answers waiting to be saved" is shown (looked at again every
:data:`WAITING_POLL` seconds), a background thread of the server saves it once the file is free,
and so does any later open for labelling: a reload or a closed tab loses nothing, and the
answer id makes each answer stored exactly once. The one moment the server cannot cover, a key
press still travelling to it when the tab reloads or closes, the browser covers: the card names
each answer (``aid``) and writes it to the browser's ``localStorage`` before sending it, drops it
once the server has handled it, asks before the tab is left while one travels (``beforeunload``),
and a Label page opened again in that browser for the same sample and annotator sends what is
left again (:func:`_on_replay`), stored once whichever copy arrives. The card's states (what the SME answered)
count the SME's own kept answers, never another's. The page reopens on the sample the annotator
last worked on, at the first pair not answered yet. The annotator id is
remembered in the address (``?annotator=``) and a cookie, so reloads and new tabs keep it; ids are
one person whatever their case and spaces (:func:`workbench.services.calibration.workflow.annotator_id`).

Blind by default: nothing the judge produced (grade, reason, model output) is read for the page
until this SME's label is in. With "Show the judge's label after I submit" ticked, the judge's
grade and reason appear after submitting, and the label records that they did.

The card is headed "Pair n of N" (the sample-wide number ``calibrate report`` uses); for a
query-design sample it adds "· query k of n · pair j of m of this query"
(:func:`workbench.services.calibration.workflow.query_places`, read once per sample in a
whole-page run and kept in the session's view, so the key-press path reads nothing more).

The lead routes the work (:mod:`workbench.services.calibration.routing`): the page opens on the
active sample, serves an SME only the pairs assigned to them when the sample has an assignment
(previous / next walk those), asks to confirm an annotator id the project has never seen before
labelling under it, and shows the sample's labelling guidelines in a panel above the card
(:mod:`workbench.ui.views.label_routing`).

All corpus text is escaped (``html.escape``, :mod:`workbench.ui.highlight`) before it reaches the page.

Speed (the bar: the next pair on screen within 150 ms of a key press at p95, with a million
judgments stored; ``benchmarks/label_bench.py`` measures it in a real server and browser): the
card is a fragment and the session keeps the pairs around the one on screen; the card is also
sent the pair that comes after the one on screen, so the browser shows it at the key press
without waiting for the server. The server then, in the key press's script run, draws the same
pair, opens the project, stores the answer, reads what the next key press needs and closes the
project again (``finally``: an interrupted drawing still stores it). "Saved grade ..." appears
when the answer is stored; an answer the project refuses for good (its pair or document changed
since) brings its pair back with the reason. The file is never held between key presses, so the
judge job and CLI commands get it in between; while one of them holds it, a key press waits
:data:`PRESS_WAIT` seconds for it, then goes on from the pairs the card holds ahead (a page
opening waits up to :data:`OPEN_WAIT` seconds,
:func:`workbench.services.calibration.workflow.open_for_labelling`). A key press's open is a
*visit* (the file attached to the server's one DuckDB instance and detached again, not a DuckDB
instance started and shut down per press), and its read is three small queries (the
annotator's answers, the sample's size, the one item not held yet): the queue order comes from
the answers. Choosing evidence (``Space`` or a click) stays in the browser: no script run.
"""

from __future__ import annotations

import functools
import html
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import streamlit as st
from streamlit.errors import StreamlitAPIException

from workbench.config import load_settings
from workbench.core.stopwords import STOPWORDS
from workbench.errors import InputError, WorkbenchError
from workbench.services import visibility
from workbench.services.calibration import pending
from workbench.services.calibration import workflow as cal
from workbench.services.calibration.workflow import annotator_id
from workbench.ui import auth, context
from workbench.ui.highlight import marked_terms, units_html
from workbench.ui.views import label_routing

GRADE_LABELS = {
    0: "0 · Not relevant",
    1: "1 · Related, does not help",
    2: "2 · Partly answers",
    3: "3 · Fully answers",
}
CONTEXT_CHARS = 600
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
#: The card's script (a file next to this module, read once).
CARD_JS = (Path(__file__).with_name("label_card.js")).read_text(encoding="utf-8")
CARD_CSS = """
.wb-card { outline: none; }
.wb-card:focus-visible { outline: 2px solid rgba(240, 165, 0, 0.5); outline-offset: 4px; border-radius: 0.5rem; }
.wb-document { white-space: pre-wrap; line-height: 1.55; border: 1px solid rgba(49,51,63,0.2);
  border-radius: 0.5rem; padding: 0.8rem; max-height: 28rem; overflow-y: auto; }
.wb-passage { background: rgba(255, 214, 102, 0.35); border-left: 3px solid #f0a500; padding: 0 0.2rem; }
.wb-unit { cursor: pointer; border-radius: 0.2rem; }
.wb-unit.wb-cursor { outline: 2px dashed #1c6dd0; outline-offset: 1px; }
.wb-unit.wb-chosen { background: #b7e4c7; box-shadow: inset 0 -2px 0 #2d6a4f; }
.wb-note { margin-top: 0.5rem; padding: 0.4rem 0.7rem; border-radius: 0.4rem; background: #fff3bf; }
.wb-note[data-kind="info"] { background: rgba(28, 109, 208, 0.1); }
.wb-evidence { margin-top: 0.5rem; font-size: 0.92rem; }
.wb-evidence ol { margin: 0.2rem 0 0 1.2rem; padding: 0; }
.wb-answered { margin: 0.4rem 0; padding: 0.4rem 0.7rem; border-radius: 0.4rem; background: rgba(28,109,208,0.1); }
"""


def query_terms(query: str) -> list[str]:
    """The query's words worth marking in the text (3+ letters, no stop words)."""
    words = {w.lower() for w in re.findall(r"\w+", query or "") if len(w) >= 3}
    return sorted(words - STOPWORDS, key=len, reverse=True)


def marked(text: str, terms: list[str]) -> str:
    """``text`` as safe HTML with the query terms marked (:func:`workbench.ui.highlight.marked_terms`)."""
    return marked_terms(text, terms)


def sentences(item: dict) -> list[tuple[int, int, str]]:
    """The passage's evidence units as ``(start, end, text)`` document spans, in document order:
    every line and every sentence (headings and table rows are lines), ``text[start:end]`` being
    the unit without the spaces around it."""
    text = item["text"] or ""
    start, end = item["start"], min(item["end"], len(text))
    out = []
    for m in _SENTENCE.finditer(text[start:end]):
        piece = m.group(0)
        if piece.strip():
            s = start + m.start() + len(piece) - len(piece.lstrip())
            out.append((s, s + len(piece.strip()), piece.strip()))
    return out


def passage_html(item: dict, terms: list[str], units: list[tuple[int, int, str]] | None = None) -> str:
    """The document around the judged span, the span highlighted, each evidence unit a
    ``span.wb-unit`` (all pieces escaped)."""
    text = item["text"] or ""
    units = sentences(item) if units is None else units
    return units_html(text, item["start"], min(item["end"], len(text)), [(s, e) for s, e, _ in units], terms,
                      window=CONTEXT_CHARS)


def pair_html(item: dict, position: int, total: int, terms: list[str], *, state: dict | None = None,
              units: list[tuple[int, int, str]] | None = None, place=None) -> str:
    """The pair as the SME reads it, as one block of safe HTML: "Pair n of N" (the sample-wide
    number the CLI's reports use too; for a query-design sample followed by ``place``, a
    :class:`workbench.core.calibration.query_place.QueryPlace`: "· query k of n · pair j of m of
    this query"), the query (terms marked), its description, the document's title,
    :func:`passage_html`, the chosen evidence list (filled in the browser) and, for a pair
    answered already, what the answer was."""
    description = (f'<div style="color: rgba(49,51,63,0.75)">{html.escape(item["description"])}</div>'
                   if item["description"] else "")
    answered = ""
    if state is not None:
        word = {"label": f"your grade: {state.get('grade')}", "skip": "skipped",
                "cant_judge": "marked can't judge"}.get(state.get("action"), "answered")
        answered = (f'<div class="wb-answered" data-testid="label-answered">You already answered this pair '
                    f"({html.escape(word)}). Choosing again replaces it.</div>")
    return (
        f'<div data-testid="label-pair" style="font-weight: 600; margin-bottom: 0.4rem">'
        f"Pair {position + 1} of {total}{'' if place is None else ' · ' + html.escape(place.words())}</div>"
        f'<div data-testid="label-query" style="font-size: 1.25rem; font-weight: 600">'
        f'{marked(item["query"] or item["query_id"], terms)}</div>{description}'
        f'<div data-testid="label-title" style="font-weight: 600; margin: 0.6rem 0 0.3rem">'
        f'{html.escape(item["title"] or item["doc_id"])}</div>{answered}'
        f"{passage_html(item, terms, units)}"
        f'<div data-testid="label-evidence" class="wb-evidence"></div>'
    )


def _settings() -> tuple[int, int]:
    """(SMEs per pair, ``[calibration] overlap``; minimum visible milliseconds, ``min_visible_ms``)."""

    settings = load_settings()
    return int(settings.get("calibration", "overlap")), int(settings.get("calibration", "min_visible_ms"))


def _key(*parts) -> str:
    return "label_" + "_".join(str(p) for p in parts)


#: Seconds the page's whole run (opening the page, a reload) waits for the project while another
#: process (a judge job writing a batch, a CLI command) holds it: it has nothing to show without
#: it. As long as a judge job waits for the file itself: on a loaded machine one batch visit of
#: the job can take several seconds.
OPEN_WAIT: float | None = 30.0
#: Seconds a key press's run waits for the project (after its answer is kept on disk, so a
#: busy project delays nothing but the saving): short, so the next key press is taken (and
#: kept) at once instead of queueing behind a run that waits. While the project stays busy the
#: key presses after that do not wait at all; a background thread saves the kept answers.
PRESS_WAIT: float = 0.5
#: Seconds between the page's looks at the kept answers while some wait to be saved.
WAITING_POLL = 2.0
_VIEW = "_label_view"  # what the card draws from (see the module docstring)
_PENDING = "_label_pending"  # answers given on screen (kept on disk), not known stored yet (in order)
_WAITED = "_label_waited"  # the page showed answers waiting to be saved (refresh once they are)
_ADVANCING = ("label", "skip", "cant_judge")
_HEX = frozenset("0123456789abcdef")
#: Answers one replay takes at most (a browser's outbox holds the few a reload interrupted).
_REPLAY_MOST = 200
_SAID = "_label_said"  # (kind, message) of the last stored answer, shown above the card
_SHOWN = "_label_shown"  # what the card's last run showed above it (None: nothing)
_UNKNOWN = "unknown"  # the pair after an answer, when the card did not hold it at the key press
_UNREAD = "unread"  # the view's query places before they are read
_ACK = "_label_ack"  # the number of the last action the browser sent that was handled
_TAKEN = "_label_taken"  # the card tokens (pair on screen, visit) whose one answer was taken
_CARD = None  # the registered card component (registered on first use)
#: Pairs the card holds ahead of the one on screen: the browser draws each at its key press
#: without the server, so a server that is busy (a judge job holding the file) is caught up
#: with later instead of being waited for.
AHEAD = 4


#: Set (to a file path) by ``benchmarks/label_bench.py``: the server then appends one JSON line
#: per timed phase of the page's work (``{"phase": ..., "ms": ...}``), measured inside the real
#: server. Unset (always, outside that benchmark), nothing is written.
TIMINGS_ENV = "WORKBENCH_LABEL_TIMINGS"


@contextmanager
def _timed(phase: str) -> Iterator[None]:
    target = os.environ.get(TIMINGS_ENV)
    if not target:
        yield
        return
    started = time.perf_counter()
    try:
        yield
    finally:
        line = json.dumps({"phase": phase, "ms": round((time.perf_counter() - started) * 1000, 3)})
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


# The card's place (pair on screen, visit, time shown, comment, card state) is kept per sample
# *and* annotator id: switching ids in the same tab (no sign-in) must not carry the previous
# id's pair, answer token or comment over to the next one.

def _visit(sample: str, annotator: str) -> int:
    return int(st.session_state.get(_key("visit", sample, annotator), 0))


def _go(sample: str, annotator: str, position: int | None) -> None:
    """Move ``annotator``'s card on ``sample`` to ``position``: a new visit (a new card token, so
    one new answer)."""
    st.session_state[_key("position", sample, annotator)] = position
    st.session_state[_key("visit", sample, annotator)] = _visit(sample, annotator) + 1


def _token(sample: str, annotator: str, position: int | None, visit: int) -> str:
    return f"{sample}|{annotator}|{position}|{visit}"


def _view(sample: str, annotator: str) -> dict:
    """The session's view of one sample for one annotator (a new one when either changes)."""
    key = (str(context.db_path()), sample, annotator)
    view = st.session_state.get(_VIEW)
    if view is None or view["key"] != key:
        overlap, min_ms = _settings()
        # places: each pair's "query k of n" for a query-design sample (read once: items never
        # change once drawn), None for a pair design; _UNREAD until the first whole-page run
        view = {"key": key, "items": {}, "states": {}, "total": 0, "next": {}, "stale": True,
                "overlap": overlap, "min_ms": min_ms, "places": _UNREAD}
        st.session_state[_VIEW] = view
    return view


def _identity(annotator: str) -> str:

    return annotator_id(annotator)


def render() -> None:

    st.title("Label")
    st.caption("Grade each pair as a subject-matter expert. Your labels check whether the LLM judge "
               "can be trusted; the judge's grade stays hidden until you submit yours.")
    path = context.db_path()
    if not path.exists():
        with context.project():  # offers to create the project, then stops
            return
    try:
        with _timed("page open"):
            db = cal.open_for_labelling(path, wait=OPEN_WAIT, migrate=True)
    except WorkbenchError as exc:
        if st.session_state.get(_VIEW):
            st.session_state[_VIEW]["stale"] = True
        st.error(context.plain(str(exc)))
        typed = context.annotator()
        if typed:  # answers given before (this tab or one reloaded or closed) are kept, not lost
            _waiting(_identity(typed))
        return
    try:
        samples = cal.list_samples(db)
        if samples.empty:
            st.info("There is no calibration sample to label yet. Once the pool has been judged, draw one "
                    "on the Calibration page.")
            context.page_link("calibration", "Go to Calibration", ":material/verified:")
            return
        names = samples["name"].tolist()
        typed = context.annotator()
        if not typed:
            st.warning("Enter your annotator id in the sidebar first: every label is recorded with it.")
            return
        annotator = _identity(typed)
        if "label_sample" not in st.session_state or st.session_state["label_sample"] not in names:
            # the sample the lead made active, else the one this annotator was working on
            st.session_state["label_sample"] = label_routing.opening_sample(db, annotator, names)
        sample = st.selectbox("Calibration sample", names, key="label_sample")
        if not auth.may("label"):
            st.info("You can read this project but not label it; ask a lead for the annotator role.")
            return
        if auth.mode() == "none" and not label_routing.confirmed(db, sample, typed):
            return  # a new annotator id: asked to confirm first (a typo would start a new annotator)
        guide = label_routing.guidelines_of(db, sample)

        if visibility.can_read("judge_output"):  # a signed-in annotator never sees the judge's output
            st.checkbox("Show the judge's label after I submit", key="label_reveal",
                        help="Off by default, so the judge cannot anchor your grade. When on, "
                             "each label records that the judge's output was shown afterwards.")
        else:
            st.session_state["label_reveal"] = False
        view = _view(sample, annotator)
        view["overlap"], view["min_ms"] = _settings()
        view["display"] = typed
        # the guidelines version the panel shows: recorded with each answer given on this card
        view["guidelines"] = guide["sha256"] if guide else None
        view["busy"] = None  # the project opened: the next key press may wait for it again
        # A whole-page run (opening the page, another sample, the reveal box) reads everything
        # afresh: another tab may have labelled, a lead may have re-imported a document.
        _sync(db, sample, annotator, fresh=True)
        if view["places"] == _UNREAD:  # once per view, never on the key-press path
            try:
                view["places"] = cal.query_places(db, sample)
            except WorkbenchError:
                view["places"] = None
        try:
            pace = next(iter(cal.throughput(db, sample, annotator)), None)
        except WorkbenchError:
            pace = None
    finally:
        db.close()
    shown = typed if typed == annotator else f"{typed} (id {annotator})"
    if pace and pace["labels_per_hour"] is not None:
        st.caption(f"Labelling as {shown} · your pace on this sample: {pace['labels_per_hour']:,.0f} labels per "
                   f"hour of time on task ({pace['labels']} label{'' if pace['labels'] == 1 else 's'} in "
                   f"{pace['hours'] * 60:,.1f} min)")
    else:
        st.caption(f"Labelling as {shown}")
    label_routing.guidelines_panel(guide)
    _labelling(sample, annotator)


# -- storing and reading (no drawing: these run inside `finally`) ---------------------------

def _sync_open(sample: str, annotator: str) -> bool:
    """:func:`_sync` on a project handle of its own; False when the project could not be opened
    (the reason is kept for the next draw; the answers stay kept on disk and a background
    thread saves them once the project is free)."""

    view = _view(sample, annotator)
    try:
        with _timed("open"):
            # while the project stays busy, a key press does not wait for it again
            db = cal.open_for_labelling(context.db_path(), wait=0.0 if view.get("busy") else PRESS_WAIT)
    except WorkbenchError as exc:
        view["stale"], view["busy"] = True, str(exc)
        cal.drain_in_background(context.db_path())
        if st.session_state.get(_PENDING):
            _say("warning", context.plain(f"Not saved yet: {exc}. Your answers are kept on the server's disk and "
                                          "saved as soon as the project is free; you can keep labelling."))
        else:
            _say("error", context.plain(str(exc)))
        return False
    view["busy"] = None
    try:
        _sync(db, sample, annotator)
    finally:
        with _timed("close"):
            db.close()
    return True


def _refused(answers: list[dict], sample: str) -> None:  # answers: one annotator's (pending.refused)
    """Answers the project refused for good (their pair or its document changed since): bring
    the first one's pair back and say why."""
    given = [a for a in answers if a["action"] in _ADVANCING]
    if not given:
        _say("error", context.plain(f"Your undo could not be stored: {answers[0].get('reason')}."))
        return
    first = given[0]
    if first["sample"] == sample:
        _go(sample, first["annotator"], first["position"])
    more = f" (and {len(given) - 1} answer(s) after it)" if len(given) > 1 else ""
    _say("error", context.plain(f"Your answer to pair {first['position'] + 1} of {first['sample']}{more} could "
                                f"not be stored: {first.get('reason')}. Give it again."))


def _say(kind: str, message: str) -> None:
    st.session_state[_SAID] = (kind, message)


def _sync(db, sample: str, annotator: str, *, fresh: bool = False) -> None:
    """Store the pending answers in order, then read what the card needs (no drawing here);
    ``fresh``: read the items again too, not only those the session does not hold."""

    view = _view(sample, annotator)
    pos_key = _key("position", sample, annotator)
    path = context.db_path()
    given = list(st.session_state.get(_PENDING) or [])
    with _timed("store"):
        # Every kept answer of the project (this session's, a reloaded tab's, another SME's),
        # each stored exactly once (the open drained already; this catches any kept since).
        cal.drain_kept(db)
    refused = pending.refused(path, annotator)
    gone = {a["id"] for a in refused}
    last, still = None, []
    for answer in given:
        if answer["id"] in gone:
            continue
        if pending.is_waiting(path, answer):  # not stored yet (the drain stopped at an error)
            still.append(answer)
            continue
        try:
            message = _stored(db, cal, answer)
        except WorkbenchError as exc:
            message = ("error", context.plain(str(exc)))
        if message is not None:
            _say(*message)
            last = answer
    st.session_state[_PENDING] = still
    if refused:
        _refused(refused, sample)
        pending.dismiss(path, refused)
        last = None
    if still:
        _say("warning", context.plain(f"{len(still)} answer(s) not saved yet; they are kept and saved as soon as "
                                      "the project can be written."))
    position = st.session_state.get(pos_key)
    after = None
    if (last is not None and last["action"] in _ADVANCING and last["sample"] == sample
            and last["annotator"] == annotator
            and (position == last["to"] or (position is None and last["to"] == _UNKNOWN))):
        # The card moved on at the key press; the pair after the answered one is read again now
        # that the answer is stored (with an overlap, other SMEs may have answered the pair the
        # card moved to meanwhile: then the card moves once more).
        position, after = None, last["position"]
    try:
        with _timed("read"):
            try:
                snap = cal.labelling_view(db, sample, annotator, position=position, after=after,
                                          overlap=view["overlap"], have=() if fresh else view["items"].keys(),
                                          depth=AHEAD)
            except InputError:
                if not refused or position is None:
                    raise
                # the refused answer's pair is gone from the sample: the first open pair instead
                snap = cal.labelling_view(db, sample, annotator, overlap=view["overlap"], have=(), depth=AHEAD)
    except WorkbenchError as exc:
        _say("error", context.plain(str(exc)))
        view["stale"] = True
        return
    walk = [] if snap["position"] is None else [snap["position"], *snap["ahead"]]
    keep = set(walk)
    if snap["position"] is not None:
        keep |= {snap["position"] - 1, snap["position"] + 1}
    items = {p: item for p, item in view["items"].items() if p in keep}
    items.update(snap["items"])
    # pair -> the pair after it, along the pairs the card holds ahead (None: the last open one)
    chain = {a: b for a, b in zip(walk, walk[1:])}
    if snap["position"] is not None and not snap["ahead"]:
        chain[snap["position"]] = None
    view.update(items=items, states=snap["states"], total=snap["total"], stale=False, next=chain,
                assigned=snap.get("assigned"))
    if st.session_state.get(pos_key) != snap["position"]:
        _go(sample, annotator, snap["position"])


def _stored(db, cal, action: dict) -> tuple[str, str] | None:
    """The message to show for one answer of this session that is stored (by whichever drain);
    None when it is not in the project (refused and told in another tab)."""
    sample, annotator, position = action["sample"], action["annotator"], action.get("position")
    kind = action["action"]
    done = cal.stored_answer(db, action["id"])
    if done is None:
        return None
    if kind == "label":
        grade = action["grade"]
        spans = len(action["evidence"] or [])
        message = f"Saved grade {grade} for pair {position + 1}" + (
            f" with {spans} evidence sentence{'s' if spans > 1 else ''}." if spans else ".")
        if action["reveal"]:
            judge = cal.judge_output(db, sample, annotator, position)
            message += f" The judge said {judge.get('grade')}: {judge.get('reason') or 'no reason given'}"
        return "success", context.plain(message)
    if kind in ("skip", "cant_judge"):
        word = "Skipped" if kind == "skip" else "Marked can't judge:"
        return "info", f"{word} pair {position + 1}."
    undone = done["position"]
    if undone is None:
        return "info", "Nothing to undo."
    _go(sample, annotator, undone)
    return "info", f"Undid your last action on pair {undone + 1}."


# -- the card ------------------------------------------------------------------------------

@st.fragment
def _labelling(sample: str, annotator: str) -> None:
    # Keys and buttons act in callbacks, which run before the card is drawn again: one
    # fragment run per action (see the module docstring for the order of the work).
    with _timed("card run"):
        _card(sample, annotator)


def _card(sample: str, annotator: str) -> None:
    view = _view(sample, annotator)
    pos_key = _key("position", sample, annotator)
    pending = st.session_state.get(_PENDING) or []
    position = st.session_state.get(pos_key)
    # Read first (one project open) only when the card cannot be drawn from the session: an undo
    # (its pair is known once stored), a pair the session does not hold, a view gone stale.
    read_first = view["stale"] or (position is not None and position not in view["items"]) or any(
        a["action"] == "undo" or a.get("to") == _UNKNOWN for a in pending)
    if read_first:
        _sync_open(sample, annotator)  # at most one attempt per run: a busy file is not waited on twice
        position = st.session_state.get(pos_key)
    context.show_flash("label")
    status = st.empty()
    drawn = position
    stored = False
    sent_ahead: list[int] = []
    try:
        with _timed("draw"):
            bar, sent_ahead = _draw(view, sample, annotator, position)  # and the pair the card holds ahead
    finally:
        # Store the answer (and read ahead for the next key press) right after drawing, even when
        # the drawing was interrupted (another key press, a reload): no Streamlit call in here.
        if not read_first and (st.session_state.get(_PENDING) or (
                drawn is not None and drawn not in view["next"])):
            stored = _sync_open(sample, annotator)
    said = st.session_state.pop(_SAID, None)
    st.session_state[_SHOWN] = said
    if view.get("busy") or st.session_state.get(_PENDING):
        _waiting(annotator)  # "N answers waiting to be saved", looked at again every few seconds
    if st.session_state.get(pos_key) != drawn or (stored and drawn is not None and _walk(view, drawn) != sent_ahead):
        # moved on, or the pair after the one on screen is known only now: draw the card again,
        # so the browser holds it for the next key press
        if said:  # for the card drawn next
            st.session_state[_SAID] = said
        _rerun_card()
    if said:
        getattr(status, said[0])(said[1])
    if stored:
        bar.progress(*_progress_bar(view))


def _waiting(annotator: str) -> None:
    """While answers of ``annotator`` wait to be saved: say how many (a fragment that looks again
    every :data:`WAITING_POLL` seconds and makes sure a background thread is saving them); once
    none wait, the page reads everything afresh. Only this annotator's answers are counted."""
    if _count_waiting(annotator):
        st.fragment(_waiting_note, run_every=WAITING_POLL)(annotator)


def _count_waiting(annotator: str) -> int:

    return len(pending.waiting(context.db_path(), annotator=annotator))


def _waiting_note(annotator: str) -> None:

    waiting = _count_waiting(annotator)
    if waiting:
        cal.drain_in_background(context.db_path())
        st.session_state[_WAITED] = True
        st.info(f"{waiting} answer{'s' if waiting != 1 else ''} waiting to be saved: the project is in use by "
                "another process (an import, a judge job, a command). They are kept on the server's disk and "
                "saved as soon as the project is free; reloading or closing this tab loses none of them.")
    elif st.session_state.pop(_WAITED, False):
        st.rerun()  # all saved: the whole page reads afresh (the card, the progress, the pace)


def _walk(view: dict, position: int) -> list[int]:
    """The pairs after ``position`` the card could hold ahead now (as :func:`_draw` walks them)."""
    out, at = [], position
    while len(out) < AHEAD:
        at = view["next"].get(at)
        if at is None or at == position or at in out or at not in view["items"]:
            break
        out.append(at)
    return out


def _rerun_card() -> None:

    try:
        st.rerun(scope="fragment")
    except StreamlitAPIException:  # the card is being drawn as part of the whole page
        st.rerun()


def _progress_bar(view: dict) -> tuple[float, str]:

    mine = view.get("assigned")
    done = (cal.progress_of(view["states"], view["total"]) if mine is None else
            cal.progress_of({p: s for p, s in view["states"].items() if p in set(mine)}, len(mine)))
    text = (f"{done['labelled']} labelled, {done['skipped']} skipped, {done['cant_judge']} can't judge "
            f"of {done['total']} pairs")
    return min(1.0, (done["total"] - done["open"]) / max(done["total"], 1)), text


def _card_component():
    global _CARD
    if _CARD is None:
        _CARD = st.components.v2.component("workbench_label_card", js=CARD_JS, css=CARD_CSS,
                                           isolate_styles=False)
    return _CARD


def _payload(view: dict, sample: str, annotator: str, position: int, visit: int) -> dict | None:
    """What the card needs to draw the pair at ``position`` (None when the session does not hold it)."""
    item = view["items"].get(position)
    if item is None:
        return None
    units = sentences(item)
    state = view["states"].get(position)
    stored = {tuple(span) for span in ((state or {}).get("evidence") or [])}
    token = _token(sample, annotator, position, visit)
    cursor, hits = label_routing.cursor_start(item, units, query_terms(item["query"] or ""))
    return {"token": token, "position": position, "units": len(units), "cursor": cursor, "hits": hits,
            "chosen": [i for i, (s, e, _) in enumerate(units) if (s, e) in stored],
            "taken": token in st.session_state.get(_TAKEN, set()),
            "html": pair_html(item, position, view["total"], query_terms(item["query"] or ""), state=state,
                              units=units, place=_place(view, position))}


def _place(view: dict, position: int):
    """The pair's place in its query for a query-design sample, else None (from the view: no read)."""
    places = view.get("places")
    return places.get(position) if isinstance(places, dict) else None


def _draw(view: dict, sample: str, annotator: str, position: int | None):
    """Draw the card from the session's view (no project access); returns the progress bar and
    the positions of the pairs sent ahead, in order."""
    value, text = _progress_bar(view)
    bar = st.empty()
    bar.progress(value, text=text)
    visit = _visit(sample, annotator)
    shown = st.session_state.get(_key("shown_at", sample, annotator))
    if not shown or shown[0] != _token(sample, annotator, position, visit):
        st.session_state[_key("shown_at", sample, annotator)] = (_token(sample, annotator, position, visit),
                                                                 time.monotonic())
    pair = None if position is None else _payload(view, sample, annotator, position, visit)
    ahead, held = [], []
    at = position
    while at is not None and len(ahead) < AHEAD:
        at = view["next"].get(at)
        if at is None or at == position or at in held:
            break
        payload = _payload(view, sample, annotator, at, visit + 1 + len(ahead))
        if payload is None:
            break
        ahead.append(payload)
        held.append(at)
    display = None if auth.mode() != "none" else view.get("display")
    _card_component()(key=_key("card", sample, annotator), data={
        "pair": pair, "ahead": ahead, "ack": st.session_state.get(_ACK, 0), "min_ms": view["min_ms"],
        "annotator": display, "scope": f"{sample}\x1f{annotator}"}, on_action_change=functools.partial(_on_card, sample, annotator),
        on_chosen_change=_nothing)
    if position is None and (view["stale"] or any(a.get("to") == _UNKNOWN or a["action"] == "undo"
                                                   for a in st.session_state.get(_PENDING) or [])):
        # the pair after the last answer is not known yet: the project could not be read
        st.warning("The next pair cannot be read while the project is in use by another process. Your "
                   "answers are kept; press Try again (or reload) in a moment.")
        st.button("Try again", key=_key("retry", sample))
        return bar, []
    if position is None and view.get("assigned") == []:
        st.info("No pair of this sample is assigned to you. The lead assigns pairs on the Calibration page; "
                "choose another sample above or ask them.")
        return bar, []
    if position is None:
        st.success("You have labelled every pair of this sample. Thank you! The Calibration page shows "
                   "how the judge compares.")
        st.button("Undo my last action", key=_key("undo_end", sample), on_click=_on_undo, args=(sample, annotator))
        st.caption("Keys: U undo")
        return bar, []
    total = view["total"]
    if pair is None:  # the project could not be read (the reason is shown above)
        st.warning("This pair cannot be shown right now. Press a key again in a moment, or reload the page.")
        return bar, []
    st.text_input("Comment (optional)", key=_key("comment", sample, annotator, position))
    cols = st.columns(4)
    for grade, col in zip(range(4), cols):
        state = view["states"].get(position)
        with col:
            st.button(GRADE_LABELS[grade], key=_key("grade", sample, grade), width="stretch",
                      type="primary" if state and state.get("grade") == grade else "secondary",
                      on_click=_on_grade, args=(sample, annotator, position, grade))
    nav = st.columns(5)
    walk = label_routing.walkable(view.get("assigned"), total)
    with nav[0]:
        st.button("Previous", key=_key("prev", sample), disabled=label_routing.step(walk, position, -1) is None,
                  on_click=_on_step, args=(sample, annotator, -1, total))
    with nav[1]:
        st.button("Next", key=_key("next", sample), disabled=label_routing.step(walk, position, 1) is None,
                  on_click=_on_step, args=(sample, annotator, 1, total))
    with nav[2]:
        st.button("Skip", key=_key("skip", sample), on_click=_on_act, args=(sample, annotator, position, "skip"))
    with nav[3]:
        st.button("Can't judge", key=_key("cant", sample), on_click=_on_act,
                  args=(sample, annotator, position, "cant_judge"))
    with nav[4]:
        st.button("Undo", key=_key("undo", sample), on_click=_on_undo, args=(sample, annotator))
    st.caption("Keys: ↓/↑ or j/k move the evidence cursor · n / Shift+N next / previous sentence with a query "
               "term · Space choose / drop the sentence · Shift+↓/↑ extend the chosen sentences · 0–3 grade "
               "(2 and 3 need evidence) · S skip · X can't judge · U undo · ← previous · → next · "
               "Esc leaves a text box")
    return bar, held


def _nothing(*_args) -> None:
    """The card's chosen evidence reached the server (the browser sends it only as a grade or
    skip button is about to act, whose callback reads it; nothing to do now)."""


# -- key presses and buttons (callbacks: they only record the answer and move the card) -------

def _taken(token: str) -> bool:
    return token in st.session_state.get(_TAKEN, set())


def _take(token: str) -> None:
    taken = st.session_state.setdefault(_TAKEN, set())
    if len(taken) > 500:
        taken.clear()
    taken.add(token)


def _on_card(sample: str, annotator: str) -> None:
    """An action the card sent (a key press or a click on it), applied once."""
    result = st.session_state.get(_key("card", sample, annotator))
    action = getattr(result, "action", None) if result is not None else None
    if not isinstance(action, dict):
        return
    seq = int(action.get("seq") or 0)
    if seq <= st.session_state.get(_ACK, 0):
        # A copy of an action handled already (the card sends one again when the server's ack is
        # late, as on a loaded machine): it changes nothing, the message above the card included,
        # which the run it starts would otherwise draw empty ("Saved grade ..." seen for a moment).
        if _SAID not in st.session_state and st.session_state.get(_SHOWN):
            st.session_state[_SAID] = st.session_state[_SHOWN]
        return
    st.session_state[_ACK] = seq
    kind = action.get("kind")
    view = _view(sample, annotator)
    total = view["total"]
    if kind == "prev":
        _on_step(sample, annotator, -1, total, view.get("assigned"))
    elif kind == "next":
        _on_step(sample, annotator, 1, total, view.get("assigned"))
    elif kind == "undo":
        _on_undo(sample, annotator)
    elif kind == "replay":
        _on_replay(sample, annotator, action.get("answers"))
    elif kind in _ADVANCING:
        position = st.session_state.get(_key("position", sample, annotator))
        token = _token(sample, annotator, position, _visit(sample, annotator))
        if action.get("token") != token or position is None:
            context.flash("label", "That key came while the page was moving to another pair; nothing was stored. "
                                   "Press it again.", "warning")
            return
        if _taken(token):
            context.flash("label", "This pair's answer was already taken; the second key was ignored.", "warning")
            return
        seen = float(action.get("visible_ms") or 0)
        if seen < view["min_ms"]:
            context.flash("label", f"Too early: the pair had been on screen {seen:.0f} ms (at least "
                                   f"{view['min_ms']} ms); the key was ignored.", "warning")
            return
        seconds = round(seen / 1000.0, 3)
        if kind == "label":
            grade = action.get("grade")
            if grade not in (0, 1, 2, 3):
                return
            _grade(sample, annotator, position, int(grade), action.get("units") or [], seconds, token,
                   answer_id=_answer_id(action))
        else:
            _take(token)
            comment = st.session_state.get(_key("comment", sample, annotator, position)) or None
            _answer(sample, annotator, position, kind, seconds=seconds, comment=comment,
                    answer_id=_answer_id(action))


def _answer_id(action: dict) -> str | None:
    """The id the card gave an answer (32 hex digits), None for anything else."""
    aid = action.get("aid")
    return aid if isinstance(aid, str) and len(aid) == 32 and all(c in _HEX for c in aid) else None


def _on_replay(sample: str, annotator: str, answers) -> None:
    """Answers an earlier page of this browser gave by key and could not see handled (the tab was
    reloaded or closed while they travelled): kept now, under the ids the card gave them, so one
    that did reach the server then is still stored once. The same checks as a key press, except
    the card token (that page's cards are gone): a pair of the sample, on screen long enough,
    grades 2-3 with evidence. The card then moves to the pair after the last one kept."""
    view = _view(sample, annotator)
    kept, dropped, last = 0, 0, None
    for given in (answers if isinstance(answers, list) else [])[:_REPLAY_MOST]:
        if not isinstance(given, dict) or given.get("kind") not in _ADVANCING:
            continue
        position, aid, kind = given.get("position"), _answer_id(given), given["kind"]
        seen = given.get("visible_ms")
        if (isinstance(position, bool) or not isinstance(position, int) or not 0 <= position < view["total"]
                or aid is None or not isinstance(seen, (int, float)) or seen < view["min_ms"]):
            dropped += 1
            continue
        fields: dict = {}
        if kind == "label":
            grade = given.get("grade")
            chosen = _spans(view, position, given.get("units") or [])
            if grade not in (0, 1, 2, 3) or isinstance(grade, bool) or (grade >= 2 and not chosen):
                dropped += 1  # a pair the session no longer holds has no sentences to map the evidence to
                continue
            fields = {"grade": int(grade), "evidence": chosen or None}
        if _answer(sample, annotator, position, kind, seconds=round(float(seen) / 1000.0, 3), answer_id=aid,
                   move=False, **fields):
            kept += 1
            last = position
    if last is not None:
        _go(sample, annotator, None)  # the pair after the last answer kept, once it is stored (_sync)
    if dropped:
        context.flash("label", f"{dropped} answer(s) given before the page was reloaded could not be taken "
                               "again (their pair changed or is no longer on hand); please give them again.",
                      "warning")


def _spans(view: dict, position: int, units) -> list[list[int]]:
    """The document spans of the chosen units (one per unit, in document order)."""
    item = view["items"].get(position)
    found = sentences(item) if item is not None else []
    picked = sorted({int(u) for u in units if isinstance(u, int) or str(u).isdigit()})
    return [[found[i][0], found[i][1]] for i in picked if 0 <= i < len(found)]


def _grade(sample, annotator, position, grade, units, seconds, token, answer_id: str | None = None) -> None:
    view = _view(sample, annotator)
    chosen = _spans(view, position, units)
    if grade >= 2 and not chosen:
        context.flash("label", f"Grade {grade} refused: grades 2 and 3 need evidence. Move to a sentence with "
                               "↓/↑ (or j/k), press Space, then the grade. Nothing was stored.", "warning")
        return
    _take(token)
    # Read at the key press, not when the card was drawn: the box may have just been ticked.
    reveal = bool(st.session_state.get("label_reveal", False))
    comment = st.session_state.get(_key("comment", sample, annotator, position)) or None
    _answer(sample, annotator, position, "label", seconds=seconds, grade=grade, comment=comment,
            evidence=chosen or None, reveal=reveal, answer_id=answer_id)


def _on_screen(sample: str, annotator: str, position: int) -> bool:
    """Whether the pair a button answers is the pair the session is on. A click that comes while
    the card is being redrawn for another pair may still carry the old card's buttons: it is
    refused (nothing stored) rather than given to a pair the SME is no longer looking at."""
    if st.session_state.get(_key("position", sample, annotator)) == position:
        return True
    context.flash("label", "That key came while the page was moving to another pair; nothing was stored. "
                           "Press it again.", "warning")
    return False


def _on_step(sample: str, annotator: str, delta: int, total: int, assigned: list[int] | None = None) -> None:
    """Previous / next: from the pair the session is on (not the one the buttons were drawn for),
    along the annotator's assigned pairs when the lead assigned the sample."""
    position = st.session_state.get(_key("position", sample, annotator))
    if assigned is None:
        view = st.session_state.get(_VIEW)
        assigned = view.get("assigned") if view else None
    to = label_routing.step(label_routing.walkable(assigned, total), position, delta)
    if to is not None:
        _go(sample, annotator, to)


def _answer(sample: str, annotator: str, position: int, action: str, *, seconds: float | None,
            answer_id: str | None = None, move: bool = True, **fields) -> bool:
    """Queue an answer to the pair on screen and move the card to the pair after it, which the
    session already holds when it can (the answer is stored right after the card is drawn).
    ``move=False``: queue it only (a replay moves the card once, after its last answer).
    False when the answer was not taken (the page says why)."""

    view = _view(sample, annotator)
    # Kept on disk first (fsync'd): from here on no reload, closed tab or busy project loses it.
    try:
        kept = cal.keep_answer(context.db_path(), sample=sample, annotator=annotator, action=action,
                               position=position, seconds=seconds, grade=fields.get("grade"),
                               evidence=fields.get("evidence"), comment=fields.get("comment"),
                               reveal=bool(fields.get("reveal")), answer_id=answer_id,
                               **({"guidelines_sha256": view["guidelines"]} if "guidelines" in view else {}))
    except WorkbenchError as exc:
        st.session_state.get(_TAKEN, set()).discard(_token(sample, annotator, position, _visit(sample, annotator)))
        context.flash("label", context.plain(f"Your answer to pair {position + 1} was not taken: {exc}. Nothing "
                                             "was stored; give it again."), "error")
        return False
    # The card moves along the pairs it holds ahead even while the project is busy (the
    # chain read last still holds: the answers since moved along it).
    if not move:
        st.session_state.setdefault(_PENDING, []).append({**kept, "to": _UNKNOWN})
        view["states"] = {**view["states"], position: {"action": action, "grade": fields.get("grade"),
                                                       "evidence": fields.get("evidence")}}
        return True
    following = view["next"].get(position, _UNKNOWN)
    if action == "skip" and following is None:
        following = position  # the only open pair: a skipped pair comes back
    if following not in (_UNKNOWN, None) and following not in view["items"]:
        following = _UNKNOWN
    st.session_state.setdefault(_PENDING, []).append({**kept, "to": following})
    # What the card shows until the answer is stored (the progress line); replaced by what is
    # read back after storing.
    view["states"] = {**view["states"], position: {"action": action, "grade": fields.get("grade"),
                                                   "evidence": fields.get("evidence")}}
    _go(sample, annotator, None if following == _UNKNOWN else following)
    return True


def _drawn_seconds(sample: str, annotator: str, token: str) -> float | None:
    """Seconds since the server drew the card ``token`` (time on task of a button press)."""
    shown = st.session_state.get(_key("shown_at", sample, annotator))
    return round(time.monotonic() - shown[1], 3) if shown and shown[0] == token else None


def _on_grade(sample, annotator, position, grade) -> None:
    if not _on_screen(sample, annotator, position):
        return
    token = _token(sample, annotator, position, _visit(sample, annotator))
    if _taken(token):
        context.flash("label", "This pair's answer was already taken; the second press was ignored.", "warning")
        return
    result = st.session_state.get(_key("card", sample, annotator))
    chosen = getattr(result, "chosen", None) if result is not None else None
    units = chosen.get("units", []) if isinstance(chosen, dict) and chosen.get("token") == token else \
        st.session_state.get(_key("evidence", sample, annotator, position), [])
    _grade(sample, annotator, position, grade, units, _drawn_seconds(sample, annotator, token), token)


def _on_act(sample, annotator, position, action) -> None:
    if not _on_screen(sample, annotator, position):
        return
    token = _token(sample, annotator, position, _visit(sample, annotator))
    if _taken(token):
        context.flash("label", "This pair's answer was already taken; the second press was ignored.", "warning")
        return
    _take(token)
    comment = st.session_state.get(_key("comment", sample, annotator, position)) or None
    _answer(sample, annotator, position, action, seconds=_drawn_seconds(sample, annotator, token), comment=comment)


def _on_undo(sample, annotator) -> None:

    try:
        kept = cal.keep_answer(context.db_path(), sample=sample, annotator=annotator, action="undo")
    except WorkbenchError as exc:
        context.flash("label", context.plain(f"The undo was not taken: {exc}. Give it again."), "error")
        return
    st.session_state.setdefault(_PENDING, []).append({**kept, "to": None})
