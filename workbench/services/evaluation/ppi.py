"""Judge-corrected metric intervals from files: what ``workbench ppi`` computes.

Inputs: HUMAN_QRELS (the human labels of a random sample of queries: every query present in it
is a labelled query), JUDGE_QRELS (the judge's labels for every query: its queries are the
population) and run files. The target is each run's mean of a measure over every query of
JUDGE_QRELS as human labels would score them; PPI++ (:mod:`workbench.core.metrics.ppi`)
estimates it from the judge's per-query values on all queries and the human ones on the sample.

Per-query values come from the metric engine (:func:`workbench.core.metrics.evaluation.evaluate`)
with ``include_no_relevant=True``: a query whose labels (judge's or human) hold no relevant item
scores 0, as trec_eval scores it, so every query has a value on both sides; a query the run
does not answer scores 0 (as ``eval``).

* :func:`load_values` reads the files once and returns the per-query values.
* :func:`estimate` turns them into a :class:`PPIReport` (runs and paired differences against
  the first run, each with its PPI++ and human-only interval).
* :func:`plan` is the power analysis: labelled queries needed for a target half-width.
* :func:`ppi_files` does both steps of an estimate from files.

Refused with :class:`~workbench.errors.InputError` (exit 3): fewer than 2 labelled queries (5 for
a plan), a labelled query missing from JUDGE_QRELS, a measure the engine does not know,
unreadable or empty files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from workbench import lazylibs
from workbench.core.metrics.measures import parse_measures
from workbench.errors import ConfigError, InputError, clip
from workbench.services import lazy
from workbench.services.evaluation.evaluate import run_names

if TYPE_CHECKING:
    import numpy as np

    from workbench.core.metrics.ppi import PPIEstimate, SampleSizePlan

#: a plan rests on the pilot's variances: fewer than this many labelled queries is too rough
MIN_PILOT = 5


@dataclass(frozen=True)
class PerQueryValues:
    """Per-query values of every run: ``judge[measure][run]`` over ``query_ids`` (all queries of
    JUDGE_QRELS, sorted), ``human[measure][run]`` over ``labelled`` (positions in ``query_ids``
    of the queries of HUMAN_QRELS, in that order). ``judge_no_relevant`` lists the queries whose
    judge labels hold no relevant item at some measure's threshold (scored 0)."""

    query_ids: list[str]
    labelled: np.ndarray
    runs: list[str]
    measures: list[str]
    judge: dict[str, dict[str, np.ndarray]]
    human: dict[str, dict[str, np.ndarray]]
    judge_no_relevant: tuple[str, ...] = ()
    run_files: dict[str, str] = field(default_factory=dict)

    @property
    def n_labelled(self) -> int:
        return len(self.labelled)

    @property
    def n_unlabelled(self) -> int:
        return len(self.query_ids) - len(self.labelled)

    def subset(self, labelled_ids: Sequence[str]) -> PerQueryValues:
        """The same values with only ``labelled_ids`` (a subset of the labelled queries) kept
        as labelled: what a smaller HUMAN_QRELS would give (a query's values depend on its own
        labels only). Used by the coverage benchmark."""

        position = {q: i for i, q in enumerate(self.query_ids)}
        row = {int(p): k for k, p in enumerate(self.labelled)}
        keep = lazylibs.numpy.array([position[q] for q in labelled_ids], dtype=lazylibs.numpy.int64)
        rows = lazylibs.numpy.array([row[int(p)] for p in keep], dtype=lazylibs.numpy.int64)
        human = {m: {r: v[rows] for r, v in by_run.items()} for m, by_run in self.human.items()}
        return PerQueryValues(self.query_ids, keep, self.runs, self.measures, self.judge, human,
                              self.judge_no_relevant, self.run_files)


def _query_set(qrels) -> list[str]:
    return sorted(lazy.core_metrics_arrow_buffers.dictionary_encode(qrels.query_ids).dictionary.to_pylist())


def _column(result, measure: str, ids: list[str]):
    """The per-query values of ``measure`` in the order of ``ids`` (every id must be scored)."""

    scored = dict(zip(result.query_ids.astype(str).tolist(), result.scores[measure].tolist()))
    values = lazylibs.numpy.array([scored.get(q, lazylibs.numpy.nan) for q in ids], dtype=lazylibs.numpy.float64)
    if lazylibs.numpy.isnan(values).any():  # the engine scores every qrels query with include_no_relevant
        missing = ids[int(lazylibs.numpy.flatnonzero(lazylibs.numpy.isnan(values))[0])]
        raise InputError(f"no {measure} value for query {clip(missing)}")
    return values


