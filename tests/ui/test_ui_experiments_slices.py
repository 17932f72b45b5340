"""The Experiments page shows, per query tag, how far hybrid search moves a measure over dense and
over BM25 on the demo (issue 12 item 4), each with its paired randomization test, and the numbers
equal an independent computation and the CLI's ``--slices`` output.

Oracles: per-query nDCG@10 by pytrec_eval from the stored runs and the project's chunk qrels (so
the lift of every slice is recomputed outside the metric engine), and the exact two-sided
sign-flip p-value by enumerating all 2^n sign vectors for slices of up to 12 queries (the page's
test draws 10,000 random sign vectors, seed 0, so it must land within Monte Carlo error).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import run_cli
from tests.support.prerequisites import require_module
from tests.support.retrieval_fixtures import default_onnx_export
from tests.ui.html_tables import html_tables

CHUNKING = "fixed:256"


def _page():
    from workbench.ui.views import experiments

    experiments.render()


def exact_sign_flip_p(d: np.ndarray) -> float:
    """P(|mean(s·d)| >= |mean(d)|) over all 2^n sign vectors s (the observed one included)."""
    observed = abs(d.mean())
    flips = np.array(list(itertools.product((-1.0, 1.0), repeat=len(d))))
    return float(np.mean(np.abs(flips @ d / len(d)) >= observed - 1e-12))


def _per_query_ndcg(db_path: Path, runs: dict[str, str], chunking: str, pytrec_eval) -> dict[str, dict[str, float]]:
    from workbench.services.qrels.rule import project_qrels
    from workbench.services.tags import query_tags
    from workbench.store.database import Database
    from workbench.store.runs import read_run_rows

    with Database(db_path, read_only=True) as db:
        table = project_qrels(db, level="chunk", chunking=chunking, source="human").table
        qrels: dict[str, dict[str, int]] = {}
        for q, item, grade in table[["query_id", "item_id", "grade"]].itertuples(index=False):
            qrels.setdefault(str(q), {})[str(item)] = int(grade)
        # Unanswerable queries (tag type=unanswerable, issue 13) are left out of ranking measures.
        unanswerable = set(query_tags(db).query("tag == 'type=unanswerable'")["query_id"])
        qrels = {q: items for q, items in qrels.items() if q not in unanswerable}
        out = {}
        for key, run in runs.items():
            ranked: dict[str, dict[str, float]] = {}
            # Stored scores: ties (common under RRF) are broken as trec_eval does, as the engine does.
            for q, c, score in read_run_rows(db, run)[["query_id", "chunk_id", "score"]].itertuples(index=False):
                ranked.setdefault(str(q), {})[str(c)] = float(score)
            values = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10"}).evaluate(ranked)
            out[key] = {q: v["ndcg_cut_10"] for q, v in values.items()}
    return out


def test_hybrid_lift_by_slice_on_the_demo_equals_pytrec_eval_and_the_cli(demo_db, tmp_path_factory):
    pytrec_eval = require_module("pytrec_eval")
    default_onnx_export(tmp_path_factory)  # the page's dense cells take the default backend
    at = AppTest.from_function(_page, default_timeout=900)
    at.run()
    assert not at.exception, at.exception
    at.multiselect[0].set_value([CHUNKING])
    at.multiselect[1].set_value(["BM25", "Dense", "Hybrid (BM25 + dense)"])
    at.multiselect[2].set_value(["ndcg@10"])
    at.text_input[0].set_value("1000")
    at.selectbox[0].set_value("People only")
    at.button[0].click()
    at.run()
    assert not at.exception, at.exception
    rows = html_tables(at)["experiments-hybrid-slices"]
    by_slice = {r["slice"]: r for r in rows}
    assert rows[0]["slice"] == "(all)"
    assert by_slice["acronym=True"]["queries"] == "5"  # q007, q019, q021, q031, q035 (all answerable)
    assert any("the mean over" in c.value for c in at.caption)

    # Independent per-query nDCG@10 from the stored runs.
    from workbench.services.tags import query_tags
    from workbench.store.database import Database

    result = at.session_state["experiments_result"]
    name = result.cells[0].chunking_name
    values = _per_query_ndcg(demo_db, {r: f"sweep.{name}.{r}" for r in ("bm25", "dense", "hybrid")}, name,
                             pytrec_eval)
    with Database(demo_db, read_only=True) as db:
        tags = query_tags(db)
    members = {"(all)": sorted(values["hybrid"])}
    for tag, group in tags.groupby("tag"):
        members[str(tag)] = sorted(set(group["query_id"]) & set(values["hybrid"]))
    lifts = checked_p = 0
    for tag, row in by_slice.items():
        ids = members[tag]
        assert row["queries"] == str(len(ids)), tag
        hybrid = np.array([values["hybrid"][q] for q in ids])
        assert row["hybrid"] == f"{hybrid.mean():.3f}", tag
        for part, label in (("dense", "dense"), ("bm25", "BM25")):
            d = hybrid - np.array([values[part][q] for q in ids])
            assert float(row[f"lift over {label}"]) == pytest.approx(d.mean(), abs=5e-4), (tag, part)
            lifts += 1
            if 2 <= len(ids) <= 12 and np.any(d != 0):
                assert float(row[f"p over {label}"]) == pytest.approx(exact_sign_flip_p(d), abs=0.02), (tag, part)
                checked_p += 1
    assert lifts == 2 * len(by_slice) and lifts >= 20, lifts
    assert checked_p >= 10, checked_p

    # The CLI's slice output for the same cells (it reuses the page's runs) gives the same numbers.
    for part, label in (("dense", "dense"), ("bm25", "BM25")):
        done = run_cli("--db", str(demo_db), "sweep", "--chunkings", CHUNKING, "--retrievers", "bm25,dense,hybrid",
                       "-m", "ndcg@10", "--budgets", "1000", "--labels", "human", "--slices",
                       f"{CHUNKING}/{part},{CHUNKING}/hybrid", "--format", "json", "--no-progress", timeout=600)
        assert done.returncode == 0, done.stderr
        assert done.stderr.count("reusing run") == 3
        for item in json.loads(done.stdout)["slices"]:
            row = by_slice[item["tag"]]
            assert row["queries"] == str(item["queries"])
            assert row[f"lift over {label}"] == f"{item['lift']:+.3f}"
            assert row[f"p over {label}"] == ("–" if item["p_value"] is None else f"{item['p_value']:.3f}")
