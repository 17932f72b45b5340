"""The calibration report and the gate: the judge against the SMEs on a sample's held-out part.

- :func:`report` and :func:`gate`: agreement of one judge configuration with the SMEs on the
  **held-out** part only (the tuning part may have shaped the prompt), re-weighted to the pool
  with the sample's inclusion weights, plus per-slice figures, the worst disagreements, agreement
  among SMEs and the Rogan–Gladen corrected share of relevant pairs in the pool and of each
  pooled run's precision over its judged top-k items (micro-averaged: relevant / judged). The
  verdict itself is computed and stored by :mod:`workbench.services.calibration.verdicts`, the one
  home of the gate.
- :func:`compare_judges`: every configuration against the SMEs on one part, to choose one.
- :func:`result_dict`, :func:`report_json`: the figures as ``workbench agree --format json``
  gives them, and a report as JSON text.
- :func:`judge_reason`: the judge's output for the report's drill-down into disagreements.
"""

from __future__ import annotations

import json
import math

import pandas as pd

from workbench.core.calibration import agreement as core_agreement
from workbench.core.calibration.agreement import AgreementResult, agreement, worst_disagreements
from workbench.core.calibration.gate import GateResult, GateThresholds, decide
from workbench.core.calibration.sample import TUNING
from workbench.services import access, visibility
from workbench.services.calibration import verdicts
from workbench.services.calibration.adjudication import sme_agreement
from workbench.services.calibration.reference import ReportOptions, gated_part, reference_labels
from workbench.services.calibration.samples import sample_info
from workbench.store import calibration as store
from workbench.store.database import Database
from workbench.store.judge_configs import few_shot_by_config


def result_dict(result: AgreementResult, verdict: GateResult) -> dict:
    """The agreement figures in the ``workbench agree --format json`` shape."""
    out = {"n": result.n}
    for name in ("tpr", "tnr", "precision", "kappa", "kappa_graded", "kappa_linear", "kappa_quadratic"):
        out[name] = result.figures[name]
    out["msd"] = result.figures["msd"]
    out["exact"] = result.figures["exact"]
    out["confusion"] = [[float(x) if not float(x).is_integer() else int(x) for x in row] for row in result.confusion]
    # ``confusion`` holds weights when the figures are re-weighted; ``counts`` is always pairs.
    out["counts"] = [[int(round(float(x))) for x in row] for row in result.pair_counts]
    out["relevant_pairs"], out["not_relevant_pairs"] = result.relevant_pairs, result.not_relevant_pairs
    out["ci"] = {name: [lo, hi] for name, (lo, hi) in result.ci.items()}
    out["gate"] = verdict.as_dict()
    out["threshold"] = result.threshold
    out["levels"] = list(result.levels)
    out["bootstrap"] = {"seed": result.seed, "resamples": result.n_boot, "resampling": result.resampling,
                        "stratified": result.stratified,
                        "interval": result.interval, "confidence": result.confidence, "queries": result.n_queries}
    out["notes"] = list(result.notes)
    return out


