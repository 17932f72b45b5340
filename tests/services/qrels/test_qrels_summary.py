"""The Qrels page's document qrels counted in SQL equal the rule's (and so the export's).

On the hand-worked merge project (:mod:`tests.support.merge_rule_project`: SMEs tying and
outvoted, one SME's spans, an adjudicated item, imported labels tying, a judge that passed the
gate and one that failed), :func:`workbench.services.qrels.summary.doc_summary` must give the
counts, notes, statement and fingerprint of :func:`project_qrels` without unanswerable queries
(what ``workbench export qrels`` writes), for every source and combining rule, and the Qrels
overview's pool coverage must equal the pool pairs among the rule's qrels. The same holds where
every judge configuration passed (lax thresholds: the judge's labels are admitted without a
per-configuration filter, and a pool's judged pairs are counted with the qrels) and where none did.
"""

from __future__ import annotations

import pytest

from tests.support.merge_rule_project import build_merge_project
from workbench.core.qrels_policy import QrelsPolicy
from workbench.services.evaluation import views as ev
from workbench.services.qrels import summary
from workbench.services.qrels.answerability import without_unanswerable
from workbench.services.qrels.export import export_qrels
from workbench.services.qrels.rule import project_qrels
from workbench.store.pools import read_pool_pairs

@pytest.fixture(scope="module")
def project(tmp_path_factory):
    db, info = build_merge_project(tmp_path_factory.mktemp("summary") / "p.duckdb")
    yield db, info
    db.close()

POLICIES = [QrelsPolicy(), QrelsPolicy(ties="lower"), QrelsPolicy(sme_rule="max"), QrelsPolicy(sme_rule="min"),
            QrelsPolicy(sme_rule="lower_median"), QrelsPolicy(llm_labels="all"), QrelsPolicy(llm_labels="none"),
            QrelsPolicy(order=("llm", "imported", "sme", "adjudicated"))]

@pytest.mark.parametrize("source", ["merged", "human", "llm"])
@pytest.mark.parametrize("policy", POLICIES, ids=lambda p: repr(p.as_dict()))
def test_sql_counts_equal_the_rule(project, source, policy):
    db, _ = project
    rule, left_out = without_unanswerable(db, project_qrels(db, source=source, policy=policy))
    got = summary.doc_summary(db, source=source, policy=policy)
    assert got is not None
    assert (got.rows, got.queries, got.by_grade, got.by_tier) == tuple(rule.counts()[k] for k in
                                                                      ("rows", "queries", "by_grade", "by_tier"))
    assert list(got.by_tier) == list(rule.counts()["by_tier"])  # the order the page lists them in
    assert got.left_out == left_out
    assert got.notes[:len(rule.notes)] == rule.notes
    assert got.statement == rule.statement()
    assert got.fingerprint() == rule.fingerprint

def test_the_counts_are_the_exported_files(project, tmp_path):
    db, _ = project
    export_qrels(db, tmp_path / "q.txt", format="trec")
    lines = [line.split() for line in (tmp_path / "q.txt").read_text().splitlines()]
    got = summary.doc_summary(db)
    assert got.rows == len(lines) > 300
    assert got.queries == len({q for q, *_ in lines})
    grades: dict = {}
    for *_, g in lines:
        grades[int(g)] = grades.get(int(g), 0) + 1
    assert got.by_grade == grades

def test_overview_coverage_equals_the_pool_pairs_among_the_rules_qrels(project):
    db, _ = project
    for source in ("merged", "human"):
        overview = ev.qrels_overview(db, source=source)
        for row in overview.coverage.itertuples(index=False):
            pairs = {(str(q), str(d)) for q, d in read_pool_pairs(db, row.pool)[["query_id", "doc_id"]].itertuples(
                index=False)}

            def among(src):
                t = project_qrels(db, source=src).table
                return len(pairs & set(zip(t["query_id"].astype(str), t["item_id"].astype(str))))

            assert (row.labelled, row.by_people, row.by_llm) == (among("merged"), among("human"), among("llm")), row.pool
            assert row.pairs == len(pairs)