def load_values(human_qrels: str | Path, judge_qrels: str | Path, runs: Sequence[str | Path],
                measures: Sequence[str], *, rel: int = 1, min_labelled: int = 2) -> PerQueryValues:
    """Read the files and score every run on both qrels (module docstring)."""

    if not measures:
        raise ConfigError("give at least one measure, e.g. -m ndcg@10 -m 'AP(rel=2)@100'")
    if not runs:
        raise ConfigError("give at least one run file")
    parse_measures(list(dict.fromkeys(measures)))  # an unknown measure: one line, exit 3, before reading any file
    human_q = lazy.core_metrics_readers.read_qrels(human_qrels)
    judge_q = lazy.core_metrics_readers.read_qrels(judge_qrels)

    def read_runs():
        for name, path in zip(run_names(runs), runs):
            run = lazy.core_metrics_readers.read_trec_run(path, name=name)
            if not len(run):
                raise InputError("the run has no result lines", path=str(path))
            yield name, run, str(path)

    return score_values(human_q, judge_q, read_runs(), measures, rel=rel, min_labelled=min_labelled,
                        human_path=str(human_qrels), judge_path=str(judge_qrels))


def score_values(human_q, judge_q, runs, measures: Sequence[str], *, rel: int = 1, min_labelled: int = 2,
                 human_path: str | None = None, judge_path: str | None = None) -> PerQueryValues:
    """Score every run on both qrels (engine :class:`Qrels`): ``runs`` yields ``(name, Run,
    where)`` (``where`` a file path or a description). What :func:`load_values` does after
    reading the files, shared with the project mode (:mod:`workbench.services.evaluation.ppi_project`)."""

    measures = list(dict.fromkeys(measures))
    parsed = parse_measures(measures)
    judge_name = judge_path or "the judge labels"
    if not len(judge_q):
        raise InputError("no judgments in the judge qrels", path=judge_path)
    query_ids = _query_set(judge_q)
    labelled_ids = _query_set(human_q) if len(human_q) else []
    position = {q: i for i, q in enumerate(query_ids)}
    missing = [q for q in labelled_ids if q not in position]
    if missing:
        raise InputError(
            f"{len(missing)} labelled queries are not in the judge qrels {clip(judge_name)} "
            f"(e.g. {clip(missing[0])}): the judge must label every query of the human sample",
            path=human_path)
    if len(labelled_ids) < min_labelled:
        need = (f"a plan needs a pilot of at least {min_labelled}" if min_labelled >= MIN_PILOT
                else f"PPI needs at least {min_labelled}")
        raise InputError(
            f"{len(labelled_ids)} labelled queries; {need} queries with human labels (a random sample of "
            "the judge's queries)", path=human_path)
    names: list[str] = []
    files: dict[str, str] = {}
    judge: dict[str, dict[str, lazylibs.numpy.ndarray]] = {m: {} for m in measures}
    human: dict[str, dict[str, lazylibs.numpy.ndarray]] = {m: {} for m in measures}
    no_relevant: set[str] = set()
    for name, run, where in runs:
        names.append(name)
        files[name] = where
        on_judge = lazy.core_metrics_evaluation.evaluate(judge_q, run, measures, rel=rel, include_no_relevant=True)
        on_human = lazy.core_metrics_evaluation.evaluate(human_q, run, measures, rel=rel, include_no_relevant=True)
        for m in measures:
            judge[m][name] = _column(on_judge, m, query_ids)
            human[m][name] = _column(on_human, m, labelled_ids)
    if not names:
        raise ConfigError("give at least one run")
    # queries without a relevant judge label at a measure's threshold (scored 0 there)
    judged_query = lazylibs.numpy.asarray(judge_q.query_ids.to_pylist(), dtype=object)
    for threshold in {rel if measure.rel is None else measure.rel for _, measure in parsed}:
        relevant = set(judged_query[judge_q.grades >= threshold])
        no_relevant.update(q for q in query_ids if q not in relevant)
    return PerQueryValues(query_ids=query_ids,
                          labelled=lazylibs.numpy.array([position[q] for q in labelled_ids], dtype=lazylibs.numpy.int64),
                          runs=names, measures=measures, judge=judge, human=human,
                          judge_no_relevant=tuple(sorted(no_relevant)), run_files=files)


@dataclass(frozen=True)
class PPIReport:
    """PPI++ estimates: ``runs[measure][run]`` and ``differences[measure][run]`` (run minus
    the first run), each a :class:`~workbench.core.metrics.ppi.PPIEstimate`."""

    n_labelled: int
    n_unlabelled: int
    first_run: str
    confidence: float
    runs: dict[str, dict[str, PPIEstimate]]
    differences: dict[str, dict[str, PPIEstimate]]
    judge_no_relevant: tuple[str, ...] = ()

    def to_json(self) -> dict:
        """The ``workbench ppi --format json`` object (the documented contract, nothing more)."""
        def interval(i) -> list[float]:
            return [i.low, i.high]

        measures = {}
        for m, by_run in self.runs.items():
            measures[m] = {
                "runs": {r: {"estimate": e.ppi.estimate, "ci": interval(e.ppi),
                             "human_only_ci": interval(e.human_only), "judge_only": e.judge_only,
                             "lambda": e.lam} for r, e in by_run.items()},
                "differences": {r: {"vs": self.first_run, "estimate": e.ppi.estimate, "ci": interval(e.ppi),
                                    "human_only_ci": interval(e.human_only)}
                                for r, e in self.differences[m].items()},
            }
        return {"n_labelled": self.n_labelled, "n_unlabelled": self.n_unlabelled, "measures": measures}


