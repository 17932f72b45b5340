"""Judge-corrected metric intervals over the project's stored runs: ``eval --runs A,B --labels
corrected``, ``compare --runs A,B --labels corrected`` and the Evaluate page's "judge, corrected by
SME labels".

The labelled sample is a calibration sample drawn by the **query design**
(``workbench calibrate sample --design queries --queries N``,
:func:`workbench.core.calibration.sample.draw_query_sample`): a random subset of the queries whose
every pool pair has a judge grade, with every pool pair of each drawn query for the SMEs to grade.

* *Judge values*: every run scored on one judge configuration's labels (the latest ``ok`` grade of
  each pool pair by that configuration: the one named, else the only one that graded the pool,
  else the one of them that passed the gate, else refused listing them) over every query of the sample's population
  (stored with the sample when it was drawn).
* *Unanswerable queries* (:mod:`workbench.services.qrels.answerability`) are left out on both
  sides, exactly as ``eval`` leaves them out of ranking measures, and the counts say so.
* *Human values*: every run scored on the SMEs' reference labels (:func:`workbench.services.
  calibration.reference.reference_labels`: adjudicated, else the lower median) of the drawn queries
  that are **fully labelled** (every one of their pairs has a reference grade; a query with a
  pair skipped or not yet labelled is not used, and the count says so).

Both go to the same computation as ``workbench ppi`` on files
(:func:`workbench.services.evaluation.ppi.score_values`, :func:`~workbench.services.evaluation.ppi.estimate`,
:func:`~workbench.services.evaluation.ppi.plan`), so exporting the same labels and runs as files and
running ``workbench ppi`` gives the same numbers.

Level: the pool's. A chunk pool scores chunk runs of its chunking by chunk; asked for document
level (or given document runs) a document's grade is the highest grade of its pooled chunks, on
both sides alike. A document pool scores by document.

Reading both people's labels and the judge's grades, the estimate is for leads and viewers
(:func:`workbench.services.visibility.require_read`): annotators label blind. Refused in one line
(:class:`~workbench.errors.InputError`, exit 3): no query-design sample, fewer than 2 fully labelled
queries (5 for a plan).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa

from workbench.core.metrics.qrels_and_runs import Qrels
from workbench.errors import ConfigError, InputError, clip
from workbench.services import visibility
from workbench.services.calibration import verdicts
from workbench.services.calibration.reference import reference_labels
from workbench.services.evaluation.evaluate import check_measures, stored_run
from workbench.services.evaluation.ppi import (
    MIN_PILOT,
    PerQueryValues,
    PlanReport,
    PPIReport,
    estimate,
    plan,
    score_values,
)
from workbench.services.qrels.answerability import unanswerable_ids
from workbench.store import calibration as store
from workbench.store.pools import read_pool
from workbench.store.runs import read_run_info

NO_SAMPLE = ("no query-design calibration sample: draw one with {command:calibrate sample --pool POOL "
             "--design queries --queries N}, then grade every pair of its queries on the Label page")


@dataclass(frozen=True)
class QuerySampleStatus:
    """A query-design sample's progress: queries drawn, fully labelled, in the population."""

    sample: str
    pool: str
    seed: int
    drawn: int
    labelled: int
    population: int
    labelled_ids: tuple[str, ...]


@dataclass(frozen=True)
class ProjectPPI:
    """The PPI++ report of stored runs, with what it rests on."""

    status: QuerySampleStatus
    level: str
    chunking: str | None
    report: PPIReport
    values: PerQueryValues
    judge: object = None  # verdicts.JudgeConfiguration
    unanswerable: tuple[str, ...] = ()

    def statement(self) -> str:
        s = self.status
        left = (f"; {len(self.unanswerable)} unanswerable queries left out (as eval does)" if self.unanswerable
                else "")
        return (f"judge corrected by SME labels (PPI++): {self.values.n_labelled} labelled queries of {s.drawn} drawn "
                f"(query sample {s.sample!r}, seed {s.seed}), labels of judge configuration {self.judge.label} on "
                f"{len(self.values.query_ids)} queries of pool {s.pool!r}; {self.level} level{left}")

    def to_json(self) -> dict:
        """The ``workbench ppi`` JSON object plus ``labels``, ``sample``, ``queries_drawn``,
        ``judge`` (the configuration: key, label, model, ...) and ``unanswerable_left_out``."""
        return {"labels": "corrected", "sample": self.status.sample, "seed": self.status.seed,
                "queries_drawn": self.status.drawn, "judge": self.judge.as_dict(),
                "unanswerable_left_out": list(self.unanswerable), **self.report.to_json()}


