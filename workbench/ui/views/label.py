"""Label: an SME grades a calibration sample's pairs, one at a time, blind to the judge.

The page shows the query (and its description), the document's title and the judged passage
highlighted inside its document with the text around it, query terms marked. Grade buttons 0–3
(keys 0–3), Skip (S), Can't judge (X), Undo (U), Previous / Next (← / →). Every action is
stored in the script run its key press starts, right after the next pair is drawn
(:mod:`workbench.services.calibration.workflow`), so a reload loses nothing: the page reopens on the
first pair not labelled yet.

Blind by default: nothing the judge produced (grade, reason, model output) is read for the page
until this SME's label is in. With "Show the judge's label after I submit" ticked, the judge's
grade and reason appear after submitting, and the label records that they did.

Evidence: the passage's sentences are offered as evidence; the chosen ones are stored as
document character spans. They are required for grades 2 and 3 (the guide's rule).

All corpus text is escaped (``html.escape``) before it reaches the page.

Speed (the issue's bar: the next pair on screen within 150 ms of a key press at p95, with a
million judgments stored; ``benchmarks/label_bench.py`` measures it in a real server and
browser): opening the project costs more than everything else a key press needs, so the next
pair never waits for it. The labelling card is a fragment (a key press reruns only the card, not the app
around it), and the session keeps what the card needs around the pair on screen: the items at
the pair after it and its neighbours, and the annotator's answers (never anything from the
judge). At a key press the card moves to the pair after it at once, then, in the same script
run, right after drawing it, opens the project, stores the answer, reads what the next key
press needs and closes the project again (``finally``: an interrupted drawing still stores
it). "Saved grade ..." appears when the answer is stored; an answer that could not be stored
brings its pair back with the reason. The file is never held between key presses, so the judge
job and CLI commands get it in between; while one of them holds it, the page waits a few
seconds for it (:func:`workbench.services.calibration.workflow.open_for_labelling`).
"""

from __future__ import annotations

import html
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from workbench.errors import WorkbenchError
from workbench.ui import auth, context

GRADE_LABELS = {
    0: "0 · Not relevant",
    1: "1 · Related, does not help",
    2: "2 · Partly answers",
    3: "3 · Fully answers",
}
CONTEXT_CHARS = 600
_STOP = {"the", "and", "for", "with", "what", "how", "are", "does", "from", "that", "this", "which",
         "who", "why", "when", "where", "into", "can", "you", "your", "our", "was", "were", "has", "have"}
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")


def query_terms(query: str) -> list[str]:
    """The query's words worth marking in the text (3+ letters, no stop words)."""
    words = {w.lower() for w in re.findall(r"\w+", query or "") if len(w) >= 3}
    return sorted(words - _STOP, key=len, reverse=True)


def marked(text: str, terms: list[str]) -> str:
    """``text`` as safe HTML with the query terms in ``<mark>``: the text is split on the terms
    first and each piece escaped on its own, so a term can never match inside an HTML entity."""
    if not terms:
        return html.escape(text)
    pattern = re.compile(r"\b(" + "|".join(re.escape(t) for t in terms) + r")\b", re.IGNORECASE)
    out, last = [], 0
    for m in pattern.finditer(text):
        out.append(html.escape(text[last:m.start()]))
        out.append(f"<mark>{html.escape(m.group(0))}</mark>")
        last = m.end()
    out.append(html.escape(text[last:]))
    return "".join(out)


def passage_html(item: dict, terms: list[str]) -> str:
    """The document around the judged span, the span highlighted (all pieces escaped)."""
    text = item["text"] or ""
    start, end = item["start"], min(item["end"], len(text))
    before_start = max(0, start - CONTEXT_CHARS)
    after_end = min(len(text), end + CONTEXT_CHARS)
    before = ("… " if before_start > 0 else "") + text[before_start:start]
    after = text[end:after_end] + (" …" if after_end < len(text) else "")
    return (
        '<div data-testid="label-document" style="white-space: pre-wrap; line-height: 1.55; '
        'border: 1px solid rgba(49,51,63,0.2); border-radius: 0.5rem; padding: 0.8rem; max-height: 28rem; '
        'overflow-y: auto">'
        f'<span style="color: rgba(49,51,63,0.6)">{marked(before, terms)}</span>'
        f'<span data-testid="label-passage" style="background: rgba(255, 214, 102, 0.35); '
        f'border-left: 3px solid #f0a500; padding: 0 0.2rem">{marked(text[start:end], terms)}</span>'
        f'<span style="color: rgba(49,51,63,0.6)">{marked(after, terms)}</span></div>'
    )


