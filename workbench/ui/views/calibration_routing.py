"""The Calibration page's "Route the labelling" panel (leads): the active sample SMEs open on the
Label page, the sample's assignment (which SMEs, pairs each, SMEs per pair) with each SME's
progress, and the sample's labelling guidelines (a Markdown file). Every write goes through
:mod:`workbench.services.calibration.routing` / :mod:`~workbench.services.calibration.guidelines`,
which check the role again.
"""

from __future__ import annotations

import streamlit as st

from workbench.errors import WorkbenchError
from workbench.services.calibration import guidelines, routing
from workbench.ui import context


def panel(db, sample: str) -> None:
    """The panel for ``sample`` (called inside the page's project block)."""

    active = routing.active_sample(db)
    plan = routing.assignment(db, sample)
    progress = routing.progress(db, sample) if plan else []
    guide = guidelines.guidelines(db, sample)
    title = "Route the labelling" + (" (active sample)" if active == sample else "")
    # keyed and tracked: it stays open across the runs an upload and its storing start (an
    # untracked expander is drawn closed again when a message above it comes or goes)
    with st.expander(title, expanded=False, icon=":material/alt_route:", key="routing_panel", on_change="rerun"):
        _active(sample, active)
        st.divider()
        _assignment(sample, plan, progress)
        st.divider()
        _guidelines(sample, guide)


def _active(sample: str, active: str | None) -> None:
    if active == sample:
        st.markdown(context.plain(f"SMEs open {sample} by default on the Label page."))
        if st.button("No active sample", key="routing_deactivate"):
            _write(lambda db: _routing().set_active(db, None), "No active sample: SMEs open the sample they "
                                                               "labelled last.")
        return
    st.markdown(context.plain(f"Active sample: {active or 'none'}. SMEs open the active sample by default on "
                              f"the Label page."))
    if st.button(context.plain(f"Make {sample} the active sample"), key="routing_activate", type="primary"):
        _write(lambda db: _routing().set_active(db, sample), f"{sample} is the active sample.")


def _assignment(sample: str, plan: dict | None, progress: list[dict]) -> None:
    if plan is None:
        st.caption("No assignment: every SME may label every pair ([calibration] overlap applies).")
    else:
        cap = "" if plan["per_annotator"] is None else f", at most {plan['per_annotator']} each"
        whole = (f" (in {plan['queries_covered']} of {plan['queries_total']} whole queries: all pairs of a query go "
                 f"to the same SMEs)") if plan.get("unit") == "queries" else ""
        st.caption(context.plain(f"{plan['covered']} of {plan['total']} pairs assigned{whole}, {plan['overlap']} SME(s) "
                                 f"per pair{cap} (seed {plan['seed']}), set by {plan['set_by']}."))
        context.table([{"SME": p["annotator"], "assigned": p["assigned"], "answered": p["answered"],
                        "open": p["open"]} for p in progress], key="routing-progress")
    with st.form("routing_assign"):
        names = st.text_input("Annotator ids (comma-separated)", key="routing_annotators", value=", ".join((plan or {}).get("annotators", [])),
                              help="As the SMEs type them on the Label page (case and spaces do not matter).")
        cols = st.columns(3)
        overlap = cols[0].number_input("SMEs per pair", min_value=1, key="routing_overlap", value=int((plan or {}).get("overlap", 1)))
        per = cols[1].number_input("Pairs per SME (0: no cap)", min_value=0, key="routing_per",
                                   value=int((plan or {}).get("per_annotator") or 0))
        seed = cols[2].number_input("Seed", min_value=0, key="routing_seed", value=int((plan or {}).get("seed", 0)),
                                    help="The order the pairs are handed out in; stored with the assignment.")
        if st.form_submit_button("Assign pairs"):
            ids = [n.strip() for n in names.split(",") if n.strip()]
            _write(lambda db: _routing().assign(db, sample, ids, overlap=int(overlap),
                                                per_annotator=int(per) or None, seed=int(seed)),
                   f"Assigned the pairs of {sample}.")
    if plan is not None and st.button("Drop the assignment", key="routing_clear"):
        _write(lambda db: _routing().clear_assignment(db, sample), f"{sample}: every SME may label every pair.")


def _guidelines(sample: str, guide: dict | None) -> None:

    if guide is None:
        st.caption("No labelling guidelines for this sample.")
    else:
        by = f", set by {guide['set_by']}" if guide.get("set_by") else ""
        st.caption(context.plain(f"Guidelines v{len(guide['history']) + 1}, version {guide['sha256'][:12]} "
                                 f"({guide.get('source') or 'uploaded'}){by}; {len(guide['history'])} earlier "
                                 f"version(s)."))
    upload = st.file_uploader("Guidelines (Markdown)", type=["md", "markdown", "txt"], key="routing_guidelines")
    if upload is not None and st.button("Store the guidelines with this sample", key="routing_guidelines_store"):
        data = upload.getvalue()

        def store(db):
            text = guidelines.check_text(data, upload.name)
            return guidelines.set_guidelines(db, sample, text, source=upload.name)

        _write(store, f"Stored the guidelines with {sample}; SMEs read them on the Label card.")


def _routing():

    return routing


def _write(action, message: str) -> None:
    try:
        with context.project() as db:
            action(db)
    except WorkbenchError as exc:
        st.error(context.plain(str(exc)))
        return
    context.flash("calibration", context.plain(message))
    st.rerun()