def _query_sample(db, sample: str | None) -> dict:

    names = store.query_design_samples(db)
    if sample is None:
        if not names:
            raise InputError(NO_SAMPLE)
        sample = names[0]
    elif sample not in names:
        raise InputError(f"{clip(sample)} is not a query-design calibration sample; " + NO_SAMPLE)
    return store.read_sample(db, sample)


def sample_status(db, sample: str | None = None) -> QuerySampleStatus | None:
    """The newest (or named) query-design sample's progress; None when there is none. Counts
    only, no grade: any role may read it (the Evaluate and Label pages show it)."""

    try:
        info = _query_sample(db, sample)
    except InputError:
        if sample is None:
            return None
        raise
    items = store.read_sample_items(db, info["name"])
    labels = reference_labels(db, info["name"])
    graded = set(labels["position"].astype(int)) if len(labels) else set()
    per_query = items.assign(done=items["position"].astype(int).isin(graded)).groupby("query_id")["done"].all()
    done = tuple(sorted(str(q) for q, ok in per_query.items() if ok))
    return QuerySampleStatus(info["name"], info["pool"], int(info["seed"]), int(items["query_id"].nunique()),
                             len(done), int(info["spec"].get("population_size", 0)), done)


def _scope(db, pool: dict, runs: Sequence[str], level: str | None, chunking: str | None) -> tuple[str, str | None]:

    info = read_run_info(db, list(runs))
    unknown = [r for r in runs if r not in set(info["name"])]
    if unknown:
        known = ", ".join(read_run_info(db)["name"]) or "none yet"
        raise InputError(f"no run named {clip(unknown[0])} in the project; known runs: {known}")
    run_levels = set(info["level"].astype(str))
    run_chunkings = {str(c) for c in info["chunking"].dropna()}
    if pool["level"] == "doc":
        if level == "chunk":
            raise ConfigError(f"pool {pool['name']!r} pools documents: its labels score documents; drop {{field:level chunk}}")
        return "doc", None
    if level == "doc" or run_levels != {"chunk"}:
        return "doc", None
    if chunking is not None and chunking != pool["chunking"]:
        raise ConfigError(f"pool {pool['name']!r} pools chunks of {pool['chunking']!r}, not {chunking!r}; "
                          f"score its chunking or {{set_field:level doc}}")
    if run_chunkings != {pool["chunking"]}:
        raise ConfigError(f"the runs are chunk runs of {', '.join(sorted(run_chunkings))} and pool {pool['name']!r} "
                          f"pools chunks of {pool['chunking']!r}; {{set_field:level doc}} to score them by document")
    return "chunk", pool["chunking"]


def _qrels(frame: pd.DataFrame, level: str, source: str):
    """Engine qrels from ``query_id, doc_id, chunk_id, grade`` rows: by chunk, or by document
    with a document's highest grade."""


    if level == "chunk":
        items = frame["chunk_id"].where(frame["chunk_id"].notna(), frame["doc_id"]).astype(str)
        table = pd.DataFrame({"query_id": frame["query_id"].astype(str), "item": items,
                              "grade": frame["grade"].astype("int64")})
    else:
        table = (pd.DataFrame({"query_id": frame["query_id"].astype(str), "item": frame["doc_id"].astype(str),
                               "grade": frame["grade"].astype("int64")})
                 .groupby(["query_id", "item"], as_index=False, sort=True)["grade"].max())
    return Qrels(pa.array(table["query_id"].tolist(), type=pa.string()), pa.array(table["item"].tolist(), type=pa.string()),
                 table["grade"].to_numpy(dtype=np.int64), source=source)


def judge_configuration(db, pool: str, judge: str | None):
    """The configuration whose labels are corrected (module docstring)."""

    graded = store.pool_configurations(db, pool)
    if judge is not None:
        return verdicts.find_configuration(db, judge, among=graded)
    if len(graded) == 1:  # PPI++ is valid whatever the judge's quality: one judge is no choice to make
        return verdicts.describe(db, graded[0])
    passed = [k for k in verdicts.passed_configurations(db) if k in set(graded)]
    if len(passed) == 1:
        return verdicts.describe(db, passed[0])
    known = {c.key: c for c in verdicts.configurations(db)}
    listed = verdicts.choices([known[k] for k in graded if k in known])
    if not passed:
        raise ConfigError(f"no judge configuration that graded pool {pool!r} has passed the calibration gate; name "
                          f"the one to correct with {{field:judge CONFIG}}: {listed}")
    raise ConfigError(f"{len(passed)} judge configurations that graded pool {pool!r} passed the gate; name the one to "
                      f"correct with {{field:judge CONFIG}}: {listed}")