def test_the_overview_does_not_read_the_labels_at_document_level(project, monkeypatch):
    """Counting a million admitted judge labels must not read them into pandas: the rule's
    label read is not called for the document-level overview (it is for chunk level)."""
    db, _ = project
    expected = ev.qrels_overview(db)
    import workbench.store.qrels_labels as labels

    def refuse(*args, **kwargs):
        raise AssertionError("the labels were read into memory")

    monkeypatch.setattr(labels, "labelled_spans", refuse)
    got = ev.qrels_overview(db)
    assert (got.rows, got.by_grade, got.by_tier, got.notes, got.statement) == (
        expected.rows, expected.by_grade, expected.by_tier, expected.notes, expected.statement)
    assert got.coverage.equals(expected.coverage)


# gate thresholds under which both judge configurations pass (m2 is random) or none does (m1 is perfect)
GATES = {"every judge passed": {"WORKBENCH_CALIBRATION_MIN_TPR": "0", "WORKBENCH_CALIBRATION_MIN_TNR": "0",
                                "WORKBENCH_CALIBRATION_MIN_KAPPA": "-1"},
         "no judge passed": {"WORKBENCH_CALIBRATION_MIN_KAPPA": "1.01"}}


@pytest.fixture(scope="module", params=list(GATES))
def gated(request, tmp_path_factory):
    db, _ = build_merge_project(tmp_path_factory.mktemp("gated") / "p.duckdb")
    yield db, GATES[request.param], request.param
    db.close()


@pytest.mark.parametrize("source", ["merged", "llm"])
@pytest.mark.parametrize("policy", [QrelsPolicy(), QrelsPolicy(sme_rule="min"), QrelsPolicy(llm_labels="all")],
                         ids=lambda p: repr(p.as_dict()))
def test_sql_counts_equal_the_rule_when_every_or_no_judge_passed(gated, source, policy, monkeypatch):
    db, env, case = gated
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    rule, left_out = without_unanswerable(db, project_qrels(db, source=source, policy=policy))
    got = summary.doc_summary(db, source=source, policy=policy)
    assert (got.rows, got.queries, got.by_grade, got.by_tier) == tuple(rule.counts()[k] for k in
                                                                      ("rows", "queries", "by_grade", "by_tier"))
    assert got.left_out == left_out
    assert got.notes[:len(rule.notes)] == rule.notes
    assert got.statement == rule.statement()
    assert got.fingerprint() == rule.fingerprint
    if source == "merged" and policy.llm_labels == "passed_gate":  # the gate is asked
        assert {state for _, state in rule.configurations} == {"passed" if case == "every judge passed" else "failed"}
        # m1 grades the 360 pool pairs and 6 hand pairs, m2 the pool and 3: those left out are noted
        dropped = 0 if case == "every judge passed" else 360 + 6 + 360 + 3
        assert [n for n in got.notes if "LLM labels left out" in n] == (
            [f"{dropped:,} LLM labels left out: their judge configuration has not passed the calibration gate "
             "(`workbench calibrate report`), or opt in with llm_labels = all"] if dropped else [])


def test_the_judge_coverage_is_counted_with_the_qrels_where_every_label_is_admitted(gated, monkeypatch):
    """Where the qrels admit every LLM label, a pool's pairs the judge graded come from the
    qrels' own query (no second join of the pool with the judgments); elsewhere on their own.
    Either way they are the pool pairs among the ``llm`` source's qrels."""
    db, env, case = gated
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    expected = ev.qrels_overview(db)
    import workbench.services.evaluation.views as views

    calls = []
    real = views.count_pool_pairs_judged
    monkeypatch.setattr(views, "count_pool_pairs_judged", lambda *a, **k: calls.append(a) or real(*a, **k))
    for source in ("merged", "llm", "human"):
        overview = ev.qrels_overview(db, source=source)
        assert overview.coverage.equals(expected.coverage) or source != "merged"
        t = project_qrels(db, source="llm").table
        judged = set(zip(t["query_id"].astype(str), t["item_id"].astype(str)))
        for row in overview.coverage.itertuples(index=False):
            pairs = {(str(q), str(d)) for q, d in read_pool_pairs(db, row.pool)[["query_id", "doc_id"]].itertuples(
                index=False)}
            assert row.by_llm == len(pairs & judged) > 0, row.pool
    # merged admits every LLM label only when every judge passed; the llm source always does
    assert len(calls) == 2 * (1 if case == "every judge passed" else 2), calls
