"""The Evaluate page's "Per-query difference" in a real Streamlit server driven by Debian's
chromium, on the demo project with a second BM25 run: rows sorted by the difference, worst for
the run first, both runs' top results with their grades and unjudged ones marked; choosing the
other run as the baseline flips every difference. The rows are checked against the service
(:func:`workbench.services.evaluation.views.per_query_difference`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.support.live_app import browser_page, serve_shared, wait_idle
from tests.support.templates import demo_project

pytestmark = pytest.mark.browser

LONG = 180_000  # ms: a page run on a shared 2-core machine
KEY = "evaluate-per-query-diff"


def _idle(page) -> None:
    wait_idle(page, LONG)


def _table(page) -> tuple[list[str], list[list[str]]]:
    table = f"table[data-table='{KEY}']"
    page.wait_for_selector(table, timeout=LONG)
    head = page.eval_on_selector_all(f"{table} thead th", "cells => cells.map(c => c.innerText)")
    rows = page.eval_on_selector_all(
        f"{table} tbody tr", "rows => rows.map(r => Array.from(r.querySelectorAll('td')).map(td => td.innerText))")
    return head, rows


def _expected(db: Path, baseline: str, run: str) -> list[tuple[str, str]]:
    from workbench.services.evaluation import views
    from workbench.store.database import Database

    with Database(db) as handle:
        evaluation = views.evaluate_runs(handle, [baseline, run], ["ndcg@10"])
        frame = views.per_query_difference(handle, evaluation, baseline, run, "ndcg@10", k=5)
    return [(r.query_id, f"{r.delta:+.3f}") for r in frame.itertuples(index=False)]


def test_rows_sorted_by_the_difference_with_unjudged_results_marked(tmp_path):
    db = tmp_path / "demo.duckdb"
    demo_project(db)  # a copy of the per-process demo project (init_project(db, demo=True))
    done = run_cli("--db", str(db), "retrieve", "bm25", "--chunking", "sections", "--name", "flat", "--k1", "0.5",
                   "--b", "0.3", "--no-progress")
    assert done.returncode == 0, done.stderr
    # computed before the app opens the file (it holds the database while it runs)
    expected, expected_flipped = _expected(db, "bm25", "flat"), _expected(db, "flat", "bm25")
    shots = Path(os.environ.get("WORKBENCH_SCREENSHOTS", tmp_path / "screenshots"))
    shots.mkdir(parents=True, exist_ok=True)
    with serve_shared(db) as url, browser_page() as page:
        page.goto(f"{url}/evaluate")
        page.get_by_role("heading", name="Per-query difference").wait_for(timeout=LONG)
        _idle(page)
        head, rows = _table(page)  # the page chooses the project's first two runs: bm25, then flat
        assert head == ["query", "query text", "baseline: bm25", "run: flat", "Δ", "top 5 of bm25", "top 5 of flat"]
        delta = head.index("Δ")
        assert [(r[0], r[delta]) for r in rows] == expected
        deltas = [float(r[delta]) for r in rows]
        assert deltas == sorted(deltas) and deltas[0] < 0 < deltas[-1]
        tops = [cell for r in rows for cell in r[-2:]]
        assert any("(unjudged)" in cell for cell in tops) and any("(grade " in cell for cell in tops)
        # a chosen query's values and delta agree: delta = run - baseline
        first = rows[0]
        assert float(first[3]) - float(first[2]) == pytest.approx(float(first[delta]), abs=2e-3)
        page.locator(f"table[data-table='{KEY}']").scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "evaluate-per-query.png"), full_page=True)

        # the other run as the baseline: every difference changes sign
        box = page.get_by_label("Baseline run", exact=True).first
        box.click()
        page.keyboard.type("flat")
        page.get_by_role("option").filter(has_text="flat").first.wait_for()
        page.keyboard.press("Enter")
        page.get_by_text("baseline: flat", exact=True).wait_for(timeout=LONG)
        _idle(page)
        head, flipped = _table(page)
        assert head[2:4] == ["baseline: flat", "run: bm25"]
        assert [(r[0], r[delta]) for r in flipped] == expected_flipped
        before = {r[0]: float(r[delta]) for r in rows}
        assert {r[0]: float(r[delta]) for r in flipped} == {q: pytest.approx(-d, abs=1e-9) for q, d in before.items()}
        assert "Traceback" not in page.inner_text("body")