def pair_html(item: dict, position: int, total: int, terms: list[str]) -> str:
    """The pair as the SME reads it, as one block of safe HTML: "Pair n of N", the query (terms
    marked), its description, the document's title and :func:`passage_html`."""
    description = (f'<div style="color: rgba(49,51,63,0.75)">{html.escape(item["description"])}</div>'
                   if item["description"] else "")
    return (
        f'<div data-testid="label-pair" style="font-weight: 600; margin-bottom: 0.4rem">'
        f"Pair {position + 1} of {total}</div>"
        f'<div data-testid="label-query" style="font-size: 1.25rem; font-weight: 600">'
        f'{marked(item["query"] or item["query_id"], terms)}</div>{description}'
        f'<div data-testid="label-title" style="font-weight: 600; margin: 0.6rem 0 0.3rem">'
        f'{html.escape(item["title"] or item["doc_id"])}</div>'
        f"{passage_html(item, terms)}"
    )


def sentences(item: dict) -> list[tuple[int, int, str]]:
    """The passage's sentences as ``(start, end, text)`` document spans (evidence choices)."""
    text = item["text"] or ""
    start, end = item["start"], min(item["end"], len(text))
    out = []
    for m in _SENTENCE.finditer(text[start:end]):
        piece = m.group(0)
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            s = start + m.start() + lead
            out.append((s, start + m.end(), piece.strip()))
    return out


def _overlap() -> int:
    """SMEs per pair (``[calibration] overlap``; 0: every SME labels every pair)."""
    from workbench.config import load_settings

    return int(load_settings().get("calibration", "overlap"))


def _key(*parts) -> str:
    return "label_" + "_".join(str(p) for p in parts)


#: Seconds a key press waits for the project while another process (a judge job writing a
#: batch, a CLI command) holds it; past that, the answer is not stored and its pair comes back.
#: ``None``: the services' default for long-running writers (the store's ``WRITER_WAIT``).
OPEN_WAIT: float | None = None
_VIEW = "_label_view"  # what the card draws from (see the module docstring)
_PENDING = "_label_pending"  # answers given on screen, not stored yet (in order)
_ADVANCING = ("label", "skip", "cant_judge")
_SAID = "_label_said"  # (kind, message) of the last stored answer, shown above the card
_UNKNOWN = "unknown"  # the pair after an answer, when the card did not hold it at the key press


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


def _go(sample: str, position: int | None) -> None:
    st.session_state[_key("position", sample)] = position
    st.session_state.pop(_key("shown_at", sample), None)


def _view(sample: str, annotator: str) -> dict:
    """The session's view of one sample for one annotator (a new one when either changes)."""
    key = (str(context.db_path()), sample, annotator)
    view = st.session_state.get(_VIEW)
    if view is None or view["key"] != key:
        view = {"key": key, "items": {}, "states": {}, "total": 0, "next": {}, "stale": True,
                "overlap": _overlap()}
        st.session_state[_VIEW] = view
    return view


def render() -> None:
    from workbench.services.calibration import workflow as cal

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
        if st.session_state.get(_PENDING):  # answers given on the card that cannot be stored now
            _not_stored(str(exc))
            st.error(st.session_state.pop(_SAID)[1])
        else:
            st.error(context.plain(str(exc)))
        return
    try:
        samples = cal.list_samples(db)
        if samples.empty:
            st.info("There is no calibration sample to label yet. Once the pool has been judged, draw one "
                    "on the Calibration page.")
            context.page_link("calibration", "Go to Calibration", ":material/verified:")
            return
        names = samples["name"].tolist()
        sample = st.selectbox("Calibration sample", names, key="label_sample")
        annotator = context.annotator()
        if not annotator:
            st.warning("Enter your annotator id in the sidebar first: every label is recorded with it.")
            return
        if not auth.may("label"):
            st.info("You can read this project but not label it; ask a lead for the annotator role.")
            return
        st.checkbox("Show the judge's label after I submit", key="label_reveal",
                    help="Off by default, so the judge cannot anchor your grade. When on, "
                         "each label records that the judge's output was shown afterwards.")
        _view(sample, annotator)["overlap"] = _overlap()
        # A whole-page run (opening the page, another sample, the reveal box) reads everything
        # afresh: another tab may have labelled, a lead may have re-imported a document.
        _sync(db, sample, annotator, fresh=True)
    finally:
        db.close()
    _labelling(sample, annotator)


