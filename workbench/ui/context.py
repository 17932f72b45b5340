"""What every page shares: the project database path, the annotator, a per-run project handle,
links between pages, and the helpers that show text safely.

The project is opened through :func:`workbench.services.project.lifecycle.open_project` (the UI never
opens the database itself) for one unit of page work and closed at its end (never cached across
runs), so that CLI commands can use the project between two clicks in the app. A page's run
opens it once: :func:`page_run` (the views' ``render`` is decorated with it) keeps the project
the run's first :func:`project` opened until the run ends, and every later ``with project()`` of
that run hands out the same open project instead of opening the file again (each open costs a
DuckDB instance and the migrations check; docs/performance.md). The file is closed when the run
ends, whatever ended it (a return, ``st.rerun``, ``st.stop`` or an error).

Another process may hold the file (a background job writing its batch, a command): a page run
waits up to :data:`PAGE_WAIT` seconds for it, and a run that still finds it held says so and
runs again by itself every :data:`RETRY_SECONDS` until it opens the project, so a page never
stays an error with nothing on it (no jobs panel either) until the user clicks.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from urllib.parse import unquote

import streamlit as st

from workbench.errors import StoreLockedError, WorkbenchError
from workbench.services.project.lifecycle import init_project, open_project
from workbench.ui import auth  # registers the page session as the services' actor
from workbench.ui.project_path import served_project
from workbench.ui.words import page_message


def db_path() -> Path:
    """``--db`` after ``streamlit run app.py --``, else WORKBENCH_DB / the configuration."""
    if "db_path" not in st.session_state:
        st.session_state["db_path"] = served_project()
    return Path(st.session_state["db_path"])


#: Seconds a page run waits for a project another process holds (a job's batch is shorter).
PAGE_WAIT = 10.0
#: Seconds after which a page run that found the project held runs again by itself.
RETRY_SECONDS = 2.0
_AGAIN = "_page_runs_again"

_HELD = threading.local()  # this thread's script run: the open project (by path) and page_run's list


@contextmanager
def project() -> Iterator:
    """Open the project for one unit of page work; show a clear error instead of a traceback.

    Inside another ``with project()`` of the same script run (the same thread) on the same
    file, this is that open project: its sections' own ``with project()`` open nothing more.
    It is closed when the outermost block ends, or, inside :func:`page_run`, when the page run
    ends (the next ``with project()`` of the run reuses it).

    A missing database is the one message that names a command: the app cannot create a
    project, so whoever started it must (the path is the one the server was started with).
    """
    path = db_path()
    held = getattr(_HELD, "project", None)
    if held is not None and held[0] == path:
        yield held[1]
        return
    if not path.exists():
        _offer_to_create(path)
        st.stop()
    try:
        db = open_project(path, wait=PAGE_WAIT)
    except StoreLockedError as exc:
        st.error(plain(str(exc)))
        _run_again_soon()
        st.stop()
    except WorkbenchError as exc:
        st.error(plain(str(exc)))
        st.stop()
    _HELD.project = (path, db)
    kept = getattr(_HELD, "run", None)
    if kept is not None:  # inside page_run: closed when the run ends
        kept.append((held, db))
        yield db
        return
    try:
        yield db
    finally:
        _HELD.project = held
        db.close()


def _again() -> None:
    if st.session_state.pop(_AGAIN, False):
        return  # drawn by the page's own run: the next look is the timer's
    st.rerun(scope="app")


def _run_again_soon() -> None:
    """The page could not open the project (held by another process): run it again in
    :data:`RETRY_SECONDS` (a fragment's timer; nothing else would run it before a click)."""
    st.caption("This page tries again by itself in a moment.")
    st.session_state[_AGAIN] = True
    st.fragment(run_every=RETRY_SECONDS)(_again)()


def page_run(render):
    """Decorate a page's ``render``: the project its run opens stays open until the run ends
    (one open per run, however many sections read it); a nested ``page_run`` adds nothing."""

    @wraps(render)
    def run(*args, **kwargs):
        if getattr(_HELD, "run", None) is not None:
            return render(*args, **kwargs)
        _HELD.run = kept = []
        try:
            return render(*args, **kwargs)
        finally:
            _HELD.run = None
            for held, db in reversed(kept):
                _HELD.project = held
                db.close()

    return run


def _offer_to_create(path: Path) -> None:
    """The project file is missing (deleted, or the app started on a new path): offer to create it."""

    st.error(f"No project database at {plain(str(path))}.")
    st.caption("Create it here, as the demo project (a small handbook with queries and SME labels, "
               "chunked, retrieved and pooled) or as an empty project to import your own data into.")
    demo, empty = st.columns(2)
    choice = None
    if demo.button("Create the demo project", key="create_demo", type="primary"):
        choice = True
    if empty.button("Create an empty project", key="create_empty"):
        choice = False
    if choice is None:
        return
    try:
        with st.spinner("Creating the project…"):
            init_project(path, demo=choice)
    except WorkbenchError as exc:
        st.error(plain(str(exc)))
        return
    st.rerun()


_PAGES_KEY = "_workbench_pages"


def register_pages(pages: dict) -> None:
    """Remember the app's ``st.Page`` objects by url path, so pages can link to each other."""
    st.session_state[_PAGES_KEY] = pages


def page_link(url_path: str, label: str, icon: str | None = None) -> bool:
    """A link to another page of the app; False (nothing shown) when that page is not registered
    (a view rendered on its own, as in tests)."""
    page = st.session_state.get(_PAGES_KEY, {}).get(url_path)
    if page is None:
        return False
    st.page_link(page, label=label, icon=icon)
    return True


def annotator() -> str:
    """The annotator id as typed, trimmed (with sign-in on, the signed-in name)."""
    return str(st.session_state.get("annotator", "") or "").strip()


ANNOTATOR_COOKIE = "workbench_annotator"  # set by the Label page's card (a cookie needs the browser)


def remembered_annotator() -> str:
    """The annotator id a reload or a new tab brings back: the address's ``?annotator=``, else
    the cookie the Label page set; "" when neither holds one."""

    found = st.query_params.get("annotator")
    if not found:
        try:
            found = unquote(st.context.cookies.get(ANNOTATOR_COOKIE) or "")
        except Exception:  # noqa: BLE001 - no browser behind the session (tests): nothing remembered
            found = ""
    return str(found or "").strip()


def _remember_annotator() -> None:
    typed = annotator()
    st.session_state["annotator"] = typed  # the box keeps what was typed, trimmed
    if typed:
        st.query_params["annotator"] = typed
    elif "annotator" in st.query_params:
        del st.query_params["annotator"]


def sidebar() -> None:
    with st.sidebar:
        # The project's name, not its path on the server: SMEs never need (or see) server paths.
        st.caption("Project")
        st.text(Path(db_path()).stem)
        if auth.sidebar_user():  # signed in: the annotator id is the sign-in name
            return
        if "annotator" not in st.session_state:  # a reload or a new tab: the id given before
            st.session_state["annotator"] = remembered_annotator()
        st.text_input(
            "Annotator",
            key="annotator",
            placeholder="your name or id",
            on_change=_remember_annotator,
            help="Recorded with every label you give, so agreement can be measured per person. "
                 "Press Enter to start labelling.",
        )
        if annotator() and st.query_params.get("annotator") != annotator():
            st.query_params["annotator"] = annotator()  # the address keeps it across reloads


_MARKDOWN = str.maketrans({c: "\\" + c for c in "\\`*_[]<>#|~$"})


def plain(message: str) -> str:
    """Backslash-escape markdown in a one-line message for ``st.error``/``st.success``/``st.info``.

    Those elements render markdown, and messages quote ids, names, paths and file content; this
    keeps ``*x*``, ``_x_``, `` `x` ``, ``[x](y)``, ``<b>``, ``$x$`` literal. Corpus text itself
    (documents, queries, model output) goes through :func:`escaped`, never through markdown.
    """
    return str(message).translate(_MARKDOWN)


def escaped(text: str, *, tag: str = "div", css: str = "") -> None:
    """Show untrusted text (corpus, queries, model output) verbatim: escaped, never parsed as markdown."""
    style = f' style="{css}"' if css else ""
    st.html(f"<{tag}{style}>{html.escape(text)}</{tag}>")


def error(message, fields=None, *, uploaded=None) -> None:
    """Show a service error in the page's words (:func:`workbench.ui.words.page_message`)."""

    st.error(plain(page_message(message, fields, uploaded=uploaded, project=str(db_path()))))


def flash(key: str, message: str, kind: str = "success") -> None:
    """Keep a message to show after the rerun that follows a successful action."""
    st.session_state[f"_flash_{key}"] = (kind, message)


def show_flash(key: str) -> None:
    """Show (once) the message :func:`flash` kept for ``key``; it is already escaped."""
    kept = st.session_state.pop(f"_flash_{key}", None)
    if kept:
        kind, message = kept
        getattr(st, kind)(message)


@contextmanager
def progress(description: str, total: int | None = None, unit: str = "it") -> Iterator:
    """A :mod:`workbench.services.progress` factory drawing ``st.progress``: done/total and the
    rate measured while the work runs (never a speed written in advance)."""

    bar = st.progress(0.0, text=f"{description}…")
    started, done = time.perf_counter(), 0

    def advance(n: int = 1) -> None:
        nonlocal done
        done += n
        elapsed = max(time.perf_counter() - started, 1e-9)
        rate = f" · {done / elapsed:,.0f} {unit}/s" if elapsed > 0.5 else ""
        if total:
            bar.progress(min(done / total, 1.0), text=f"{description}: {done:,} of {total:,} {unit}{rate}")
        else:
            bar.progress(0.0, text=f"{description}: {done:,} {unit}{rate}")

    try:
        yield advance
    finally:
        bar.empty()


def table(rows: list[dict], *, key: str | None = None) -> None:
    """A small static table as escaped HTML: every cell through ``html.escape`` (names and ids
    are user data), readable in screenshots and by assistive tools. Large tables use
    ``st.dataframe``."""
    if not rows:
        return
    columns = list(rows[0])
    cell_css = ("text-align: left; padding: 0.35rem 0.6rem; vertical-align: top; "
                "border-bottom: 1px solid rgba(49, 51, 63, 0.12)")
    head = "".join(f'<th style="{cell_css}; font-weight: 600; color: rgba(49, 51, 63, 0.75)">'
                   f"{html.escape(str(c))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f'<td style="{cell_css}">{html.escape(str(row.get(c, "")))}</td>' for c in columns)
        + "</tr>"
        for row in rows)
    marker = f' data-table="{html.escape(key)}"' if key else ""
    st.html(f'<table{marker} style="border-collapse: collapse; width: 100%; font-size: 0.9rem">'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
