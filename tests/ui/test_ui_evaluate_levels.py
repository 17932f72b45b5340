"""The Evaluate page on runs of two chunkings, as the README's "try another chunking" leaves the
demo (``bm25`` on ``sections``, ``bm25-256`` on ``fixed-256``): a Level control, document-level
scores and judged@k that count each document of a chunk run once (at its best chunk), and the
refusal of chunk level worded with the control's name.

Oracles are independent of the page's path: the document-level qrels exported to a TREC file,
each run's rows read whole and reduced by hand to its distinct documents in rank order, scored
by pytrec_eval (the reference trec_eval implementation) and counted in plain Python.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.prerequisites import require_module
from tests.ui.html_tables import html_tables
from workbench.services.qrels.answerability import unanswerable_ids
from workbench.services.qrels.export import export_qrels
from workbench.store.database import Database
from workbench.store.runs import read_run_rows


def _evaluate_page():
    from workbench.ui.views import evaluate

    evaluate.render()


@pytest.fixture
def two_chunkings(demo_db):
    """The README's second chunking on the demo: ``fixed-256`` and run ``bm25-256`` over it."""
    from workbench.services.chunking import create_chunking
    from workbench.services.retrieval.runs import run_bm25

    with Database(demo_db) as db:
        create_chunking(db, "fixed-256", "fixed", size=256, unit="tokens")
        run_bm25(db, "fixed-256", "bm25-256")
    return demo_db


def _run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, at.exception
    return at


def _doc_qrels(db, tmp_path) -> dict:
    """``{query: {doc: grade}}`` of the exported document-level qrels (unanswerable queries out)."""
    export_qrels(db, tmp_path / "q.txt", format="trec", level="doc")
    unanswerable = set(map(str, unanswerable_ids(db)))
    qrels: dict = {}
    for q, _, d, g in (line.split() for line in (tmp_path / "q.txt").read_text().splitlines()):
        if q not in unanswerable:
            qrels.setdefault(q, {})[d] = int(g)
    return qrels


def _documents_in_rank_order(db, run: str) -> dict:
    """``{query: [doc, ...]}``: the run's documents by rank, each once (at its first row)."""
    docs: dict = {}
    for q, d in read_run_rows(db, run)[["query_id", "doc_id"]].itertuples(index=False):
        seen = docs.setdefault(str(q), [])
        if d not in seen:
            seen.append(d)
    return docs


def test_two_chunkings_are_scored_by_document_with_each_document_once(two_chunkings, tmp_path):
    pytrec_eval = require_module("pytrec_eval")
    at = _run(AppTest.from_function(_evaluate_page, default_timeout=120))
    assert at.multiselect(key="evaluate_runs").value == ["bm25", "bm25-256"]
    assert at.selectbox(key="evaluate_level").value == "doc"  # the one level these runs compare at
    assert not at.error, [e.value for e in at.error]
    means = {(r["run"], r["measure"]): float(r["mean"]) for r in html_tables(at)["evaluate-means"]}
    with Database(two_chunkings) as db:
        qrels = _doc_qrels(db, tmp_path)
        for name in ("bm25", "bm25-256"):
            run = {q: {d: 1.0 / rank for rank, d in enumerate(docs, 1)}
                   for q, docs in _documents_in_rank_order(db, name).items()}
            scores = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_10"}).evaluate(run)
            relevant = [q for q in scores if any(g >= 1 for g in qrels[q].values())]
            for ours, theirs in (("ndcg@10", "ndcg_cut_10"), ("recall@10", "recall_10")):
                expected = sum(scores[q][theirs] for q in relevant) / len(relevant)
                assert means[(name, ours)] == pytest.approx(expected, abs=1e-3), (name, ours)


def test_chunk_level_on_two_chunkings_is_refused_naming_the_control(two_chunkings):
    at = _run(AppTest.from_function(_evaluate_page, default_timeout=120))
    at.selectbox(key="evaluate_level").set_value("chunk").run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    assert "different chunkings" in errors[0] and "“Level” = doc" in errors[0], errors
    assert "--" not in errors[0] and "twice" not in errors[0], errors
    assert "evaluate-means" not in html_tables(at)
    # one chunking again: chunk level scores it, no error left
    at.multiselect(key="evaluate_runs").set_value(["bm25-256"]).run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert {r["run"] for r in html_tables(at)["evaluate-means"]} == {"bm25-256"}


@pytest.mark.parametrize("k", [3, 10])
def test_document_level_judged_at_k_counts_each_document_once(two_chunkings, tmp_path, k):
    """judged@k by document = |labelled documents among the first k distinct documents| / k, mean
    over the queries the run answered; k = 3 needs rows deeper than rank 3 (a document's
    second chunk often comes second)."""
    from workbench.services.evaluation import views as ev

    with Database(two_chunkings) as db:
        evaluation = ev.evaluate_runs(db, ["bm25", "bm25-256"], ["ndcg@10"], level="doc")
        shares = ev.judged_shares(db, evaluation, k=k).set_index("run")["judged_at_k"]
        labelled = {(str(q), str(i)) for q, i in evaluation.qrels["bm25"][["query_id", "item_id"]].itertuples(index=False)}
        for name in ("bm25", "bm25-256"):
            docs = _documents_in_rank_order(db, name)
            per_query = [sum((q, d) in labelled for d in top[:k]) / k for q, top in docs.items()]
            assert shares[name] == pytest.approx(sum(per_query) / len(per_query), abs=1e-12), name
        deeper = read_run_rows(db, "bm25", query_id="q001", depth=k)
        assert deeper["doc_id"].nunique() < k  # the case: the top k rows hold fewer than k documents
        top = ev.top_results(db, evaluation, "bm25", "q001", k=k)
        assert list(top["item_id"]) == _documents_in_rank_order(db, "bm25")["q001"][:k]
        assert list(top["rank"]) == list(range(1, k + 1))
