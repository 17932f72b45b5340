"""The read rule (:mod:`workbench.services.visibility`) in the services themselves: an annotator
gets no judge output, no other person's label and no label file from any service, whatever the
page shows; a lead and a viewer read everything (the control that shows the checks can fail);
a viewer writes nothing. Also the sign-in throttle under simultaneous attempts, the secrets
entry as TOML, and folder imports that link out of the data folders."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from tests.support.actors import acting_as
from tests.support import blind_project
from tests.support.prerequisites import REPO
from workbench.errors import ConfigError
from workbench.services import access, visibility
from workbench.services.access import Actor, PermissionDenied
from workbench.store.database import Database

CAROL, LEA, VI = Actor("carol", "annotator"), Actor("lea", "lead"), Actor("vi", "viewer")


acting = acting_as  # puts back the source that was installed before, the app's included


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("blind") / "blind.duckdb"
    return path, blind_project.copy(path)


@pytest.fixture
def project(seeded, tmp_path) -> tuple[Path, dict]:
    """A private copy (tests that write get their own file)."""
    path, info = seeded
    copy = tmp_path / "copy.duckdb"
    shutil.copy(path, copy)
    return copy, info


def _sample_keys(info) -> set[tuple[str, str]]:
    return {(q, d) for q, d, _ in info["sample_pairs"]}


def test_the_rule_per_role():
    assert visibility.label_scope(CAROL) == "carol" and visibility.limited(CAROL)
    for actor in (LEA, VI, access.LOCAL_OPERATOR):
        assert visibility.label_scope(actor) is None
        assert all(visibility.can_read(what, actor) for what in visibility.READS)
    assert not any(visibility.can_read(what, CAROL) for what in visibility.READS)
    with pytest.raises(PermissionDenied, match="carol \\(annotator\\) may not see the LLM judge's grades"):
        visibility.require_read("judge_output", CAROL)
    spans = pd.DataFrame({"tier": ["sme", "sme", "imported", "llm", "adjudicated"],
                          "assessor": ["carol", "alice", "nist", "m|h", "carol"]})
    assert visibility.visible_spans(spans, CAROL)["assessor"].tolist() == ["carol", "nist"]
    assert len(visibility.visible_spans(spans, LEA)) == 5
    judgments = pd.DataFrame({"source": ["human", "human", "imported", "llm"],
                              "assessor": ["carol", "bob", "nist", "carol"]})
    assert visibility.visible_judgments(judgments, CAROL)["assessor"].tolist() == ["carol", "nist"]


def test_qrels_peeks_and_evaluations_of_an_annotator_hold_only_the_imported_label(seeded):
    from workbench.services.browse import labels_table, peek_pool, queries_table
    from workbench.services.evaluation import views as ev
    from workbench.services.pooling.pools import pool_pairs
    from workbench.services.qrels.rule import project_qrels

    path, info = seeded
    imported = info["imported"]
    db = Database(path)
    try:
        # The control: a lead's qrels hold the other annotators' and the judge's grades of the sample.
        with acting(LEA):
            lead = project_qrels(db, level="doc", source="merged", policy=None).table
            assert _sample_keys(info) <= set(zip(lead["query_id"], lead["item_id"]))
            assert len(labels_table(db)) > 100
        with acting(CAROL):
            for level, chunking in (("doc", None), ("chunk", "sections")):
                for source in ("merged", "human", "llm"):
                    table = project_qrels(db, level=level, chunking=chunking, source=source).table
                    assert set(table["tier"]) <= {"imported"}, (level, source)
                    expected = set() if source == "llm" else {imported}
                    assert set(table["query_id"]) <= {q for q, _ in expected}
                    if level == "doc":
                        assert set(zip(table["query_id"], table["item_id"])) == expected, (level, source)
            shown = labels_table(db)
            assert shown["assessor"].tolist() == ["nist"]
            assert queries_table(db)["labels"].sum() == 1
            # Every query of the pool: the peek grades only the imported pair's chunks.
            for query_id in sorted(set(pool_pairs(db, "demo")["query_id"])):
                pairs = peek_pool(db, "demo", query_id, limit=1000)["pairs"]
                graded = pairs[pairs["grade"].notna()]
                assert set(zip([query_id] * len(graded), graded["doc_id"])) <= {imported}, query_id
            overview = ev.qrels_overview(db, level="doc", source="merged")
            assert overview.rows == 1 and overview.by_tier == {"imported": 1}
            assert any("your own labels" in note for note in overview.notes)
            for refused in (lambda: ev.qrels_overview(db, source="llm"),
                            lambda: ev.qrels_download(db, format="trec"),
                            lambda: ev.stored_evaluations(db),
                            lambda: ev.evaluate_runs(db, ["bm25"], ["ndcg@10"], source="llm")):
                with pytest.raises(PermissionDenied):
                    refused()
            evaluation = ev.evaluate_runs(db, ["bm25"], ["ndcg@10"])
            for query_id in evaluation.results["bm25"].query_ids:
                top = ev.top_results(db, evaluation, "bm25", str(query_id), k=1000)
                graded = top[top["grade"].notna()]
                assert str(query_id) == imported[0] or graded.empty, query_id
            frame, reason = ev.rank_agreement(db, ["bm25", "bm25"], ["ndcg@10"])
            assert frame.empty and "leads and viewers" in reason
    finally:
        db.close()


def test_label_files_and_judge_output_are_refused_to_an_annotator(seeded, tmp_path):
    from workbench.services.judge.export import export_judgments
    from workbench.services.judge.jobs import job_judgments, list_failures, list_jobs, offline_preview
    from workbench.services.qrels.export import export_qrels

    path, _ = seeded
    job = list_jobs(path, "demo")[0]["job_id"]
    db = Database(path)
    try:
        with acting(CAROL):
            for attempt in (lambda: export_qrels(db, tmp_path / "q.txt"),
                            lambda: export_qrels(db, tmp_path / "s.jsonl", format="spans"),
                            lambda: export_judgments(db, tmp_path / "j.jsonl"),
                            lambda: list_failures(path, job),
                            lambda: job_judgments(path, job),
                            lambda: offline_preview("sick leave", "Sick leave is paid.")):
                with pytest.raises(PermissionDenied) as refused:
                    attempt()
                assert "\n" not in str(refused.value) and "annotators label blind" in str(refused.value)
            assert not list(tmp_path.iterdir())  # nothing written
        with acting(VI):  # a viewer reads them
            export_qrels(db, tmp_path / "q.txt")
            export_judgments(db, tmp_path / "j.jsonl")
            assert offline_preview("sick leave", "Sick leave is paid.").reason
            assert blind_project.JUDGE_MARKER in (tmp_path / "j.jsonl").read_text()
    finally:
        db.close()


def test_own_labels_are_visible_to_their_annotator_only(project):
    from workbench.services.calibration import workflow as cal
    from workbench.services.qrels.rule import project_qrels

    path, info = project
    db = Database(path)
    try:
        # carol labels the 20th sample pair (nobody else labelled it: only the judges graded it)
        found = cal.item(db, "cal", 20)
        cal.save_label(db, "cal", "carol", 20, 2)
        with acting(CAROL):
            table = project_qrels(db, level="doc").table
            mine = table[table["tier"] == "sme"]
            assert list(zip(mine["query_id"], mine["item_id"], mine["grade"])) == [
                (found["query_id"], found["doc_id"], 2)]
        with acting(Actor("dan", "annotator")):  # another annotator does not see carol's label
            table = project_qrels(db, level="doc").table
            assert set(table["tier"]) == {"imported"}
    finally:
        db.close()


def test_a_viewer_reads_but_never_writes(project):
    from workbench.services.evaluation import views as ev

    path, _ = project
    db = Database(path)
    try:
        with acting(VI):
            before = db.query_value("SELECT count(*) FROM evaluations")
            assert ev.evaluate_runs(db, ["bm25"], ["ndcg@10"], source="llm").results
            with pytest.raises(PermissionDenied, match="vi \\(viewer\\) may not build"):
                ev.evaluate_runs(db, ["bm25"], ["ndcg@10"], store=True)
            assert db.query_value("SELECT count(*) FROM evaluations") == before
        with acting(LEA):
            assert ev.evaluate_runs(db, ["bm25"], ["ndcg@10"], store=True).evaluation_id is not None
    finally:
        db.close()


# ---- sign-in throttle ------------------------------------------------------------------------

def test_simultaneous_wrong_sign_ins_get_at_most_the_free_checks():
    throttle = access.SignInThrottle(free=5, clock=lambda: 100.0)
    start = threading.Barrier(12)
    checked = []

    def sign_in():
        start.wait()
        if throttle.attempt("ann") == 0:
            checked.append(1)  # the password would be checked now

    threads = [threading.Thread(target=sign_in) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(checked) == 5
    assert throttle.wait_seconds("ann") == 30.0 and throttle.attempt("ANN ") == 30.0  # the name folded
    throttle.succeeded("ann")
    assert throttle.attempt("ann") == 0


# ---- secrets entries -------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["alice", "john.doe", "Ann Lee", "émile@example.com", "a-b_c"])
def test_the_secrets_entry_is_valid_toml_for_every_name_it_accepts(name):
    hashed = access.hash_password("pw")
    parsed = tomllib.loads(access.secrets_entry(name, "lead", hashed) + "\n"
                           + access.secrets_entry("other", "viewer", hashed))
    users = parsed["auth"]["users"]
    assert set(users) == {name, "other"} and users[name] == {"role": "lead", "hash": hashed}


@pytest.mark.parametrize("name", ["", "  ", " ann", "ann ", 'a"b', "a\\b", "a\nb", "a\tb", "a\x00b", "a\u2028b"])
def test_names_toml_cannot_hold_are_refused_in_one_line(name):
    with pytest.raises(ConfigError) as refused:
        access.secrets_entry(name, "lead", "x")
    assert "\n" not in str(refused.value)


def test_the_hash_helper_writes_a_dotted_name_that_signs_in():
    from workbench.ui.auth import check_password

    out = subprocess.run([sys.executable, "-m", "workbench.services.access", "john.doe", "lead"],
                         input="pw-1\npw-1\n", capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 0, out.stderr
    users = tomllib.loads(out.stdout)["auth"]["users"]
    assert check_password(users, "john.doe", "pw-1") == Actor("john.doe", "lead")
    bad = subprocess.run([sys.executable, "-m", "workbench.services.access", "john\"doe", "lead"],
                         input="pw-1\npw-1\n", capture_output=True, text=True, cwd=REPO, timeout=60)
    assert bad.returncode == 2 and bad.stdout == "" and len(bad.stderr.strip().splitlines()) == 1, bad
    assert "Traceback" not in bad.stderr


# ---- folder imports --------------------------------------------------------------------------

def test_a_folder_import_refuses_a_file_linked_from_outside_the_data_folders(tmp_path):
    from workbench.services.ingest import import_file
    from workbench.services.project.lifecycle import init_project

    db_path = tmp_path / "p.duckdb"
    init_project(db_path)
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("not for the app\n")
    data = tmp_path / "data"
    corpus = data / "corp2"
    corpus.mkdir(parents=True)
    (corpus / "a.txt").write_text("A document about leave.\n")
    (corpus / "inside.txt").symlink_to(corpus / "a.txt")  # a link that stays inside is fine
    allowed = access.data_folders("data", tmp_path)
    with Database(db_path) as db:
        for link, target in (("passwd.txt", Path("/etc/passwd")), ("secret.txt", secret)):
            (corpus / link).symlink_to(target)
            with pytest.raises(PermissionDenied) as refused:
                import_file(db, "corpus", corpus, allowed_folders=allowed)
            message = str(refused.value)
            assert "\n" not in message and f"corp2/{link}" in message and str(target) not in message
            assert db.query_value("SELECT count(*) FROM documents") == 0
            (corpus / link).unlink()
        result = import_file(db, "corpus", corpus, allowed_folders=allowed)
        assert db.query_value("SELECT count(*) FROM documents") == 2, result
        # A folder that is itself a link out of the data folders is refused too.
        (data / "escape").symlink_to(secret.parent)
        with pytest.raises(PermissionDenied):
            import_file(db, "corpus", data / "escape", allowed_folders=allowed)


# ---- host names ------------------------------------------------------------------------------

def test_only_the_configured_host_names_are_served():
    allowed = access.allowed_hosts("127.0.0.1, localhost", "127.0.0.1")
    assert allowed == ["127.0.0.1", "localhost"]
    assert access.allowed_hosts("", "0.0.0.0") == list(access.DEFAULT_ALLOWED_HOSTS)
    assert access.allowed_hosts("app.example.com", "10.0.0.5") == ["app.example.com", "10.0.0.5"]
    for good in ("127.0.0.1:8501", "localhost", "LOCALHOST:1", "localhost.:8501"):
        assert access.host_allowed(good, allowed), good
    for bad in ("rebind.attacker.example:8501", "127.0.0.1.attacker.example", "", None, "localhost:x",
                "user@localhost", "localhost/x", "127.0.0.2"):
        assert not access.host_allowed(bad, allowed), bad
    assert access.host_allowed("a.example.com", ["*.example.com"])
    assert not access.host_allowed("example.com.evil", ["*.example.com"])
