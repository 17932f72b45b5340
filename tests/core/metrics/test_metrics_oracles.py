"""Differential tests: our engine against independent evaluators.

Oracles
* trec_eval 10.0 / 9.0.8 expected outputs (``../shared/oracles``; 4 decimals -> tolerance 5e-5),
  including the generated edge-case collection and ``-c``, ``-J``, ``-l2``, ``-M10`` runs.
* gdeval (ERR@k with max grade 4, exp-gain nDCG@k; 5 decimals).
* ranx and ir_measures outputs stored in ``generated/`` (full doubles), on tie-free runs.
* live pytrec_eval and ir_measures on hypothesis-generated qrels/runs (ties, missing and extra
  queries, R = 0, labels -1), to 1e-6.

Known, documented discrepancies (checked explicitly below, not hidden):
* pytrec_eval / trec_eval 9 compare scores as float32; we use float64 (edge topic 2).
* trec_eval -c scores a missing topic's rbp_resid 0; our residual is 1 (nothing was seen).
* trec_eval's unj@k divides by k; our judged@k divides by min(k, retrieved): converted here.
* ir_measures' Judged@k counts labels < 0 as judged; we (like trec_eval's unj) do not.
* ranx's rbp uses raw grades; ours is binary (compared on binary qrels only).
* trec_eval's graded rbp (``-l2`` with graded qrels) rescales by the topic's max grade from
  uninitialised memory; not compared.
"""

from __future__ import annotations

import csv
import math
import re
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.support.prerequisites import shared_path, require_module
from tests.support.prerequisites import REPO
from workbench import evaluate
from workbench.core.metrics.readers import read_trec_qrels, read_trec_run

pytestmark = pytest.mark.shared

TE_TOL = 5.1e-5

# trec_eval measure name -> our spelling ("{}" gets the cutoff)
TE_NAMES = [
    (r"P_(\d+)", "P@{}"),
    (r"recall_(\d+)", "R@{}"),
    (r"success_(\d+)", "Success@{}"),
    (r"map_cut_(\d+)", "AP@{}"),
    (r"ndcg_cut_(\d+)", "nDCG@{}"),
    (r"map", "AP"),
    (r"recip_rank", "RR"),
    (r"ndcg", "nDCG"),
    (r"Rprec", "Rprec"),
    (r"bpref", "Bpref"),
    (r"rbp", "RBP(p=0.9)"),  # trec_eval 10's rbp default persistence is 0.9
    (r"rbp_resid", "RBP(p=0.9).residual_unjudged"),
]


def read_trec_eval(path: Path) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = defaultdict(dict)
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            out[parts[0]][parts[1]] = parts[2]
    return out


def ours_for(te_name: str) -> str | None:
    for pattern, ours in TE_NAMES:
        m = re.fullmatch(pattern, te_name)
        if m:
            return ours.format(*m.groups())
    return None


def oracle(*parts: str) -> Path:
    return shared_path("oracles", *parts)


