"""Project mode of PPI++: the query design of calibration samples and ``--labels corrected``
over stored runs, checked against ``workbench ppi``'s file mode on files exported from the same
project by the export commands (an independent path: export, TREC files, the file readers)."""

from __future__ import annotations

import math

import pytest

from tests.support.ppi_project import RUNS, build_ppi_project, export_files, label_queries
from workbench.errors import InputError
from workbench.services import access
from workbench.services.calibration import workflow as cal
from workbench.services.evaluation.ppi import ppi_files
from workbench.services.evaluation.ppi_project import corrected_project, sample_status
from workbench.store import calibration as store

MEASURES = ["ndcg@10", "P@5", "AP(rel=2)"]


def test_query_design_draws_whole_queries_seeded(tmp_path):
    db, _ = build_ppi_project(tmp_path / "p.duckdb")
    a = cal.create_sample(db, "a", "p", design="queries", queries=8, seed=11)
    cal.create_sample(db, "b", "p", design="queries", queries=8, seed=11)
    cal.create_sample(db, "c", "p", design="queries", queries=8, seed=12)
    items = {n: store.read_sample_items(db, n) for n in "abc"}
    assert a["queries"] == 8 and a["population_queries"] == 30
    assert a["size"] == 8 * 12  # every pool pair of each drawn query
    assert list(items["a"]["query_id"]) == list(items["b"]["query_id"])  # the seed decides
    assert set(items["a"]["query_id"]) != set(items["c"]["query_id"])
    info = store.read_sample(db, "a")
    assert info["seed"] == 11 and info["spec"]["design"] == "queries" and len(info["spec"]["population"]) == 30
    assert set(items["a"]["weight"]) == {30 / 8}
    # a query's pairs are consecutive in the labelling order
    order = items["a"]["query_id"].tolist()
    assert sum(1 for x, y in zip(order, order[1:]) if x != y) == 7
    assert set(store.query_design_samples(db)) == {"a", "b", "c"}
    with pytest.raises(InputError, match="only 30 queries"):
        cal.create_sample(db, "d", "p", design="queries", queries=31, seed=1)
    db.close()


def test_corrected_equals_file_mode_on_exported_files(tmp_path):
    path = tmp_path / "p.duckdb"
    db, truth = build_ppi_project(path)
    cal.create_sample(db, "qs", "p", design="queries", queries=10, seed=3)
    with pytest.raises(InputError, match="0 of its 10 queries are fully labelled"):
        corrected_project(db, list(RUNS), MEASURES)
    labelled = label_queries(db, "qs", truth, 7, partial=1)
    status = sample_status(db)
    assert (status.drawn, status.labelled, status.population) == (10, 7, 30)
    done = corrected_project(db, list(RUNS), MEASURES)
    db.close()

    # the independent path: the project's export commands, then files
    human_qrels, judge_qrels, runs = export_files(path, tmp_path, labelled)
    files = ppi_files(human_qrels, judge_qrels, runs, MEASURES)

    assert done.report.n_labelled == files.n_labelled == 7
    assert done.report.n_unlabelled == files.n_unlabelled == 23
    ours, theirs = done.report.to_json()["measures"], files.to_json()["measures"]
    assert ours.keys() == theirs.keys()
    for m in MEASURES:
        for r in RUNS:
            a, b = ours[m]["runs"][r], theirs[m]["runs"][r]
            for key in ("estimate", "judge_only", "lambda"):
                assert math.isclose(a[key], b[key], rel_tol=1e-12, abs_tol=1e-12), (m, r, key)
            assert a["ci"] == pytest.approx(b["ci"], abs=1e-12)
            assert a["human_only_ci"] == pytest.approx(b["human_only_ci"], abs=1e-12)
        d, e = ours[m]["differences"]["rb"], theirs[m]["differences"]["rb"]
        assert d["vs"] == "ra" and d["estimate"] == pytest.approx(e["estimate"], abs=1e-12)
        assert d["ci"] == pytest.approx(e["ci"], abs=1e-12)
    # the corrected estimate is not the judge's mean: the SME labels moved it
    assert ours["ndcg@10"]["runs"]["ra"]["estimate"] != ours["ndcg@10"]["runs"]["ra"]["judge_only"]


def test_annotator_may_not_read_corrected(tmp_path):
    db, truth = build_ppi_project(tmp_path / "p.duckdb")
    cal.create_sample(db, "qs", "p", design="queries", queries=4, seed=3)
    label_queries(db, "qs", truth, 3)
    previous = access.set_actor_source(lambda: access.Actor("anna", "annotator"))
    try:
        with pytest.raises(access.PermissionDenied):
            corrected_project(db, list(RUNS), ["ndcg@10"])
        assert sample_status(db).labelled == 3  # counts only: readable by anyone
    finally:
        access.set_actor_source(previous)
    db.close()


def test_unanswerable_queries_are_left_out_as_eval_leaves_them_out(tmp_path):
    """Two queries marked unanswerable, one labelled by the SMEs and one judged only: both leave
    both sides (eval drops them from ranking measures), so the estimate equals file mode on the
    exported files without them; before, they stayed in with a human side of 0."""
    from workbench.services.qrels.answerability import mark_answerability

    path = tmp_path / "p.duckdb"
    db, truth = build_ppi_project(path)
    cal.create_sample(db, "qs", "p", design="queries", queries=10, seed=3)
    labelled = label_queries(db, "qs", truth, 7)
    population = set(store.read_sample(db, "qs")["spec"]["population"])
    dropped = [sorted(labelled)[0], sorted(population - set(store.read_sample_items(db, "qs")["query_id"]))[0]]
    for q in dropped:
        mark_answerability(db, q, answerable=False, annotator="lead")
    done = corrected_project(db, list(RUNS), MEASURES)
    db.close()
    assert (done.report.n_labelled, done.report.n_unlabelled) == (6, 22)
    assert done.to_json()["unanswerable_left_out"] == sorted(dropped)
    assert "2 unanswerable queries left out" in done.statement()
    human_qrels, judge_qrels, runs = export_files(path, tmp_path, [q for q in labelled if q not in dropped])
    keep = [line for line in judge_qrels.read_text().splitlines() if line.split()[0] not in dropped]
    judge_qrels.write_text("\n".join(keep) + "\n")
    files = ppi_files(human_qrels, judge_qrels, runs, MEASURES)
    ours, theirs = done.report.to_json()["measures"], files.to_json()["measures"]
    for m in MEASURES:
        for r in RUNS:
            assert ours[m]["runs"][r]["estimate"] == pytest.approx(theirs[m]["runs"][r]["estimate"], abs=1e-12)
            assert ours[m]["runs"][r]["ci"] == pytest.approx(theirs[m]["runs"][r]["ci"], abs=1e-12)
