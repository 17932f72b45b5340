"""Restricted content as a calibration slice: pairs whose document is restricted form the slice
``restricted``, which ``high_risk_tags`` holds to the stricter thresholds."""

from __future__ import annotations

from tests.support.calibration_project import build_project, label_all
from workbench.services.calibration import workflow as cal
from workbench.services.calibration.reference import restricted_slice_tags
from workbench.services.evaluation.rbac import apply_access


def test_restricted_documents_form_a_high_risk_slice(tmp_path):
    db, truth = build_project(tmp_path / "cal.duckdb", judge_noise=0.1)
    try:
        restricted = [f"d{i}" for i in range(0, 360, 3)]  # every third document
        apply_access(db, [{"doc_id": d, "roles": ["hr"]} for d in restricted])
        assert restricted_slice_tags(db, ["d0", "d1", "d3"]) == [["restricted"], [], ["restricted"]]
        cal.create_sample(db, "s", "p", seed=0, size=200, holdout_share=1.0)
        label_all(db, "s", truth)
        body = cal.report(db, "s", options=cal.ReportOptions(seed=1, n_boot=200, high_risk_tags=("restricted",)))
        [sl] = [s for s in body["slices"] if s["tag"] == "restricted"]
        assert sl["high_risk"] and sl["min_rate"] == 0.90
        # the slice holds exactly the labelled pairs on restricted documents
        items = db.query_df("SELECT doc_id FROM calibration_items WHERE sample = 's'")
        assert sl["n"] == int(items["doc_id"].isin(restricted).sum()) > 0
        plain = cal.report(db, "s", options=cal.ReportOptions(seed=1, n_boot=200))
        [sl] = [s for s in plain["slices"] if s["tag"] == "restricted"]
        assert not sl["high_risk"]
    finally:
        db.close()
