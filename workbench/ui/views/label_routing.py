"""The Label page's part of the lead's routing (issue 34), kept apart from the card's key path:

- :func:`opening_sample`: the page opens on the sample the lead made active
  (:func:`workbench.services.calibration.routing.active_sample`), else on the one the SME
  labelled last, else the newest;
- :func:`confirmed`: before labelling under an annotator id the project has never seen (no
  label anywhere, no assignment naming it) while it knows others, the page asks to confirm, so
  a mistyped id does not silently start a new annotator; once confirmed for this project, not
  again in the session;
- :func:`walkable` / :func:`step`: previous / next move along the SME's assigned pairs when the
  lead assigned the sample (all pairs otherwise);
- :func:`guidelines_panel`: the sample's labelling guidelines above the card, Markdown rendered
  with raw HTML escaped (:mod:`workbench.ui.markdown_html`);
- :func:`cursor_start`: where the evidence cursor starts (the first sentence holding a query
  term, headings skipped) and the units the ``n`` / ``N`` keys jump between
  (:mod:`workbench.core.calibration.evidence_cursor`).
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from workbench.core.calibration.evidence_cursor import first_cursor, is_heading, term_units
from workbench.errors import WorkbenchError
from workbench.services.calibration import guidelines, routing
from workbench.services.calibration import workflow as cal
from workbench.services.calibration.workflow import annotator_id
from workbench.ui import context
from workbench.ui.markdown_html import markdown_html

_CONFIRMED = "_label_confirmed_ids"  # (project path, annotator id) the SME confirmed as theirs


def opening_sample(db, annotator: str, names: Sequence[str]) -> str:
    """The sample the Label page opens on (see the module docstring)."""

    try:
        active = routing.active_sample(db)
    except WorkbenchError:
        active = None
    if active in names:
        return active
    try:
        last = cal.latest_sample(db, annotator)
    except WorkbenchError:
        last = None
    return last if last in names else names[0]


def confirmed(db, sample: str, typed: str) -> bool:
    """Whether the page may go on labelling as ``typed``: the id is known to the project, or the
    SME confirmed it in this session. Otherwise a warning and a confirm button are shown."""

    who = annotator_id(typed)
    key = (str(context.db_path()), who)
    if key in st.session_state.get(_CONFIRMED, set()):
        return True
    try:
        new = routing.needs_confirmation(db, sample, who)
    except WorkbenchError:
        new = False
    if not new:
        st.session_state.setdefault(_CONFIRMED, set()).add(key)
        return True
    st.warning(context.plain(
        f"No labels are stored under the annotator id \"{typed}\" yet, and no assignment names it. If you "
        f"have labelled before, check the id in the sidebar: a mistyped id starts a new annotator, and "
        f"your labels would be split between two people."), icon=":material/person_alert:")
    st.button(context.plain(f"Yes, start labelling as {typed}"), key="label_confirm_new_id",
              on_click=_confirm, args=(key,), type="primary")
    return False


def _confirm(key) -> None:
    st.session_state.setdefault(_CONFIRMED, set()).add(key)


def guidelines_of(db, sample: str) -> dict | None:
    """The sample's guidelines (None when none were set or they cannot be read now)."""

    try:
        return guidelines.guidelines(db, sample)
    except WorkbenchError:
        return None


def guidelines_panel(guide: dict | None) -> None:
    """The guidelines in a panel above the card, closed by default (their hash shown small)."""
    if not guide:
        return
    with st.expander("Labelling guidelines", icon=":material/menu_book:"):
        st.html(f'<div data-testid="label-guidelines">{markdown_html(guide["text"])}</div>')
        st.caption(f"Version {guide['sha256'][:12]}, set by {context.plain(str(guide.get('set_by')))}")


def walkable(assigned: Sequence[int] | None, total: int) -> Sequence[int]:
    """The positions previous / next move over: the assigned ones (sorted) or all."""
    return range(int(total)) if assigned is None else sorted(int(p) for p in assigned)


def step(walk: Sequence[int], position: int | None, delta: int) -> int | None:
    """The position ``delta`` (±1) from ``position`` along ``walk`` (None: no such position).
    From a position not on the walk, the nearest one in that direction."""
    if position is None or not walk:
        return None
    if delta > 0:
        return next((p for p in walk if p > position), None)
    return next((p for p in reversed(walk) if p < position), None)


def cursor_start(item: dict, units: Sequence[tuple[int, int, str]], terms: Sequence[str]) -> tuple[int, list[int]]:
    """``(cursor, hits)``: where the evidence cursor starts and the units holding a query term
    (headings left out), as indices into ``units`` (:func:`workbench.ui.views.label.sentences`)."""
    text = item.get("text") or ""
    headings = [is_heading(text, s, e) for s, e, _ in units]
    hits = term_units([u for _, _, u in units], terms, headings)
    return first_cursor(headings, hits), hits
