"""services.calibration on a real DuckDB file: sample, label, undo, blind judge output, report,
gate, re-weighting, SME agreement and the tuning/held-out boundary."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from tests.support.calibration_project import build_project, label_all
from workbench.core.calibration.agreement import agreement
from workbench.errors import InputError
from workbench.services.calibration import workflow as cal
from workbench.store.database import Database


@pytest.fixture
def project(db_path):
    db, truth = build_project(db_path)
    yield db, truth
    db.close()


def test_sample_is_stored_with_seed_split_and_weights(project):
    db, _ = project
    summary = cal.create_sample(db, "s1", "p", size=200, seed=7)
    assert summary["size"] == 200 and summary["holdout"] == 150 and summary["tuning"] == 50
    items = db.query_df("SELECT * FROM calibration_items WHERE sample = 's1'")
    assert len(items) == 200 and items["weight"].sum() == pytest.approx(360)
    info = db.query_all("SELECT seed, pool_size FROM calibration_samples WHERE name = 's1'")
    assert info == [(7, 360)]
    with pytest.raises(InputError, match="exists already"):
        cal.create_sample(db, "s1", "p", seed=8)
    assert db.query_value("SELECT count(*) FROM calibration_items WHERE sample = 's1'") == 200
    with pytest.raises(InputError, match="no pool named 'nope'"):
        cal.create_sample(db, "s2", "nope")
    with pytest.raises(InputError, match="0 with an LLM grade of model 'other-model'"):
        cal.create_sample(db, "s3", "p", model="other-model")


def test_labelling_flow_blind_undo_and_reload(project):
    db, truth = project
    cal.create_sample(db, "s", "p", seed=1)
    first = cal.next_item(db, "s", "ann")
    assert first["position"] == 0
    assert "grade" not in first and "reason" not in first and "judge_grade" not in first
    with pytest.raises(InputError, match="only after you submit"):
        cal.judge_output(db, "s", "ann", 0)
    cal.save_label(db, "s", "ann", 0, 2, comment="ok", evidence=[[0, 5]], seconds=4.5, reveal=True)
    out = cal.judge_output(db, "s", "ann", 0)
    assert out["grade"] in (0, 1, 2, 3) and out["reason"] == "because"
    # another annotator still cannot see it
    with pytest.raises(InputError):
        cal.judge_output(db, "s", "bob", 0)
    human = db.query_df("SELECT * FROM judgments WHERE source = 'human'")
    assert len(human) == 1 and human.iloc[0]["assessor"] == "ann" and human.iloc[0]["grade"] == 2
    # relabel replaces the judgment row; history stays in label_events
    cal.save_label(db, "s", "ann", 0, 3, seconds=1.0)
    assert db.query_all("SELECT grade FROM judgments WHERE source = 'human'") == [(3,)]
    cal.skip(db, "s", "ann", 1)
    cal.cant_judge(db, "s", "ann", 2)
    assert cal.next_item(db, "s", "ann")["position"] == 3
    # undo the can't-judge, then the skip, then the relabel (back to grade 2)
    assert cal.undo(db, "s", "ann") == 2
    assert cal.my_state(db, "s", "ann", 2) is None
    assert cal.undo(db, "s", "ann") == 1
    assert cal.undo(db, "s", "ann") == 0
    assert cal.my_state(db, "s", "ann", 0)["grade"] == 2
    assert db.query_all("SELECT grade FROM judgments WHERE source = 'human'") == [(2,)]
    assert cal.undo(db, "s", "ann") == 0
    assert cal.my_state(db, "s", "ann", 0) is None
    assert db.query_value("SELECT count(*) FROM judgments WHERE source = 'human'") == 0
    assert cal.undo(db, "s", "ann") is None
    assert db.query_value("SELECT count(*) FROM label_events") == 8
    # a reopened database (a reload) sees the same state
    path = db.path
    cal.save_label(db, "s", "ann", 5, 1)
    db.close()
    db2 = Database(path)
    try:
        assert cal.my_state(db2, "s", "ann", 5)["grade"] == 1
        assert cal.progress(db2, "s", "ann")["labelled"] == 1
    finally:
        db2.close()


def test_bad_labels_refused(project):
    db, _ = project
    cal.create_sample(db, "s", "p", seed=1)
    with pytest.raises(InputError, match="not one of 0, 1, 2, 3"):
        cal.save_label(db, "s", "ann", 0, 4)
    with pytest.raises(InputError, match="annotator id"):
        cal.save_label(db, "s", " ", 0, 1)
    with pytest.raises(InputError, match="no item at position 999"):
        cal.save_label(db, "s", "ann", 999, 1)
    with pytest.raises(InputError, match="need evidence"):
        cal.save_label(db, "s", "ann", 0, 3, require_evidence=True)
    with pytest.raises(InputError, match="not inside the document"):
        cal.save_label(db, "s", "ann", 0, 3, evidence=[[0, 10_000]])
    assert db.query_value("SELECT count(*) FROM label_events") == 0


def test_save_labels_stores_what_one_save_label_per_item_stores(project):
    """The bulk path (label_all's) writes the judgments rows and label events that save_label
    writes item by item, relabels included, numbered in the same order; a bad grade or position
    stores nothing."""
    db, _ = project
    cal.create_sample(db, "s", "p", seed=1)
    first = {3: 2, 0: 1, 7: 3, 5: 0}
    second = {7: 0, 1: 2, 3: 2}  # relabels 7 and 3, labels 1
    for name in ("ann", "bob"):
        if name == "ann":
            for grades in (first, second):
                for position, grade in grades.items():
                    cal.save_label(db, "s", name, position, grade, seconds=3.0)
        else:
            assert len(cal.save_labels(db, "s", name, first, seconds=3.0)) == 4
            assert len(cal.save_labels(db, "s", name, second, seconds=3.0)) == 3
    events = db.query_df("SELECT * FROM label_events ORDER BY event_id")
    kept = ["position", "action", "grade", "comment", "evidence", "seconds", "revealed", "undoes"]
    ann, bob = (events[events["annotator"] == a].reset_index(drop=True) for a in ("ann", "bob"))
    assert len(ann) == len(bob) == 7 and ann[kept].equals(bob[kept])
    assert (bob["event_id"].diff().dropna() > 0).all() and bob["event_id"].min() > ann["event_id"].max()
    judged = db.query_df("""SELECT * EXCLUDE (judgment_id, created_at, assessor) FROM judgments
                            WHERE source = 'human' AND assessor = ? ORDER BY judgment_id""", ["ann"])
    assert len(judged) == 5
    assert judged.equals(db.query_df("""SELECT * EXCLUDE (judgment_id, created_at, assessor) FROM judgments
                                        WHERE source = 'human' AND assessor = ? ORDER BY judgment_id""", ["bob"]))
    # each event points at its own judgment; the replaced ones are gone
    live = set(db.query_df("SELECT judgment_id FROM judgments WHERE source = 'human'")["judgment_id"])
    assert [j in live for j in bob["judgment_id"]] == [False, True, False, True, True, True, True]
    assert cal.my_states(db, "s", "bob") == cal.my_states(db, "s", "ann")
    before = db.query_value("SELECT count(*) FROM label_events")
    with pytest.raises(InputError, match="not one of 0, 1, 2, 3"):
        cal.save_labels(db, "s", "cy", {0: 1, 1: 4})
    with pytest.raises(InputError, match="no item at position 999"):
        cal.save_labels(db, "s", "cy", {0: 1, 999: 1})
    assert db.query_value("SELECT count(*) FROM label_events") == before
    assert cal.save_labels(db, "s", "cy", {}) == []


def test_report_uses_the_held_out_part_reweighted(project):
    db, truth = project
    cal.create_sample(db, "s", "p", seed=3)
    label_all(db, "s", truth)
    body = cal.report(db, "s", options=cal.ReportOptions(seed=5, n_boot=500))
    items = db.query_df("SELECT * FROM calibration_items WHERE sample = 's' AND part = 'holdout' ORDER BY position")
    ref = np.array([truth[(q, d)] for q, d in zip(items["query_id"], items["doc_id"])])
    judge = items["judge_grade"].to_numpy()
    expected = agreement(ref, judge, weights=items["weight"].to_numpy(), query_ids=items["query_id"].to_numpy(),
                         strata=items["stratum"].to_numpy(), seed=5, n_boot=500)
    a = body["agreement"]
    assert a["n"] == 150 == body["labelled_in_part"]
    for k in ("tpr", "tnr", "precision", "kappa", "kappa_quadratic", "msd"):
        assert a[k] == pytest.approx(expected.figures[k])
        assert a["ci"][k] == pytest.approx(list(expected.ci[k]))
    unweighted = cal.report(db, "s", options=cal.ReportOptions(seed=5, n_boot=500, weighted=False))["agreement"]
    assert unweighted["kappa_graded"] == pytest.approx(cohen_kappa_score(ref, judge))
    assert body["gate"]["verdict"] in ("pass", "fail", "inconclusive")
    assert {s["tag"] for s in body["slices"]} == {"risk=high", "risk=low"}
    risky = cal.report(db, "s", options=cal.ReportOptions(seed=5, n_boot=300, high_risk_tags=("risk=high",)))
    high = next(s for s in risky["slices"] if s["tag"] == "risk=high")
    assert high["high_risk"] and high["min_rate"] == 0.90
    assert all(d["sme_grade"] != d["judge_grade"] for d in body["disagreements"])
    cp = body["corrected_prevalence"]
    assert cp["n_observed"] == 360 and 0 <= cp["estimate"] <= 1


def test_gate_verdicts_on_stored_labels(tmp_path):
    # A near-perfect judge with 200 held-out labels passes; a random one fails.
    db, truth = build_project(tmp_path / "good.duckdb", judge_noise=0.02)
    try:
        cal.create_sample(db, "s", "p", seed=0, size=300, holdout_share=1.0)
        label_all(db, "s", truth)
        assert cal.gate(db, options=cal.ReportOptions(n_boot=500))["gate"]["verdict"] == "pass"
    finally:
        db.close()
    db, truth = build_project(tmp_path / "bad.duckdb", judge_noise=1.0)
    try:
        cal.create_sample(db, "s", "p", seed=0)
        label_all(db, "s", truth)
        assert cal.gate(db, "s", options=cal.ReportOptions(n_boot=500))["gate"]["verdict"] == "fail"
    finally:
        db.close()


def test_several_smes_agreement_and_reference(project):
    db, truth = project
    cal.create_sample(db, "s", "p", seed=2)
    label_all(db, "s", truth, "ann")
    label_all(db, "s", truth, "bob", flip=0.3, seed=1)
    sme = cal.report(db, "s", options=cal.ReportOptions(n_boot=200))["sme_agreement"]
    assert sme["annotators"] == ["ann", "bob"]
    pair = sme["pairwise_kappa"][0]
    labels = db.query_df("""SELECT e.position, e.annotator, e.grade FROM label_events e""")
    wide = labels.pivot(index="position", columns="annotator", values="grade")
    assert pair["n"] == 200
    assert pair["kappa"] == pytest.approx(cohen_kappa_score(wide["ann"], wide["bob"], labels=[0, 1, 2, 3]))
    # and on relevant / not relevant at the sample's threshold (grade >= 2)
    assert sme["threshold"] == 2
    assert pair["kappa_binary"] == pytest.approx(cohen_kappa_score(wide["ann"] >= 2, wide["bob"] >= 2))
    assert pair["kappa_binary"] != pytest.approx(pair["kappa"])
    assert 0 < sme["alpha_ordinal"] < 1


def test_binary_pairwise_kappa_by_hand():
    """Shared items 1-3: ann grades 0, 3, 2 and bob 0, 3, 1; relevant at grade >= 2: ann 0, 1, 1
    and bob 0, 1, 0. Observed agreement 2/3; expected 2/3·1/3 + 1/3·2/3 = 4/9;
    κ = (2/3 − 4/9) / (1 − 4/9) = 0.4. At threshold 1 both read 0, 1, 1: κ = 1. cy shares
    nothing (NaN); dee and eve call every shared item relevant (0/0: NaN)."""
    import math

    from workbench.core.calibration.agreement import pairwise_binary_kappa

    labels = {"ann": {1: 0, 2: 3, 3: 2, 4: 1}, "bob": {1: 0, 2: 3, 3: 1, 5: 2}, "cy": {9: 1}}
    got = {(a, b): (n, k) for a, b, n, k in pairwise_binary_kappa(labels)}
    assert got[("ann", "bob")] == (3, pytest.approx(0.4))
    assert got[("ann", "cy")][0] == 0 and math.isnan(got[("ann", "cy")][1])
    assert pairwise_binary_kappa(labels, threshold=1)[0] == ("ann", "bob", 3, pytest.approx(1.0))
    both_relevant = pairwise_binary_kappa({"dee": {1: 2, 2: 3}, "eve": {1: 3, 2: 2}})
    assert both_relevant[0][2] == 2 and math.isnan(both_relevant[0][3])


def test_no_held_out_pair_reaches_the_tuning_set(project):
    db, truth = project
    cal.create_sample(db, "s", "p", seed=4)
    label_all(db, "s", truth)
    tuning = cal.tuning_pairs(db, "s")
    held = db.query_df("SELECT query_id, doc_id FROM calibration_items WHERE sample = 's' AND part = 'holdout'")
    assert len(tuning) == 50
    assert set(zip(tuning["query_id"], tuning["doc_id"])).isdisjoint(set(zip(held["query_id"], held["doc_id"])))
    assert set(tuning["part"]) == {"tuning"}


def test_report_before_any_label(project):
    db, _ = project
    cal.create_sample(db, "s", "p", seed=1)
    body = cal.report(db)
    assert body["agreement"] is None and body["gate"]["verdict"] == "inconclusive"
    with pytest.raises(InputError, match="no calibration sample named 'x'"):
        cal.report(db, "x")


def test_five_smes_labelling_at_once_lose_no_label(project):
    """Five sessions of one server (threads, each with its own handle on the same file) label
    the same 60 items at the same time: every label is stored once, with its own judgment."""
    import threading

    db, _ = project
    cal.create_sample(db, "s", "p", seed=1)
    path = db.path
    errors: list[str] = []

    def session(name: str, offset: int) -> None:
        handle = Database(path)
        try:
            for position in range(60):
                cal.save_label(handle, "s", name, position, (position + offset) % 2)
        except Exception as exc:  # collected and asserted below
            errors.append(repr(exc))
        finally:
            handle.close()

    threads = [threading.Thread(target=session, args=(f"sme{i}", i)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert db.query_value("SELECT count(*) FROM label_events") == 300
    counts = db.query_df("SELECT assessor, count(*) AS n, sum(grade) AS s FROM judgments "
                         "WHERE source = 'human' GROUP BY assessor ORDER BY assessor")
    assert counts["n"].tolist() == [60] * 5
    assert counts["s"].tolist() == [30] * 5
    sme = cal.report(db, "s", options=cal.ReportOptions(n_boot=100))["sme_agreement"]
    assert sme["annotators"] == [f"sme{i}" for i in range(5)] and len(sme["pairwise_kappa"]) == 10


def test_judge_configurations_compared_on_the_tuning_part(project):
    db, truth = project
    # a second configuration (another model) that agrees with the SMEs everywhere
    items = db.query_df("SELECT query_id, doc_id, start, \"end\" FROM judgments WHERE source = 'llm' AND status = 'ok'")
    from workbench.store.judgments import write_judgments

    with db.transaction() as tx:
        write_judgments(tx, items.assign(grade=[truth[(q, d)] for q, d in zip(items["query_id"], items["doc_id"])],
                                         source="llm", assessor="judge2", model="m2", prompt_hash="h2", status="ok"))
    cal.create_sample(db, "s", "p", seed=6, model="m1")
    label_all(db, "s", truth)
    configs = cal.compare_judges(db, "s", options=cal.ReportOptions(n_boot=300, seed=1))
    assert [(c["model"], c["prompt_hash"]) for c in configs] == [("m2", "h2"), ("m1", None)]
    assert configs[0]["kappa"] == pytest.approx(1.0) and configs[0]["n"] == 50
    tuning = db.query_df("SELECT * FROM calibration_items WHERE sample = 's' AND part = 'tuning' ORDER BY position")
    ref = np.array([truth[(q, d)] for q, d in zip(tuning["query_id"], tuning["doc_id"])])
    expected = agreement(ref, tuning["judge_grade"].to_numpy(), weights=tuning["weight"].to_numpy(),
                         query_ids=tuning["query_id"].to_numpy(), strata=tuning["stratum"].to_numpy(),
                         seed=1, n_boot=300)
    assert configs[1]["kappa"] == pytest.approx(expected.figures["kappa"])
    assert configs[1]["ci"]["tpr"] == pytest.approx(list(expected.ci["tpr"]))


def test_runs_precision_corrected_with_the_judges_error_rates(project):
    from tests.support.calibration_project import DOCS_PER_QUERY, QUERIES, judge_grades

    db, truth = project
    cal.create_sample(db, "s", "p", seed=2)
    label_all(db, "s", truth)
    body = cal.report(db, "s", options=cal.ReportOptions(n_boot=400, seed=3, precision_k=5))
    runs = {r["run"]: r for r in body["corrected_precision"]}
    assert set(runs) == {"r1", "r2"}
    grades = judge_grades(db)
    a = body["agreement"]
    for run, ranks in (("r1", range(1, 6)), ("r2", range(DOCS_PER_QUERY - 4, DOCS_PER_QUERY + 1))):
        # pairs of query q are d{q*12 + priority - 1}; r1 ranks by priority, r2 reversed
        top = [(f"q{q:02d}", f"d{q * DOCS_PER_QUERY + p - 1}") for q in range(QUERIES) for p in ranks]
        observed = np.mean([grades[k] >= 2 for k in top])
        assert runs[run]["judged"] == QUERIES * 5
        assert runs[run]["observed"] == pytest.approx(observed)
        expected = (observed + a["tnr"] - 1) / (a["tpr"] + a["tnr"] - 1)
        assert runs[run]["estimate"] == pytest.approx(min(max(expected, 0.0), 1.0))
        lo, hi = runs[run]["ci"]
        assert lo <= runs[run]["estimate"] <= hi


def test_few_shot_examples_come_from_the_tuning_part_only(project):
    db, truth = project
    cal.create_sample(db, "s", "p", seed=4)
    with pytest.raises(InputError, match="no SME labels on its tuning part"):
        cal.few_shot_examples(db, "s")
    label_all(db, "s", truth)  # every pair labelled, held-out ones included
    held = db.query_df("SELECT query_id, doc_id FROM calibration_items WHERE sample = 's' AND part = 'holdout'")
    held_keys = set(zip(held["query_id"], held["doc_id"]))
    seen = set()
    for seed in range(25):
        examples = cal.few_shot_examples(db, "s", per_grade=3, seed=seed)
        assert {e["grade"] for e in examples} == {0, 1, 2, 3}
        for e in examples:
            assert e["part"] == "tuning" and (e["query_id"], e["doc_id"]) not in held_keys
            assert e["grade"] == truth[(e["query_id"], e["doc_id"])] and e["passage"]
            seen.add((e["query_id"], e["doc_id"]))
    assert len(seen) > 12  # the seeds really vary the choice


def test_overlap_hands_each_item_to_k_smes(project):
    db, truth = project
    cal.create_sample(db, "s", "p", seed=1)
    answered: dict[int, set] = {}
    # three SMEs take turns, overlap 2: every item gets exactly two answers, nobody answers twice
    smes = ["a", "b", "c"]
    turn = 0
    while True:
        progressed = False
        for sme in smes:
            nxt = cal.next_item(db, "s", sme, overlap=2)
            if nxt is None:
                continue
            cal.save_label(db, "s", sme, nxt["position"], 1)
            assert sme not in answered.setdefault(nxt["position"], set())
            answered[nxt["position"]].add(sme)
            progressed = True
        turn += 1
        if not progressed:
            break
    assert len(answered) == 200 and all(len(v) == 2 for v in answered.values())
    assert turn <= 140
    with pytest.raises(InputError, match="overlap"):
        cal.next_item(db, "s", "a", overlap=-1)


def test_adjudication_resolves_sme_disagreements(project):
    db, truth = project
    cal.create_sample(db, "s", "p", seed=1)
    for position in range(6):
        cal.save_label(db, "s", "ann", position, 1)
        cal.save_label(db, "s", "bob", position, 1 if position % 2 else 3)
    cal.save_label(db, "s", "cy", 0, 2)
    found = cal.sme_disagreements(db, "s")
    assert [d["position"] for d in found] == [0, 2, 4]
    assert found[0]["grades"] == {"ann": 1, "bob": 3, "cy": 2} and found[0]["resolved"] is None
    with pytest.raises(InputError, match="no disagreement"):
        cal.adjudicate(db, "s", 1, 2, lead="lead")
    with pytest.raises(InputError, match="reserved"):
        cal.save_label(db, "s", "adjudication", 3, 2)
    # lower median of (1, 3) is 1; the resolution makes it 3, and records who resolved it
    before = cal.report(db, "s", options=cal.ReportOptions(part="all", n_boot=50))
    cal.adjudicate(db, "s", 2, 3, lead="lead", comment="bob is right")
    cal.adjudicate(db, "s", 2, 2, lead="lead2")  # a later resolution replaces the earlier one
    found = {d["position"]: d for d in cal.sme_disagreements(db, "s")}
    assert found[2]["resolved"] == 2 and found[2]["resolved_by"] == "lead2"
    labels = cal.reference_labels(db, "s").set_index("position")
    assert labels.loc[2, "grade"] == 2 and bool(labels.loc[2, "adjudicated"])
    assert labels.loc[4, "grade"] == 1 and not bool(labels.loc[4, "adjudicated"])
    assert db.query_all("SELECT assessor, grade FROM judgments WHERE source = 'human' AND assessor LIKE 'lead%'") == \
        [("lead2", 2)]
    from workbench.store.calibration import adjudicated_judgment_ids

    ids = adjudicated_judgment_ids(db)
    assert ids["resolved_by"].tolist() == ["lead2"] and ids["position"].tolist() == [2]
    assert db.query_value("SELECT grade FROM judgments WHERE judgment_id = ?", [int(ids["judgment_id"][0])]) == 2
    after = cal.report(db, "s", options=cal.ReportOptions(part="all", n_boot=50))
    assert after["sme_agreement"]["annotators"] == ["ann", "bob", "cy"]
    assert after["labelled"] == before["labelled"] == 6
