"""The Qrels and Evaluate pages in Streamlit's AppTest on the demo project.

Numbers on the pages are checked against an independent path: the qrels exported to a TREC
file and the run exported to a TREC file, scored by pytrec_eval (the reference trec_eval
implementation), and the qrels file's own line counts.
"""

from __future__ import annotations

from collections import Counter

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.prerequisites import require_module
from tests.ui.html_tables import html_tables
from workbench.services.qrels.answerability import unanswerable_ids
from workbench.services.qrels.export import export_qrels, export_run
from workbench.store.database import Database


def _qrels_page():
    from workbench.ui.views import qrels

    qrels.render()


def _evaluate_page():
    from workbench.ui.views import evaluate

    evaluate.render()


def _run(page) -> AppTest:
    at = AppTest.from_function(page, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


def test_qrels_page_counts_equal_the_exported_file(demo_db, tmp_path):
    at = _run(_qrels_page)
    tables = html_tables(at)
    with Database(demo_db) as db:
        export_qrels(db, tmp_path / "q.txt", format="trec")
    lines = [line.split() for line in (tmp_path / "q.txt").read_text().splitlines()]
    by_grade = Counter(int(g) for *_, g in lines)
    shown = {int(r["grade"]): int(r["qrels"].replace(",", "")) for r in tables["qrels-grades"]}
    assert shown == dict(by_grade)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Qrels"] == f"{len(lines):,}"
    assert metrics["Queries"] == f"{len({q for q, *_ in lines}):,}"
    coverage = tables["qrels-coverage"]
    assert [r["pool"] for r in coverage] == ["demo"]
    assert "policy" in " ".join(e.proto.body for e in at.get("html"))
    assert at.get("download_button"), "a download button"
    # the button's file is written when pressed (a callable): the export's bytes
    from workbench.ui.views import qrels as page

    assert page._file(demo_db, "trec", "doc", None, "merged") == (tmp_path / "q.txt").read_bytes()
    # it runs outside the page session: the page's signed-in person is checked there
    from workbench.services.access import Actor, PermissionDenied

    with pytest.raises(PermissionDenied):
        page._file(demo_db, "trec", "doc", None, "merged", Actor("ann", "annotator"))


def test_evaluate_page_means_equal_pytrec_eval(demo_db, tmp_path):
    pytrec_eval = require_module("pytrec_eval")
    at = _run(_evaluate_page)
    at.multiselect(key="evaluate_runs").set_value(["bm25"]).run()
    assert not at.exception, at.exception
    means = {(r["run"], r["measure"]): float(r["mean"]) for r in html_tables(at)["evaluate-means"]}
    with Database(demo_db) as db:
        chunking = db.query_value("SELECT chunking FROM runs WHERE name = 'bm25'")
        export_qrels(db, tmp_path / "q.txt", format="trec", level="chunk", chunking=chunking)
        export_run(db, "bm25", tmp_path / "r.txt")
        unanswerable = set(map(str, unanswerable_ids(db)))
    qrels: dict = {}
    for q, _, d, g in (line.split() for line in (tmp_path / "q.txt").read_text().splitlines()):
        if q not in unanswerable:  # nothing to retrieve: left out of ranking measures (page note)
            qrels.setdefault(q, {})[d] = int(g)
    run: dict = {}
    for q, _, d, _rank, s, _ in (line.split() for line in (tmp_path / "r.txt").read_text().splitlines()):
        run.setdefault(q, {})[d] = float(s)
    scores = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_10"}).evaluate(run)
    # queries with no relevant item are left out of the mean (the engine's default)
    relevant = [q for q in scores if any(g >= 1 for g in qrels[q].values())]
    checked = 0
    for ours, theirs in (("ndcg@10", "ndcg_cut_10"), ("recall@10", "recall_10")):
        expected = sum(scores[q][theirs] for q in relevant) / len(relevant)
        assert means[("bm25", ours)] == pytest.approx(expected, abs=1e-3)
        checked += 1
    assert checked == 2


def test_evaluate_page_saves_an_evaluation_only_when_asked(demo_db):
    from workbench.services.evaluation.evaluate import stored_evaluations

    at = _run(_evaluate_page)
    at.multiselect(key="evaluate_runs").set_value(["bm25"]).run()
    with Database(demo_db) as db:
        assert len(stored_evaluations(db)) == 0  # showing scores stores nothing
    next(b for b in at.button if b.label == "Save this evaluation").click().run()
    assert not at.exception, at.exception
    with Database(demo_db) as db:
        stored = stored_evaluations(db)
    assert len(stored) == 1 and list(stored["runs"].iloc[0]) == ["bm25"]
    assert any("Saved evaluation" in s.value for s in at.success)
    assert len(at.dataframe) == 1  # the history table


def test_low_judged_advice_fits_a_run_already_pooled_and_notes_use_page_words(demo_db, cli):
    """The judge labelled every pooled pair but has not passed the gate: the page must not tell
    the user to pool bm25 again (it is in pool demo) and must not name a command or a setting."""
    judged = cli("--db", str(demo_db), "judge", "--pool", "demo", "--model", "offline-lexical")
    assert judged.returncode == 0, judged.stderr
    at = _run(_evaluate_page)
    at.multiselect(key="evaluate_runs").set_value(["bm25"]).run()
    assert not at.exception, at.exception
    warnings = " ".join(w.value for w in at.warning)
    assert "Run bm25: only" in warnings and "already in pool demo" in warnings
    assert "calibration gate" in warnings and "Add it to a pool" not in warnings
    shown = " ".join([w.value for w in at.warning] + [c.value for c in at.caption])
    assert "No pool of the same kind" not in shown
    assert "LLM labels left out" in shown  # the policy note is there...
    assert "workbench " not in shown and "llm_labels" not in shown  # ...in the page's words
