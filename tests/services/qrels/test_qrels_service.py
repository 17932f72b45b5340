"""services/qrels on a real DuckDB project: the gate decides whether LLM labels count (unless
the user opts in), and export and pool statistics apply the same rule."""

from __future__ import annotations

from tests.support.calibration_project import build_project, label_all
from workbench.core.qrels_policy import QrelsPolicy
from workbench.services.calibration import workflow as cal
from workbench.services.qrels.export import export_qrels
from workbench.services.pooling.pools import pool_stats
from workbench.services.calibration import verdicts
from workbench.services.qrels.rule import project_qrels


def passed_judge_configurations(db, settings=None) -> tuple[tuple[str, str], ...]:
    """(model, prompt_hash) of each configuration that passed (the fixtures' judges have one
    configuration per model)."""
    known = {c.key: c for c in verdicts.configurations(db)}
    return tuple((known[k].model, known[k].prompt_hash) for k in verdicts.passed_configurations(db, settings))


def gate_verdict(db, sample, thresholds=None, options=None) -> str:
    from workbench.core.calibration.gate import GateThresholds

    thresholds = GateThresholds() if thresholds is None else thresholds
    options = cal.ReportOptions() if options is None else options
    config = verdicts.default_configuration(db, sample)
    return verdicts.verdict(db, sample, config, thresholds, options).verdict


def _exported(db, tmp_path, name, **kw) -> set[tuple[str, str, int]]:
    path = tmp_path / name
    export_qrels(db, path, **kw)
    return {(q, d, int(g)) for q, _, d, g in (line.split() for line in path.read_text().splitlines())}


def test_llm_labels_count_only_after_the_gate_passed_or_by_opt_in(tmp_path):
    db, truth = build_project(tmp_path / "p.duckdb", judge_noise=0.0)
    try:
        gated = project_qrels(db)
        assert gated.table.empty and passed_judge_configurations(db) == ()
        assert "left out" in gated.notes[0] and "none" in gated.statement()
        opted = project_qrels(db, policy=QrelsPolicy(llm_labels="all"))
        assert len(opted.table) == 360 and set(opted.table["tier"]) == {"llm"}
        # export and pool statistics agree: nothing is judged under the gated rule
        assert _exported(db, tmp_path, "before.txt") == set()
        stats = pool_stats(db, "p", k=5)
        assert stats.judged_pairs == 0
        assert stats.summary["qrels_policy"].startswith("qrels policy: adjudicated > sme > imported > llm")

        cal.create_sample(db, "s", "p", size=200, seed=1)
        label_all(db, "s", truth)
        assert cal.gate(db, "s")["gate"]["verdict"] == "pass"
        assert passed_judge_configurations(db) == (("m1", ""),)
        after = project_qrels(db)
        labelled = set(db.query_df("SELECT query_id, doc_id FROM judgments WHERE source = 'human'")
                       .itertuples(index=False, name=None))
        assert len(after.table) == 360
        for q, d, grade, tier in after.table[["query_id", "item_id", "grade", "tier"]].itertuples(index=False):
            assert tier == ("sme" if (q, d) in labelled else "llm")
            if tier == "sme":
                assert grade == truth[(q, d)]
        exported = _exported(db, tmp_path, "after.txt")
        assert exported == set(zip(after.table["query_id"], after.table["item_id"], after.table["grade"].astype(int)))
        assert pool_stats(db, "p", k=5).judged_pairs == len(exported) == 360
        assert "m1" in after.statement()
    finally:
        db.close()


def test_a_failed_gate_keeps_llm_labels_out(tmp_path):
    db, truth = build_project(tmp_path / "p.duckdb", judge_noise=1.0, seed=3)
    try:
        cal.create_sample(db, "s", "p", size=200, seed=1)
        label_all(db, "s", truth)
        assert cal.gate(db, "s")["gate"]["verdict"] != "pass"
        table = project_qrels(db).table
        n_human = db.query_value("SELECT count(DISTINCT (query_id, doc_id)) FROM judgments WHERE source = 'human'")
        assert set(table["tier"]) == {"sme"} and len(table) == n_human
        exported = _exported(db, tmp_path, "q.txt")
        assert pool_stats(db, "p", k=5).judged_pairs == len(exported) == n_human
        assert len(_exported(db, tmp_path, "llm.txt", source="llm")) == 360  # asking for LLM labels by name
    finally:
        db.close()


