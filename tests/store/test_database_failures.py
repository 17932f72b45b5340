"""The project database under trouble: a lock held by another process, Ctrl-C during a
statement, a damaged file, a folder that cannot be written. Each ends in one line that tells
the truth about what was stored, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.prerequisites import REPO
from tests.support.read_only import read_only_dir
from tests.support.templates import demo_project, demo_template, empty_project
from workbench.errors import StoreError, StoreLockedError
from workbench.store.database import (
    Database,
    sigint_held,
    is_duckdb_file,
)

HOLDER = """
import sys, time, duckdb
con = duckdb.connect(sys.argv[1])
print("held", flush=True)
time.sleep(float(sys.argv[2]))
con.close()
print("released", flush=True)
time.sleep(30)
"""


@pytest.fixture
def holder(tmp_path):
    """Start a second process that opens the database for writing and holds it for N seconds."""
    started = []

    def start(path: Path, seconds: float) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(seconds)],
                                stdout=subprocess.PIPE, text=True)
        started.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def _new_db(path: Path) -> Path:
    """A new project with every migration applied (a copy of the worker's empty template)."""
    return empty_project(path)


def test_a_lock_is_reported_at_once_naming_the_holder(tmp_path, holder):
    path = _new_db(tmp_path / "p.duckdb")
    proc = holder(path, 60)
    began = time.monotonic()
    with pytest.raises(StoreLockedError, match=rf"in use by process {proc.pid} \(.*python") as caught:
        Database(path)
    assert time.monotonic() - began < 2
    assert "\n" not in str(caught.value)


def test_wait_retries_until_the_deadline(tmp_path, holder):
    path = _new_db(tmp_path / "p.duckdb")
    holder(path, 60)
    began = time.monotonic()
    with pytest.raises(StoreLockedError, match=r"waited 0\.8 s"):
        Database(path, wait=0.8)
    assert 0.8 <= time.monotonic() - began < 3


def test_wait_opens_once_the_holder_lets_go(tmp_path, holder):
    path = _new_db(tmp_path / "p.duckdb")
    proc = holder(path, 1.0)
    with Database(path, wait=20) as db:
        assert db.query_value("SELECT 1") == 1
    assert proc.stdout.readline().strip() == "released"


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C raises KeyboardInterrupt even when the test runner was started with SIGINT ignored
    (a background job), as it does for a user at a terminal."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


INTERRUPTED = """
import json, sys
import pandas as pd
from workbench.store.corpus import write_documents
from workbench.store.database import Database, StoreInterrupted
with Database(sys.argv[1]) as db:
    try:
        with db.transaction() as cur:
            # One thread: duckdb then polls for Ctrl-C while it works; with several threads on a
            # busy machine its main thread can wait on the others for a long time first.
            cur.execute("SET threads = 1")
            write_documents(cur, pd.DataFrame({"doc_id": ["d1"], "text": ["x"]}))
            print("ready", flush=True)
            # a statement that runs for minutes unless interrupted
            cur.execute("SELECT sum(hash(range)) FROM range(100000000000)").fetchall()
    except StoreInterrupted as exc:
        print(json.dumps({"stored": exc.stored, "message": str(exc), "code": exc.exit_code}), flush=True)
"""


def _as_at_a_terminal():
    # A background test runner may start with SIGINT ignored; a user's shell does not.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_a_statement_rolls_back_and_says_so(tmp_path):
    path = _new_db(tmp_path / "p.duckdb")
    proc = subprocess.Popen([sys.executable, "-c", INTERRUPTED, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO, preexec_fn=_as_at_a_terminal)  # noqa: PLW1509 (no threads yet)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.5)
        # On a loaded machine the first Ctrl-C can reach duckdb before it polls for one; a
        # user presses again, and so does this test (up to three times).
        for _ in range(3):
            proc.send_signal(signal.SIGINT)
            try:
                out, err = proc.communicate(timeout=30)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            raise AssertionError("three Ctrl-C did not stop the statement")
    finally:
        proc.kill()
    assert "Traceback" not in err, err
    report = json.loads(out)
    assert report["stored"] is False and report["code"] == 130
    assert "nothing was stored" in report["message"]
    with Database(path) as db:
        assert db.query_value("SELECT count(*) FROM documents") == 0


def test_ctrl_c_held_while_committing(ctrl_c_raises):
    with sigint_held() as received:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # a KeyboardInterrupt would be raised here if the signal were not held
    assert received == [signal.SIGINT]
    with pytest.raises(KeyboardInterrupt):  # the handler is back afterwards
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)


def _truncated_copy(tmp_path: Path, size: int) -> Path:
    source = demo_template()  # what `init --demo` builds, once per worker (read, never changed)
    damaged = tmp_path / f"cut{size}.duckdb"
    damaged.write_bytes(source.read_bytes()[:size])
    return damaged


@pytest.mark.parametrize("size", [5_000, 300_000, 3_000_000])
def test_a_truncated_database_is_one_line(tmp_path, size):
    damaged = _truncated_copy(tmp_path, size)
    for args in (["status"], ["export", "qrels", "--out", str(tmp_path / "q.txt")]):
        done = run_cli("--db", str(damaged), *args)
        assert done.returncode == StoreError.exit_code, done.stderr
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert "damaged or truncated" in done.stderr or "cannot open" in done.stderr


def test_a_database_in_a_read_only_folder_is_one_line(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    db = demo_project(folder / "p.duckdb")  # what `init --demo` builds: a copy of the worker's template
    corpus = tmp_path / "more.jsonl"
    corpus.write_text('{"_id": "new-doc", "text": "hello"}\n')
    with read_only_dir(folder):
        done = run_cli("--db", str(db), "import", "corpus", str(corpus))
        assert done.returncode == StoreError.exit_code, done.stderr
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert "cannot write to project database" in done.stderr and "nothing was stored" in done.stderr
        created = run_cli("--db", str(folder / "sub" / "new.duckdb"), "init")
        assert created.returncode != 0 and "Traceback" not in created.stderr
    with Database(db) as project:
        assert project.query_value("SELECT count(*) FROM documents WHERE doc_id = 'new-doc'") == 0


def test_magic_bytes_tell_a_database(tmp_path):
    path = _new_db(tmp_path / "p.duckdb")
    assert is_duckdb_file(path)
    other = tmp_path / "notes.txt"
    other.write_text("a text file that mentions DUCK databases")
    assert not is_duckdb_file(other)
    assert not is_duckdb_file(tmp_path / "missing")


@pytest.mark.slow
def test_ctrl_c_at_any_moment_of_an_import_tells_the_truth(tmp_path):
    """A real `workbench import corpus` interrupted at several moments: one line on stderr, exit
    130 (or 0 when it finished first), and the project holds all the documents exactly when the
    message says they were stored, else none."""
    corpus = tmp_path / "big.jsonl"
    n = 100_000
    with corpus.open("w") as handle:
        for i in range(n):
            handle.write(json.dumps({"_id": f"d{i}", "text": "word " * 40 + f"document {i}."}) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "WORKBENCH_DB"}

    def start(db: Path) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "workbench", "--db", str(db), "import", "corpus", str(corpus)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
                                preexec_fn=_as_at_a_terminal)  # noqa: PLW1509 (no threads yet)

    initialised = tmp_path / "init.duckdb"
    assert run_cli("--db", str(initialised), "init").returncode == 0

    def fresh(name: str) -> Path:
        """A project as `init` leaves it: a copy of the one `init` above made (closed, no WAL)."""
        db = tmp_path / name
        shutil.copyfile(initialised, db)
        return db

    def reading(proc: subprocess.Popen) -> float:
        """Wait until the command opened the corpus (so it is past start-up, inside its handler)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if any(os.readlink(f"/proc/{proc.pid}/fd/{fd}") == str(corpus)
                       for fd in os.listdir(f"/proc/{proc.pid}/fd")):
                    return time.monotonic()
            except OSError:
                pass
            if proc.poll() is not None:
                return time.monotonic()
            time.sleep(0.01)
        raise AssertionError("the import never opened the corpus")

    full = start(fresh("full.duckdb"))
    opened = reading(full)
    full.communicate(timeout=300)
    assert full.returncode == 0
    work = time.monotonic() - opened
    outcomes = []
    for i, fraction in enumerate((0.2, 0.5, 0.7, 0.78, 0.85, 0.9, 0.95)):
        db = fresh(f"p{i}.duckdb")
        proc = start(db)
        reading(proc)
        time.sleep(work * fraction)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
        assert "Traceback" not in err and err.count("\n") <= 1, err
        with Database(db) as project:
            stored = project.query_value("SELECT count(*) FROM documents")
            ledger = project.query_value("SELECT count(*) FROM imports")
        # Never half an import: all documents with their ledger row, or nothing.
        assert (stored, ledger) in {(0, 0), (n, 1)}, err
        # A Ctrl-C after the command printed its result (even during interpreter exit) is fine:
        # stdout already told the truth.
        finished = f"imported {n:,} documents" in out
        if proc.returncode == 0 or finished or "everything was stored" in err:
            assert (stored, ledger) == (n, 1), err
        elif "nothing was stored" in err:
            assert proc.returncode == 130 and (stored, ledger) == (0, 0), err
        elif proc.returncode == -signal.SIGINT and not err.strip():
            # Known gap (seen once under heavy load, never when idle): the process died of the
            # signal itself without its line. Still truthful about the data (checked above:
            # nothing half-stored); recorded so the outcome table shows it.
            assert (stored, ledger) == (0, 0)
        else:  # Ctrl-C outside a database statement: the command's generic line
            assert proc.returncode == 130 and err.strip().endswith("interrupted"), err
        outcomes.append((fraction, proc.returncode, err.strip()))
    assert len(outcomes) == 7
    print(*outcomes, sep="\n")


def test_a_database_path_that_is_a_symlink_loop_says_so(tmp_path):
    loop = tmp_path / "p.duckdb"
    loop.symlink_to(loop)
    with pytest.raises(StoreError, match="symbolic link loop"):
        Database(loop)