# -- storing and reading (no drawing: these run inside `finally`) ---------------------------

def _sync_open(sample: str, annotator: str) -> bool:
    """:func:`_sync` on a project handle of its own; False when the project could not be opened
    (the reason is kept for the next draw, and the pending answers are dropped with it)."""
    from workbench.services.calibration import workflow as cal

    try:
        with _timed("open"):
            db = cal.open_for_labelling(context.db_path(), wait=OPEN_WAIT)
    except WorkbenchError as exc:
        _not_stored(str(exc))
        _view(sample, annotator)["stale"] = True
        return False
    try:
        _sync(db, sample, annotator)
    finally:
        with _timed("close"):
            db.close()
    return True


def _not_stored(reason: str) -> None:
    """Drop every pending answer, bring the first one's pair back and say why it was not stored."""
    pending = st.session_state.get(_PENDING) or []
    st.session_state[_PENDING] = []
    answers = [a for a in pending if a["action"] in _ADVANCING]
    if answers:
        first = answers[0]
        _go(first["sample"], first["position"])
        more = f" (and {len(answers) - 1} answer(s) after it)" if len(answers) > 1 else ""
        _say("error", context.plain(f"Your answer to pair {first['position'] + 1}{more} was not stored: "
                                    f"{reason}. Give it again."))
    else:
        _say("error", context.plain(reason))


def _say(kind: str, message: str) -> None:
    st.session_state[_SAID] = (kind, message)


def _sync(db, sample: str, annotator: str, *, fresh: bool = False) -> None:
    """Store the pending answers in order, then read what the card needs (no drawing here);
    ``fresh``: read the items again too, not only those the session does not hold."""
    from workbench.services.calibration import workflow as cal

    view = _view(sample, annotator)
    pos_key = _key("position", sample)
    last = None
    while st.session_state.get(_PENDING):
        action = st.session_state[_PENDING][0]
        try:
            with _timed("store"):
                message = _store(db, cal, action)
        except WorkbenchError as exc:
            _not_stored(str(exc))
            last = None
            break
        # Popped right after the commit (no Streamlit call in between can interrupt it), so an
        # answer is never stored twice.
        st.session_state[_PENDING].pop(0)
        _say(*message)
        last = action
    position = st.session_state.get(pos_key)
    after = None
    if (last is not None and last["action"] in _ADVANCING and last["sample"] == sample
            and (position == last["to"] or (position is None and last["to"] == _UNKNOWN))):
        # The card moved on at the key press; the pair after the answered one is read again now
        # that the answer is stored (with an overlap, other SMEs may have answered the pair the
        # card moved to meanwhile: then the card moves once more).
        position, after = None, last["position"]
    try:
        with _timed("read"):
            snap = cal.labelling_view(db, sample, annotator, position=position, after=after,
                                      overlap=view["overlap"], have=() if fresh else view["items"].keys())
    except WorkbenchError as exc:
        _say("error", context.plain(str(exc)))
        view["stale"] = True
        return
    keep = {p for p in (snap["position"], snap["next"]) if p is not None}
    if snap["position"] is not None:
        keep |= {snap["position"] - 1, snap["position"] + 1}
    items = {p: item for p, item in view["items"].items() if p in keep}
    items.update(snap["items"])
    view.update(items=items, states=snap["states"], total=snap["total"], stale=False,
                next={} if snap["position"] is None else {snap["position"]: snap["next"]})
    if st.session_state.get(pos_key) != snap["position"]:
        _go(sample, snap["position"])


