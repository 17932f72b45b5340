"""Overview: what the project holds and which pipeline step comes next.

Each step's state follows the rule in :mod:`workbench.services.project.status`. The next step is the
first one not done that a page of this app takes forward (``PageSpec.steps`` in
:mod:`workbench.ui.pages`); a step no page offers yet is shown as "not in the app yet", never
as a command to type.
"""

from __future__ import annotations

import streamlit as st

from workbench.services.project.lifecycle import DEMO_READY, project_status
from workbench.ui import context
from workbench.ui.pages import PAGES, page_for_step, shown_to
from workbench.ui.words import params_text

# What to do on the step's page, in the page's words.
ACTIONS = {
    "corpus": "Import documents and queries",
    "chunks": "Create a chunking (section 1, Chunk)",
    "runs": "Run a retriever (section 2, Retrieve)",
    "pool": "Build a pool from your runs (section 3, Pool)",
    "judgments": "Grade the pool's pairs with the LLM judge",
    "calibration": "Draw a calibration sample so SMEs can check the judge",
    "qrels": "Label the pool's pairs that have no label yet",
    "evaluation": "Evaluate your runs against the qrels",
}
# A partly done step may be taken forward on another page than the one that starts it.
PARTIAL_PAGE = {"calibration": "label"}
# What to do on a partly done step's page; {on_page} is where "on the X page" goes (else at the end).
REPAIR = {
    "calibration": "Label the calibration sample's pairs (blind to the judge) {on_page}, then read the "
                   "verdict on the Calibration page",
    "chunks": "Create a chunking that covers every document (section 1, Chunk) {on_page}: "
              "a chunking made before documents were imported misses them",
    "runs": "Run a retriever again so a run covers every document (section 2, Retrieve)",
}


def next_step_sentence(title: str, action: str, page_title: str) -> str:
    """"Next step: TITLE. ACTION on the PAGE page.", the page named where the action puts it
    ({on_page}), so an action that goes on to another page never ends "… on the Calibration
    page on the Label page"."""
    on_page = f"on the {page_title} page"
    text = action.format(on_page=on_page) if "{on_page}" in action else f"{action} {on_page}"
    return f"Next step: {title}. {text}."


def _state_in_app(step) -> str:
    if step.state in ("to do", "partial") and page_for_step(step.key) is None:
        return f"{step.state} (not in the app yet)"
    return step.state


@context.page_run
def render() -> None:
    st.title("Relevance Workbench")
    with context.project() as db:
        status = project_status(db)
    demo = " (demo project)" if status.meta.get("demo") == DEMO_READY else ""
    st.caption(context.plain(f"Project {status.path.name}{demo}"))

    counts = status.counts
    headline = [("Documents", counts.get("documents", 0)), ("Queries", counts.get("queries", 0)),
                ("Chunkings", counts.get("chunkings", 0)), ("Runs", counts.get("runs", 0)),
                ("Pools", counts.get("pools", 0)), ("Labels", status.labels)]
    for column, (label, value) in zip(st.columns(len(headline)), headline):
        column.metric(label, f"{value:,}")

    st.subheader("Pipeline")
    offered = {key for key in ACTIONS if page_for_step(key) is not None}
    nxt = status.next_step_among(offered)
    rows = []
    for number, step in enumerate(status.steps, start=1):
        page = page_for_step(step.key)
        state = "next" if nxt is not None and step.key == nxt.key else _state_in_app(step)
        rows.append({"#": number, "step": step.title, "state": state, "what the project holds": step.detail,
                     "page": page.title if page else ""})
    context.table(rows, key="pipeline")
    for warning in status.warnings:
        st.warning(context.plain(warning[0].upper() + warning[1:] + "."))
    if nxt is not None:
        page = page_for_step(nxt.key)
        if nxt.state == "partial" and nxt.key in PARTIAL_PAGE:
            page = next((p for p in PAGES if p.url_path == PARTIAL_PAGE[nxt.key]), page)
        action = REPAIR.get(nxt.key, ACTIONS[nxt.key]) if nxt.state == "partial" else ACTIONS[nxt.key]
        sentence = next_step_sentence(nxt.title, action, page.title)
        if not shown_to(page):  # a lead's page, not in an annotator's navigation
            sentence += " A lead takes this step: that page is a lead's."
        st.info(context.plain(sentence))
        context.page_link(page.url_path, f"Go to {page.title}", icon=":material/arrow_forward:")
    else:
        later = [s.title for s in status.steps if s.actionable]
        if later:
            st.success(context.plain(
                "Every step this app offers is done. Still ahead, not in the app yet: " + ", ".join(later) + "."))
        else:
            st.success("Every pipeline step is done.")

    left, right = st.columns(2)
    with left:
        st.markdown("**Chunkings**")
        if len(status.chunkings):
            context.table(
                [{"chunking": c.name, "strategy": c.strategy, "parameters": params_text(c.params),
                  "chunks": f"{int(c.chunks):,}", "documents": f"{int(c.documents):,} of {int(c.total_documents):,}"}
                 for c in status.chunkings.itertuples(index=False)], key="chunkings")
        else:
            st.caption("No chunking yet.")
    with right:
        st.markdown("**Runs**")
        if len(status.runs):
            context.table(
                [{"run": r.name, "retriever": r.retriever, "chunking": r.chunking or "",
                  "documents": (f"{int(r.documents):,} of {int(r.total_documents):,}" if r.known
                                else "not recorded"),
                  "queries": f"{int(r.queries):,}"}
                 for r in status.runs.itertuples(index=False)], key="runs")
        else:
            st.caption("No run yet.")

    with st.expander("All tables"):
        st.dataframe([{"table": k, "rows": v} for k, v in counts.items()], hide_index=True, width="stretch")
