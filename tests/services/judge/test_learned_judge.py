"""The learned judge (``judge learn``) and imported judges (``import judgments``) on a small
synthetic project (tests/support/calibration_project: 30 queries x 12 documents, one LLM grade
per pair, simulated SMEs)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests.support.calibration_project import build_project, label_all
from tests.support.cli_runner import run_cli
from workbench.core.judging import learned as core
from workbench.errors import InputError
from workbench.services.calibration import verdicts
from workbench.services.calibration import workflow as cal
from workbench.services.judge.imported import import_judgments
from workbench.services.judge.learned import learn, pool_features
from workbench.store.calibration import pool_configurations, read_sample_items
from workbench.store.database import Database
from workbench.store.judging import read_jobs


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """Sample s (150 held-out, 50 tuning pairs), every pair labelled, 10% of labels noisy."""
    path = tmp_path_factory.mktemp("learned") / "p.duckdb"
    db, truth = build_project(path, seed=3)
    cal.create_sample(db, "s", "p", size=200, seed=1, min_per_class=50)
    label_all(db, "s", truth, flip=0.1, seed=2)
    # the dense cosine's vectors cached once with the project's encoder, so each copy reads them
    pool_features(db, "p", "doc", [], {})
    db.close()
    return path, truth


def _copy(labelled, tmp_path, name="copy.duckdb") -> Database:
    path = tmp_path / name
    shutil.copy(labelled[0], path)
    return Database(path)


def _learned_grades(db, key) -> dict:
    rows = db.query_all("""SELECT j.query_id, j.doc_id, j.grade, j.reason, j.raw_response FROM judgments j
                           JOIN judge_jobs jj ON jj.job_id = j.job_id WHERE jj.config_key = ?""", [key])
    return {(q, d): (int(g), r, json.loads(raw)) for q, d, g, r, raw in rows}


def test_too_few_tuning_labels_are_refused(tmp_path):
    db, truth = build_project(tmp_path / "few.duckdb", seed=3)
    cal.create_sample(db, "s", "p", size=200, seed=1, min_per_class=50)
    items = read_sample_items(db, "s")
    tuning = items[items["part"] == "tuning"]["position"].astype(int).tolist()
    held = items[items["part"] == "holdout"]["position"].astype(int).tolist()
    # 120 held-out labels and 29 tuning ones: the held-out ones do not count
    cal.save_labels(db, "s", "ann", {p: i % 4 for i, p in enumerate(held[:120] + tuning[:29])})
    with pytest.raises(InputError, match="29 SME labels on the tuning part; a learned judge needs at least 30"):
        learn(db, "s")
    # 40 tuning labels, only 5 of them relevant
    cal.save_labels(db, "s", "ann", {p: (3 if i < 5 else 0) for i, p in enumerate(tuning[:40])})
    with pytest.raises(InputError, match="5 relevant and 35 not relevant .* at least 8 of each"):
        learn(db, "s")
    assert not [j for j in read_jobs(db) if j["judge"] == "learned"]  # nothing half-written


def test_learn_grades_every_pool_pair_as_a_new_configuration(labelled, tmp_path):
    db = _copy(labelled, tmp_path)
    before = pool_configurations(db, "p")
    result = learn(db, "s", seed=4)
    assert result.created and result.tuning == 50 and result.config not in before
    assert pool_configurations(db, "p") == before + [result.config]
    pairs = {(q, d) for q, d in db.query_all("SELECT query_id, doc_id FROM pool_pairs WHERE pool = 'p'")}
    grades = _learned_grades(db, result.config)
    assert set(grades) == pairs and len(pairs) == 360
    job = [j for j in read_jobs(db) if j["config_key"] == result.config][0]
    assert (job["judge"], job["model"], job["prompt_id"], job["prompt_hash"]) == ("learned",) * 3 + (result.config,)
    t, (lo, hi) = result.operating.threshold, result.cuts
    for grade, reason, raw in grades.values():
        p = raw["p_relevant"]
        assert reason == f"p(relevant)={p:.3f}"
        # the grade is the probability's place among the three cuts
        assert grade == (3 if p >= hi else 2) if p >= t else grade == (1 if p >= lo else 0)
    config = verdicts.find_configuration(db, "learned")
    assert config.key == result.config and config.graded == 360
    # the same inputs again: the same configuration, nothing written twice
    again = learn(db, "s", seed=4)
    assert again.config == result.config and not again.created
    assert db.query_value("SELECT count(*) FROM judgments WHERE model = 'learned'") == 360


def test_held_out_labels_never_reach_the_fit(labelled, tmp_path):
    a = _copy(labelled, tmp_path, "a.duckdb")
    b = _copy(labelled, tmp_path, "b.duckdb")
    items = read_sample_items(b, "s")
    held = items[items["part"] == "holdout"]
    truth = labelled[1]
    # every held-out label in b relabelled upside down (3 - grade)
    cal.save_labels(b, "s", "ann", {int(p): 3 - truth[(q, d)] for p, q, d in zip(held["position"], held["query_id"],
                                                                                 held["doc_id"])})
    assert not cal.reference_labels(a, "s")["grade"].equals(cal.reference_labels(b, "s")["grade"])
    seen = []

    def recording_fit(x, y, w, seed, **kw):
        seen.append((x.copy(), y.copy(), w.copy()))
        return core.fit(x, y, w, seed, **kw)

    ra, rb = learn(a, "s", seed=0, fit=recording_fit), learn(b, "s", seed=0, fit=recording_fit)
    assert ra.config == rb.config
    assert _learned_grades(a, ra.config) == _learned_grades(b, rb.config)
    # the fit got exactly the tuning part's labels, the same in both projects
    tuning = cal.tuning_pairs(a, "s")
    for x, y, w in seen:
        assert len(y) == len(tuning) == 50
        assert np.array_equal(y, (tuning["grade"].to_numpy() >= 2).astype(int))
        assert np.allclose(w, tuning["weight"].to_numpy())
    assert np.array_equal(seen[0][0], seen[1][0])
    # relabelling the tuning part is another configuration: the old one is not refitted in place
    position = int(tuning["position"].iloc[0])
    cal.save_labels(a, "s", "ann", {position: 3 - int(tuning["grade"].iloc[0])})
    rc = learn(a, "s", seed=0)
    assert rc.config != ra.config and rc.created
    assert len(_learned_grades(a, ra.config)) == len(_learned_grades(a, rc.config)) == 360


def test_the_learned_configuration_is_gated_on_the_held_out_part(labelled, tmp_path):
    db = _copy(labelled, tmp_path)
    result = learn(db, "s", seed=0)
    db.close()
    done = run_cli("--db", str(tmp_path / "copy.duckdb"), "calibrate", "gate", "--sample", "s", "--judge", "learned")
    assert done.returncode in (0, 1, 2), done.stderr
    assert done.stdout.startswith(("pass", "fail", "inconclusive"))
    assert f"learned/learned ({result.config[:12]}) on sample 's', 150 held-out labels" in done.stdout
    db = Database(tmp_path / "copy.duckdb")
    assert result.config in verdicts.gated_configurations(db, "s")


def test_judge_learn_on_the_command_line(labelled, tmp_path):
    path = tmp_path / "cli.duckdb"
    shutil.copy(labelled[0], path)
    done = run_cli("--db", str(path), "judge", "learn", "--sample", "s", "--from", "m1", "--format", "json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["tuning"] == 50 and body["graded"] == 360 and body["operating_point"]["rule"] in ("targets", "kappa")
    done = run_cli("--db", str(path), "judge", "learn", "--sample", "nosuch")
    assert done.returncode == 3 and done.stderr.count("\n") == 1 and "no calibration sample named" in done.stderr


def test_operating_point_meets_the_targets_when_it_can():
    y = np.array([0] * 50 + [1] * 50)
    p = np.r_[np.linspace(0, 0.5, 50), np.linspace(0.4, 1, 50)]
    op = core.operating_point(y, p, np.ones(100), min_tpr=0.85, min_tnr=0.85)
    assert op.rule == "targets" and op.tpr >= 0.85 and op.tnr >= 0.85
    # hand-worked: at t = 0.5 every relevant pair with p >= 0.5 (42 of 50: the linspace from 0.4
    # passes 0.5 after index 8) and the one not-relevant pair at 0.5 are called relevant
    op = core.operating_point(y, p, np.ones(100), min_tpr=0.99, min_tnr=0.99)
    assert op.rule == "kappa"
    assert op.kappa == max(core.binary_figures(y, p >= t, np.ones(100))["kappa"] for t in np.unique(p))


def test_expected_kappa_threshold_by_hand():
    # p = 0.9, 0.8, 0.2, 0.1 (Σp = 2 expected relevant of 4). Calling the top two relevant:
    # TP = 1.7, FP = 0.3, FN = 0.3, TN = 1.7, p_o = 0.85, p_e = (2·2 + 2·2) / 16 = 0.5, κ = 0.7;
    # the top one: κ = (0.7 - 0.5) / 0.5 = 0.4; the top three: 0.4; all four: 0
    t, k = core.expected_kappa_threshold(np.array([0.1, 0.9, 0.2, 0.8]))
    assert t == 0.8 and k == pytest.approx(0.7)
    # tied values fall on one side: the top 0.7 alone is no candidate (κ 0.2); both 0.7s give 0.4
    t, k = core.expected_kappa_threshold(np.array([0.7, 0.3, 0.7, 0.3]))
    assert t == 0.7 and k == pytest.approx(0.4)
    # one value: everything relevant, p_o = p_e = 0.4, κ 0; all 1: p_e = 1, κ undefined
    assert core.expected_kappa_threshold(np.array([0.4, 0.4])) == (0.4, 0.0)
    t, k = core.expected_kappa_threshold(np.ones(3))
    assert t == 1.0 and np.isnan(k)


def test_operating_point_maximises_the_pools_expected_kappa_when_no_threshold_meets_the_targets():
    y = np.array([0] * 50 + [1] * 50)
    p = np.r_[np.linspace(0, 0.5, 50), np.linspace(0.4, 1, 50)]
    op = core.operating_point(y, p, np.ones(100), min_tpr=0.99, min_tnr=0.99, pool=np.array([0.1, 0.9, 0.2, 0.8]))
    assert op.rule == "kappa" and op.threshold == 0.8 and op.expected_kappa == pytest.approx(0.7)
    # TPR, TNR and κ stay the cross-validated ones, at the pool's threshold
    f = core.binary_figures(y, p >= 0.8, np.ones(100))
    assert (op.tpr, op.tnr, op.kappa) == (f["tpr"], f["tnr"], f["kappa"])
    assert "expects on the pool" in op.words()
    # the targets, when met, still decide (the pool is not read)
    op = core.operating_point(y, p, np.ones(100), min_tpr=0.85, min_tnr=0.85, pool=np.array([0.1, 0.9, 0.2, 0.8]))
    assert op.rule == "targets" and op.expected_kappa is None


def test_bm25_by_hand():
    import scipy.sparse as sp

    # vocabulary: 0 "cat", 1 "dog"; one query "cat cat" against passages "cat dog dog" and "dog"
    q = sp.csr_matrix(np.array([[2, 0], [2, 0]]))
    p = sp.csr_matrix(np.array([[1, 2], [0, 1]]))
    idf = core.idf_lucene(np.array([1, 2]), 2)
    avgdl = 2.0
    expected = 2 * np.log1p(1.5 / 1.5) * 1 / (1 + 1.5 * (1 - 0.75 + 0.75 * 3 / 2))
    assert np.allclose(core.bm25_scores(q, p, idf, avgdl), [expected, 0.0])
    assert np.allclose(core.term_overlap(q, p), [1.0, 0.0])


def test_import_judgments_as_a_configuration(labelled, tmp_path):
    db = _copy(labelled, tmp_path)
    qrels = tmp_path / "ext.qrels"
    rows = db.query_all("SELECT query_id, doc_id FROM pool_pairs WHERE pool = 'p' ORDER BY query_id, doc_id")
    truth = labelled[1]
    qrels.write_text("".join(f"{q} 0 {d} {truth[(q, d)]}\n" for q, d in rows) + "q99 0 d99 1\n")
    result = import_judgments(db, qrels, judge="oracle")
    assert (result.graded, result.outside, result.created) == (360, 1, True)
    job = [j for j in read_jobs(db) if j["config_key"] == result.config][0]
    assert (job["judge"], job["model"]) == ("imported-judge", "oracle")
    assert verdicts.find_configuration(db, "oracle").graded == 360
    assert not import_judgments(db, qrels, judge="oracle").created  # the same bytes: nothing written
    db.close()
    done = run_cli("--db", str(tmp_path / "copy.duckdb"), "calibrate", "gate", "--sample", "s", "--judge", "oracle")
    # the SMEs' labels are the truth with 10% noise: the oracle agrees on ~90%, the gate weighs it
    assert done.returncode in (0, 2) and f"oracle/imported ({result.config[:12]}) on sample 's', 150 held-out" \
        in done.stdout, done.stdout + done.stderr
    assert "κ 0.8" in done.stdout or "κ 0.9" in done.stdout
    # export judgments writes JSONL that imports back as the same grades
    out = tmp_path / "j.jsonl"
    assert run_cli("--db", str(tmp_path / "copy.duckdb"), "export", "judgments", "--out", str(out), "--source",
                   "llm").returncode == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    mine = tmp_path / "oracle.jsonl"
    mine.write_text("".join(json.dumps(x) + "\n" for x in lines if x["model"] == "oracle"))
    done = run_cli("--db", str(tmp_path / "copy.duckdb"), "import", "judgments", str(mine), "--judge", "again")
    assert done.returncode == 0 and "imported 360 grades of judge 'again'" in done.stdout, done.stderr
    # a pair graded twice with different grades is refused in one line
    done = run_cli("--db", str(tmp_path / "copy.duckdb"), "import", "judgments", str(out), "--judge", "mixed")
    assert done.returncode == 3 and done.stderr.count("\n") == 1 and "different grades" in done.stderr


def test_within_query_normalisations_by_hand():
    groups = np.array([0, 0, 0, 1, 1])
    values = np.array([1.0, 2.0, 3.0, 5.0, 5.0])
    sd = np.sqrt(2 / 3)
    assert np.allclose(core.within_query_z(values, groups), [-1 / sd, 0, 1 / sd, 0, 0])
    # mid-rank share: lower values plus half the other ties, over the query's pairs
    assert np.allclose(core.within_query_rank_share(values, groups), [0, 1 / 3, 2 / 3, 0.25, 0.25])


def test_imported_judgments_refuse_bad_input_in_one_line(labelled, tmp_path):
    path = tmp_path / "cli.duckdb"
    shutil.copy(labelled[0], path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query_id": "q00", "doc_id": "d0", "grade": 2}\n{"query_id": "q00", "doc_id": "d1", "grade": 7}\n')
    done = run_cli("--db", str(path), "import", "judgments", str(bad), "--judge", "x")
    assert done.returncode == 3 and done.stderr.count("\n") == 1 and "bad.jsonl:2" in done.stderr, done.stderr
    empty = tmp_path / "none.qrels"
    empty.write_text("q99 0 d99 1\n")
    done = run_cli("--db", str(path), "import", "judgments", str(empty), "--judge", "x")
    assert done.returncode == 3 and "none of its 1 rows names a pair of pool 'p'" in done.stderr, done.stderr
    done = run_cli("--db", str(path), "judge")  # neither --pool nor learn
    assert done.returncode == 3 and "--pool P is required" in done.stderr
    db = Database(path)
    assert not [j for j in read_jobs(db) if j["judge"] == "imported-judge"]  # nothing half-written
