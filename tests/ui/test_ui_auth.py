"""Signing in and roles in Streamlit's AppTest: the password form, what an annotator's session
may not do (the services refuse it, whatever the page shows), blind labels between annotators,
and the Data page's server paths limited to the data folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.calibration_project import build_project
from workbench.services import access
from workbench.services.calibration import workflow as cal
from workbench.services.access import Actor
from workbench.store.database import Database

PASSWORDS = {"ann": "ann-Secret-1", "bob": "bob-Secret-2", "lea": "lea-Secret-3", "vi": "vi-Secret-4"}
ROLES = {"ann": "annotator", "bob": "annotator", "lea": "lead", "vi": "viewer"}

# A page that signs in, then (when asked through session state) tries one write through the
# services, exactly as a page's button would.
SCRIPT = '''
import streamlit as st
from workbench.ui import auth, context
auth.gate()
context.sidebar()
attempt = st.session_state.get("attempt")
if attempt:
    from workbench.config import load_settings
    from workbench.errors import WorkbenchError
    from workbench.services.calibration import workflow as cal
    from workbench.services.project.deletion import delete
    from workbench.services.judge.jobs import resolve_spec, run_job
    try:
        with context.project() as db:
            if attempt == "adjudicate":
                cal.adjudicate(db, "s", 0, 2, lead=context.annotator())
            elif attempt == "delete":
                delete(db, "pool", "p")
            elif attempt == "sample":
                cal.create_sample(db, "s2", "p", seed=3)
            elif attempt == "label":
                cal.save_label(db, "s", context.annotator(), 0, 3)
        if attempt == "judge":
            run_job(context.db_path(), "p", resolve_spec(load_settings()))
        st.success("done")
    except WorkbenchError as exc:
        st.error(str(exc))
page = st.session_state.get("page")
if page == "browse":
    from workbench.ui.views.browse import render
    render()
elif page == "calibration":
    from workbench.ui.views.calibration import render
    render()
elif page == "label":
    from workbench.ui.views.label import render
    render()
'''


@pytest.fixture
def project(db_path, monkeypatch) -> Path:
    db, _ = build_project(db_path)
    try:
        cal.create_sample(db, "s", "p", seed=1)
        for position in range(3):  # two SMEs disagree on pairs 0..2
            cal.save_label(db, "s", "cy", position, 1)
            cal.save_label(db, "s", "dee", position, 3)
    finally:
        db.close()
    monkeypatch.setenv("WORKBENCH_DB", str(db_path))
    monkeypatch.setenv("WORKBENCH_APP_AUTH", "password")
    return db_path


@pytest.fixture(scope="module")
def users() -> dict:
    return {"users": {name: {"role": ROLES[name], "hash": access.hash_password(pw)} for name, pw in PASSWORDS.items()}}


def _session(users: dict) -> AppTest:
    at = AppTest.from_string(SCRIPT, default_timeout=60)
    at.secrets["auth"] = users
    at.run()
    assert not at.exception, at.exception
    return at


def _sign_in(at: AppTest, name: str, password: str) -> AppTest:
    at.text_input(key="sign_in_name").input(name)
    at.text_input(key="sign_in_password").input(password)
    at.button[0].click().run()
    assert not at.exception, at.exception
    return at


def _signed_in(users: dict, name: str) -> AppTest:
    at = _sign_in(_session(users), name, PASSWORDS[name])
    assert not at.error, [e.value for e in at.error]
    assert f"{name} · {ROLES[name]}" in [t.value for t in at.sidebar.text]
    return at


def _counts(path: Path) -> tuple:
    with Database(path) as db:
        return (db.query_value("SELECT count(*) FROM judgments"), db.query_value("SELECT count(*) FROM pools"),
                db.query_value("SELECT count(*) FROM calibration_samples"),
                db.query_value("SELECT count(*) FROM judge_jobs"))


def test_the_sign_in_form_refuses_a_wrong_password_and_keeps_no_plaintext(project, users):
    at = _session(users)
    assert at.text_input(key="sign_in_password").value == ""
    for name, password in (("ann", "wrong"), ("ann", PASSWORDS["bob"]), ("nobody", "x"), ("ann", "")):
        _sign_in(at, name, password)
        assert [e.value for e in at.error] == ["That user name and password do not match; try again."]
        assert at.text_input(key="sign_in_password")  # still the form: nothing else shown
        assert password == "" or password not in repr(at.session_state.to_dict())
        assert "_auth_actor" not in at.session_state
    _sign_in(at, "ann", PASSWORDS["ann"])
    assert not at.error and at.session_state["annotator"] == "ann"
    # No plaintext password anywhere in the session, nor in the secrets the app reads.
    state = repr(at.session_state.to_dict())
    assert all(pw not in state for pw in PASSWORDS.values())
    assert all(pw not in repr(users) for pw in PASSWORDS.values())
    # The self-declared annotator field is gone: the id is the sign-in name.
    assert not at.sidebar.text_input


def test_repeated_wrong_passwords_make_the_name_wait(project, users, monkeypatch):
    """Five wrong passwords for one name: the sixth try waits, even with the right password, and
    the wait reads the same for a name that does not exist; the wait over, the right one works."""
    clock = [5000.0]
    throttle = access.SignInThrottle(clock=lambda: clock[0])
    monkeypatch.setattr(access, "SIGN_IN_THROTTLE", throttle)
    at = _session(users)
    for name in ("ann", "nobody"):
        for _ in range(5):
            _sign_in(at, name, "wrong")
            assert [e.value for e in at.error] == ["That user name and password do not match; try again."]
    _sign_in(at, "ann", PASSWORDS["ann"])
    locked = [e.value for e in at.error]
    assert locked == ["Too many failed sign-ins for this user name; wait 30 seconds and try again."]
    assert "_auth_actor" not in at.session_state
    _sign_in(at, "nobody", "x")
    assert [e.value for e in at.error] == locked  # the same words: the wait never tells who exists
    _sign_in(at, "bob", PASSWORDS["bob"])  # another name is not held up
    assert not at.error and at.session_state["annotator"] == "bob"
    clock[0] += 30
    at = _sign_in(_session(users), "ann", PASSWORDS["ann"])
    assert not at.error and at.session_state["annotator"] == "ann"
    assert throttle.wait_seconds("ann") == 0  # a success forgets the failures


def test_a_new_password_or_role_in_the_secrets_ends_a_signed_in_session(project, users):
    """The sign-in is checked again on every run against the user's entry as it is now: an
    operator who changes a password hash or a role (or removes the user) signs that user out;
    the other users stay signed in."""
    changes = {
        "ann": {"role": "annotator", "hash": access.hash_password("a-New-Secret")},  # new password
        "bob": {"role": "lead", "hash": users["users"]["bob"]["hash"]},  # promoted
    }
    for name, entry in changes.items():
        at = _signed_in(users, name)
        at.secrets["auth"] = {"users": dict(users["users"], **{name: entry})}
        at.run()
        assert not at.exception, at.exception
        assert at.text_input(key="sign_in_password"), name  # back at the form
        assert "_auth_actor" not in at.session_state and f"{name} · " not in repr([t.value for t in at.sidebar.text])
    removed = _signed_in(users, "vi")
    at = _signed_in(users, "lea")
    for session, name in ((removed, "vi"), (at, "lea")):
        session.secrets["auth"] = {"users": {k: v for k, v in users["users"].items() if k != "vi"}}
        session.run()
    assert removed.text_input(key="sign_in_password") and "_auth_actor" not in removed.session_state
    assert "lea · lead" in [t.value for t in at.sidebar.text]  # untouched entry: still signed in


def test_an_annotator_cannot_adjudicate_start_a_job_delete_or_draw(project, users):
    before = _counts(project)
    at = _signed_in(users, "ann")
    for attempt in ("adjudicate", "judge", "delete", "sample"):
        at.session_state["attempt"] = attempt
        at.run()
        assert not at.exception, at.exception
        assert not at.success, attempt
        assert len(at.error) == 1 and "ann (annotator) may not" in at.error[0].value, attempt
    assert _counts(project) == before
    # The Calibration page (report, adjudication, drawing) stays closed to an annotator.
    at.session_state["attempt"] = None
    at.session_state["page"] = "calibration"
    at.run()
    assert not at.exception, at.exception
    assert any("only leads and viewers" in i.value for i in at.info)
    assert [b.key for b in at.button] == ["sign_out"] and "dee" not in repr([m.value for m in at.markdown])
    # A lead signed in the same way may adjudicate (control: the refusals above are the role's).
    lead = _signed_in(users, "lea")
    lead.session_state["attempt"] = "adjudicate"
    lead.run()
    assert [s.value for s in lead.success] == ["done"], [e.value for e in lead.error]


def test_a_viewer_reads_but_cannot_label(project, users):
    at = _signed_in(users, "vi")
    at.session_state["attempt"] = "label"
    at.run()
    assert len(at.error) == 1 and "vi (viewer) may not give labels" in at.error[0].value


def _browse_text(at: AppTest) -> str:
    at.session_state["attempt"] = None
    at.session_state["page"] = "browse"
    at.run()
    assert not at.exception, at.exception
    cells = [df.value.to_csv() for df in at.dataframe]
    return repr(cells) + repr([m.value for m in at.markdown]) + repr([h.proto for h in at.get("html")])


def test_one_annotator_never_sees_anothers_labels_before_submitting(project, users):
    bob = _signed_in(users, "bob")
    bob.session_state["attempt"] = "label"
    bob.run()
    assert [s.value for s in bob.success] == ["done"]
    ann = _signed_in(users, "ann")
    seen = _browse_text(ann)
    # Neither bob's label nor the SMEs' nor the judge's reach ann's page before she labels.
    for other in ("bob", "cy", "dee", "judge"):
        assert other not in seen, other
    ann.session_state["attempt"] = "label"
    ann.run()
    seen = _browse_text(_signed_in(users, "ann"))
    assert "ann" in seen and "bob" not in seen
    # Control: a lead's page shows them, so the check above can fail.
    lead = _signed_in(users, "lea")
    assert "bob" in _browse_text(lead) and "dee" in _browse_text(lead)


DATA = "from workbench.ui.views.data import render\nrender()\n"


def test_server_path_import_refuses_files_outside_the_data_folders(tmp_path, monkeypatch):
    from workbench.services.project.lifecycle import init_project

    path = tmp_path / "p.duckdb"
    init_project(path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "queries.tsv").symlink_to("/etc/passwd")
    (data / "escape").symlink_to(tmp_path)
    (tmp_path / "outside.tsv").write_text("q1\tquery\n")
    (data / "ok.tsv").write_text("q1\tquery\n")
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    monkeypatch.setenv("WORKBENCH_APP_DATA_DIRS", str(data))
    at = AppTest.from_string(DATA, default_timeout=60)
    at.run()
    at.selectbox(key="data_kind").select("queries").run()
    at.radio(key="data_source").set_value("Path on the server").run()
    refused = ["/etc/passwd", str(data / "queries.tsv"), str(data / "escape" / "outside.tsv"),
               str(data / ".." / "outside.tsv")]
    for server_path in refused:
        at.text_input(key="data_path").input(server_path).run()
        at.button(key="data_import").click().run()
        assert not at.exception, at.exception
        errors = [e.value for e in at.error]
        assert len(errors) == 1 and "outside the folders this app may import from" in errors[0], errors
        assert "--" not in errors[0]
    with Database(path) as db:
        assert db.query_value("SELECT count(*) FROM queries") == 0
    # Control: a file inside the data folder imports.
    at.text_input(key="data_path").input(str(data / "ok.tsv")).run()
    at.button(key="data_import").click().run()
    assert not at.error, [e.value for e in at.error]
    with Database(path) as db:
        assert db.query_value("SELECT count(*) FROM queries") == 1


def test_the_label_page_records_the_signed_in_name(project, users):
    at = _signed_in(users, "ann")
    at.session_state["page"] = "label"
    at.run()
    assert not at.exception, at.exception
    at.button(key="label_grade_s_0").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    with Database(project) as db:
        rows = db.query_all("SELECT assessor, grade FROM judgments WHERE source = 'human' AND assessor "
                            "NOT IN ('cy', 'dee')")
    assert rows == [("ann", 0)]
    # A viewer signed in the same way gets no grade buttons and cannot label.
    viewer = _signed_in(users, "vi")
    viewer.session_state["page"] = "label"
    viewer.run()
    assert any("cannot label" in i.value or "not label" in i.value for i in viewer.info)
    assert not [b for b in viewer.button if b.key and b.key.startswith("label_grade")]


def test_oidc_roles_come_from_the_secrets_mapping():
    from workbench.ui.auth import oidc_actor

    roles = {"Ann@Example.com": "annotator", "lea@example.com": "lead", "odd@example.com": "admin"}
    assert oidc_actor({"is_logged_in": True, "email": "ann@example.com"}, roles) == Actor("ann@example.com", "annotator")
    assert oidc_actor({"is_logged_in": True, "email": "lea@example.com"}, roles).role == "lead"
    assert oidc_actor({"is_logged_in": True, "email": "eve@example.com"}, roles) is None  # no role: no access
    assert oidc_actor({"is_logged_in": True, "email": "odd@example.com"}, roles) is None  # unknown role
    assert oidc_actor({"is_logged_in": True}, roles) is None
    assert oidc_actor({"is_logged_in": False, "email": "lea@example.com"}, roles) is None
