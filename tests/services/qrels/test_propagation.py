"""Near-duplicate label propagation on a real project file (issue 14): what is stored, judged@k
before/after, agreement, opt-in qrels, revert; the CLI end to end."""

from __future__ import annotations

import json

import pytest

from workbench.errors import InputError
from workbench.services.chunking import create_chunking
from workbench.services.ingest import import_file
from workbench.services.qrels.propagation import (
    propagate_labels,
    propagated_qrels,
    qrels_with_propagated,
    revert_propagation,
)
from workbench.services.retrieval.runs import run_bm25
from workbench.store.database import Database

BASE1 = ("the travel policy says that economy class is booked for every flight shorter than six hours and "
         "business class needs the approval of a director before the trip is booked by the assistant")
BASE2 = ("laptops are refreshed every three years and the old device is wiped by the service desk before it "
         "is donated or recycled according to the hardware disposal standard of the company")
DOCS = {
    "d1": BASE1,
    "d1copy": BASE1.replace("assistant", "travel desk"),  # Jaccard of 5-word shingles 28/31
    "d2": BASE2,
    "d2copy": BASE2 + " today",
    "d3": "the canteen opens at eight and closes at three on fridays while the coffee bar stays open longer",
    "d4": "security badges must be worn visibly at all times inside the office buildings and data centres",
}
QRELS = [("q1", "d1", 3), ("q1", "d2", 0), ("q2", "d2copy", 2), ("q2", "d2", 2), ("q2", "d3", 1)]


@pytest.fixture
def project(tmp_path, db_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in DOCS.items()))
    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps({"_id": "q1", "text": "flight class approval"}) + "\n"
                       + json.dumps({"_id": "q2", "text": "old laptop disposal"}) + "\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in QRELS))
    db = Database(db_path)
    import_file(db, "corpus", corpus)
    import_file(db, "queries", queries)
    import_file(db, "qrels", qrels)
    create_chunking(db, "whole", "document")
    run_bm25(db, "whole", "bm25", k=10)
    yield db
    db.close()


def _chunk(db, doc_id):
    return db.query_value("SELECT chunk_id FROM chunks WHERE chunking = 'whole' AND doc_id = ?", [doc_id])


def test_propagation_is_stored_apart_and_reported(project):
    judgments_before = project.query_value("SELECT count(*) FROM judgments")
    report = propagate_labels(project, "whole", threshold=0.8)
    assert report.pairs == 2 and report.clusters == 2 and report.clustered_chunks == 4
    assert report.direct_labels == 5
    got = propagated_qrels(project, "whole")
    rows = {(q, i): (g, src) for q, i, g, _s, src in got.itertuples(index=False)}
    c = {d: _chunk(project, d) for d in DOCS}
    # q1: d1's 3 goes to d1copy, d2's 0 to d2copy; q2 labels both d2 copies itself: nothing to copy
    assert rows == {("q1", c["d1copy"]): (3, c["d1"]), ("q1", c["d2copy"]): (0, c["d2"])}
    sims = dict(zip(got["item_id"], got["similarity"]))
    assert sims[c["d1copy"]] == pytest.approx(28 / 31)  # worked out in test_similarity_by_hand
    assert sims[c["d2copy"]] == pytest.approx(27 / 28)  # 31 words + "today": 27 windows shared of 28
    # never written as judgments
    assert project.query_value("SELECT count(*) FROM judgments") == judgments_before
    # leave-one-out agreement: q2's d2 and d2copy predict each other (2 = 2); q1's d1/d2 have
    # no labelled near duplicate
    assert report.agreement["n"] == 2 and report.agreement["exact"] == 1.0
    # judged@10 of bm25 rises: the two copies are now labelled for q1
    assert report.judged_after["bm25"] > report.judged_before["bm25"]
    merged = qrels_with_propagated(project, "whole", "human")
    assert merged["propagated"].sum() == 2 and len(merged) == 7


