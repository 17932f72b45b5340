"""The BM25 baseline of synthetic questions (issue 14), worked by hand on a tiny project."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from workbench.services.chunking import create_chunking
from workbench.services.ingest import import_file
from workbench.services.qrels.synthetic_queries import bm25_baseline
from workbench.store.database import Database
from workbench.store.synthetic_queries import write_questions

TEXTS = {"a": "penguins huddle together through the antarctic winter night",
         "b": "volcanoes erupt molten basalt across the ocean floor",
         "c": "bakers proof sourdough overnight before baking at dawn"}


def test_bm25_baseline_by_hand(tmp_path, db_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in TEXTS.items()))
    with Database(db_path) as db:
        import_file(db, "corpus", corpus)
        create_chunking(db, "whole", "document")
        chunks = db.query_df("SELECT chunk_id, doc_id, start, \"end\" FROM chunks ORDER BY doc_id")
        by_doc = chunks.set_index("doc_id")
        rows = []
        # original questions copy their chunk (found at rank 1); rewritten: q1 still finds its
        # chunk, q2 matches nothing, q3 matches chunk b only (its chunk is c) -> none in the run
        spec = [("q1", "a", "penguins antarctic winter?", "why do penguins huddle?"),
                ("q2", "b", "basalt ocean floor?", "what is hot rock?"),
                ("q3", "c", "sourdough proof overnight?", "which volcanoes erupt?")]
        for q, doc, original, rewritten in spec:
            c = by_doc.loc[doc]
            rows.append({"query_id": q, "chunking": "whole", "chunk_id": c["chunk_id"], "doc_id": doc,
                         "start": int(c["start"]), "end": int(c["end"]), "generator": "test", "model": "test",
                         "seed": 0, "original": original, "rewritten": rewritten, "overlap_before": 1.0,
                         "overlap_after": 0.0, "flagged": False})
        with db.transaction() as cur:
            write_questions(cur, pd.DataFrame(rows))
        got = bm25_baseline(db, "whole", k=10)
    assert got["questions"] == 3
    assert got["before"] == {"hit": pytest.approx(1.0), "mrr": pytest.approx(1.0)}
    assert got["after"]["hit"] == pytest.approx(1 / 3) and got["after"]["mrr"] == pytest.approx(1 / 3)
