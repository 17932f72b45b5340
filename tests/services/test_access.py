"""Who may do what (services.access): the role table, password hashes, the loopback rule, the
data folders, and the write services refusing an annotator or viewer even when called directly."""

from __future__ import annotations

import pytest

from tests.support.calibration_project import build_project
from workbench.errors import ConfigError
from workbench.services import access
from workbench.services.calibration import workflow as cal
from workbench.services.access import Actor, PermissionDenied

ANN, BOB, LEAD, VIEW = Actor("ann", "annotator"), Actor("bob", "annotator"), Actor("lea", "lead"), Actor("vi", "viewer")

# Hand-written expectation, row by row (not derived from PERMISSIONS).
EXPECTED = {
    "annotator": {"label"},
    "lead": {"label", "sample", "adjudicate", "judge", "delete", "import", "build", "see_all_labels"},
    "viewer": {"see_all_labels"},
}


def test_role_table_matches_the_rules():
    checked = 0
    for role, may in EXPECTED.items():
        for action in access.PERMISSIONS:
            assert access.allowed(Actor("x", role), action) == (action in may), (role, action)
            checked += 1
    assert checked == 3 * 8
    with pytest.raises(ConfigError, match="unknown role"):
        Actor("x", "admin")


def test_require_names_who_what_and_who_may():
    with pytest.raises(PermissionDenied, match=r"ann \(annotator\) may not resolve disagreements; ask a lead"):
        access.require("adjudicate", ANN)
    assert access.require("label", ANN) is ANN
    assert PermissionDenied.exit_code not in (0, 1)


@pytest.fixture
def acting():
    """Make the services see ``who`` as the caller (the app's page session does this)."""
    holder: dict = {}

    def set_actor(who: Actor | None) -> None:
        holder["who"] = who

    # the app's source, when a UI test imported it in this process
    previous = access.set_actor_source(lambda: holder.get("who"))
    yield set_actor
    access.set_actor_source(previous)


def test_outside_a_session_the_caller_is_the_local_lead(acting):
    acting(None)
    assert access.current_actor() is access.LOCAL_OPERATOR and access.LOCAL_OPERATOR.role == "lead"
    acting(VIEW)
    assert access.current_actor() == VIEW


def test_password_hash_is_salted_and_verifies():
    first, second = access.hash_password("correct horse"), access.hash_password("correct horse")
    assert first != second  # random salt
    assert "correct horse" not in first and first.startswith("scrypt$")
    assert access.verify_password("correct horse", first) and access.verify_password("correct horse", second)
    assert not access.verify_password("correct hors", first)
    assert not access.verify_password("correct horse", "plaintext")
    assert not access.verify_password("x", "scrypt$1$2$3$!!$??")
    with pytest.raises(ConfigError):
        access.hash_password("")


def test_hash_helper_reads_without_echo_and_prints_no_plaintext(monkeypatch, capsys):
    typed = iter(["pa55word", "pa55word"])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(typed))
    assert access.main(["alice", "lead"]) == 0
    out = capsys.readouterr().out
    assert "pa55word" not in out and "[auth.users.alice]" in out and 'role = "lead"' in out
    stored = out.split('hash = "')[1].split('"')[0]
    assert access.verify_password("pa55word", stored)
    typed = iter(["a", "b"])
    assert access.main(["alice"]) == 2


def test_no_sign_in_is_refused_on_a_reachable_host():
    access.check_serving("127.0.0.1", "none")
    access.check_serving("localhost", "none")
    access.check_serving("0.0.0.0", "password")
    access.check_serving("0.0.0.0", "none", allow_public_without_auth=True)
    with pytest.raises(ConfigError, match="auth = \"none\""):
        access.check_serving("0.0.0.0", "none")
    with pytest.raises(ConfigError, match="not one of"):
        access.check_serving("127.0.0.1", "ldap")


def test_server_paths_outside_the_data_folders_are_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    inside = data / "runs.txt"
    inside.write_text("q 0 d 1 1 x\n")
    assert access.check_data_path(inside, "data", base=tmp_path) == inside.resolve()
    assert access.check_data_path("data/runs.txt", "data", base=tmp_path) == inside.resolve()
    (data / "passwd").symlink_to("/etc/passwd")
    (data / "up").symlink_to(tmp_path)
    refused = ["/etc/passwd", data / "passwd", data / "up" / "data" / ".." / "secret.txt", "data/../secret.txt",
               tmp_path / "data-other" / "x"]
    for path in refused:
        with pytest.raises(PermissionDenied, match="outside the folders"):
            access.check_data_path(path, "data", base=tmp_path)
    assert len(refused) == 5
    # Several folders, comma-separated.
    other = tmp_path / "more"
    other.mkdir()
    assert access.check_data_path(other / "f", "data, more", base=tmp_path) == (other / "f").resolve()


@pytest.fixture
def project(db_path):
    db, _ = build_project(db_path)
    yield db
    db.close()