def test_similarity_by_hand():
    from workbench.core.documents.near_duplicates import jaccard, shingles

    a, b = shingles(DOCS["d1"]), shingles(DOCS["d1copy"])
    # 33 words vs 34: only the last word changes (into two), so only the windows ending in it
    # differ: d1's window 29, d1copy's windows 29 and 30; 28 shared of 28 + 1 + 2 = 31
    assert (len(a), len(b), len(a & b)) == (29, 30, 28)
    assert jaccard(a, b) == pytest.approx(28 / 31)


def test_rerun_replaces_and_revert_removes(project):
    first = propagate_labels(project, "whole", threshold=0.6)
    second = propagate_labels(project, "whole", threshold=0.6)
    assert second.replaced == first.propagated and len(propagated_qrels(project, "whole")) == second.propagated
    removed = revert_propagation(project, "whole")
    assert removed == second.propagated
    assert propagated_qrels(project, "whole").empty
    assert project.query_value("SELECT count(*) FROM propagations WHERE reverted_at IS NOT NULL") == 2
    with pytest.raises(InputError, match="no propagated labels"):
        revert_propagation(project, "whole")


def test_dry_run_stores_nothing_and_bad_input_is_one_line(project):
    propagate_labels(project, "whole", dry_run=True)
    assert project.query_value("SELECT count(*) FROM propagations") == 0
    with pytest.raises(InputError, match="no chunking named 'nope'"):
        propagate_labels(project, "nope")
    with pytest.raises(InputError, match="source"):
        propagate_labels(project, "whole", source="robots")


def test_cli_propagate_and_unpropagate(project, db_path, cli):
    project.close()
    done = cli("--db", str(db_path), "labels", "propagate", "--chunking", "whole", "--threshold", "0.6",
               "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["propagated"] == 2 and report["agreement"]["n"] == 2
    text = cli("--db", str(db_path), "labels", "propagate", "--chunking", "whole", "--dry-run")
    assert "would propagate 2 labels" in text.stdout
    undo = cli("--db", str(db_path), "labels", "unpropagate", "--chunking", "whole")
    assert undo.returncode == 0 and "removed 2 propagated labels" in undo.stdout
    again = cli("--db", str(db_path), "labels", "unpropagate", "--chunking", "whole")
    assert again.returncode == 3 and "Traceback" not in again.stderr and len(again.stderr.strip().splitlines()) == 1
    bad = cli("--db", str(db_path), "labels", "propagate", "--chunking", "whole", "--threshold", "1.5")
    assert bad.returncode == 2


def test_cli_qrels_export_opt_in_and_query_sets(project, db_path, tmp_path, cli):
    project.close()
    assert cli("--db", str(db_path), "labels", "propagate", "--chunking", "whole").returncode == 0
    out = tmp_path / "with.txt"
    done = cli("--db", str(db_path), "labels", "qrels", "--chunking", "whole", "--out", str(out), "--source", "human")
    assert done.returncode == 0, done.stderr
    assert "wrote 7 chunk qrels (2 propagated) for 2 queries" in done.stdout
    lines = out.read_text().splitlines()
    assert len(lines) == 7 and all(len(line.split()) == 4 for line in lines)
    plain = tmp_path / "without.txt"
    assert "wrote 5 chunk qrels (0 propagated)" in cli(
        "--db", str(db_path), "labels", "qrels", "--chunking", "whole", "--out", str(plain), "--no-propagated").stdout
    synth = tmp_path / "synthetic.txt"
    assert "wrote 0 chunk qrels" in cli("--db", str(db_path), "labels", "qrels", "--chunking", "whole", "--out",
                                        str(synth), "--queries", "synthetic").stdout
    again = cli("--db", str(db_path), "labels", "qrels", "--chunking", "whole", "--out", str(out))
    assert again.returncode == 3 and "exists" in again.stderr and out.read_text().splitlines() == lines
    assert "pass --force" in again.stderr  # ...and the option the error names exists:
    forced = cli("--db", str(db_path), "labels", "qrels", "--chunking", "whole", "--out", str(out),
                 "--no-propagated", "--force")
    assert forced.returncode == 0, forced.stderr
    assert len(out.read_text().splitlines()) == 5
    onto_project = cli("--db", str(db_path), "labels", "qrels", "--chunking", "whole", "--out", str(db_path))
    assert onto_project.returncode == 3 and "DuckDB database" in onto_project.stderr