# (id, expected output, qrels, run, evaluate() options, te names skipped, (measure, qid) skipped)
CASES = [
    ("te10-aq", ("trec_eval", "out.test.aq"), "qrels.test", "results.test", {}, set(), set()),
    ("te9-aq", ("trec_eval-v9.0.8", "out.test.aq"), "qrels.test", "results.test", {}, set(), set()),
    ("te10-std", ("generated", "te10.q.qrels.test.results.test.txt"), "qrels.test", "results.test", {}, set(), set()),
    ("te9-std", ("generated", "te9.q.qrels.test.results.test.txt"), "qrels.test", "results.test", {}, set(), set()),
    ("te10-graded", ("generated", "te10.q.qrels.rel_level.results.test.txt"), "qrels.rel_level", "results.test",
     {}, set(), set()),
    ("te10-graded-notie", ("generated", "te10.q.qrels.rel_level.results.test.notie.txt"), "qrels.rel_level",
     "generated/results.test.notie", {}, set(), set()),
    ("te10-l2", ("generated", "te10.q.l2.qrels.rel_level.results.test.txt"), "qrels.rel_level", "results.test",
     {"rel": 2}, set(), set()),
    ("te10-aql", ("trec_eval", "out.test.aql"), "qrels.rel_level", "results.test", {"rel": 2}, {"rbp"}, set()),
    ("te10-J", ("generated", "te10.q.J.qrels.test.results.test.txt"), "qrels.test", "results.test",
     {"condensed": True}, set(), set()),
    ("te10-J-graded", ("generated", "te10.q.J.qrels.rel_level.results.test.txt"), "qrels.rel_level",
     "results.test", {"condensed": True}, set(), set()),
    ("te10-c-trunc", ("generated", "te10.q.c.qrels.test.results.trunc.txt"), "qrels.test", "results.trunc",
     {}, set(), {("rbp_resid", "302"), ("rbp_resid", "all")}),
    ("te10-aqc", ("trec_eval", "out.test.aqc"), "qrels.test", "results.trunc", {}, set(),
     {("rbp_resid", "302"), ("rbp_resid", "all")}),
    ("te9-nocmissing", ("generated", "te9.q.nocmissing.qrels.test.results.trunc.txt"), "qrels.test",
     "results.trunc", {"missing_as_zero": False}, set(), set()),
    ("te10-c-edge", ("generated", "te10.q.c.edge.txt"), "generated/edge.qrels", "generated/edge.run",
     {"include_no_relevant": True}, set(), {("rbp_resid", "3"), ("rbp_resid", "all")}),
    # trec_eval 9 compares float32 scores: topic 2's 1.00000001 vs 1.00000002 tie there.
    ("te9-c-edge", ("generated", "te9.q.c.edge.txt"), "generated/edge.qrels", "generated/edge.run",
     {"include_no_relevant": True}, set(), {"2", "all"}),
    ("te10-comment", ("trec_eval", "out.comment.test"), "qrels.comment.test", "results.comment.test",
     {}, set(), set()),
]


