"""Sweep slices and latencies on the demo project against independent computations (scipy, numpy)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from tests.support.templates import demo_project
from workbench.services.evaluation import sweep
from workbench.services.tags import query_tags
from workbench.store.database import Database


@pytest.fixture(scope="module")
def result_and_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("sweep") / "demo.duckdb"
    demo_project(path)  # a copy of the worker's init --demo template
    db = Database(path)
    result = sweep.run_sweep(db, "fixed:128,fixed:256", "bm25", ["ndcg@10"], budgets=[1000], labels="human")
    yield result, db
    db.close()


def test_slice_lift_and_paired_t_test_equal_scipy_on_stored_values(result_and_db):
    result, db = result_and_db
    base, other = result.cells
    tags = query_tags(db)
    table = sweep.slice_lift(base, other, "ndcg@10", tags, test="ttest")
    assert table.iloc[0]["tag"] == "(all)"
    # per-query values as stored by the evaluation service (one stored evaluation per chunking)
    values = {}
    for evaluation_id in result.evaluation_ids:
        rows = db.query_all("SELECT run, query_id, value FROM evaluation_values WHERE evaluation_id = ? "
                            "AND measure = 'ndcg@10'", [evaluation_id])
        for run, q, v in rows:
            values.setdefault(run, {})[q] = v
    a, b = values[base.run], values[other.run]
    checked = 0
    for row in table.itertuples(index=False):
        ids = sorted(set(a) & set(b)) if row.tag == "(all)" else sorted(
            set(tags.loc[tags["tag"] == row.tag, "query_id"]) & set(a) & set(b))
        x = np.array([a[q] for q in ids])
        y = np.array([b[q] for q in ids])
        assert row.queries == len(ids)
        assert row.lift == pytest.approx(float((y - x).mean()))
        if len(ids) >= 2 and np.any(y - x != (y - x)[0]):
            assert row.p_value == pytest.approx(stats.ttest_rel(y, x).pvalue)
            checked += 1
    assert checked >= 5, checked


def test_latency_percentiles_equal_numpy(result_and_db):
    result, db = result_and_db
    cell = result.cells[0]
    raw = [v for (v,) in db.query_all("SELECT latency_ms FROM run_latencies WHERE run = ?", [cell.run])]
    assert len(raw) == 44
    assert cell.latency_p50 == pytest.approx(np.percentile(raw, 50))
    assert cell.latency_p95 == pytest.approx(np.percentile(raw, 95))
    params = json.loads(db.query_all("SELECT params::VARCHAR FROM runs WHERE name = ?", [cell.run])[0][0])
    assert params["latency_ms"] == pytest.approx(np.percentile(raw, 95))


def test_parse_errors_name_the_spec():
    for bad in ("fixed", "fixed:x", "fixed:10:20", "paragraph"):
        with pytest.raises(Exception) as info:
            sweep.parse_chunking(bad)
        assert "chunking" in str(info.value)
    assert sweep.parse_chunking("fixed:512:64").params == {"size": 512, "overlap": 64, "unit": "tokens"}