def test_synthetic_queries_are_kept_apart_unless_asked(tmp_path):
    import pandas as pd

    from workbench.store.database import insert_frame

    db, _ = build_project(tmp_path / "p.duckdb", judge_noise=0.0)
    try:
        with db.transaction() as tx:
            insert_frame(tx, "synthetic_questions", pd.DataFrame([{
                "query_id": "q00", "chunking": "c", "chunk_id": "d0#0", "doc_id": "d0", "start": 0, "end": 10,
                "generator": "g", "model": "m", "seed": 0, "original": "x", "rewritten": "x",
                "overlap_before": 0.0, "overlap_after": 0.0, "flagged": False}]))
        policy = QrelsPolicy(llm_labels="all")
        every = project_qrels(db, policy=QrelsPolicy(llm_labels="all", synthetic="include")).table
        default = project_qrels(db, policy=policy).table
        only = project_qrels(db, policy=QrelsPolicy(llm_labels="all", synthetic="only")).table
        assert "q00" in set(every["query_id"]) and "q00" not in set(default["query_id"])
        assert set(only["query_id"]) == {"q00"} and len(only) + len(default) == len(every) == 360
        assert "synthetic queries excluded" in project_qrels(db, policy=policy).statement()
    finally:
        db.close()


def test_the_gate_verdict_is_cached_until_one_of_its_inputs_changes(tmp_path):
    from workbench.core.calibration.gate import GateThresholds
    from workbench.services.calibration.workflow import ReportOptions
    from workbench.services.pooling.pools import pool_labels

    db, truth = build_project(tmp_path / "p.duckdb", judge_noise=0.0)
    try:
        cal.create_sample(db, "s", "p", size=200, seed=1)
        label_all(db, "s", truth)
        verdicts.forget()
        start = verdicts.computed()
        assert passed_judge_configurations(db) == (("m1", ""),)
        assert verdicts.computed() - start == 1
        # qrels, export, pool statistics and the pool peek all reuse the verdict: no new bootstrap
        project_qrels(db)
        _exported(db, tmp_path, "a.txt")
        pool_stats(db, "p", k=5)
        pool_labels(db, "doc", None)
        assert verdicts.computed() - start == 1
        # the cached verdict is the one the calibration report gives (the report computes its own)
        assert gate_verdict(db, "s") == cal.gate(db, "s")["gate"]["verdict"] == "pass"
        start = verdicts.computed()
        # another seed, other thresholds: new keys, computed afresh
        assert gate_verdict(db, "s", options=ReportOptions(seed=7)) == "pass"
        strict = GateThresholds(min_pairs=10_000)
        assert gate_verdict(db, "s", strict) == cal.gate(db, "s", thresholds=strict)["gate"]["verdict"] == "inconclusive"
        assert verdicts.computed() - start == 3  # two new keys, and the strict report
        # the configured relevance grade and resamples are part of the key, and decide as the report does
        from workbench.config import load_settings

        settings = load_settings(overrides={"calibration": {"relevant_min_grade": 3, "bootstrap_resamples": 500}},
                                 env={})
        assert passed_judge_configurations(db, settings) == (("m1", ""),)
        assert verdicts.computed() - start == 4
        assert cal.gate(db, "s", options=ReportOptions(threshold=3, n_boot=500))["gate"]["verdict"] == "pass"
        # changed labels: the SMEs relabel the held-out part at random, so the judge no longer agrees
        label_all(db, "s", truth, flip=1.0, seed=5, part="holdout")
        assert passed_judge_configurations(db) == ()
        assert verdicts.computed() - start == 6  # and the report of the relevance grade 3
        assert gate_verdict(db, "s") == cal.gate(db, "s")["gate"]["verdict"] != "pass"
        assert set(project_qrels(db).table["tier"]) == {"sme"}
    finally:
        db.close()


