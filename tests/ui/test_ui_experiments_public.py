"""The Experiments page runs a 4 × 2 sweep (fixed:32/64/128/256 × BM25, hybrid) on a public
collection, a seeded Cranfield subset (``tests/support/public_subset.py``; shared data: skipped
locally when absent, fails in CI), in Streamlit's AppTest, and its table equals the JSON of
``workbench sweep`` for the same grid on the same project.

The project is a copy of the session's swept subset (:func:`swept_subset_project`, also the
subject of ``tests/cli/test_cli_sweep_public_cranfield.py``) with every run deleted, so the page
builds all the grid's runs itself while the chunk vectors come from the project's embedding cache
(the page's own dense encoding is covered on the demo by ``tests/ui/test_ui_experiments_slices.py``);
its table also equals the JSON of that from-scratch CLI sweep.

The full-collection run reported in the note is the CLI on all of ``../shared/datasets/cranfield``::

    workbench --db cran.duckdb init
    workbench --db cran.duckdb import corpus ../shared/datasets/cranfield/cran.all.1400
    workbench --db cran.duckdb import queries ../shared/datasets/cranfield/cran.qry
    workbench --db cran.duckdb import qrels ../shared/datasets/cranfield/cranqrel
    workbench --db cran.duckdb sweep --chunkings fixed:32,fixed:64,fixed:128,fixed:256 \\
        --retrievers bm25,hybrid -m ndcg@10 -m recall@10 --budgets 250,500,1000,2000 --labels human
"""

from __future__ import annotations

import json
import shutil

from streamlit.testing.v1 import AppTest

from tests.conftest import run_cli
from tests.support.public_subset import BUDGETS, CHUNKINGS, swept_subset_project
from tests.ui.html_tables import html_tables


def _page():
    from workbench.ui.views import experiments

    experiments.render()


def _without_runs(swept, dest) -> str:
    """A copy of the swept project with every run deleted through the CLI: its chunkings and
    embedding cache stay (so the page encodes nothing), the grid's runs are the page's to make."""
    from workbench.store.database import Database
    from workbench.store.runs import read_run_info

    db = str(dest / "cran.duckdb")
    shutil.copyfile(swept.db, db)
    with Database(db, read_only=True) as store:
        names = read_run_info(store)["name"].tolist()
    assert len(names) >= len(CHUNKINGS) * 2, names
    for name in names:
        done = run_cli("--db", db, "delete", "run", name, "--yes")
        assert done.returncode == 0, done.stderr
    with Database(db, read_only=True) as store:
        assert read_run_info(store).empty
    return db


def test_page_runs_the_public_4x2_grid_and_equals_the_cli_json(tmp_path, tmp_path_factory, monkeypatch):
    swept = swept_subset_project(tmp_path_factory)
    assert swept.returncode == 0, swept.stderr
    db = _without_runs(swept, tmp_path)
    monkeypatch.setenv("WORKBENCH_DB", db)
    at = AppTest.from_function(_page, default_timeout=900)
    at.run()
    assert not at.exception, at.exception
    at.multiselect[0].set_value(list(CHUNKINGS))
    at.multiselect[1].set_value(["BM25", "Hybrid (BM25 + dense)"])
    at.multiselect[2].set_value(["ndcg@10", "recall@10"])
    at.text_input[0].set_value(",".join(BUDGETS))
    at.selectbox[0].set_value("People only")
    at.button[0].click()
    at.run()
    assert not at.exception, at.exception
    # The only warning allowed is the unjudged-text one (Cranfield judged ~8 documents a query).
    assert all("judged" in w.value for w in at.warning), [w.value for w in at.warning]
    tables = html_tables(at)
    cells = tables["experiments-cells"]
    grid = [(s, r) for s in CHUNKINGS for r in ("bm25", "hybrid")]
    assert [r["configuration"] for r in cells] == [f"{s} × {r}" for s, r in grid]

    done = run_cli("--db", db, "sweep", "--chunkings", ",".join(CHUNKINGS), "--retrievers", "bm25,hybrid",
                   "-m", "ndcg@10", "-m", "recall@10", "--budgets", ",".join(BUDGETS), "--labels", "human",
                   "--format", "json", "--no-progress", timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("reusing run") == len(grid)  # the page's runs are the CLI's runs
    out = json.loads(done.stdout)
    compared = 0
    for row, cell in zip(cells, out["cells"], strict=True):
        assert row["configuration"] == f"{cell['chunking']} × {cell['retriever']}"
        for measure in ("ndcg@10", "recall@10"):
            assert row[measure] == f"{cell['aggregate'][measure]:.3f}"
            compared += 1
        for budget in BUDGETS:
            assert row[f"coverage@{budget}"] == f"{cell['coverage'][budget]:.3f}"
            compared += 1
        assert row["judged@10"] == f"{cell['judged@10']:.3f}"
        compared += 1
    assert compared == len(grid) * 7
    winners = {r["budget (tokens)"]: r["winner"] for r in tables["experiments-winners"]}
    assert winners == {b: f"{w['chunking']} × {w['retriever']}" for b, w in out["winner_by_budget"].items()}
    # Hybrid ran next to BM25 on every chunking: the hybrid-by-slice section is drawn (Cranfield's
    # only query tag is its written id, smart_id=NNN, one query per slice).
    assert "experiments-hybrid-slices" in tables
    # ... and equals the sweep the CLI ran from scratch (encoding included) before the runs were
    # deleted: the page's grid, run from the chunkings and vector cache, measures the same.
    scratch = json.loads(swept.stdout)
    measured = ("chunking", "retriever", "aggregate", "coverage", "judged@10")
    assert [{m: c[m] for m in measured} for c in out["cells"]] == [{m: c[m] for m in measured} for c in scratch["cells"]]
    assert out["winner_by_budget"] == scratch["winner_by_budget"]