def test_comment_collection_counts_and_default_exclusion():
    # counted independently with plain string handling
    best: dict[str, int] = {}
    for line in _input("qrels.comment.test").read_text().splitlines():
        f = line.split()
        if f and not f[0].startswith("#"):
            best[f[0]] = max(best.get(f[0], -9), int(f[3]))
    run_q = {ln.split()[0] for ln in _input("results.comment.test").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")}
    no_rel = sorted(q for q, g in best.items() if g < 1)
    result = evaluate(_input("qrels.comment.test"), _input("results.comment.test"), ["AP"])
    assert no_rel and result.excluded_no_relevant == tuple(no_rel)
    assert result.n_queries == len(best) - len(no_rel)
    assert result.n_only_in_run == len(run_q - set(best)) == 270


def _input(name: str) -> Path:
    if "/" in name:
        return oracle(*name.split("/"))
    return oracle("trec_eval", name)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_trec_eval(case):
    _, out_parts, qrels_name, run_name, options, skip_names, skip_pairs = case
    expected = read_trec_eval(oracle(*out_parts))
    labels = {te: ours_for(te) for te in expected if te not in skip_names and ours_for(te)}
    assert labels, "no comparable measure in the oracle file"
    wanted = sorted({label.removesuffix(".residual_unjudged") for label in labels.values()})
    # trec_eval scores topics without relevant docs; our default excludes them
    options = {"include_no_relevant": True, **options}
    result = evaluate(_input(qrels_name), _input(run_name), wanted, **options)
    checked = 0
    for te, ours in labels.items():
        for qid, value in expected[te].items():
            if qid in skip_pairs or (te, qid) in skip_pairs:
                continue
            got = result.aggregate[ours] if qid == "all" else result.per_query.loc[qid, ours]
            assert got == pytest.approx(float(value), abs=TE_TOL), (te, qid)
            checked += 1
    # every (measure, topic) value of the oracle file was compared, and there were many
    pairs = sum(1 for te in labels for qid in expected[te]
                if qid not in skip_pairs and (te, qid) not in skip_pairs)
    assert checked == pairs >= len(labels) >= 5
    if "all" in expected.get("num_q", {}) and "all" not in skip_pairs:
        assert result.n_queries == int(expected["num_q"]["all"])


@pytest.mark.parametrize(
    "out_name,qrels_name",
    [("te10.q.qrels.test.results.test.txt", "qrels.test"), ("te10.q.c.edge.txt", "generated/edge.qrels")],
)
def test_judged_matches_trec_eval_unj(out_name, qrels_name):
    expected = read_trec_eval(oracle("generated", out_name))
    run = "generated/edge.run" if "edge" in out_name else "results.test"
    ks = sorted(int(te[4:]) for te in expected if te.startswith("unj_"))
    # an oracle file without unj_k lines would make the loop below check nothing
    assert len(ks) >= 3, ks
    result = evaluate(_input(qrels_name), _input(run), [f"judged@{k}" for k in ks], include_no_relevant=True)
    checked = 0
    for k in ks:
        for qid, unj in expected[f"unj_{k}"].items():
            if qid == "all":
                continue
            n = min(k, int(expected["num_ret"][qid]))
            want = 0.0 if n == 0 else (n - float(unj) * k) / n  # unj divides by k
            assert result.per_query.loc[qid, f"judged@{k}"] == pytest.approx(want, abs=k * TE_TOL), (k, qid)
            checked += 1
    topics = [qid for qid in expected["num_ret"] if qid != "all"]
    assert checked == len(ks) * len(topics) and len(topics) >= 3


def test_rr_at_10_matches_trec_eval_depth_10():
    expected = read_trec_eval(oracle("generated", "te10.q.M10.qrels.test.results.test.txt"))
    result = evaluate(_input("qrels.test"), _input("results.test"), ["RR@10"])
    for qid, value in expected["recip_rank"].items():
        got = result.aggregate["RR@10"] if qid == "all" else result.per_query.loc[qid, "RR@10"]
        assert got == pytest.approx(float(value), abs=TE_TOL)
    assert len(expected["recip_rank"]) == result.n_queries + 1 >= 2  # every topic and "all"


def test_missing_topic_residual_is_one_not_trec_eval_zero():
    result = evaluate(_input("generated/edge.qrels"), _input("generated/edge.run"), ["rbp"])
    assert result.per_query.loc["3", "rbp.residual"] == 1.0
    assert result.per_query.loc["3", "rbp.residual_unjudged"] == 1.0
    assert result.missing_from_run == ("3",)
    assert result.excluded_no_relevant == ("5",)
    assert result.only_in_run == ("4",)


# --- gdeval: ERR (max grade 4) and exp-gain nDCG ----------------------------------------------
@pytest.mark.parametrize("k", [5, 10, 20])
@pytest.mark.parametrize("run_name", ["results.test", "generated/results.test.notie"])
def test_matches_gdeval(k, run_name):
    suffix = ".notie" if "notie" in run_name else ""
    rows = list(csv.DictReader(oracle("generated", f"gdeval.k{k}.qrels.rel_level.results.test{suffix}.csv").open()))
    ours = evaluate(_input("qrels.rel_level"), _input(run_name), [f"err(gmax=4)@{k}", f"ndcg_exp@{k}"])
    for row in rows:
        qid = row["topic"]
        if qid == "amean":
            got_err, got_ndcg = ours.aggregate[f"err(gmax=4)@{k}"], ours.aggregate[f"ndcg_exp@{k}"]
        else:
            got_err = ours.per_query.loc[qid, f"err(gmax=4)@{k}"]
            got_ndcg = ours.per_query.loc[qid, f"ndcg_exp@{k}"]
        assert got_err == pytest.approx(float(row[f"err@{k}"]), abs=6e-6), qid
        assert got_ndcg == pytest.approx(float(row[f"ndcg@{k}"]), abs=6e-6), qid
    assert len(rows) == ours.n_queries >= 3  # every topic was compared


# --- ranx and ir_measures outputs on tie-free runs ---------------------------------------------
def read_tsv(path: Path) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for row in csv.DictReader(path.open(), delimiter="\t"):
        out[row["measure"]][row["qid"]] = float(row["value"])
    return out


RANX_NAMES = {
    "hit_rate@1": "hit@1", "hit_rate@10": "hit@10", "precision@10": "P@10", "recall@100": "R@100",
    "f1@10": "f1@10", "mrr@10": "mrr@10", "map": "map", "map@10": "map@10", "ndcg": "ndcg",
    "ndcg@10": "ndcg@10", "ndcg_burges": "ndcg_exp", "ndcg_burges@10": "ndcg_exp@10",
    "r-precision": "rprec", "bpref": "bpref", "precision@10-l2": "precision(rel=2)@10",
    "ndcg@10-l2": "ndcg(rel=2)@10", "rbp.8": "rbp(p=0.8)", "rbp.95": "rbp(p=0.95)",
}


@pytest.mark.parametrize("qrels_name", ["qrels.test", "qrels.rel_level"])
def test_matches_ranx_on_tie_free_run(qrels_name):
    tag = qrels_name.replace("qrels.", "")
    expected = read_tsv(oracle("generated", f"ranx.qrels.{tag}.results.test.notie.tsv"))
    names = {k: v for k, v in RANX_NAMES.items() if k in expected}
    if qrels_name != "qrels.test":
        names = {k: v for k, v in names.items() if not k.startswith("rbp")}  # ranx rbp: raw grades
    result = evaluate(_input(qrels_name), _input("generated/results.test.notie"), list(names.values()))
    best = defaultdict(int)  # each topic's top grade, read independently of our readers
    for line in _input(qrels_name).read_text().splitlines():
        f = line.split()
        best[f[0]] = max(best[f[0]], int(f[3]))
    checked = excluded = 0
    for ranx_name, ours in names.items():
        for qid, value in expected[ranx_name].items():
            got = result.per_query.loc[qid, ours]
            if math.isnan(got):
                # ranx scores a topic without a relevant doc (at this measure's rel) 0; we
                # exclude it from this measure, and only then
                assert best[qid] < result.thresholds[ours] and value == 0.0, (ranx_name, qid)
                excluded += 1
            else:
                assert got == pytest.approx(value, abs=1e-9), (ranx_name, qid)
            checked += 1
    assert checked == sum(len(expected[n]) for n in names) >= 3 * len(names)  # 3 topics per measure
    # exactly the (measure, topic) pairs without a doc at the measure's rel were excluded
    assert excluded == sum(1 for n, ours in names.items() for qid in expected[n]
                           if best[qid] < result.thresholds[ours])


IRM_NAMES = {
    "P@10": "P@10", "R@100": "R@100", "AP": "AP", "AP@10": "AP@10", "RR": "RR", "RR@10": "RR@10",
    "nDCG": "nDCG", "nDCG@10": "nDCG@10", "Rprec": "Rprec", "Bpref": "Bpref", "Success@10": "Success@10",
    "ERR@10": "ERR(gmax=4)@10", "nDCG(dcg='exp-log2')@10": "nDCG(dcg='exp-log2')@10", "Judged@10": "Judged@10",
}


@pytest.mark.parametrize("run_name", ["generated/results.test.notie", "results.test"])
def test_matches_ir_measures_output(run_name):
    tag = ".notie" if "notie" in run_name else ""
    expected = read_tsv(oracle("generated", f"ir_measures.qrels.rel_level.results.test{tag}.tsv"))
    names = dict(IRM_NAMES)
    if not tag:  # ir_measures' RR@k and Judged@k break ties by docno ascending
        names.pop("RR@10")
        names.pop("Judged@10")
    result = evaluate(_input("qrels.rel_level"), _input(run_name), list(names.values()))
    checked = 0
    for irm, ours in names.items():
        for qid, value in expected[irm].items():
            tol = 6e-6 if irm.startswith(("ERR", "nDCG(dcg")) else 1e-9  # gdeval prints 5 decimals
            if irm == "Judged@10":
                continue  # see test_judged_differs_from_ir_measures_on_negative_labels
            assert result.per_query.loc[qid, ours] == pytest.approx(value, abs=tol), (irm, qid)
            checked += 1
    assert checked == sum(len(expected[n]) for n in names if n != "Judged@10") >= 3 * (len(names) - 1)


def test_judged_differs_from_ir_measures_on_negative_labels():
    expected = read_tsv(oracle("generated", "ir_measures.edge.tsv"))["Judged@10"]
    result = evaluate(_input("generated/edge.qrels"), _input("generated/edge.run"), ["Judged@10"],
                      include_no_relevant=True)
    # topic 1: b a d zz e; e is labelled -1. ir_measures counts it (4/5), we do not (3/5).
    assert expected["1"] == pytest.approx(0.8)
    assert result.per_query.loc["1", "Judged@10"] == pytest.approx(0.6)
    for qid in ("2", "3", "5"):
        assert result.per_query.loc[qid, "Judged@10"] == pytest.approx(expected[qid])


# --- live differential tests on generated data -------------------------------------------------
pytrec_eval = require_module("pytrec_eval")
ir_measures = require_module("ir_measures")

PTE = ["P_1", "P_3", "P_10", "recall_3", "recall_10", "map", "map_cut_5", "ndcg", "ndcg_cut_3",
       "ndcg_cut_10", "recip_rank", "Rprec", "bpref", "success_1", "success_5"]
DOCS = [f"d{i}" for i in range(12)] + ["D1", "d1#2", "a-b"]
QUERIES = ["1", "2", "10", "q/a", "x"]
# scores on a coarse grid: exact in float32 too, so pytrec_eval's float32 ranks like ours
SCORES = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, -1.0, 3.25])