def _store(db, cal, action: dict) -> tuple[str, str]:
    """Store one pending answer; the message to show once it is stored."""
    sample, annotator, position = action["sample"], action["annotator"], action.get("position")
    kind = action["action"]
    if kind == "label":
        grade = action["grade"]
        cal.save_label(db, sample, annotator, position, grade, comment=action["comment"],
                       evidence=action["evidence"], seconds=action["seconds"], reveal=action["reveal"])
        message = f"Saved grade {grade} for pair {position + 1}."
        if action["reveal"]:
            judge = cal.judge_output(db, sample, annotator, position)
            message += f" The judge said {judge.get('grade')}: {judge.get('reason') or 'no reason given'}"
        return "success", context.plain(message)
    if kind in ("skip", "cant_judge"):
        fn = cal.skip if kind == "skip" else cal.cant_judge
        fn(db, sample, annotator, position, seconds=action["seconds"], comment=action["comment"])
        word = "Skipped" if kind == "skip" else "Marked can't judge:"
        return "info", f"{word} pair {position + 1}."
    undone = cal.undo(db, sample, annotator)
    if undone is None:
        return "info", "Nothing to undo."
    _go(sample, undone)
    return "info", f"Undid your last action on pair {undone + 1}."


# -- the card ------------------------------------------------------------------------------

@st.fragment
def _labelling(sample: str, annotator: str) -> None:
    # Buttons act in on_click callbacks, which run before the card is drawn again: one
    # fragment run per key press (see the module docstring for the order of the work).
    with _timed("card run"):
        _card(sample, annotator)


def _card(sample: str, annotator: str) -> None:
    view = _view(sample, annotator)
    pos_key = _key("position", sample)
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
    try:
        with _timed("draw"):
            bar = _draw(view, sample, annotator, position)
    finally:
        # Store the answer (and read ahead for the next key press) right after drawing, even when
        # the drawing was interrupted (another key press, a reload): no Streamlit call in here.
        if not read_first and (st.session_state.get(_PENDING) or (
                drawn is not None and drawn not in view["next"])):
            stored = _sync_open(sample, annotator)
    said = st.session_state.pop(_SAID, None)
    if st.session_state.get(pos_key) != drawn:
        if said:  # for the card drawn next
            st.session_state[_SAID] = said
        _rerun_card()
    if said:
        getattr(status, said[0])(said[1])
    if stored:
        bar.progress(*_progress_bar(view))


def _rerun_card() -> None:
    from streamlit.errors import StreamlitAPIException

    try:
        st.rerun(scope="fragment")
    except StreamlitAPIException:  # the card is being drawn as part of the whole page
        st.rerun()


def _progress_bar(view: dict) -> tuple[float, str]:
    from workbench.services.calibration import workflow as cal

    done = cal.progress_of(view["states"], view["total"])
    text = (f"{done['labelled']} labelled, {done['skipped']} skipped, {done['cant_judge']} can't judge "
            f"of {done['total']} pairs")
    return min(1.0, (done["total"] - done["open"]) / max(done["total"], 1)), text


def _draw(view: dict, sample: str, annotator: str, position: int | None):
    """Draw the card from the session's view (no project access); returns the progress bar."""
    value, text = _progress_bar(view)
    bar = st.empty()
    bar.progress(value, text=text)
    if position is None:
        st.success("You have labelled every pair of this sample. Thank you! The Calibration page shows "
                   "how the judge compares.")
        st.button("Undo my last action", key=_key("undo_end", sample), shortcut="U",
                  on_click=_on_undo, args=(sample, annotator))
        return bar
    total = view["total"]
    item = view["items"].get(position)
    if item is None:  # the project could not be read (the reason is shown above)
        st.warning("This pair cannot be shown right now. Press a key again in a moment, or reload the page.")
        return bar
    shown_key = _key("shown_at", sample)
    if st.session_state.get(shown_key, (None,))[0] != position:
        st.session_state[shown_key] = (position, time.monotonic())
    state = view["states"].get(position)

    terms = query_terms(item["query"] or "")
    st.html(pair_html(item, position, total, terms))  # one element: one message, one browser update

    if state is not None:
        word = {"label": f"your grade: {state['grade']}", "skip": "skipped", "cant_judge": "marked can't judge"}
        st.info(f"You already answered this pair ({word[state['action']]}). Choosing again replaces it.")

    choices = sentences(item)
    st.multiselect(
        "Evidence: the sentence(s) that support your grade (needed for grades 2 and 3)",
        options=list(range(len(choices))), format_func=lambda i: choices[i][2][:120],
        key=_key("evidence", sample, position),
    )
    st.text_input("Comment (optional)", key=_key("comment", sample, position))
    spans = [[s, e] for s, e, _ in choices]

    cols = st.columns(4)
    for grade, col in zip(range(4), cols):
        with col:
            st.button(GRADE_LABELS[grade], key=_key("grade", sample, grade), shortcut=str(grade), width="stretch",
                      type="primary" if state and state.get("grade") == grade else "secondary",
                      on_click=_on_grade, args=(sample, annotator, position, grade, spans))
    nav = st.columns(5)
    with nav[0]:
        st.button("Previous", key=_key("prev", sample), shortcut="Left", disabled=position == 0,
                  on_click=_on_step, args=(sample, -1, total))
    with nav[1]:
        st.button("Next", key=_key("next", sample), shortcut="Right", disabled=position >= total - 1,
                  on_click=_on_step, args=(sample, 1, total))
    with nav[2]:
        st.button("Skip", key=_key("skip", sample), shortcut="S", on_click=_on_act,
                  args=(sample, annotator, position, "skip"))
    with nav[3]:
        st.button("Can't judge", key=_key("cant", sample), shortcut="X", on_click=_on_act,
                  args=(sample, annotator, position, "cant_judge"))
    with nav[4]:
        st.button("Undo", key=_key("undo", sample), shortcut="U", on_click=_on_undo, args=(sample, annotator))
    st.caption("Keys: 0–3 grade · S skip · X can't judge · U undo · ← previous · → next")
    return bar


