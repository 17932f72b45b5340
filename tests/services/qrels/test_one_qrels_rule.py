"""One rule from judgments to qrels, everywhere: on a hand-worked project where the old rules
and the one rule disagree (an SME 1 against an LLM 3, two SMEs tying, an imported label against
an LLM label, an LLM label from a judge that failed the gate, an adjudicated item), pool
statistics, the pool peek, every export format and evaluation give the same grade for every
pair (:mod:`tests.support.merge_rule_project`). The browse page is checked in
``tests/ui/test_ui_browse.py``."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.support.merge_rule_project import (
    HAND_DOCS,
    HAND_EXPECTED,
    HAND_EXPECTED_TIES_LOWER,
    TEXT,
    build_merge_project,
    old_max_rule,
)
from tests.support.prerequisites import require_module
from workbench.core.qrels_policy import QrelsPolicy
from workbench.services.calibration import workflow as cal
from workbench.services.browse import peek_pool
from workbench.services.evaluation.evaluate import evaluate_project
from workbench.services.qrels.export import export_qrels
from workbench.services.ingest import import_file
from workbench.services.pooling.pools import pool_labels, pool_stats, qrels_labels
from workbench.services.project.lifecycle import open_project
from workbench.services.qrels.rule import pair_grades, project_qrels

POLICY = "qrels policy: adjudicated > sme > imported > llm; several assessors: majority, ties to the higher grade"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    db, info = build_merge_project(tmp_path_factory.mktemp("rule") / "p.duckdb")
    yield db, info
    db.close()


def as_dict(frame, item="item_id") -> dict:
    return {(str(q), str(i)): int(g) for q, i, g in frame[["query_id", item, "grade"]].itertuples(index=False)}


def test_the_project_is_one_where_the_old_rule_and_the_one_rule_disagree(project):
    db, info = project
    assert cal.gate(db, "s1")["gate"]["verdict"] == "pass"
    assert cal.gate(db, "s2")["gate"]["verdict"] == "fail"
    old = old_max_rule(db)
    expected = info["expected"]
    differ = {k for k in set(old) | set(expected) if old.get(k) != expected.get(k)}
    # every hand-worked disagreement is one the old rule gets wrong
    assert {("h1", "hd1"), ("h1", "hd3"), ("h1", "hd4"), ("h2", "hd1"), ("h2", "hd2"), ("h2", "hd5")} <= differ
    assert info["adjudicated"] in differ or old[info["adjudicated"]] == expected[info["adjudicated"]]
    assert len(differ) > 100  # the random failed judge (m2) alone moves many pairs under the max rule


def test_the_rule_gives_the_hand_worked_grades(project):
    db, info = project
    qrels = project_qrels(db)
    got = as_dict(qrels.table)
    assert got == info["expected"]
    assert len(got) == 360 + len(HAND_EXPECTED)
    tiers = dict(zip(zip(qrels.table["query_id"], qrels.table["item_id"]), qrels.table["tier"]))
    assert tiers[info["adjudicated"]] == "adjudicated"
    assert [tiers[("h1", d)] for d in ("hd1", "hd2", "hd3", "hd4", "hd5")] == ["sme", "sme", "sme", "imported", "sme"]
    assert [tiers[("h2", d)] for d in ("hd2", "hd3", "hd4", "hd5")] == ["llm", "llm", "imported", "sme"]
    assert qrels.statement().startswith(POLICY) and "m1/" in qrels.statement()
    assert [label.split("/")[0] for label, state in qrels.configurations if state == "passed"] == ["m1"]
    assert len(qrels.passed_configurations) == 1 and qrels.passed_configurations[0].startswith("mp-")
    # a configured tie rule changes only the tied pairs
    lower = as_dict(project_qrels(db, policy=QrelsPolicy(ties="lower")).table)
    assert {k: v for k, v in lower.items() if k[0].startswith("h")} == HAND_EXPECTED_TIES_LOWER


def test_pool_statistics_and_the_pool_peek_use_the_rule(project):
    db, info = project
    expected = info["expected"]
    assert as_dict(qrels_labels(db, "doc", None), "doc_id") == expected
    assert as_dict(pool_labels(db, "doc", None), "doc_id") == expected
    assert pool_labels(db, "doc", None).attrs["qrels_policy"].startswith(POLICY)
    stats = pool_stats(db, "hp", k=6)
    hand_pairs = {(q, d) for q in ("h1", "h2") for d in HAND_DOCS}
    assert stats.judged_pairs == len(hand_pairs & set(expected)) == 9
    assert stats.summary["qrels_policy"].startswith(POLICY)
    judged = dict(zip(stats.judged["run_id"], stats.judged["judged_at_k"]))
    assert judged["hr"] == pytest.approx((5 / 6 + 4 / 6) / 2)  # h1: hd6 unjudged; h2: hd1 (failed judge), hd6
    for query in ("h1", "h2"):
        peek = peek_pool(db, "hp", query, limit=6)
        shown = {(query, d): (None if pd.isna(g) else int(g)) for d, g in zip(peek["pairs"]["doc_id"], peek["pairs"]["grade"])}
        assert shown == {(query, d): expected.get((query, d)) for d in HAND_DOCS}
        assert peek["policy"].startswith(POLICY)
    checked = 2 * len(HAND_DOCS)
    assert checked == 12


@pytest.mark.parametrize("fmt", ["trec", "beir", "jsonl"])
def test_every_qrels_format_exports_the_rule(project, tmp_path, fmt):
    db, info = project
    result = export_qrels(db, tmp_path / f"q.{fmt}", format=fmt)
    assert result.policy.startswith(POLICY) and POLICY in result.summary()
    # the fingerprint of the rule's qrels is stated with the file; the failed judge's labels are noted
    assert result.fingerprint == project_qrels(db).fingerprint and result.fingerprint in result.summary()
    assert len(result.notes) == 1 and "left out" in result.notes[0] and result.notes[0] in result.summary()
    lines = (tmp_path / f"q.{fmt}").read_text().splitlines()
    if fmt == "trec":
        got = {(q, d): int(g) for q, _, d, g in (line.split() for line in lines)}
    elif fmt == "beir":
        assert lines[0] == "query-id\tcorpus-id\tscore"
        got = {(q, d): int(g) for q, d, g in (line.split("\t") for line in lines[1:])}
    else:
        got = {(row["query_id"], d): g for row in map(json.loads, lines) for d, g in row["relevant"].items()}
    assert got == info["expected"]
    assert len(got) == 369


def test_the_spans_export_reads_back_as_the_same_qrels(project, tmp_path):
    db, info = project
    result = export_qrels(db, tmp_path / "spans.jsonl", format="spans")
    assert result.policy.startswith(POLICY)
    rows = [json.loads(line) for line in (tmp_path / "spans.jsonl").read_text().splitlines()]
    hand = [(r["query_id"], r["doc_id"], r["grade"], r["assessor"], r["tier"]) for r in rows
            if r["query_id"].startswith("h")]
    # per document only the deciding tier's spans; nothing from the failed judge m2
    assert sorted(hand) == sorted([
        ("h1", "hd1", 1, "ann", "sme"), ("h1", "hd2", 1, "ann", "sme"), ("h1", "hd2", 2, "bob", "sme"),
        ("h1", "hd3", 2, "ann", "sme"), ("h1", "hd3", 1, "bob", "sme"), ("h1", "hd3", 1, "cat", "sme"),
        ("h1", "hd4", 0, "nist", "imported"), ("h1", "hd5", 0, "ann", "sme"), ("h1", "hd5", 2, "ann", "sme"),
        ("h2", "hd2", 1, "m1|", "llm"), ("h2", "hd3", 2, "m1|", "llm"), ("h2", "hd4", 1, "nist", "imported"),
        ("h2", "hd4", 3, "trec", "imported"), ("h2", "hd5", 0, "ann", "sme")])
    assert not any(r["assessor"].startswith("m2") for r in rows)
    # a fresh project importing the file gets the same document qrels (all of them imported now)
    other = open_project(tmp_path / "other.duckdb", create=True)
    try:
        docs = db.query_df("SELECT doc_id, text FROM documents")
        (tmp_path / "c.jsonl").write_text("".join(json.dumps({"_id": d, "text": t}) + "\n"
                                                  for d, t in docs.itertuples(index=False)))
        import_file(other, "corpus", tmp_path / "c.jsonl")
        queries = db.query_df("SELECT query_id, text FROM queries")
        (tmp_path / "q.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n"
                                                  for q, t in queries.itertuples(index=False)))
        import_file(other, "queries", tmp_path / "q.jsonl")
        import_file(other, "qrels", tmp_path / "spans.jsonl", format="spans")
        assert as_dict(project_qrels(other).table) == info["expected"]
    finally:
        other.close()
    assert len(TEXT) == 6


def test_evaluation_scores_against_the_rule(project):
    db, info = project
    pytrec_eval = require_module("pytrec_eval")
    done = evaluate_project(db, ["hr"], ["nDCG@6", "P@6"], store=False)
    assert as_dict(done.qrels.table) == info["expected"]
    assert done.qrels.statement().startswith(POLICY)
    per_query = done.results["hr"].per_query
    run = {"h1": {d: float(10 - r) for r, d in enumerate(reversed(HAND_DOCS), 1)},
           "h2": {d: float(10 - r) for r, d in enumerate(HAND_DOCS, 1)}}

    def oracle(grades: dict) -> dict:
        qrels = {q: {d: g for (qq, d), g in grades.items() if qq == q} for q in ("h1", "h2")}
        return pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_6", "P_6"}).evaluate(run)

    want = oracle(HAND_EXPECTED)
    old = oracle({k: v for k, v in old_max_rule(db).items() if k[0].startswith("h")})
    checked = 0
    for q in ("h1", "h2"):
        assert per_query.loc[q, "nDCG@6"] == pytest.approx(want[q]["ndcg_cut_6"], abs=1e-12)
        assert per_query.loc[q, "P@6"] == pytest.approx(want[q]["P_6"], abs=1e-12)
        # the old rule would have scored these queries differently
        assert old[q]["ndcg_cut_6"] != pytest.approx(want[q]["ndcg_cut_6"], abs=1e-9)
        checked += 2
    assert checked == 4


def test_pair_grades_are_the_qrels_of_the_chosen_queries(project):
    db, info = project
    got = as_dict(pair_grades(db, query_ids=["h1"]).table)
    assert got == {k: v for k, v in info["expected"].items() if k[0] == "h1"}


def test_chunk_level_outputs_agree_and_follow_the_spans(project, tmp_path):
    """At chunk level every whole-document label grades every chunk of its document; the one SME
    with two short spans on h1/hd5 grades only the chunk holding them (the failed judge's
    whole-document 3 does not count). Qrels, pool labels, export and evaluation agree."""
    from workbench.core.documents.chunking import ChunkingSpec, chunk_documents
    from workbench.store.chunks import chunking_exists, read_chunks, write_chunking
    from workbench.store.corpus import read_documents
    from workbench.store.runs import set_run_scope, write_run

    db, info = project
    if not chunking_exists(db, "w40"):
        spec = ChunkingSpec("w40", "fixed", {"size": 40})
        chunks = chunk_documents(spec, read_documents(db)[["doc_id", "text"]])
        with db.transaction() as tx:
            write_chunking(tx, "w40", spec.strategy, dict(spec.params), chunks)
            hand = chunks[chunks["doc_id"].isin(HAND_DOCS)].reset_index(drop=True)
            rows = pd.DataFrame({"query_id": "h1", "doc_id": hand["doc_id"], "chunk_id": hand["chunk_id"],
                                 "rank": range(1, len(hand) + 1), "score": [100.0 - i for i in range(len(hand))]})
            write_run(tx, "hrc", "hand", rows)
            set_run_scope(tx, "hrc", "chunk", "w40")
    chunks = read_chunks(db, "w40")
    first = chunks[(chunks["doc_id"] == "hd5") & (chunks["start"] == 0)].iloc[0]
    assert first["end"] >= 30  # both of ann's spans (0-10, 20-30) lie in hd5's first chunk
    expected = {}
    for c in chunks.itertuples(index=False):
        for (q, d), grade in info["expected"].items():
            if d == c.doc_id and (q, d) != ("h1", "hd5"):
                expected[(q, c.chunk_id)] = grade
    expected[("h1", first["chunk_id"])] = 2

    assert as_dict(project_qrels(db, level="chunk", chunking="w40").table) == expected
    assert as_dict(pool_labels(db, "chunk", "w40"), "chunk_id") == expected
    export_qrels(db, tmp_path / "c.txt", level="chunk", chunking="w40")
    exported = {(q, i): int(g) for q, _, i, g in (x.split() for x in (tmp_path / "c.txt").read_text().splitlines())}
    assert exported == expected
    done = evaluate_project(db, ["hrc"], ["nDCG@10"], store=False)
    assert done.qrels.level == "chunk" and as_dict(done.qrels.table) == expected
    assert len(expected) > len(info["expected"])  # several chunks per document