def test_synthetic_labels_by_construction_count_without_the_gate_once_synthetic_queries_are_in(tmp_path):
    import pandas as pd

    from workbench.store.corpus import write_queries
    from workbench.store.database import insert_frame
    from workbench.store.judgments import write_judgments

    db, _ = build_project(tmp_path / "p.duckdb", judge_noise=0.0)  # m1 has not passed the gate
    try:
        with db.transaction() as tx:
            write_queries(tx, pd.DataFrame([{"query_id": "syn1", "text": "what is in d0?", "description": None,
                                             "tags": None}]))
            insert_frame(tx, "synthetic_questions", pd.DataFrame([{
                "query_id": "syn1", "chunking": "c", "chunk_id": "d0#0", "doc_id": "d0", "start": 0, "end": 10,
                "generator": "g", "model": "gen", "seed": 0, "original": "x", "rewritten": "x",
                "overlap_before": 0.0, "overlap_after": 0.0, "flagged": False}]))
            write_judgments(tx, pd.DataFrame([
                # the label synth writes with its question, and an ungated judge's grade on the same query
                {"query_id": "syn1", "doc_id": "d0", "start": 0, "end": 10, "grade": 3, "source": "llm",
                 "assessor": "synthetic", "model": "gen", "status": "ok"},
                {"query_id": "syn1", "doc_id": "d1", "start": 0, "end": 10, "grade": 2, "source": "llm",
                 "assessor": "judge", "model": "m1", "status": "ok"}]))
        only = project_qrels(db, policy=QrelsPolicy(synthetic="only"))
        assert list(zip(only.table["query_id"], only.table["item_id"], only.table["grade"])) == [("syn1", "d0", 3)]
        assert "left out" in only.notes[0]  # the judge's grade on d1 still waits for the gate
        assert "syn1" not in set(project_qrels(db).table["query_id"])  # excluded by default
    finally:
        db.close()


def test_the_gate_verdict_is_stored_with_the_project_for_the_next_command(tmp_path):
    import json

    from workbench.store.database import Database
    from workbench.store.meta import read_meta, set_meta

    db, truth = build_project(tmp_path / "p.duckdb", judge_noise=0.0)
    try:
        cal.create_sample(db, "s", "p", size=200, seed=1)
        label_all(db, "s", truth)
        verdicts.forget()
        assert passed_judge_configurations(db) == (("m1", ""),)
        meta_key = next(k for k in read_meta(db) if k.startswith("judge_verdict:s\x1f"))
        entry = json.loads(read_meta(db)[meta_key])
        assert entry["verdict"] == "pass" and len(entry["key"]) == 64
        # A later command (the process memo empty) reads the stored verdict instead of rerunning the
        # bootstrap: a stored entry saying otherwise for the same inputs is what it answers.
        with db.transaction() as tx:
            set_meta(tx, meta_key, json.dumps({**entry, "verdict": "fail"}))
        verdicts.forget()
        assert passed_judge_configurations(db) == ()
        # An entry for other inputs is never served: one changed held-out label is a new key,
        # computed afresh (still a pass) and stored in place of the old entry.
        item = db.query_df("SELECT position, query_id, doc_id FROM calibration_items WHERE sample = 's' "
                           "AND part = 'holdout' ORDER BY position LIMIT 1").iloc[0]
        cal.save_label(db, "s", "ann", int(item["position"]), (truth[(item["query_id"], item["doc_id"])] + 1) % 4)
        verdicts.forget()
        assert passed_judge_configurations(db) == (("m1", ""),)
        again = json.loads(read_meta(db)[meta_key])
        assert again["key"] != entry["key"] and again["verdict"] == "pass" == cal.gate(db, "s")["gate"]["verdict"]
        with db.transaction() as tx:  # an entry of other inputs: the next reader must compute
            set_meta(tx, meta_key, json.dumps({"key": "other", "verdict": "fail"}))
    finally:
        db.close()
    # a project opened read-only: the verdict is computed, and nothing is written to the file
    ro = Database(tmp_path / "p.duckdb", read_only=True)
    try:
        verdicts.forget()
        assert passed_judge_configurations(ro) == (("m1", ""),)
        assert json.loads(read_meta(ro)[meta_key]) == {"key": "other", "verdict": "fail"}
    finally:
        ro.close()
