"""Issue 19's page words: the Qrels and Calibration pages both say where "relevant" starts (grade 1
on the Qrels page, the gate's grade 2 on the Calibration page), and the confusion matrix counts
pairs while naming the re-weighted cells as weights."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.calibration_project import build_project, label_all
from workbench.services.calibration import workflow as cal


def _qrels_page():
    from workbench.ui.views import qrels

    qrels.render()


def _calibration_page():
    from workbench.ui.views import calibration

    calibration.render()


def _captions(page) -> str:
    at = AppTest.from_function(page, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return "\n".join(c.value for c in at.caption)


def test_qrels_page_says_where_relevant_starts_on_both_pages(demo_db):
    text = _captions(_qrels_page)
    assert "Relevant here means grade 1 or higher" in text
    assert "The Calibration page checks the judge at grade 2 or higher" in text


def test_calibration_page_says_grade_2_and_counts_pairs(tmp_path, monkeypatch):
    path = tmp_path / "p.duckdb"
    db, truth = build_project(path)
    cal.create_sample(db, "s", "p", seed=1)
    label_all(db, "s", truth)
    report = cal.report(db, "s")
    db.close()
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    text = _captions(_calibration_page)
    assert "Relevant here means grade 2 or higher" in text and "The Qrels page counts grade 1" in text
    a = report["agreement"]
    counted = sum(map(sum, a["counts"]))
    assert counted == report["labelled_in_part"] == a["relevant_pairs"] + a["not_relevant_pairs"]
    assert (f"Each cell counts labelled pairs. {a['relevant_pairs']} reference-relevant and "
            f"{a['not_relevant_pairs']} reference-non-relevant pairs.") in text
    assert "weights, not pairs" in text  # the sample's figures are re-weighted to the pool


def _retrieve_page():
    from workbench.ui.views import retrieve

    retrieve.render()


def test_retrieve_page_says_a_dense_run_works_in_the_background(demo_db):
    from workbench.ui.views.retrieve import DENSE_IN_BACKGROUND, dense_available

    if not dense_available():
        pytest.skip("the dense extra is not installed: the Dense tab shows how to install it instead")
    text = _captions(_retrieve_page)
    assert DENSE_IN_BACKGROUND in text and "you may go to another page or reload this one" in text
