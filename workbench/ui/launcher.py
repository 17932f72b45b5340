"""What ``workbench app`` serves: the app (:mod:`workbench.ui.app`) as Streamlit's ``st.App``
with the sign-in cookie's routes beside it (:mod:`workbench.ui.session_routes`).

``streamlit run launcher.py`` finds the ``app`` below and serves it (Streamlit's server options
and the arguments after ``--`` work as for ``streamlit run app.py``).
"""

from pathlib import Path

import streamlit as st

from workbench.ui import session_routes

session_routes.SERVED[0] = True
app = st.App(Path(__file__).resolve().with_name("app.py"), routes=session_routes.routes())