@st.composite
def collections(draw):
    qrels = {}
    for q in draw(st.lists(st.sampled_from(QUERIES), min_size=1, max_size=5, unique=True)):
        docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=8, unique=True))
        qrels[q] = {d: draw(st.integers(-1, 3)) for d in docs}
    run = {}
    for q in draw(st.lists(st.sampled_from(QUERIES + ["extra"]), min_size=1, max_size=6, unique=True)):
        docs = draw(st.lists(st.sampled_from(DOCS), min_size=1, max_size=12, unique=True))
        run[q] = {d: draw(SCORES) for d in docs}
    return qrels, run


def _pte_label(name: str) -> str:
    return ours_for(name)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(collections(), st.sampled_from([1, 2]), st.booleans())
def test_agrees_with_pytrec_eval(data, rel, condensed):
    qrels, run = data
    # pytrec_eval 0.5.11 never returns on a topic whose labels are all < 0 (found by this test)
    assume(all(any(g >= 0 for g in docs.values()) for docs in qrels.values()))
    evaluator = pytrec_eval.RelevanceEvaluator(
        qrels, set(PTE), relevance_level=rel, judged_docs_only_flag=condensed
    )
    expected = evaluator.evaluate(run)
    assume(expected)  # no query in both: nothing to compare
    labels = [_pte_label(m) for m in PTE]
    # pytrec_eval: only queries in both qrels and run, R = 0 scored
    result = evaluate(qrels, run, labels, rel=rel, condensed=condensed, include_no_relevant=True,
                      missing_as_zero=False)
    assert set(result.per_query.index) == set(expected)
    checked = 0
    for qid, values in expected.items():
        for name in PTE:
            label = _pte_label(name)
            if label.startswith("nDCG") and rel != 1:
                continue  # pytrec_eval's ndcg ignores relevance_level; ours too (checked below)
            assert result.per_query.loc[qid, label] == pytest.approx(values[name], abs=1e-6), (qid, name)
            checked += 1
    per_query = len(PTE) - (3 if rel != 1 else 0)
    assert checked == len(expected) * per_query