# -- key presses (callbacks: they only record the answer and move the card) ------------------

def _seconds(sample: str, position: int) -> float | None:
    shown = st.session_state.get(_key("shown_at", sample))
    if not shown or shown[0] != position:
        return None
    return round(time.monotonic() - shown[1], 3)


def _on_screen(sample: str, position: int) -> bool:
    """Whether the pair a key press answers is the pair the session is on. A key that comes while
    the card is being redrawn for another pair may still carry the old card's buttons: it is
    refused (nothing stored) rather than given to a pair the SME is no longer looking at."""
    if st.session_state.get(_key("position", sample)) == position:
        return True
    context.flash("label", "That key came while the page was moving to another pair; nothing was stored. "
                           "Press it again.", "warning")
    return False


def _on_step(sample: str, delta: int, total: int) -> None:
    """Previous / next: from the pair the session is on (not the one the buttons were drawn for)."""
    position = st.session_state.get(_key("position", sample))
    if position is not None and 0 <= position + delta < total:
        _go(sample, position + delta)


def _answer(sample: str, annotator: str, position: int, action: str, **fields) -> None:
    """Queue an answer to the pair on screen and move the card to the pair after it, which the
    session already holds when it can (the answer is stored right after the card is drawn)."""
    view = _view(sample, annotator)
    following = _UNKNOWN if view["stale"] else view["next"].get(position, _UNKNOWN)
    if action == "skip" and following is None:
        following = position  # the only open pair: a skipped pair comes back
    if following not in (_UNKNOWN, None) and following not in view["items"]:
        following = _UNKNOWN
    st.session_state.setdefault(_PENDING, []).append(
        {"sample": sample, "annotator": annotator, "position": position, "action": action,
         "seconds": _seconds(sample, position), "to": following, **fields})
    # What the card shows until the answer is stored (the progress line); replaced by what is
    # read back after storing.
    view["states"] = {**view["states"], position: {"action": action, "grade": fields.get("grade")}}
    _go(sample, None if following == _UNKNOWN else following)


def _on_grade(sample, annotator, position, grade, spans) -> None:
    if not _on_screen(sample, position):
        return
    # Read at the key press, not when the buttons were drawn: the box may have just been ticked.
    reveal = bool(st.session_state.get("label_reveal", False))
    chosen = [spans[i] for i in st.session_state.get(_key("evidence", sample, position), [])]
    if grade >= 2 and not chosen:
        context.flash("label", "Grades 2 and 3 need evidence: choose the sentence(s) that support the grade "
                               "first.", "warning")
        return
    comment = st.session_state.get(_key("comment", sample, position)) or None
    _answer(sample, annotator, position, "label", grade=grade, comment=comment, evidence=chosen or None,
            reveal=reveal)


def _on_act(sample, annotator, position, action) -> None:
    if not _on_screen(sample, position):
        return
    comment = st.session_state.get(_key("comment", sample, position)) or None
    _answer(sample, annotator, position, action, comment=comment)


def _on_undo(sample, annotator) -> None:
    st.session_state.setdefault(_PENDING, []).append(
        {"sample": sample, "annotator": annotator, "action": "undo"})
