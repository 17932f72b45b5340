"""A pool peek computes the qrels of the one query it shows
(:func:`workbench.services.qrels.rule.project_qrels` with ``query_ids``): the result must be
exactly the whole project's qrels filtered to that query, with the same policy line, for every
query of the demo project and of the blind project (:mod:`tests.support.blind_project`), for a
lead, an annotator (who sees only her own and the imported labels: the filter must not widen
that) and a viewer."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support import blind_project
from tests.support.actors import acting_as
from tests.support.templates import demo_project
from workbench.services.access import Actor
from workbench.services.browse import peek_pool
from workbench.services.pooling.pools import pool_labels, pool_pairs
from workbench.services.qrels.rule import project_qrels
from workbench.store.database import Database
from workbench.store.pools import read_pool

CAROL, LEA, VI = Actor("carol", "annotator"), Actor("lea", "lead"), Actor("vi", "viewer")


@pytest.fixture(scope="module")
def projects(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("peek")
    demo, blind = base / "demo.duckdb", base / "blind.duckdb"
    demo_project(demo)
    blind_project.build(blind)
    return {"demo": demo, "blind": blind}


def _old_peek_grades(record: dict, labels: pd.DataFrame, query_id: str, pairs: pd.DataFrame) -> pd.Series:
    """The peek's grades as before: the whole project's pool labels, then this query's rows."""
    item = "chunk_id" if record["level"] == "chunk" else "doc_id"
    labels = labels.loc[labels["query_id"] == query_id, [item, "grade"]]
    return pairs[[item]].merge(labels, on=item, how="left")["grade"].astype("Int64")


@pytest.mark.parametrize("name", ["demo", "blind"])
@pytest.mark.parametrize("actor", [LEA, CAROL, VI], ids=lambda a: a.role)
def test_one_query_qrels_are_the_whole_qrels_filtered(projects, name, actor):
    db = Database(projects[name], read_only=True)
    try:
        record = read_pool(db, "demo")
        queries = sorted(pool_pairs(db, "demo")["query_id"].astype(str).unique())
        assert len(queries) > 1
        with acting_as(actor):
            assert record["level"] == "chunk"  # the chunk rule is checked through pool_labels below
            whole = project_qrels(db, level="doc")
            whole_labels = pool_labels(db, record["level"], record["chunking"])
            graded = rows = chunk_rows = 0
            for q in queries:
                one = project_qrels(db, level="doc", query_ids=[q])
                expected = whole.table[whole.table["query_id"] == q].reset_index(drop=True)
                pd.testing.assert_frame_equal(one.table, expected)
                assert one.statement() == whole.statement() and one.notes == whole.notes
                assert one.passed_configurations == whole.passed_configurations
                rows += len(one.table)
                one_labels = pool_labels(db, record["level"], record["chunking"], query_ids=[q])
                pd.testing.assert_frame_equal(
                    one_labels, whole_labels[whole_labels["query_id"] == q].reset_index(drop=True))
                assert one_labels.attrs["qrels_policy"] == whole_labels.attrs["qrels_policy"]
                chunk_rows += len(one_labels)
                peek = peek_pool(db, "demo", q, limit=10_000)  # every pair of the query
                assert peek["policy"] == whole_labels.attrs["qrels_policy"]
                pd.testing.assert_series_equal(peek["pairs"]["grade"], _old_peek_grades(record, whole_labels, q, peek["pairs"]),
                                               check_names=False)
                graded += int(peek["pairs"]["grade"].notna().sum())
            # every row of the whole qrels is some query's: the per-query results cover them all
            assert rows == len(whole.table) and chunk_rows == len(whole_labels)
    finally:
        db.close()
    if actor is CAROL:  # demo-sme's, the judge's, alice's and bob's labels stay unseen
        assert graded == (1 if name == "blind" else 0)  # the blind project's one imported label
    else:
        assert graded > 0  # the comparison is not between empty tables
