"""The Evaluate page's "Per-query difference" in Streamlit's AppTest: the empty state on the demo
(one run) names the next step in the page's words; the rows are the service's."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.ui.html_tables import html_tables


def _evaluate_page():
    from workbench.ui.views import evaluate

    evaluate.render()


def test_one_run_shows_the_next_step_and_no_table(demo_db):
    at = AppTest.from_function(_evaluate_page, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    assert "Per-query difference" in [h.value for h in at.subheader]
    infos = [i.value for i in at.info]
    assert any("Choose at least two runs" in i and "Retrieve & Pool" in i for i in infos), infos
    assert not any("--" in i for i in infos)  # no CLI flags in page text
    assert "evaluate-per-query-diff" not in html_tables(at)


def test_two_runs_show_the_services_rows(demo_db):
    from tests.conftest import run_cli
    from workbench.services.evaluation import views
    from workbench.store.database import Database

    done = run_cli("--db", str(demo_db), "retrieve", "bm25", "--chunking", "sections", "--name", "flat",
                   "--k1", "0.5", "--b", "0.3", "--no-progress")
    assert done.returncode == 0, done.stderr
    with Database(demo_db) as db:
        evaluation = views.evaluate_runs(db, ["bm25", "flat"], ["ndcg@10"])
        frame = views.per_query_difference(db, evaluation, "bm25", "flat", "ndcg@10", k=5)
    at = AppTest.from_function(_evaluate_page, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    rows = html_tables(at)["evaluate-per-query-diff"]
    expected = [(q, f"{d:+.3f}") for q, d in zip(frame["query_id"], frame["delta"])]
    assert [(r["query"], r["Δ"]) for r in rows] == expected
    assert list(frame["delta"]) == sorted(frame["delta"])
    cells = [r["top 5 of flat"] for r in rows]
    assert any("(unjudged)" in c for c in cells) and any("(grade " in c for c in cells)
    # the same query, both sides: each id with its grade in the page's words, in the run's order
    first = frame.iloc[0]
    assert rows[0]["top 5 of bm25"] == " · ".join(f"{i} (unjudged)" if g is None else f"{i} (grade {g})"
                                                  for i, g in first["baseline_top"])