def _counts(db) -> tuple:
    return (db.query_value("SELECT count(*) FROM judgments"), db.query_value("SELECT count(*) FROM runs"),
            db.query_value("SELECT count(*) FROM calibration_samples"))


def test_write_services_refuse_an_annotator_called_directly(project, acting, tmp_path):
    from workbench.config import load_settings
    from workbench.services.project.deletion import delete
    from workbench.services.ingest import import_file
    from workbench.services.judge.jobs import cancel_job, resolve_spec, run_job
    from workbench.services.pooling.pools import build_pool

    db = project
    cal.create_sample(db, "s", "p", seed=1)  # as the local operator (a lead)
    for position in range(3):
        cal.save_label(db, "s", "ann", position, 1)
        cal.save_label(db, "s", "bob", position, 3)
    before = _counts(db)
    qrels = tmp_path / "q.txt"
    qrels.write_text("q1 0 d1 1\n")
    for who in (ANN, VIEW):
        acting(who)
        refusals = [
            lambda who=who: cal.adjudicate(db, "s", 0, 2, lead=who.name),
            lambda: cal.create_sample(db, "s2", "p", seed=2),
            lambda: delete(db, "pool", "p"),
            lambda: import_file(db, "qrels", qrels),
            lambda: build_pool(db, "p2", ["r1"], 10),
            lambda: run_job(db.path, "p", resolve_spec(load_settings(env={}))),
            lambda: cancel_job(db.path, 1),
        ]
        for refuse in refusals:
            with pytest.raises(PermissionDenied):
                refuse()
        assert len(refusals) == 7
    acting(ANN)
    with pytest.raises(PermissionDenied):  # other SMEs' grades side by side
        cal.sme_disagreements(db, "s")
    with pytest.raises(PermissionDenied):
        cal.report(db, "s")
    assert _counts(db) == before
    # A lead may, but records resolutions under their own name only.
    acting(LEAD)
    with pytest.raises(PermissionDenied, match="in ann's name"):
        cal.adjudicate(db, "s", 0, 2, lead="ann")
    cal.adjudicate(db, "s", 0, 2, lead="lea")
    assert db.query_value("SELECT count(*) FROM judgments WHERE assessor = 'lea'") == 1


def test_an_annotator_labels_and_sees_only_as_themselves(project, acting):
    from workbench.services.browse import labels_table

    db = project
    cal.create_sample(db, "s", "p", seed=1)
    acting(BOB)
    cal.save_label(db, "s", "bob", 0, 3)
    acting(ANN)
    # ann cannot read bob's state nor write in bob's name
    with pytest.raises(PermissionDenied, match="own labels"):
        cal.my_state(db, "s", "bob", 0)
    with pytest.raises(PermissionDenied):
        cal.save_label(db, "s", "bob", 1, 0)
    with pytest.raises(PermissionDenied):
        cal.undo(db, "s", "bob")
    # Before ann submits, her view of the labels holds nothing of bob's (nor the judge's).
    seen = labels_table(db)
    assert "bob" not in set(seen["assessor"]) and "llm" not in set(seen["source"])
    cal.save_label(db, "s", "ann", 0, 1)
    seen = labels_table(db)
    assert set(seen["assessor"]) == {"ann"}
    # A viewer and a lead see everyone's.
    for who in (VIEW, LEAD):
        acting(who)
        assert {"ann", "bob"} <= set(labels_table(db)["assessor"])
    acting(VIEW)
    with pytest.raises(PermissionDenied):
        cal.save_label(db, "s", "vi", 2, 1)



class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_sign_in_throttle_waits_double_and_forget():
    clock = _Clock()
    throttle = access.SignInThrottle(free=5, base=30, cap=100, forget=900, clock=clock)
    for _ in range(4):
        throttle.failed("Ann")
        assert throttle.wait_seconds("ann") == 0  # four failures: still free to try
    throttle.failed(" ANN ")  # the same name, however it is typed
    assert throttle.wait_seconds("ann") == 30
    clock.now += 10
    assert throttle.wait_seconds("ann") == 20
    assert throttle.wait_seconds("bob") == 0  # other names are not held up
    clock.now += 20
    assert throttle.wait_seconds("ann") == 0
    throttle.failed("ann")  # the sixth failure doubles the wait, the seventh doubles it again...
    assert throttle.wait_seconds("ann") == 60
    clock.now += 60
    throttle.failed("ann")
    assert throttle.wait_seconds("ann") == 100  # ...up to the cap (120 capped at 100)
    clock.now += 900  # a quiet quarter of an hour forgets the failures
    assert throttle.wait_seconds("ann") == 0
    throttle.failed("ann")
    assert throttle.wait_seconds("ann") == 0
    for _ in range(5):
        throttle.failed("nobody-by-this-name")  # names that do not exist count the same
    assert throttle.wait_seconds("nobody-by-this-name") == 30
    throttle.succeeded("nobody-by-this-name")
    assert throttle.wait_seconds("nobody-by-this-name") == 0
