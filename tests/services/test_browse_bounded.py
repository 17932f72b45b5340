"""Queries & Labels reads what it shows: counts, facets and label pages come from SQL, the
annotator's blind scope applies inside the read, and the one-query merged grades read that
query's labels only (issue 37)."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support.actors import acting_as
from workbench.services import access
from workbench.services.browse import count_labels, label_facets, labels_table, queries_table
from workbench.services.qrels.rule import admitted_spans, pair_grades, project_qrels
from workbench.store.corpus import write_documents, write_queries
from workbench.store.database import Database
from workbench.store.judgments import write_judgments

# judgment_id order; the failed LLM call (no grade) is no label
ROWS = [("q1", "d1", 2, "human", "ann", "ok"), ("q1", "d2", 1, "human", "bob", "ok"),
        ("q2", "d1", 3, "llm", "judge", "ok"), ("q2", "d3", 0, "imported", "file", "ok"),
        ("q1", "d3", 3, "llm", "judge", "ok"), ("q3", "d2", 1, "human", "ann", "ok"),
        ("q1", "d1", None, "llm", "judge", "failed")]


@pytest.fixture
def db(tmp_path):
    db = Database(tmp_path / "p.duckdb")
    with db.transaction() as tx:
        write_documents(tx, pd.DataFrame({"doc_id": ["d1", "d2", "d3"], "title": ["T1", "T2", "T3"],
                                          "text": ["alpha beta", "gamma delta", "eps zeta"]}))
        write_queries(tx, pd.DataFrame({"query_id": ["q1", "q2", "q3"], "text": ["a", "b", "c"]}))
        frame = pd.DataFrame(ROWS, columns=["query_id", "doc_id", "grade", "source", "assessor", "status"])
        write_judgments(tx, frame.assign(start=0, end=5, model=[("m" if s == "llm" else None) for s in frame["source"]],
                                         prompt_hash=[("h" if s == "llm" else None) for s in frame["source"]]))
    yield db
    db.close()


def test_counts_and_pages_by_hand(db):
    assert dict(zip(*queries_table(db)[["query_id", "labels"]].T.values)) == {"q1": 3, "q2": 2, "q3": 1}
    first, second = labels_table(db, limit=2), labels_table(db, limit=2, offset=2)
    assert list(zip(first["query_id"], first["doc_id"], first["title"])) == [("q1", "d1", "T1"), ("q1", "d2", "T2")]
    assert list(zip(second["query_id"], second["doc_id"])) == [("q2", "d1"), ("q2", "d3")]
    assert pd.concat([first, second], ignore_index=True).equals(labels_table(db).head(4))
    assert len(labels_table(db)) == count_labels(db) == 6
    assert count_labels(db, grades=[3]) == 2 and count_labels(db, query_ids=["q1"], sources=["human"]) == 2
    assert label_facets(db) == {"labels": 6, "sources": ["human", "imported", "llm"],
                                "assessors": ["ann", "bob", "file", "judge"]}


def test_an_annotator_reads_own_and_imported_only(db):
    with acting_as(access.Actor("ann", "annotator")):
        assert dict(zip(*queries_table(db)[["query_id", "labels"]].T.values)) == {"q1": 1, "q2": 1, "q3": 1}
        assert labels_table(db)["doc_id"].tolist() == ["d1", "d3", "d2"]
        assert labels_table(db, assessors=["bob"]).empty and count_labels(db, assessors=["bob"]) == 0
        assert label_facets(db) == {"labels": 3, "sources": ["human", "imported"], "assessors": ["ann", "file"]}


def test_one_query_reads_that_query_only(db, monkeypatch):
    whole = project_qrels(db).table
    expected = whole[whole["query_id"] == "q1"].reset_index(drop=True)
    # by hand: the judge has not passed the gate, so q1's pairs are the SMEs' d1 (2) and d2 (1)
    assert list(zip(expected["item_id"], expected["grade"], expected["tier"])) == [("d1", 2, "sme"), ("d2", 1, "sme")]
    assert admitted_spans(db).notes == admitted_spans(db, query_ids=["q1", "q2", "q3"]).notes

    seen: list[pd.DataFrame] = []
    real = Database.query_df

    def recording(self, sql, params=None):
        out = real(self, sql, params)
        seen.append(out)
        return out

    monkeypatch.setattr(Database, "query_df", recording)
    got = pair_grades(db, query_ids=["q1"])
    assert got.table.reset_index(drop=True).equals(expected)
    read = {q for frame in seen if "query_id" in frame.columns for q in frame["query_id"].astype(str)}
    assert read == {"q1"}, f"the one-query path read other queries' labels: {sorted(read)}"


def test_a_document_pools_judge_coverage_is_counted_in_sql(db):
    from workbench.services.evaluation.views import qrels_overview
    from workbench.store.database import insert_frame
    from workbench.store.pools import create_pool

    pairs = pd.DataFrame({"query_id": ["q1", "q1", "q2", "q2", "q3"], "doc_id": ["d1", "d3", "d1", "d2", "d3"]})
    with db.transaction() as tx:
        create_pool(tx, "p", level="doc", chunking=None, depth=10, runs=["r"])
        insert_frame(tx, "pool_pairs", pairs.assign(pool="p", chunk_id=None, priority=1, rrf_score=1.0))
    row = qrels_overview(db).coverage.iloc[0]
    # by hand: the judge graded (q1, d3) and (q2, d1); its failed call on (q1, d1) is no label
    llm = project_qrels(db, source="llm").table
    oracle = len(pairs.merge(llm.rename(columns={"item_id": "doc_id"}), on=["query_id", "doc_id"]))
    assert int(row["by_llm"]) == oracle == 2
    # people: (q1, d1) by ann; merged (judge not gated): (q1, d1) and the imported (q2, d3) is not pooled
    assert (int(row["by_people"]), int(row["labelled"])) == (1, 1)
