"""What every page shares: the project database path, the annotator, and a per-run DB handle.

The database is opened for the length of one script run and closed at its end (never cached
across runs), so that CLI commands can use the project between two clicks in the app.
"""

from __future__ import annotations

import argparse
import html
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import streamlit as st

from workbench.config import load_settings
from workbench.errors import WorkbenchError
from workbench.store.database import Database


def db_path() -> Path:
    """``--db`` after ``streamlit run app.py --``, else WORKBENCH_DB / the configuration."""
    if "db_path" not in st.session_state:
        parser = argparse.ArgumentParser(add_help=False)
        parser.add_argument("--db")
        known, _ = parser.parse_known_args(sys.argv[1:])
        path = known.db or os.environ.get("WORKBENCH_DB") or str(load_settings().db_path)
        st.session_state["db_path"] = path
    return Path(st.session_state["db_path"])


@contextmanager
def project() -> Iterator[Database]:
    """Open the project for one unit of page work; show a clear error instead of a traceback."""
    path = db_path()
    if not path.exists():
        st.error(f"No project database at {plain(str(path))}. "
                 f"Create one with `workbench --db {path} init --demo`.")
        st.stop()
    try:
        db = Database(path)
    except WorkbenchError as exc:
        st.error(plain(str(exc)))
        st.stop()
    try:
        yield db
    finally:
        db.close()


def annotator() -> str:
    return st.session_state.get("annotator", "").strip()


def sidebar() -> None:
    with st.sidebar:
        st.caption("Project database")
        st.code(str(db_path()), language=None)
        st.text_input(
            "Annotator",
            key="annotator",
            placeholder="your name or id",
            help="Recorded with every label you give, so agreement can be measured per person.",
        )


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
