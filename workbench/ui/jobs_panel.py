"""Background jobs on a page: start one, and follow, stop, resume or restart the page's jobs.

A page builds a typed request (:mod:`workbench.services.jobs.requests`) and calls :func:`launch`;
:func:`panel` shows the page's latest jobs from their rows (:func:`workbench.services.jobs.jobs`)
in a fragment that refreshes every :data:`LIVE_SECONDS` while one runs, so the progress survives
going to another page and a reload, and a job started by another lead shows too. When a job ends
the whole page reruns, so its tables show what the job stored.
"""

from __future__ import annotations

import streamlit as st

from workbench.errors import StoreLockedError, WorkbenchError
from workbench.services import jobs
from workbench.services.jobs import in_background as rule
from workbench.ui import context
from workbench.ui.words import page_message

LIVE_SECONDS = 1.5
_SEEN = "_jobs_active_seen"
STATE_WORDS = {"queued": "starting", "running": "running", "stopping": "stopping", "stopped": "stopped",
               "failed": "failed", "finished": "finished", "interrupted": "interrupted (its process ended)"}


def in_background(kind: str, size: int | None) -> bool:
    """Whether the page runs this work as a background job (:func:`workbench.services.jobs.in_background`)."""

    return rule(kind, size)


def launch(request, *, flash_key: str, fields: dict | None = None) -> bool:
    """Start ``request`` as a background job; True when it started (else the error is shown)."""

    try:
        started = jobs.start(context.db_path(), request)
    except WorkbenchError as exc:
        context.error(exc, fields)
        return False
    st.session_state.setdefault(_SEEN, set()).add(started.job_id)
    context.flash(flash_key, context.plain(f"Started in the background: {request.title()} (job {started.job_id}). "
                                           "You may leave this page; its progress stays here."), "info")
    return True


def _line(job: dict) -> str:
    done, total, unit = int(job["done"] or 0), job["total"], job["unit"] or ""
    amount = f"{done:,} of {int(total):,} {unit}" if total else (f"{done:,} {unit}" if done else "")
    phase = job["phase"] or ""
    return " · ".join(p for p in (phase, amount) if p)


def _job(job: dict, fields: dict | None, finished_action=None) -> None:

    state = job["state"]
    head = f"Job {job['job_id']}: {job['title']} — {STATE_WORDS.get(state, state)}"
    total = int(job["total"] or 0)
    if state in ("running", "stopping", "queued"):
        st.progress(min(1.0, int(job["done"] or 0) / total) if total else 0.0,
                    text=context.plain(head + (f" · {_line(job)}" if _line(job) else "")))
    else:
        st.markdown(context.plain(head + (f" · {_line(job)}" if _line(job) and state != "finished" else "")))
    if job.get("message") and state != "finished":
        st.caption(context.plain(job["message"]))
    if state == "finished" and isinstance(job.get("result"), dict) and job["result"].get("summary"):
        summary = page_message(job["result"]["summary"], fields)
        st.caption(context.plain(summary[:1].upper() + summary[1:] + "."))
    if state == "failed" and job.get("error") is not None:
        context.error(job["error"], fields)
    if state == "interrupted":
        st.warning("The job's process ended before the job did (the machine or the app stopped). "
                   + ("Resume continues where it stopped." if job["resumable"] else
                      "Restart runs it again from the beginning; nothing half-done was stored."))
    cols = st.columns(6)
    key = f"job_{job['job_id']}"
    if job["alive"] and state != "stopping":
        if cols[0].button("Stop", key=f"{key}_stop"):
            try:
                jobs.stop(context.db_path(), job["job_id"])
            except WorkbenchError as exc:
                context.error(exc, fields)
            st.rerun(scope="app")
    elif state in ("stopped", "failed", "interrupted"):
        label = "Resume" if job["resumable"] else "Restart"
        if cols[0].button(label, key=f"{key}_resume",
                          help=None if job["resumable"] else "Runs it again from the beginning."):
            try:
                jobs.resume(context.db_path(), job["job_id"])
                st.session_state.setdefault(_SEEN, set()).add(job["job_id"])
            except WorkbenchError as exc:
                context.error(exc, fields)
                return
            st.rerun(scope="app")
    elif state == "finished" and finished_action is not None:
        label, action = finished_action
        if cols[0].button(label, key=f"{key}_show"):
            action(job)
            st.rerun(scope="app")


def _jobs(kinds: tuple[str, ...], limit: int, fields: dict | None, ended, finished_action,
          unread: bool = False) -> None:
    """The jobs' lines (a fragment). ``unread``: the page could not read them when it ran (the
    project was held), so this fragment looks every :data:`LIVE_SECONDS` until it can; then,
    with no job active, the page runs again to draw the panel as it should be (still or live)."""

    try:
        rows = jobs.jobs(context.db_path(), kinds, limit=limit)
    except StoreLockedError:
        # a job (or a command) holds the project this instant: look again, do not go quiet
        st.caption("The project is in use by another process; the jobs are shown again in a moment.")
        return
    except WorkbenchError as exc:
        context.error(exc, fields)
        return
    if unread and not any(j["state"] in jobs.ACTIVE for j in rows) and not st.session_state.get(_SEEN):
        st.rerun(scope="app")
    seen = st.session_state.setdefault(_SEEN, set())
    active = {j["job_id"] for j in rows if j["state"] in jobs.ACTIVE}
    for job in rows:
        _job(job, fields, finished_action)
    ended_now = [j for j in rows if j["job_id"] in seen and j["job_id"] not in active]
    seen.difference_update(j["job_id"] for j in ended_now)
    seen.update(active)
    if ended_now:
        for job in ended_now:
            if ended is not None and job["state"] == "finished":
                ended(job)
        st.rerun(scope="app")  # the page's tables show what the job stored


def panel(kinds: tuple[str, ...], *, title: str = "Background jobs", limit: int = 5, fields: dict | None = None,
          ended=None, finished_action=None) -> None:
    """The page's latest jobs of ``kinds`` (none: nothing shown), refreshed while one runs.
    ``ended(job)`` is called once for each job this session saw running that finished;
    ``finished_action`` (label, action(job)) is a button on each finished job (then a rerun)."""

    try:
        rows: list[dict] | None = jobs.jobs(context.db_path(), kinds, limit=limit)
    except StoreLockedError:
        # Held by another process this instant (a job writing its batch): the panel must not
        # vanish, with nothing to bring it back until the user acts, while a job may be running.
        rows = None
    except WorkbenchError:
        return
    if rows == []:
        return
    live = rows is None or any(j["state"] in jobs.ACTIVE for j in rows) or bool(st.session_state.get(_SEEN))
    st.markdown(f"**{title}**")
    st.fragment(run_every=LIVE_SECONDS if live else None)(_jobs)(kinds, limit, fields, ended, finished_action,
                                                                 unread=rows is None)
