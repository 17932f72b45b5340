"""Budgeted judging on the demo project file (issue 14): the budget cut per unit, which pairs are
candidates, the interval effect, the CLI."""

from __future__ import annotations

import json

import pytest

from workbench.config import load_settings
from workbench.errors import InputError
from workbench.services.budgeted_judging import plan_budget
from workbench.services.project import init_project
from workbench.store.database import Database


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    path = tmp_path_factory.mktemp("budget") / "demo.duckdb"
    init_project(path, demo=True)
    return path


def test_calls_budget_takes_pairs_in_strategy_order(demo):
    with Database(demo) as db:
        plan = plan_budget(db, "demo", budget=30, unit="calls", strategy="priority")
        pool = db.query_df("SELECT query_id, chunk_id, priority FROM pool_pairs WHERE pool = 'demo'")
    assert plan.selected == 30 and plan.spent == 30 and plan.candidates == len(pool)
    # priority order: the 30 pairs are the lowest priorities, all priority 1 first (44 queries)
    assert (plan.pairs["priority"] == 1).all()
    assert plan.pairs["query_id"].tolist() == sorted(plan.pairs["query_id"])
    effect = plan.effect.set_index("run")
    assert effect.loc["bm25", "width_after"] < effect.loc["bm25", "width_before"]


def test_hours_budget_pays_sme_time_for_pairs_without_a_human_label(demo):
    with Database(demo) as db:
        plan = plan_budget(db, "demo", budget=0.5, unit="hours", seconds_per_pair=60)
        calls = plan_budget(db, "demo", budget=10, unit="calls")
    assert plan.selected == 30 and plan.cost_per_pair == pytest.approx(1 / 60)
    # pairs with a human label are not candidates for SME time
    assert plan.candidates < calls.candidates


def test_random_is_seeded_and_usd_needs_a_price(demo):
    with Database(demo) as db:
        a = plan_budget(db, "demo", budget=20, strategy="random", seed=5)
        b = plan_budget(db, "demo", budget=20, strategy="random", seed=5)
        assert a.pairs["chunk_id"].tolist() == b.pairs["chunk_id"].tolist()
        settings = load_settings(None, {"project": {"db": str(demo)}, "judge": {"model": "no-such-model",
                                                                                  "base_url": "http://127.0.0.1:9/v1"}})
        with pytest.raises(InputError, match="no price"):
            plan_budget(db, "demo", budget=1, unit="usd", settings=settings)
        with pytest.raises(InputError, match="no pool named"):
            plan_budget(db, "nope", budget=1)


def test_cli_budget(demo, tmp_path, cli):
    out = tmp_path / "plan.jsonl"
    done = cli("--db", str(demo), "labels", "budget", "--pool", "demo", "--budget", "12", "--strategy",
               "comparison", "--out", str(out), "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["selected"] == 12 and report["strategy"] == "comparison"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 12 and set(rows[0]) == {"query_id", "doc_id", "chunk_id", "priority", "score"}
    again = cli("--db", str(demo), "labels", "budget", "--pool", "demo", "--budget", "12", "--out", str(out))
    assert again.returncode == 3 and "exists" in again.stderr
    bad = cli("--db", str(demo), "labels", "budget", "--pool", "demo", "--budget", "-3")
    assert bad.returncode == 2