@settings(max_examples=60, deadline=None)
@given(collections())
def test_ndcg_ignores_evaluation_rel_like_trec_eval(data):
    qrels, run = data
    a = evaluate(qrels, run, ["ndcg@10"], rel=1, include_no_relevant=True).per_query
    b = evaluate(qrels, run, ["ndcg@10"], rel=2, include_no_relevant=True).per_query
    common = a.index.intersection(b.index)
    assert (a.loc[common] == b.loc[common]).all().all()


IRM_LIVE = ["P@5", "R@10", "AP", "AP@5", "nDCG@5", "nDCG", "RR", "Rprec", "Bpref", "Success@3",
            "P(rel=2)@5", "AP(rel=2)", "R(rel=2)@10"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(collections(), st.data())
def test_agrees_with_ir_measures(data, draw):
    qrels, run = data
    assume(all(any(g >= 0 for g in docs.values()) for docs in qrels.values()))  # pytrec_eval hang
    measures = [ir_measures.parse_measure(m) for m in IRM_LIVE]
    qrels_rows = [ir_measures.Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    run_rows = [ir_measures.ScoredDoc(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    expected = defaultdict(dict)
    for m in ir_measures.iter_calc(measures, qrels_rows, run_rows):
        expected[m.query_id][str(m.measure)] = m.value
    # ir_measures scores missing queries 0 and keeps R = 0 queries
    result = evaluate(qrels, run, IRM_LIVE, include_no_relevant=True)
    checked = 0
    for qid, values in expected.items():
        for name, value in values.items():
            assert result.per_query.loc[qid, name] == pytest.approx(value, abs=1e-6), (qid, name)
            checked += 1
    # ir_measures yields every measure for every qrels query (missing from the run: 0)
    assert checked == len(qrels) * len(IRM_LIVE)


@settings(max_examples=80, deadline=None)
@given(collections())
def test_dict_and_columnar_paths_agree(data):
    from workbench.core.metrics.qrels_and_runs import qrels_from_dict, run_from_dict

    qrels, run = data
    measures = ["ndcg@5", "P@3", "AP", "RR@3", "bpref", "rbp", "err@5", "judged@5", "f1@3", "hit@2"]
    a = evaluate(qrels, run, measures, include_no_relevant=True)
    b = evaluate(qrels_from_dict(qrels), run_from_dict(run), measures, include_no_relevant=True)
    assert a.per_query.equals(b.per_query)
    assert a.counts() == b.counts()


def test_topic_with_only_negative_labels_has_no_relevant_docs():
    qrels = {"a": {"d1": -1}, "b": {"d1": 1}}
    run = {"a": {"d1": 1.0}, "b": {"d1": 1.0}}
    res = evaluate(qrels, run, ["P@1", "judged@1"])
    assert res.excluded_no_relevant == ("a",)
    res = evaluate(qrels, run, ["P@1", "judged@1"], include_no_relevant=True)
    assert res.per_query.loc["a"].tolist() == [0.0, 0.0]


def test_err_hand_worked_against_definition():
    # grades by rank [3, 0, 1, 3], gmax 3: R = [7/8, 0, 1/8, 7/8]
    qrels = {"q": {"a": 3, "b": 0, "c": 1, "d": 3}}
    run = {"q": {"a": 4, "b": 3, "c": 2, "d": 1}}
    r = [7 / 8, 0, 1 / 8, 7 / 8]
    want, reach = 0.0, 1.0
    for i, x in enumerate(r, start=1):
        want += reach * x / i
        reach *= 1 - x
    got = evaluate(qrels, run, ["err@4", "err@1"]).aggregate
    assert got["err@4"] == pytest.approx(want, abs=1e-12)
    assert got["err@1"] == pytest.approx(7 / 8)
    assert math.isclose(want, 7 / 8 + (1 / 8) * (1 / 8) / 3 + (1 / 8) * (7 / 8) * (7 / 8) / 4)


def test_read_oracle_files_with_our_readers_match_pytrec_parser():
    path_q, path_r = _input("qrels.test"), _input("results.test")
    with path_q.open() as f:
        assert read_trec_qrels(path_q).to_dict() == pytrec_eval.parse_qrel(f)
    with path_r.open() as f:
        theirs = pytrec_eval.parse_run(f)
    ours = read_trec_run(path_r).to_dict()
    assert ours.keys() == theirs.keys()
    for q in ours:
        assert ours[q] == pytest.approx(theirs[q])


def test_aggregate_from_files_does_not_import_pandas(tmp_path):
    # pandas (and pyarrow's pandas shim) cost ~40 MB and ~0.5 s: only .per_query may load it
    import subprocess
    import sys

    (tmp_path / "q.txt").write_text("1 0 a 1\n1 0 b 0\n2 0 c 2\n")
    (tmp_path / "r.txt").write_text("1 Q0 a 1 2.0 t\n1 Q0 b 2 2.0 t\n2 Q0 c 1 1.5 t\n2 Q0 d 2 1.0 t\n")
    code = (
        "import sys; from workbench import evaluate\n"
        f"r = evaluate({str(tmp_path / 'q.txt')!r}, {str(tmp_path / 'r.txt')!r}, ['ndcg@10', 'map', 'mrr@10'])\n"
        "agg = r.aggregate; assert 'pandas' not in sys.modules, 'pandas imported'\n"
        "assert 'pyarrow.compute' not in sys.modules, 'pyarrow.compute imported'\n"
        "pq = r.per_query; assert 'pandas' in sys.modules\n"
        "assert list(pq.index) == ['1', '2'] and pq.index.name == 'query_id'\n"
        "assert all(abs(pq[c].mean() - agg[c]) < 1e-15 for c in agg), (pq, agg)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
