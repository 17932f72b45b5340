"""Export a stored run, never overwrite what an export did not create, and delete runs, pools and
chunkings with their dependents listed first (issue 8, items 5 and 7)."""

from __future__ import annotations

import os
import socket

import pytest

from tests.support.retrieval_fixtures import write_corpus
from workbench.errors import InputError
from workbench.services.chunking import create_chunking
from workbench.services.project.deletion import delete, plan_deletion
from workbench.services.qrels.export import export_qrels, export_run
from workbench.services.ingest import import_file
from workbench.services.pooling.pools import build_pool
from workbench.services.retrieval.runs import run_bm25
from workbench.store.database import Database
from workbench.store.runs import read_run_rows

LABELS = [{"query_id": "q1", "doc_id": "cats", "start": 0, "end": 10, "grade": 2},
          {"query_id": "q2", "doc_id": "plants", "start": 0, "end": 20, "grade": 3}]


@pytest.fixture
def project(db_path):
    db = Database(db_path)
    write_corpus(db, labels=LABELS)
    create_chunking(db, "fixed", "fixed", size=20, overlap=5)
    run_bm25(db, "fixed", "bm25", k=10)
    yield db
    db.close()


# --- export run ---------------------------------------------------------------------------------
def test_an_exported_run_reads_back_as_the_same_run(project, tmp_path):
    out = tmp_path / "bm25.trec"
    result = export_run(project, "bm25", out)
    lines = out.read_text().splitlines()
    assert result.rows == len(lines) > 0 and result.level == "chunk" and result.chunking == "fixed"
    assert all(len(line.split()) == 6 and line.split()[1] == "Q0" and line.endswith(" bm25") for line in lines)
    again = import_file(project, "run", out, name="bm25_again")
    assert again.level == "chunk" and again.chunking == "fixed" and again.rows == result.rows
    cols = ["query_id", "doc_id", "chunk_id", "rank", "score"]
    original, back = read_run_rows(project, "bm25")[cols], read_run_rows(project, "bm25_again")[cols]
    assert original.reset_index(drop=True).equals(back.reset_index(drop=True))


def test_exporting_an_unknown_run_names_the_known_ones(project, tmp_path):
    with pytest.raises(InputError, match="no run named 'nope'.*known runs: bm25"):
        export_run(project, "nope", tmp_path / "x.trec")


# --- the output path ------------------------------------------------------------------------------
def test_export_never_overwrites_a_database(project, tmp_path):
    target = project.path  # the project's own file
    before = target.read_bytes()[:4096]
    for force in (False, True):
        with pytest.raises(InputError, match="is a DuckDB database"):
            export_run(project, "bm25", target, force=force)
        with pytest.raises(InputError, match="is a DuckDB database"):
            export_qrels(project, target, force=force)
    other = tmp_path / "other.dat"  # another project's database under any name
    Database(other).close()
    with pytest.raises(InputError, match="is a DuckDB database"):
        export_run(project, "bm25", other, force=True)
    assert target.read_bytes()[:4096] == before