def corrected_values(db, runs: Sequence[str], measures: Sequence[str], *, sample: str | None = None,
                     level: str | None = None, chunking: str | None = None, rel: int = 1,
                     min_labelled: int = 2, judge: str | None = None):
    """Per-query values of the stored ``runs`` on one judge configuration's and the SMEs' labels
    (module docstring), with the sample's status, the level scored at, the configuration and the
    unanswerable queries left out."""

    visibility.require_read("judge_output")
    visibility.require_read("others_labels")
    check_measures(measures)
    runs = list(dict.fromkeys(runs))
    if not runs:
        raise ConfigError("give at least one stored run, e.g. {field:runs bm25,dense}")
    info = _query_sample(db, sample)
    status = sample_status(db, info["name"])
    if status.labelled < min_labelled:
        what = f"a plan needs a pilot of at least {min_labelled}" if min_labelled >= MIN_PILOT else \
            f"corrected labels need at least {min_labelled}"
        raise InputError(f"query sample {info['name']!r}: {status.labelled} of its {status.drawn} queries are fully "
                         f"labelled; {what} (grade every pair of a query on the Label page)")
    pool = read_pool(db, info["pool"])
    level, chunking = _scope(db, pool, runs, level, chunking)

    config = judge_configuration(db, info["pool"], judge)
    unanswerable = set(map(str, unanswerable_ids(db)))
    population = set(info["spec"].get("population", [])) - unanswerable
    judged = store.judged_pool_pairs(db, info["pool"], config=config.key)
    judged = judged[judged["query_id"].astype(str).isin(population)].rename(columns={"judge_grade": "grade"})
    labels = reference_labels(db, info["name"])
    human = labels[labels["query_id"].astype(str).isin(set(status.labelled_ids) - unanswerable)]
    if human["query_id"].nunique() < min_labelled:
        raise InputError(f"query sample {info['name']!r}: {human['query_id'].nunique()} fully labelled answerable "
                         f"queries; at least {min_labelled} are needed")
    judge_q = _qrels(judged, level, f"judge labels of pool {info['pool']}")
    human_q = _qrels(human, level, f"SME labels of query sample {info['name']}")

    def scored():
        for name in runs:
            run = stored_run(db, name, level)
            if not len(run):
                raise InputError(f"run {clip(name)} has no rows")
            yield name, run, f"stored run {name}"

    values = score_values(human_q, judge_q, scored(), measures, rel=rel, min_labelled=min_labelled,
                          human_path=None, judge_path=None)
    left_out = tuple(sorted(q for q in unanswerable if q in set(info["spec"].get("population", []))))
    return values, status, level, chunking, config, left_out


def corrected_project(db, runs: Sequence[str], measures: Sequence[str], *, sample: str | None = None,
                      level: str | None = None, chunking: str | None = None, rel: int = 1,
                      confidence: float = 0.95, judge: str | None = None) -> ProjectPPI:
    """PPI++ estimates of every stored run's mean and every run's difference from the first
    (:func:`workbench.services.evaluation.ppi.estimate`) on the project's labels."""
    values, status, level, chunking, config, left_out = corrected_values(
        db, runs, measures, sample=sample, level=level, chunking=chunking, rel=rel, judge=judge)
    return ProjectPPI(status, level, chunking, estimate(values, confidence=confidence), values, config, left_out)


def corrected_plan(db, runs: Sequence[str], measures: Sequence[str], half_width: float, *,
                   sample: str | None = None, level: str | None = None, chunking: str | None = None,
                   rel: int = 1, confidence: float = 0.95, judge: str | None = None) -> tuple[PlanReport, QuerySampleStatus]:
    """Labelled queries needed for ``half_width`` (``ppi --plan``'s
    :func:`workbench.services.evaluation.ppi.plan`), the sample's fully labelled queries as the pilot."""
    values, status, *_ = corrected_values(db, runs, measures, sample=sample, level=level, chunking=chunking,
                                          rel=rel, min_labelled=MIN_PILOT, judge=judge)
    return plan(values, half_width, confidence=confidence), status
