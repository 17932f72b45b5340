"""Which queries are unanswerable: :func:`unanswerable_ids` reads only the queries with tags or an
SME decision, and must name the same queries as :func:`query_answerability` (every query read).

Hand-worked project: an SME decision wins over tags (the latest decision of a query wins), a
list tag or a mapping's flag or value ``unanswerable`` (any case, spaces around) marks a query;
a query with no tags and no decision is answerable.
"""

from __future__ import annotations

import pandas as pd
import pytest

from workbench.services.qrels import answerability
from workbench.store import query_kinds
from workbench.store.corpus import write_queries
from workbench.store.database import Database

TAGS = {"q1": None,                               # nothing: answerable
        "q2": ["unanswerable"],                   # list tag
        "q3": {"unanswerable": True},             # mapping flag
        "q4": {"kind": "factoid"},                # tags that say nothing
        "q5": None,                               # no tags, SME: unanswerable
        "q6": ["unanswerable"],                   # tagged, SME: answerable (wins)
        "q7": None,                               # SME unanswerable, then answerable (latest wins)
        "q8": {},                                 # empty tags
        "q9": {"type": " Unanswerable "}}         # mapping value, any case
DECISIONS = [("q5", False), ("q6", True), ("q7", False), ("q7", True)]
EXPECTED = ["q2", "q3", "q5", "q9"]


@pytest.fixture
def db(tmp_path):
    db = Database(tmp_path / "p.duckdb")
    with db.transaction() as tx:
        write_queries(tx, pd.DataFrame({"query_id": list(TAGS), "text": [f"question {q}" for q in TAGS],
                                        "tags": list(TAGS.values())}))
    for qid, answerable in DECISIONS:
        answerability.mark_answerability(db, qid, answerable=answerable, annotator="sme1")
    yield db
    db.close()


def test_unanswerable_ids_are_the_hand_worked_ones_and_those_of_every_query_read(db):
    marks = answerability.query_answerability(db)
    assert marks.loc[marks["unanswerable"], "query_id"].tolist() == EXPECTED
    assert dict(zip(marks["query_id"], marks["decided_by"])) == {
        "q1": "none", "q2": "tag", "q3": "tag", "q4": "none", "q5": "sme", "q6": "sme", "q7": "sme", "q8": "none",
        "q9": "tag"}
    assert answerability.unanswerable_ids(db) == EXPECTED


def test_unanswerable_ids_do_not_read_every_query(db, monkeypatch):
    """A project of many untagged queries (the Qrels page asks on every load) is not read whole."""

    def refuse(*args, **kwargs):
        raise AssertionError("every query was read")

    monkeypatch.setattr(query_kinds, "query_tags", refuse)
    assert answerability.unanswerable_ids(db) == EXPECTED
    assert query_kinds.tagged_or_decided_queries(db)["query_id"].tolist() == ["q2", "q3", "q4", "q5", "q6", "q7",
                                                                              "q8", "q9"]