def test_export_refuses_links_devices_fifos_and_loops(project, tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("keep me\n")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    sock_path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        cases = [(link, "symbolic link;"), (fifo, "is a FIFO"), (loop, "symbolic link loop"),
                 ("/dev/null", "is a device"), (sock_path, "is a socket"), (tmp_path, "is a directory")]
        for path, message in cases:
            for force in (False, True):
                with pytest.raises(InputError, match=message):
                    export_run(project, "bm25", path, force=force)
    finally:
        server.close()
    assert real.read_text() == "keep me\n"


def test_an_existing_file_is_replaced_only_with_force(project, tmp_path):
    out = tmp_path / "q.txt"
    out.write_text("mine\n")
    with pytest.raises(InputError, match="already exists; choose another --out, or pass --force"):
        export_qrels(project, out)
    assert out.read_text() == "mine\n"
    result = export_qrels(project, out, force=True)
    assert result.replaced and "replaced the file that was there" in result.summary()
    assert out.read_text() != "mine\n"
    fresh = export_qrels(project, tmp_path / "new.txt")
    assert not fresh.replaced and "replaced" not in fresh.summary()


def test_export_into_a_new_or_unwritable_folder(project, tmp_path):
    assert export_run(project, "bm25", tmp_path / "new" / "x.trec").rows > 0
    with pytest.raises(InputError, match="cannot write: Permission denied"):
        export_run(project, "bm25", "/sys/x.trec")


# --- delete -----------------------------------------------------------------------------------------
def test_deleting_a_run_lists_and_deletes_its_pools_but_never_labels(project):
    run_bm25(project, "fixed", "bm25b", k=5)
    build_pool(project, "p", ["bm25", "bm25b"], 5)
    build_pool(project, "only_b", ["bm25b"], 5)
    labels = project.query_value("SELECT count(*) FROM judgments")
    plan = plan_deletion(project, "run", "bm25")
    assert plan.runs == ["bm25"] and plan.pools == ["p"] and plan.labels_kept == labels
    assert plan.rows["run rows"] == project.query_value("SELECT count(*) FROM run_rows WHERE run = 'bm25'")
    assert any("keeps all" in line for line in plan.lines())
    # Listing changed nothing.
    assert project.query_value("SELECT count(*) FROM pools") == 2
    delete(project, "run", "bm25", expected=plan)
    assert project.query_value("SELECT count(*) FROM runs WHERE name = 'bm25'") == 0
    assert project.query_value("SELECT count(*) FROM run_rows WHERE run = 'bm25'") == 0
    assert [r[0] for r in project.query_all("SELECT name FROM pools")] == ["only_b"]
    assert project.query_value("SELECT count(*) FROM pool_pairs WHERE pool = 'p'") == 0
    assert project.query_value("SELECT count(*) FROM pool_provenance WHERE pool = 'p'") == 0
    assert project.query_value("SELECT count(*) FROM judgments") == labels


def test_deleting_a_chunking_takes_its_runs_and_pools(project):
    create_chunking(project, "whole", "document")
    run_bm25(project, "whole", "bm25_whole", k=5)
    build_pool(project, "p", ["bm25"], 5)
    plan = plan_deletion(project, "chunking", "fixed")
    assert (plan.chunkings, plan.runs, plan.pools) == (["fixed"], ["bm25"], ["p"])
    assert plan.rows["chunks"] == project.query_value("SELECT count(*) FROM chunks WHERE chunking = 'fixed'")
    delete(project, "chunking", "fixed")
    assert project.query_value("SELECT count(*) FROM chunks WHERE chunking = 'fixed'") == 0
    assert [r[0] for r in project.query_all("SELECT name FROM runs")] == ["bm25_whole"]
    assert project.query_value("SELECT count(*) FROM judgments") == len(LABELS)


def test_a_plan_that_changed_since_it_was_listed_deletes_nothing(project):
    plan = plan_deletion(project, "run", "bm25")
    build_pool(project, "p", ["bm25"], 5)
    with pytest.raises(InputError, match="changed since it was listed; nothing was deleted"):
        delete(project, "run", "bm25", expected=plan)
    assert project.query_value("SELECT count(*) FROM runs") == 1


def test_deleting_what_does_not_exist_says_so(project):
    with pytest.raises(InputError, match="no pool named 'nope'"):
        plan_deletion(project, "pool", "nope")
    with pytest.raises(InputError, match="known chunkings: fixed"):
        plan_deletion(project, "chunking", "nope")


def test_the_delete_command_lists_then_needs_yes(project, db_path, cli):
    project.close()
    listed = cli("--db", str(db_path), "delete", "run", "bm25")
    assert listed.returncode == 1 and "nothing was deleted; run again with --yes" in listed.stdout
    assert "keeps all 2 labels" in listed.stdout
    done = cli("--db", str(db_path), "delete", "run", "bm25", "--yes")
    assert done.returncode == 0 and "removed:" in done.stdout, done.stderr
    with Database(db_path) as db:
        assert db.query_value("SELECT count(*) FROM runs") == 0


def test_the_export_run_command_and_force(project, db_path, tmp_path, cli):
    project.close()
    out = tmp_path / "run.trec"
    first = cli("--db", str(db_path), "export", "run", "bm25", "--out", str(out))
    assert first.returncode == 0 and "wrote run 'bm25'" in first.stdout, first.stderr
    again = cli("--db", str(db_path), "export", "run", "bm25", "--out", str(out))
    assert again.returncode == InputError.exit_code and "pass --force" in again.stderr
    assert again.stderr.count("\n") == 1 and "Traceback" not in again.stderr
    forced = cli("--db", str(db_path), "export", "run", "bm25", "--out", str(out), "--force")
    assert forced.returncode == 0 and "replaced the file" in forced.stdout
    own = cli("--db", str(db_path), "export", "qrels", "--out", str(db_path), "--force")
    assert own.returncode == InputError.exit_code and "is a DuckDB database" in own.stderr
