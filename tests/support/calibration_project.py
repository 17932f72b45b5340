"""A judged project for calibration tests: a document-level pool whose every pair carries an
LLM grade, and the 'true' SME grade of each pair (for simulated SMEs)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.support import templates
from workbench.services.calibration import workflow as cal
from workbench.store.corpus import write_documents, write_queries
from workbench.store.database import Database, insert_frame
from workbench.store.judgments import write_judgments
from workbench.store.pools import create_pool

QUERIES = 30
DOCS_PER_QUERY = 12


def build_project(path, *, seed: int = 0, judge_noise: float = 0.3) -> tuple[Database, dict]:
    """A project with a document-level pool of 360 pairs, an LLM grade on every pair, and the
    'true' SME grade of each pair (returned, for simulated SMEs), open at ``path``.

    Built once per test process for each ``(seed, judge_noise)`` and copied to ``path``
    (:mod:`tests.support.templates`: a 5 ms copy instead of 0.4-1 s of writes per test)."""
    key = templates.copy_of(("calibration_project", seed, judge_noise),
                            lambda where: _build(where, seed=seed, judge_noise=judge_noise), path)
    return Database(path), dict(key)


def _build(path, *, seed: int, judge_noise: float) -> dict:
    rng = np.random.default_rng(seed)
    db = Database(path)
    docs = pd.DataFrame({"doc_id": [f"d{i}" for i in range(QUERIES * DOCS_PER_QUERY)],
                         "title": [f"Title {i}" for i in range(QUERIES * DOCS_PER_QUERY)],
                         "text": [f"Document {i} about topic {i % QUERIES}. " * 3 for i in range(QUERIES * DOCS_PER_QUERY)]})
    queries = pd.DataFrame({"query_id": [f"q{i:02d}" for i in range(QUERIES)],
                            "text": [f"topic {i}" for i in range(QUERIES)],
                            "description": [f"about topic {i}" for i in range(QUERIES)],
                            "tags": [{"risk": "high"} if i < 10 else {"risk": "low"} for i in range(QUERIES)]})
    pairs = pd.DataFrame({"query_id": [f"q{i // DOCS_PER_QUERY:02d}" for i in range(len(docs))],
                          "doc_id": docs["doc_id"], "chunk_id": None,
                          "priority": [i % DOCS_PER_QUERY + 1 for i in range(len(docs))],
                          "rrf_score": 1.0})
    truth = rng.choice(4, size=len(pairs), p=[0.35, 0.25, 0.2, 0.2])
    noisy = np.where(rng.random(len(pairs)) < judge_noise, rng.integers(0, 4, len(pairs)), truth)
    judgments = pd.DataFrame({"query_id": pairs["query_id"], "doc_id": pairs["doc_id"], "start": 0,
                              "end": docs["text"].str.len(), "grade": noisy, "source": "llm",
                              "assessor": "judge", "model": "m1", "reason": "because", "status": "ok"})
    failed = judgments.head(5).assign(grade=None, status="failed", reason=None)
    with db.transaction() as tx:
        write_documents(tx, docs)
        write_queries(tx, queries)
        create_pool(tx, "p", level="doc", chunking=None, depth=20, runs=["r"])
        insert_frame(tx, "pool_pairs", pairs.assign(pool="p"))
        # two runs put the pairs in the pool: r1 ranks them by priority, r2 in reverse
        provenance = pairs[["query_id", "doc_id", "chunk_id"]].assign(pool="p")
        insert_frame(tx, "pool_provenance_rows", provenance.assign(run="r1", rank=pairs["priority"]))
        insert_frame(tx, "pool_provenance_rows", provenance.assign(run="r2", rank=DOCS_PER_QUERY + 1 - pairs["priority"]))
        write_judgments(tx, failed)  # failed LLM calls are not grades
        write_judgments(tx, judgments)
    db.close()
    return {(q, d): int(t) for q, d, t in zip(pairs["query_id"], pairs["doc_id"], truth)}


def judge_grades(db) -> dict:
    """The stored LLM grade of each (query_id, doc_id)."""
    rows = db.query_all("SELECT query_id, doc_id, grade FROM judgments WHERE source = 'llm' AND status = 'ok'")
    return {(q, d): int(g) for q, d, g in rows}


def label_all(db, sample, truth, annotator="ann", flip: float = 0.0, seed: int = 0, part: str | None = None):
    """Label every item (of ``part``) with its true grade, a share ``flip`` replaced at random.

    One :func:`~workbench.services.calibration.workflow.save_labels` (the same rows as a
    ``save_label`` per item, test_calibration_service checks, in a few statements instead of
    six per label)."""
    rng = np.random.default_rng(seed)
    items = db.query_df("SELECT position, query_id, doc_id, part FROM calibration_items WHERE sample = ?", [sample])
    grades = {}
    for row in items.itertuples():
        if part is not None and row.part != part:
            continue
        grade = truth[(row.query_id, row.doc_id)]
        if rng.random() < flip:
            grade = int(rng.integers(0, 4))
        grades[int(row.position)] = grade
    cal.save_labels(db, sample, annotator, grades, seconds=3.0)


#: Markup and markdown in a document: they must reach the page as text.
EVIL = "<script>window.__pwned = 1</script> *emph* $x$"


def two_smes_disagree(db, sample: str = "s", position: int = 0) -> dict:
    """Give the document of ``sample``'s item at ``position`` a known text (with :data:`EVIL`
    in it), then have SME ``ann`` grade it 3 and ``bob`` 2, each with their own evidence span and
    comment. Returns ``{"query_id", "doc_id", "text", "ann": (span text, comment), "bob": ...}``."""
    keys = db.query_all("SELECT query_id, doc_id FROM calibration_items WHERE sample = ? AND position = ?",
                        [sample, position])[0]
    text = "First sentence. " + EVIL + " Second sentence here. Third one."
    with db.transaction() as tx:
        tx.execute("UPDATE documents SET text = ? WHERE doc_id = ?", [text, keys[1]])
        tx.execute('UPDATE calibration_items SET start = 0, "end" = ? WHERE doc_id = ?', [len(text), keys[1]])
    ann_span, bob_span = "Second sentence here.", EVIL
    ann_note, bob_note = "ANN-NOTE <b>only the second</b>", "BOB-NOTE *x* partly"
    cal.save_label(db, sample, "ann", position, 3, comment=ann_note,
                   evidence=[[text.index(ann_span), text.index(ann_span) + len(ann_span)]])
    cal.save_label(db, sample, "bob", position, 2, comment=bob_note,
                   evidence=[[text.index(bob_span), text.index(bob_span) + len(bob_span)]])
    return {"query_id": keys[0], "doc_id": keys[1], "text": text, "ann": (ann_span, ann_note),
            "bob": (bob_span, bob_note)}
