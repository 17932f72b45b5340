"""Overview: what the project holds and which pipeline step comes next."""

from __future__ import annotations

import streamlit as st

from workbench.services.project import DEMO_READY, project_status
from workbench.ui import context

HEADLINE = [("documents", "Documents"), ("queries", "Queries"), ("chunks", "Chunks"),
            ("runs", "Runs"), ("judgments", "Labels")]


def render() -> None:
    st.title("Relevance Workbench")
    with context.project() as db:
        status = project_status(db)
    demo = " (demo project)" if status.meta.get("demo") == DEMO_READY else ""
    st.caption(context.plain(f"Project {status.path.name}{demo}"))

    columns = st.columns(len(HEADLINE))
    for column, (key, label) in zip(columns, HEADLINE):
        column.metric(label, f"{status.counts.get(key, 0):,}")

    st.subheader("Pipeline")
    nxt = status.next_step
    rows = []
    for number, step in enumerate(status.steps, start=1):
        state = "done" if step.done else ("next" if nxt and step.key == nxt.key else "to do")
        rows.append({"#": number, "step": step.title, "items": step.count, "state": state})
    st.dataframe(rows, hide_index=True, width="stretch")
    if nxt is not None:
        st.info(f"Next step: {nxt.title}. {nxt.hint}")
    else:
        st.success("Every pipeline step has run.")

    with st.expander("All tables"):
        st.dataframe(
            [{"table": k, "rows": v} for k, v in status.counts.items()], hide_index=True, width="stretch"
        )
