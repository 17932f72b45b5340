"""Streamlit entry point: ``streamlit run workbench/ui/app.py -- --db PATH``. ``workbench app``
serves it through :mod:`workbench.ui.launcher`, which adds the routes of the sign-in cookie."""

from __future__ import annotations

import streamlit as st

from workbench.ui import auth, context
from workbench.ui.pages import page_specs

FAVICON = "\N{LEFT-POINTING MAGNIFYING GLASS}"


def main() -> None:
    # A favicon of our own: without one, Streamlit's front end makes each page's ``:material/...:``
    # icon the favicon, fetched from fonts.gstatic.com (the app must work offline). An emoji is
    # drawn by the browser from a data: URL, so nothing leaves the machine.
    st.set_page_config(page_title="Relevance Workbench", page_icon=FAVICON, layout="wide")
    auth.gate()  # the sign-in, when [app] auth is password or oidc
    context.db_path()
    pages = {
        spec.url_path: st.Page(spec.render, title=spec.title, url_path=spec.url_path, icon=spec.icon,
                               default=(i == 0))
        for i, spec in enumerate(page_specs())
    }
    context.register_pages(pages)
    navigation = st.navigation(list(pages.values()))
    context.sidebar()
    navigation.run()


main()
