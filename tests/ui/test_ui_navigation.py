"""The app's navigation per role, in Streamlit's AppTest of the whole app signed in with a
password: an annotator's lists no lead-only page (Data, Judge, Calibration), a lead's and a
viewer's list every page, and the services still refuse the annotator by themselves."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.prerequisites import REPO
from workbench.services import access

APP = str(REPO / "workbench" / "ui" / "app.py")
PASSWORDS = {"ann": "ann-Secret-1", "lea": "lea-Secret-3", "vi": "vi-Secret-4"}
ROLES = {"ann": "annotator", "lea": "lead", "vi": "viewer"}
EVERY_PAGE = ["overview", "data", "labels", "retrieve", "judge", "label", "calibration", "qrels", "evaluate",
              "experiments", "query-kinds"]
LEAD_ONLY = {"data", "judge", "calibration"}


@pytest.fixture
def project(demo_project, monkeypatch) -> Path:
    """The demo: its next step (the LLM judge's grades) is taken on the Judge page, a lead's."""
    monkeypatch.setenv("WORKBENCH_DB", str(demo_project))
    monkeypatch.setenv("WORKBENCH_APP_AUTH", "password")
    return demo_project


def _signed_in(name: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.secrets["auth"] = {"users": {n: {"role": ROLES[n], "hash": access.hash_password(pw)}
                                    for n, pw in PASSWORDS.items()}}
    at.run()
    at.text_input(key="sign_in_name").input(name)
    at.text_input(key="sign_in_password").input(PASSWORDS[name])
    at.button[0].click().run()
    assert not at.exception, at.exception
    assert f"{name} · {ROLES[name]}" in [t.value for t in at.sidebar.text]
    return at


def _navigation(at: AppTest) -> list[str]:
    """The url paths of the pages the app registered with st.navigation for this session."""
    from workbench.ui.context import _PAGES_KEY

    return list(at.session_state[_PAGES_KEY])


def test_an_annotators_navigation_lists_no_lead_only_page(project):
    at = _signed_in("ann")
    assert _navigation(at) == [p for p in EVERY_PAGE if p not in LEAD_ONLY]
    # The Overview's next step may be on a lead's page: it says so, with no link to it.
    info = " ".join(i.value for i in at.info)
    assert "Next step: LLM judgments" in info and "A lead takes this step" in info, info


@pytest.mark.parametrize("name", ["lea", "vi"])
def test_leads_and_viewers_list_every_page(project, name):
    at = _signed_in(name)
    assert _navigation(at) == EVERY_PAGE
    assert "A lead takes this step" not in " ".join(i.value for i in at.info)


def test_the_services_refuse_an_annotator_without_the_navigation(project):
    """Hiding is not the guard: the lead-only pages' services refuse an annotator by themselves."""
    from workbench.services.calibration import workflow as cal
    from workbench.services.chunking import create_chunking
    from workbench.store.database import Database

    annotator = access.Actor("ann", "annotator")
    previous = access.set_actor_source(lambda: annotator)
    try:
        with Database(project) as db:
            for attempt in (lambda: cal.create_sample(db, "s9", "demo", seed=9), lambda: cal.report(db),
                            lambda: create_chunking(db, "c9", "document")):
                with pytest.raises(access.PermissionDenied, match="ann \\(annotator\\) may not"):
                    attempt()
    finally:
        access.set_actor_source(previous)
