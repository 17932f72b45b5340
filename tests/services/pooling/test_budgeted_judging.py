"""Budgeted judging on the demo project file (issue 14): the budget cut per unit, which pairs are
candidates, the interval effect, the CLI."""

from __future__ import annotations

import json

import pytest

from tests.support.templates import demo_project
from workbench.config import load_settings
from workbench.errors import InputError
from workbench.services.judge.budget import plan_budget
from workbench.store.database import Database


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    path = tmp_path_factory.mktemp("budget") / "demo.duckdb"
    demo_project(path)  # a copy of the worker's init --demo template
    return path


def test_calls_budget_takes_pairs_in_strategy_order(demo):
    with Database(demo) as db:
        plan = plan_budget(db, "demo", budget=30, unit="calls", strategy="priority")
        pool = db.query_df("SELECT query_id, chunk_id, priority FROM pool_pairs WHERE pool = 'demo'")
    # candidates: the pool's pairs without a label (the demo's 131 human-labelled pairs are not
    # "unlabelled" for the judge either: issue 19)
    assert plan.selected == 30 and plan.spent == 30 and plan.candidates == len(pool) - 131
    # priority order: the 30 pairs are the lowest priorities, priority 1 first (of the unlabelled
    # pairs), then priority 2, each by query
    pri = plan.pairs["priority"].tolist()
    assert pri == sorted(pri) and pri[0] == 1
    keys = list(zip(pri, plan.pairs["query_id"]))
    assert keys == sorted(keys)
    effect = plan.effect.set_index("run")
    assert effect.loc["bm25", "width_after"] < effect.loc["bm25", "width_before"]


def test_hours_budget_pays_sme_time_for_pairs_without_a_human_label(demo):
    with Database(demo) as db:
        plan = plan_budget(db, "demo", budget=0.5, unit="hours", seconds_per_pair=60)
        calls = plan_budget(db, "demo", budget=10, unit="calls")
    assert plan.selected == 30 and plan.cost_per_pair == pytest.approx(1 / 60)
    # pairs with a human label are candidates neither for SME time nor for the judge (the demo has
    # no LLM label, so both leave out the same 131 pairs)
    assert plan.candidates == calls.candidates == 880 - 131


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
    onto_project = cli("--db", str(demo), "labels", "budget", "--pool", "demo", "--budget", "1", "--out", str(demo))
    assert onto_project.returncode == 3 and "DuckDB database" in onto_project.stderr
    bad = cli("--db", str(demo), "labels", "budget", "--pool", "demo", "--budget", "-3")
    assert bad.returncode == 2


def test_disagreement_comes_from_stored_judgments_of_several_judges(demo, tmp_path):
    import pandas as pd

    from workbench.store.judgments import write_judgments

    path = tmp_path / "copy.duckdb"
    path.write_bytes(demo.read_bytes())
    with Database(path) as db:
        # two pairs SMEs have not labelled (candidates for SME time), well down the priority order
        later = plan_budget(db, "demo", budget=1, unit="hours", seconds_per_pair=1, strategy="priority").pairs
        wanted = later["chunk_id"].iloc[[200, 300]].tolist()
        pair = db.query_df("""SELECT doc_id, chunk_id, start, "end" FROM chunks WHERE chunk_id IN
                              (SELECT unnest(?::VARCHAR[]))""", [wanted])
        pair = pair.set_index("chunk_id").loc[wanted].reset_index()
        pair.insert(0, "query_id", later["query_id"].iloc[[200, 300]].tolist())
        pair = pair[["query_id", "doc_id", "chunk_id", "start", "end"]]
        rows = []
        for (q, d, c, s, e), grades in zip(pair.itertuples(index=False), ([0, 3], [1, 2])):
            for assessor, g in zip(("judge-a", "judge-b"), grades):
                rows.append({"query_id": q, "doc_id": d, "start": int(s), "end": int(e), "grade": g,
                             "source": "llm", "assessor": assessor, "status": "ok", "chunk_id": c})
        with db.transaction() as cur:
            write_judgments(cur, pd.DataFrame(rows))
        plan = plan_budget(db, "demo", budget=2, unit="hours", seconds_per_pair=3600, strategy="disagreement")
    # the pair judged 0 and 3 comes first (spread 3), then the one judged 1 and 2 (spread 1)
    assert plan.pairs["chunk_id"].tolist() == pair["chunk_id"].tolist()
    assert plan.pairs["score"].tolist() == [3.0, 1.0]
