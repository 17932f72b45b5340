"""Imports from the app's data folders read only files inside them, even while a link is being
switched (issue 37, defect 3).

Before the fix a file's path was checked (links resolved) and then read by path again, so a link
switched in between brought in a file from elsewhere: 2 of 360 racing folder imports stored
/etc/passwd. Here another process switches a link inside the data folder between a file inside
it and a secret file outside it, as fast as it can, while the imports run; none may read or
store the secret. (A process, not a thread: the switch must land between two steps of the
reader, which a thread of the same interpreter rarely gets to do.)
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.templates import empty_project
from workbench.errors import InputError
from workbench.services.access import PermissionDenied
from workbench.services.ingest import import_file
from workbench.services.ingest.source import read_source
from workbench.store.database import Database

SECRET = "SECRET-OUTSIDE-THE-DATA-FOLDER"
ROUNDS = 200  # racing reads of the folder (the old code read the secret in this many)
IMPORTS = 60  # racing imports end to end, each into a fresh project (the old code stored it at the 5th in one run)

FLIPPER = textwrap.dedent("""
    import os, sys, time
    link, inside, outside, stop = sys.argv[1:5]
    spare = link + ".next"
    deadline = time.monotonic() + 300  # bounded, whatever happens to the test
    flips = 0
    while time.monotonic() < deadline and not os.path.exists(stop):
        for target in (inside, outside):
            try:
                os.remove(spare)
            except FileNotFoundError:
                pass
            os.symlink(target, spare)
            os.replace(spare, link)  # atomic: the link always exists, pointing one way or the other
            flips += 1
    print(flips)
""")


@pytest.fixture
def racing(tmp_path):
    """``data/`` (the allowed folder) holding ``docs/`` with a plain file and ``docs/flip.txt``, a
    link switched between ``data/safe.txt`` and ``outside/secret.txt`` by another process."""
    data = tmp_path / "data"
    (data / "docs").mkdir(parents=True)
    (data / "docs" / "plain.txt").write_text("a plain document inside the folder\n")
    (data / "safe.txt").write_text("the safe target inside the folder\n")
    (data / "safe.jsonl").write_text('{"doc_id": "d1", "text": "the safe corpus"}\n')
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    (outside / "secret.jsonl").write_text(f'{{"doc_id": "d1", "text": "{SECRET}"}}\n')
    stop = tmp_path / "stop"
    started = []

    def flip(link: Path, inside: Path, secret: Path) -> None:
        link.symlink_to(inside)
        started.append(subprocess.Popen([sys.executable, "-c", FLIPPER, str(link), str(inside), str(secret),
                                         str(stop)], stdout=subprocess.PIPE, text=True))

    yield data, outside, flip
    stop.touch()
    for process in started:
        out, _ = process.communicate(timeout=30)
        assert int(out) > 0  # it flipped


def test_racing_folder_reads_never_read_a_file_outside(racing):
    data, outside, flip = racing
    flip(data / "docs" / "flip.txt", data / "safe.txt", outside / "secret.txt")
    read, refused = 0, 0
    for _ in range(ROUNDS):
        try:
            source = read_source(data / "docs", "docs", [data.resolve()])
        except PermissionDenied:
            refused += 1
            continue
        read += 1
        assert all(SECRET.encode() not in body for _, body in source.files)
    assert read + refused == ROUNDS and read > 0  # the folder could be read while its link pointed inside


def _stored_texts(path: Path) -> list[str]:
    with Database(path) as db:
        return [row[0] for row in db.query_all("SELECT text FROM documents")]


@pytest.mark.parametrize("what", ["folder", "jsonl"])
def test_racing_imports_store_nothing_from_outside(racing, tmp_path, what):
    """End to end, as the Data page imports a path on the server: each import goes into a fresh
    project, so a secret read would be stored (not refused as a changed document)."""
    data, outside, flip = racing
    if what == "folder":
        flip(data / "docs" / "flip.txt", data / "safe.txt", outside / "secret.txt")
        target = data / "docs"
    else:
        flip(data / "corpus.jsonl", data / "safe.jsonl", outside / "secret.jsonl")
        target = data / "corpus.jsonl"
    template = empty_project(tmp_path / "template.duckdb")
    stored = 0
    for round_ in range(IMPORTS):
        project = tmp_path / f"p{round_}.duckdb"
        project.write_bytes(template.read_bytes())
        with Database(project) as db:
            try:
                result = import_file(db, "corpus", target, allowed_folders=[data.resolve()])
            except (PermissionDenied, InputError):
                result = None
        texts = _stored_texts(project)
        assert not any(SECRET in text for text in texts), (round_, texts)
        stored += bool(result and result.rows)
        project.unlink()
    assert stored > 0