def _checked_confidence(confidence: float) -> float:
    if not 0 < confidence < 1:
        raise ConfigError(f"{{field:confidence}} must be strictly between 0 and 1 (e.g. 0.95), got {confidence}")
    return float(confidence)


def estimate(values: PerQueryValues, *, confidence: float = 0.95) -> PPIReport:
    """PPI++ for every run's mean and every run's difference from the first run."""

    confidence = _checked_confidence(confidence)
    first = values.runs[0]
    runs, diffs = {}, {}
    for m in values.measures:
        f, y = values.judge[m], values.human[m]
        runs[m] = {r: lazy.core_metrics_ppi.ppi_mean(y[r], f[r], values.labelled, confidence=confidence) for r in values.runs}
        diffs[m] = {r: lazy.core_metrics_ppi.ppi_mean_difference(y[first], y[r], f[first], f[r], values.labelled, confidence=confidence)
                    for r in values.runs[1:]}
    return PPIReport(n_labelled=values.n_labelled, n_unlabelled=values.n_unlabelled, first_run=first,
                     confidence=confidence, runs=runs, differences=diffs,
                     judge_no_relevant=values.judge_no_relevant)


def ppi_files(human_qrels: str | Path, judge_qrels: str | Path, runs: Sequence[str | Path],
              measures: Sequence[str], *, rel: int = 1, confidence: float = 0.95) -> PPIReport:
    """``workbench ppi``: :func:`load_values` then :func:`estimate`."""
    _checked_confidence(confidence)
    return estimate(load_values(human_qrels, judge_qrels, runs, measures, rel=rel), confidence=confidence)


@dataclass(frozen=True)
class PlanReport:
    """Labelled queries needed for ``half_width``: ``runs[measure][run]`` and
    ``differences[measure][run]``, each a :class:`~workbench.core.metrics.ppi.SampleSizePlan`."""

    n_pilot: int
    n_total: int
    half_width: float
    confidence: float
    first_run: str
    runs: dict[str, dict[str, SampleSizePlan]]
    differences: dict[str, dict[str, SampleSizePlan]]

    def to_json(self) -> dict:
        def row(p) -> dict:
            return {"n_ppi": p.n_ppi, "n_human": p.n_human, "lambda": p.lam, "sd_ppi": p.sd_ppi,
                    "sd_human": p.sd_human}

        return {
            "n_pilot": self.n_pilot, "n_total": self.n_total, "half_width": self.half_width,
            "confidence": self.confidence,
            "measures": {m: {"runs": {r: row(p) for r, p in by_run.items()},
                             "differences": {r: {"vs": self.first_run, **row(p)}
                                             for r, p in self.differences[m].items()}}
                         for m, by_run in self.runs.items()},
        }


def plan(values: PerQueryValues, half_width: float, *, confidence: float = 0.95) -> PlanReport:
    """How many labelled queries give ``half_width`` on each run's mean and each difference
    from the first run, with PPI++ and with human labels alone (the labelled queries are the
    pilot; :func:`workbench.core.metrics.ppi.plan_sample_size`)."""

    confidence = _checked_confidence(confidence)
    if not half_width > 0:
        raise ConfigError(f"{{field:half_width}} must be positive (e.g. 0.05), got {half_width}")
    if values.n_labelled < MIN_PILOT:
        raise InputError(f"a plan needs a pilot of at least {MIN_PILOT} labelled queries, got {values.n_labelled}")
    first = values.runs[0]
    runs, diffs = {}, {}
    for m in values.measures:
        f, y = values.judge[m], values.human[m]
        runs[m] = {r: lazy.core_metrics_ppi.plan_sample_size(y[r], f[r], values.labelled, half_width, confidence=confidence)
                   for r in values.runs}
        diffs[m] = {r: lazy.core_metrics_ppi.plan_sample_size(lazylibs.numpy.asarray(y[r]) - y[first], lazylibs.numpy.asarray(f[r]) - f[first], values.labelled,
                                                              half_width, confidence=confidence) for r in values.runs[1:]}
    return PlanReport(n_pilot=values.n_labelled, n_total=len(values.query_ids), half_width=float(half_width),
                      confidence=confidence, first_run=first, runs=runs, differences=diffs)