def report(db: Database, sample: str | None = None, *, thresholds: GateThresholds = GateThresholds(),
           options: ReportOptions = ReportOptions(), judge: str | None = None, record: bool = True) -> dict:
    """The calibration report of a sample (the latest one when ``sample`` is None) for one judge
    configuration: ``judge`` (key, prefix or model), else the sample's own
    (:func:`workbench.services.calibration.verdicts.default_configuration`). Every figure (the
    agreement, the gate, the slices, the disagreements, the observed share of relevant pairs and
    its Rogan–Gladen correction, each run's corrected precision) uses that configuration's grades
    only; ``judge`` in the output names it. With ``record`` the verdict is stored with the
    project: reporting on a configuration gates it (:func:`workbench.services.calibration.verdicts.record`);
    a page that only shows the report passes ``record=False`` and gates on a lead's request."""

    access.require("see_all_labels")
    info = sample_info(db, sample)
    name = info["name"]
    config = _chosen_configuration(db, name, info, judge)
    gate_ = verdicts.gate_configuration(db, name, config, thresholds, options, keep_boot=True)
    if record:
        access.require("sample")  # a stored verdict decides which labels enter the qrels: leads only
        verdicts.record(db, gate_)
    labels = reference_labels(db, name)
    part = gate_.part
    total_items = store.count_items(db, name)
    base = {"sample": name, "pool": info["pool"], "seed": info["seed"], "part": options.part,
            "judge": gate_.config.as_dict(), "items": total_items, "labelled": len(labels),
            "labelled_in_part": len(gated_part(labels, options)), "not_graded_by_judge": gate_.missing,
            "weighted": options.weighted, "threshold": options.threshold}
    result, verdict = gate_.result, gate_.verdict
    if result is None:
        return {**base, "agreement": None, "gate": verdict.as_dict(), "slices": [], "disagreements": [],
                "sme_agreement": sme_agreement(db, name), "corrected_prevalence": None,
                "corrected_precision": []}
    body = result_dict(result, verdict)
    worst = worst_disagreements(part["grade"].to_numpy(), part["judge_grade"].to_numpy(),
                                threshold=options.threshold, limit=options.disagreements)
    disagreements = [
        {"position": int(part.iloc[i]["position"]), "query_id": str(part.iloc[i]["query_id"]),
         "doc_id": str(part.iloc[i]["doc_id"]),
         "chunk_id": None if pd.isna(part.iloc[i]["chunk_id"]) else str(part.iloc[i]["chunk_id"]),
         "sme_grade": int(part.iloc[i]["grade"]), "judge_grade": int(part.iloc[i]["judge_grade"])}
        for i in worst
    ]
    relevant, judged = store.count_judge_relevant(db, name, config)
    corrected = None
    if judged:
        share = core_agreement.corrected_share(relevant, judged, result, seed=options.seed)
        corrected = {"observed": share.observed, "n_observed": share.n_observed, "estimate": share.estimate,
                     "ci": list(share.ci), "clipped": share.clipped, "note": share.note}
    runs = []
    for row in store.run_judged_shares(db, name, options.precision_k, config).itertuples(index=False):
        if int(row.judged) == 0:
            continue
        share = core_agreement.corrected_share(int(row.relevant), int(row.judged), result, seed=options.seed)
        runs.append({"run": row.run, "k": options.precision_k, "judged": int(row.judged),
                     "observed": share.observed, "estimate": share.estimate, "ci": list(share.ci),
                     "note": share.note})
    return {**base, "agreement": body, "gate": verdict.as_dict(), "slices": gate_.slices,
            "disagreements": disagreements, "sme_agreement": sme_agreement(db, name),
            "corrected_prevalence": corrected, "corrected_precision": runs}


def _chosen_configuration(db: Database, sample: str, info: dict, judge: str | None) -> str:
    """The configuration a report or gate is about: ``judge`` among those that graded the
    sample's pairs, else the sample's default."""

    if judge is None:
        return verdicts.default_configuration(db, sample, info)
    graded = list(dict.fromkeys(store.judge_grades_for_sample(db, sample)["config"].astype(str)))
    return verdicts.find_configuration(db, judge, among=graded).key


