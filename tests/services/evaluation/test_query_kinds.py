"""Query kinds on the demo project (a real DuckDB file): unanswerable queries and SME decisions,
abstention of runs and answers, the demo's role runs and their leaks, stored chains and
trajectories."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.services.evaluation import abstention
from workbench.services.qrels import answerability
from workbench.services.evaluation import rbac
from workbench.services.evaluation import trajectories
from workbench.services.project.lifecycle import open_project
from workbench.services.evaluation.query_kinds import DEMO_ANSWERS, DEMO_TRAJECTORIES, add_demo_role_runs, summary
from workbench.store.runs import read_run_rows

UNANSWERABLE = ["q022", "q027", "q041", "q042"]


@pytest.fixture
def demo(demo_project):
    with open_project(demo_project) as db:  # a copy of the worker's init --demo template
        yield db


def test_demo_unanswerable_queries_come_from_their_tags(demo):
    marks = answerability.query_answerability(demo)
    assert sorted(marks.loc[marks["unanswerable"], "query_id"]) == UNANSWERABLE
    assert set(marks.loc[marks["unanswerable"], "decided_by"]) == {"tag"}


def test_an_sme_decision_wins_over_the_tags(demo):
    answerability.mark_answerability(demo, "q001", answerable=False, annotator="ann", comment="nothing says it")
    answerability.mark_answerability(demo, "q022", answerable=True, annotator="ann")
    assert answerability.unanswerable_ids(demo) == ["q001", "q027", "q041", "q042"]
    answerability.mark_answerability(demo, "q001", answerable=True, annotator="ann")  # the latest wins
    assert answerability.unanswerable_ids(demo) == ["q027", "q041", "q042"]
    with pytest.raises(Exception, match="no query 'nope'"):
        answerability.mark_answerability(demo, "nope", answerable=False, annotator="ann")


def test_unanswerable_queries_leave_the_qrels():
    kept, dropped = answerability.answerable_only({"q1": {"d": 1}, "q022": {"d": 1}}, UNANSWERABLE)
    assert kept == {"q1": {"d": 1}} and dropped == ["q022"]


def test_run_abstention_matches_the_top_scores(demo):
    report = abstention.run_abstention(demo, "bm25", threshold=4.0)
    rows = read_run_rows(demo, "bm25")
    top = rows.groupby("query_id")["score"].max()
    # recount from the definition: abstain when the top score < 4.0
    unans = top[top.index.isin(UNANSWERABLE)]
    ans = top[~top.index.isin(UNANSWERABLE)]
    assert report.rates.abstained_unanswerable == int((unans < 4.0).sum())
    assert report.rates.abstained_answerable == int((ans < 4.0).sum())
    assert report.rates.n_answerable == 40 and report.rates.n_unanswerable == 4
    assert report.threshold_source == "given"
    best = abstention.run_abstention(demo, "bm25")
    assert best.threshold_source == "best"
    assert best.rates.balanced_accuracy == pytest.approx(np.nanmax(best.curve["balanced_accuracy"]))


def test_demo_answers_abstention_by_hand(demo):
    report = abstention.stored_answers_abstention(demo, DEMO_ANSWERS)
    # answers.jsonl: q022 "does not say", q041 flag, q042 "could not find" abstain; q027 answers.
    # Of the 10 answerable, only q005 (flag) abstains.
    r = report.rates
    assert (r.n_unanswerable, r.abstained_unanswerable, r.n_answerable, r.abstained_answerable) == (4, 3, 10, 1)
    assert r.abstention_rate == 0.75 and r.false_abstention_rate == 0.1
    assert report.counts["missing_from_run"] == 30


def test_demo_role_runs_leak_only_the_stale_document(demo):
    restricted = rbac.restricted_documents(demo)
    assert len(restricted) == 4
    made = add_demo_role_runs(demo)
    assert set(made) == {"bm25-employee", "bm25-security"}
    assert add_demo_role_runs(demo) == {}  # idempotent
    assert rbac.recorded_role_runs(demo) == {"security": "bm25-security", "employee": "bm25-employee"}
    report = rbac.rbac_check(demo, {"employee": "bm25-employee", "security": "bm25-security"})
    assert report["security"].n_leaks == 0
    leaks = report["employee"].leaks
    # the employee filter knew every restriction but eng-production-access: every row of that
    # document in the bm25 run leaks, and nothing else
    bm25 = read_run_rows(demo, "bm25")
    assert set(leaks["doc_id"]) == {"eng-production-access"}
    assert len(leaks) == int((bm25["doc_id"] == "eng-production-access").sum())
    assert report["employee"].rate == pytest.approx(len(leaks) / report["employee"].retrieved)


def test_an_unknown_run_is_refused(demo):
    with pytest.raises(Exception, match="no run 'nope'"):
        rbac.rbac_check(demo, {"hr": "nope"})


def test_role_runs_parse():
    assert rbac.parse_role_runs("a=x, b=y") == {"a": "x", "b": "y"}
    for bad in ("a", "a=", "=x", "a=x,a=y", ""):
        with pytest.raises(Exception):
            rbac.parse_role_runs(bad)


def test_stored_trajectories_equal_the_demo_file(demo):
    from workbench.resources import DEMO_DIR

    stored = trajectories.stored_trajectories(demo, DEMO_TRAJECTORIES)
    from_file = trajectories.read_trajectory_file(DEMO_DIR / "trajectories.jsonl")
    assert stored == sorted(from_file, key=lambda t: t.query_id)
    chains = trajectories.stored_chains(demo)
    assert sorted(chains) == ["q012", "q017", "q021", "q028", "q031", "q033", "q038"]
    report = trajectories.evaluate(stored, chains, k=5)
    assert report.counts["with_chain"] == 7
    # q038's agent never searched: a wrong decision and an incomplete chain
    assert report.per_query["q038"]["decision_correct"] is False
    assert report.per_query["q038"]["complete"] is False


def test_chunk_ids_resolve_through_the_project(demo, tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text('{"query_id": "q021", "hops": [{"search": true, "results": '
                    '[{"chunk_id": "sections:hr-parental-leave:1"}]}]}\n')
    [t] = trajectories.read_trajectory_file(path, demo)
    r = t.hops[0].results[0]
    assert r.doc_id == "hr-parental-leave" and r.start is not None and r.end > r.start
    path.write_text('{"query_id": "q021", "hops": [{"results": [{"chunk_id": "sections:nope:9"}]}]}\n')
    with pytest.raises(Exception, match="chunk 'sections:nope:9' is not in the project"):
        trajectories.read_trajectory_file(path, demo)


def test_summary(demo):
    s = summary(demo)
    assert s["unanswerable"] == 4 and s["chain_queries"] == 7 and s["trajectory_sets"] == [DEMO_TRAJECTORIES]
    assert s["answer_sets"] == [DEMO_ANSWERS] and len(s["restricted"]) == 4


def test_ranking_measures_leave_unanswerable_queries_out(demo):
    from workbench.core.metrics.evaluation import evaluate
    from workbench.services.qrels.export import qrels_table

    r = abstention.answerable_ranking(demo, "bm25", ["recall@10", "mrr"])
    assert r.excluded_unanswerable == UNANSWERABLE
    assert r.counts()["excluded_unanswerable"] == 4
    assert not set(UNANSWERABLE) & set(r.result.query_ids.tolist())
    # the same numbers as the engine on qrels without those queries, computed here directly
    table = qrels_table(demo, level="chunk", chunking="sections", source="merged")
    table = table[~table["query_id"].isin(UNANSWERABLE)]
    qrels = {}
    for q, i, g in zip(table["query_id"], table["item_id"], table["grade"]):
        qrels.setdefault(q, {})[i] = int(g)
    rows = read_run_rows(demo, "bm25")
    run = {}
    for q, c, s in zip(rows["query_id"], rows["chunk_id"], rows["score"]):
        run.setdefault(q, {})[c] = float(s)
    direct = evaluate(qrels, run, ["recall@10", "mrr"])
    assert r.result.aggregate == pytest.approx(direct.aggregate)
    # every one of the 40 answerable queries is scored or counted; none of the 4 others
    assert r.result.n_queries + r.result.n_excluded_no_relevant == 40


def test_uploads_never_overwrite_what_exists(demo):
    from workbench.resources import DEMO_DIR

    data = (DEMO_DIR / "trajectories.jsonl").read_bytes()
    with pytest.raises(Exception, match="trajectories named 'demo-agent' already exist"):
        trajectories.import_trajectories(demo, "demo-agent", data, "t.jsonl")
    trajectories.import_trajectories(demo, "agent-2", data, "t.jsonl")
    assert trajectories.trajectory_names(demo) == ["agent-2", "demo-agent"]
    chains = (DEMO_DIR / "chains.jsonl").read_bytes()
    with pytest.raises(Exception, match="c.jsonl: 7 of its queries already have an evidence chain"):
        trajectories.import_chains(demo, chains, "c.jsonl")
    assert trajectories.import_chains(demo, chains, "c.jsonl", replace=True) == 20
    answers = abstention.read_answers((DEMO_DIR / "answers.jsonl").read_bytes(), "a.jsonl")
    with pytest.raises(Exception, match="answers named 'demo-answers' already exist"):
        abstention.store_answers(demo, DEMO_ANSWERS, answers)


def test_a_run_is_recorded_as_a_role(demo):
    rbac.record_role_run(demo, "hr", "bm25")
    assert rbac.recorded_role_runs(demo) == {"hr": "bm25"}
    from workbench.store.runs import read_run_info

    assert read_run_info(demo, ["bm25"])["params"].iloc[0]["role"] == "hr"  # other params kept
    assert len(read_run_info(demo, ["bm25"])["params"].iloc[0]) > 1
    with pytest.raises(Exception, match="no run 'nope'"):
        rbac.record_role_run(demo, "hr", "nope")
