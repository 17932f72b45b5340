"""Label: an SME grades a calibration sample's pairs, one at a time, blind to the judge.

The page shows the query (and its description), the document's title and the judged passage
highlighted inside its document with the text around it, query terms marked. Grade buttons 0–3
(keys 0–3), Skip (S), Can't judge (X), Undo (U), Previous / Next (← / →). Every action is
stored the moment it is taken (:mod:`workbench.services.calibration`), so a reload loses nothing:
the page reopens on the first pair not labelled yet.

Blind by default: nothing the judge produced (grade, reason, model output) is read for the page
until this SME's label is in. With "Show the judge's label after I submit" ticked, the judge's
grade and reason appear after submitting, and the label records that they did.

Evidence: the passage's sentences are offered as evidence; the chosen ones are stored as
document character spans. They are required for grades 2 and 3 (the guide's rule).

All corpus text is escaped (``html.escape``) before it reaches the page.
"""

from __future__ import annotations

import html
import re
import time

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


def _go(sample: str, position: int | None) -> None:
    st.session_state[_key("position", sample)] = position
    st.session_state.pop(_key("shown_at", sample), None)


def render() -> None:
    from workbench.services import calibration as cal

    st.title("Label")
    st.caption("Grade each pair as a subject-matter expert. Your labels check whether the LLM judge "
               "can be trusted; the judge's grade stays hidden until you submit yours.")
    with context.project() as db:
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
        _labelling(db, cal, sample, annotator)


def _labelling(db, cal, sample: str, annotator: str) -> None:
    # Buttons act in on_click callbacks, which run before the page is drawn again: one script
    # run per key press, the new pair drawn straight from the stored state.
    pos_key = _key("position", sample)
    context.show_flash("label")
    if st.session_state.get(pos_key) is None:
        nxt = cal.next_item(db, sample, annotator, overlap=_overlap())
        st.session_state[pos_key] = None if nxt is None else nxt["position"]
    position = st.session_state.get(pos_key)
    done = cal.progress(db, sample, annotator)
    st.progress(min(1.0, (done["total"] - done["open"]) / max(done["total"], 1)),
                text=f"{done['labelled']} labelled, {done['skipped']} skipped, {done['cant_judge']} can't judge "
                     f"of {done['total']} pairs")
    if position is None:
        st.success("You have labelled every pair of this sample. Thank you! The Calibration page shows "
                   "how the judge compares.")
        st.button("Undo my last action", key=_key("undo_end", sample), shortcut="U",
                  on_click=_on_undo, args=(sample, annotator))
        return
    total = done["total"]
    item = cal.item(db, sample, position)
    shown_key = _key("shown_at", sample)
    if st.session_state.get(shown_key, (None,))[0] != position:
        st.session_state[shown_key] = (position, time.monotonic())
    state = cal.my_state(db, sample, annotator, position)

    terms = query_terms(item["query"] or "")
    st.markdown(f"**Pair {position + 1} of {total}**")
    st.html(f'<div data-testid="label-query" style="font-size: 1.25rem; font-weight: 600">'
            f'{marked(item["query"] or item["query_id"], terms)}</div>')
    if item["description"]:
        st.html(f'<div style="color: rgba(49,51,63,0.75)">{html.escape(item["description"])}</div>')
    st.html(f'<div data-testid="label-title" style="font-weight: 600; margin-top: 0.6rem">'
            f'{html.escape(item["title"] or item["doc_id"])}</div>')
    st.html(passage_html(item, terms))

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
                  on_click=_go, args=(sample, position - 1))
    with nav[1]:
        st.button("Next", key=_key("next", sample), shortcut="Right", disabled=position >= total - 1,
                  on_click=_go, args=(sample, position + 1))
    with nav[2]:
        st.button("Skip", key=_key("skip", sample), shortcut="S", on_click=_on_act,
                  args=(sample, annotator, position, "skip"))
    with nav[3]:
        st.button("Can't judge", key=_key("cant", sample), shortcut="X", on_click=_on_act,
                  args=(sample, annotator, position, "cant_judge"))
    with nav[4]:
        st.button("Undo", key=_key("undo", sample), shortcut="U", on_click=_on_undo, args=(sample, annotator))
    st.caption("Keys: 0–3 grade · S skip · X can't judge · U undo · ← previous · → next")


def _seconds(sample: str, position: int) -> float | None:
    shown = st.session_state.get(_key("shown_at", sample))
    if not shown or shown[0] != position:
        return None
    return round(time.monotonic() - shown[1], 3)


def _acting(work) -> None:
    """Run one stored action on its own project handle (inside a button callback); an error the
    user can act on is shown on the next draw instead of a traceback."""
    from workbench.services.project import open_project

    try:
        db = open_project(context.db_path())
    except WorkbenchError as exc:
        context.flash("label", context.plain(str(exc)), "error")
        return
    try:
        work(db)
    except WorkbenchError as exc:
        context.flash("label", context.plain(str(exc)), "error")
    finally:
        db.close()


def _on_grade(sample, annotator, position, grade, spans) -> None:
    from workbench.services import calibration as cal

    # Read at the key press, not when the buttons were drawn: the box may have just been ticked.
    reveal = bool(st.session_state.get("label_reveal", False))
    chosen = [spans[i] for i in st.session_state.get(_key("evidence", sample, position), [])]
    if grade >= 2 and not chosen:
        context.flash("label", "Grades 2 and 3 need evidence: choose the sentence(s) that support the grade "
                               "first.", "warning")
        return
    comment = st.session_state.get(_key("comment", sample, position)) or None

    def work(db) -> None:
        cal.save_label(db, sample, annotator, position, grade, comment=comment, evidence=chosen or None,
                       seconds=_seconds(sample, position), reveal=reveal)
        message = f"Saved grade {grade} for pair {position + 1}."
        if reveal:
            judge = cal.judge_output(db, sample, annotator, position)
            message += f" The judge said {judge.get('grade')}: {judge.get('reason') or 'no reason given'}"
        context.flash("label", context.plain(message))
        nxt = cal.next_item(db, sample, annotator, after=position, overlap=_overlap())
        _go(sample, None if nxt is None else nxt["position"])

    _acting(work)


def _on_act(sample, annotator, position, action) -> None:
    from workbench.services import calibration as cal

    comment = st.session_state.get(_key("comment", sample, position)) or None

    def work(db) -> None:
        fn = cal.skip if action == "skip" else cal.cant_judge
        fn(db, sample, annotator, position, seconds=_seconds(sample, position), comment=comment)
        word = "Skipped" if action == "skip" else "Marked can't judge:"
        context.flash("label", f"{word} pair {position + 1}.", "info")
        nxt = cal.next_item(db, sample, annotator, after=position, overlap=_overlap())
        _go(sample, None if nxt is None else nxt["position"])

    _acting(work)


def _on_undo(sample, annotator) -> None:
    from workbench.services import calibration as cal

    def work(db) -> None:
        position = cal.undo(db, sample, annotator)
        if position is None:
            context.flash("label", "Nothing to undo.", "info")
        else:
            context.flash("label", f"Undid your last action on pair {position + 1}.", "info")
            _go(sample, position)

    _acting(work)