def compare_judges(db: Database, sample: str | None = None, *, part: str = TUNING,
                   options: ReportOptions = ReportOptions(),
                   thresholds: GateThresholds = GateThresholds()) -> list[dict]:
    """Every judge configuration (:mod:`workbench.store.judge_configs`) that graded the sample's pairs, against the
    SMEs on ``part`` (the tuning part by default: compare and choose there, then gate the chosen
    one on the held-out part once), each with its figures, intervals and the verdict the gate
    would give. Sorted by binary κ, best first; configurations with no labelled pair are left out.
    A few-shot configuration (``judge --few-shot``) is compared without its own examples (they
    are in its prompt): ``few_shot`` is its number of examples (0: zero-shot) and
    ``examples_left_out`` how many of this sample's pairs that removed."""
    info = sample_info(db, sample)
    labels = reference_labels(db, info["name"])
    if part != "all":
        labels = labels[labels["part"] == part]

    grades = store.judge_grades_for_sample(db, info["name"])
    shots = few_shot_by_config(db)
    shots_by_prompt = store.few_shot_configurations(db)  # grades written without a job
    known = {c.key: c for c in verdicts.configurations(db)}
    out = []
    for config, rows in grades.groupby("config", sort=False):
        model, prompt_hash = rows["model"].iloc[0], rows["prompt_hash"].iloc[0]
        merged = labels.merge(rows[["position", "grade"]].rename(columns={"grade": "config_grade"}), on="position")
        few = shots.get(str(config)) or shots_by_prompt.get((str(model), str(prompt_hash)))
        left_out = 0
        if few is not None and few.get("sample") == info["name"]:
            examples = merged["position"].astype(int).isin({int(p) for p in few.get("positions", [])})
            left_out = int(examples.sum())
            merged = merged[~examples]
        if merged.empty:
            continue
        r = agreement(merged["grade"].to_numpy(), merged["config_grade"].to_numpy(), threshold=options.threshold,
                      query_ids=merged["query_id"].astype(str).to_numpy(),
                      weights=merged["weight"].to_numpy() if options.weighted else None,
                      strata=merged["stratum"].to_numpy() if options.weighted else None,
                      seed=options.seed, n_boot=options.n_boot)
        out.append({"config": str(config), "label": verdicts.describe(db, str(config), known).label,
                    "model": model or None, "prompt_hash": prompt_hash or None, "n": r.n,
                    **{k: r.figures[k] for k in ("tpr", "tnr", "precision", "kappa", "kappa_graded", "msd")},
                    "ci": {k: list(r.ci[k]) for k in ("tpr", "tnr", "precision", "kappa", "kappa_graded", "msd")},
                    "verdict": decide(r, thresholds).verdict,
                    "few_shot": int(few["k"]) if few is not None else 0, "examples_left_out": left_out})
    return sorted(out, key=lambda d: -(d["kappa"] if d["kappa"] == d["kappa"] else -2.0))



def gate(db: Database, sample: str | None = None, *, thresholds: GateThresholds = GateThresholds(),
         options: ReportOptions = ReportOptions(), judge: str | None = None) -> dict:
    """The gate verdict of one judge configuration on a sample's held-out part (the ``gate`` of
    :func:`report`, without the rest of the report): ``judge`` (key, prefix or model) or the
    sample's own configuration. The verdict is stored with the project, so gating a
    configuration here admits its labels to the qrels once it passes."""

    access.require("see_all_labels")
    info = sample_info(db, sample)
    name = info["name"]
    gate_ = verdicts.gate_configuration(db, name, _chosen_configuration(db, name, info, judge), thresholds, options)
    access.require("sample")  # a stored verdict decides which labels enter the qrels: leads only
    verdicts.record(db, gate_)
    return {"sample": name, "judge": gate_.config.as_dict(), "gate": gate_.verdict.as_dict(), "n": len(gate_.part),
            "not_graded_by_judge": gate_.missing}


def judge_reason(db: Database, sample: str, position: int) -> dict:
    """The judge's output for an item, for the report's drill-down into disagreements (items
    an SME has labelled already; the labelling page uses
    :func:`~workbench.services.calibration.labelling.judge_output`). Leads and viewers only."""

    visibility.require_read("judge_output")
    return store.read_judge_output(db, sample, position) or {}


def report_json(body: dict) -> str:
    """A report as JSON text: NaN and infinities as null, numpy numbers as numbers."""
    def clean(value):
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        if hasattr(value, "item") and not isinstance(value, (str, bytes)):
            value = value.item()
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value

    return json.dumps(clean(body), indent=2, ensure_ascii=False, default=str)
