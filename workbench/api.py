"""The whole loop as a Python API, for notebooks and scripts.

Thin over :mod:`workbench.services`, as the CLI and the app are: every method opens the project
for the one operation it runs and closes it again (so the app or a CLI command can use the same
file between two calls), and every failure raises the typed errors of :mod:`workbench.errors`
(:class:`~workbench.errors.InputError` for bad input, :class:`~workbench.errors.ConfigError` for a
bad option, :class:`~workbench.errors.StoreError` for a database that cannot be used as asked).

::

    from workbench.api import Project

    project = Project.create("demo.duckdb", demo=True)   # corpus, queries, chunks, a bm25 run, a pool
    project.judge("demo", model="offline-lexical")        # blocking; progress=callback
    sample = project.calibration_sample("demo", seed=0)
    ...                                                   # SMEs label it (app, or project.label)
    project.gate(sample.name).verdict                     # "pass", "fail" or "inconclusive"
    result = project.evaluate(runs=["bm25"], measures=["ndcg@10", "P@5"])
    result.to_pandas()                                    # one row per run, one column per measure

Results are dataclasses (the services' own where a service defines the result: ``chunk``,
``retrieve``, ``pool`` and the imports); each has ``to_pandas()``. :meth:`Project.qrels` returns
the metric engine's :class:`~workbench.core.metrics.qrels_and_runs.Qrels`, the type
:func:`workbench.evaluate` takes, and :meth:`Project.run` a stored run as its
:class:`~workbench.core.metrics.qrels_and_runs.Run`.

Settings resolve as for the CLI (defaults < ``config/workbench.toml`` or ``config=`` < environment
< the keyword arguments a method takes), so a method without options does what the matching
command does without flags.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from workbench import api_lazy as lazy
from workbench import lazylibs
from workbench.errors import ConfigError, InputError, WorkbenchError, render_text
from workbench.services.judge.request import OPTIONS as JUDGE_OPTIONS
from workbench.services.judge.request import field_arguments, from_keywords, keywords_doc
from workbench.services.retrieval.registry import RETRIEVERS, make_options, run_retriever

if TYPE_CHECKING:
    import pandas as pd

    from workbench.config import Settings
    from workbench.core.metrics.evaluation import EvaluationResult
    from workbench.core.metrics.qrels_and_runs import Qrels, Run
    from workbench.services.chunking import ChunkingSummary as Chunking
    from workbench.services.ingest.result import ImportResult as ImportSummary
    from workbench.services.judge.runner import Progress
    from workbench.services.pooling.pools import PoolSummary as Pool
    from workbench.services.retrieval.runs import RunSummary as RunInfo

__all__ = [
    "CalibrationReport", "CalibrationSample", "Chunking", "Comparison", "Evaluation", "GateResult",
    "ImportSummary", "JudgeReport", "LearnedJudge", "Pool", "Project", "RunInfo",
]

Labels = Literal["merged", "human", "llm"]
Retriever = str  # a name of workbench.services.retrieval.registry.RETRIEVERS


def _frame(record: Mapping[str, Any]):
    return lazylibs.pandas.DataFrame([dict(record)])


# -- results --------------------------------------------------------------------------------------

#: Result types the services define, returned as they are (one type, one set of fields) under
#: the names the API has always used: ``Chunking`` is what :meth:`Project.chunk` returns,
#: :class:`~workbench.services.chunking.ChunkingSummary`; ``RunInfo`` what
#: :meth:`Project.retrieve` returns, :class:`~workbench.services.retrieval.runs.RunSummary`;
#: ``Pool`` what :meth:`Project.pool` returns, :class:`~workbench.services.pooling.pools.PoolSummary`;
#: ``ImportSummary`` what the imports return, :class:`~workbench.services.ingest.result.ImportResult`.
#: Resolved on first use, so importing this module stays cheap.
_SERVICE_TYPES = {"Chunking": ("workbench.services.chunking", "ChunkingSummary"),
                  "RunInfo": ("workbench.services.retrieval.runs", "RunSummary"),
                  "Pool": ("workbench.services.pooling.pools", "PoolSummary"),
                  "ImportSummary": ("workbench.services.ingest.result", "ImportResult")}


def __getattr__(name: str):
    if name in _SERVICE_TYPES:
        module, attribute = _SERVICE_TYPES[name]
        return getattr(import_module(module), attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

@dataclass(frozen=True)
class JudgeReport:
    """A judge job after :meth:`Project.judge`: ``state`` is ``finished`` unless it stopped early
    (``budget``, ``cancelled``, ``batch``, ...; calling judge again resumes it)."""

    job_id: int
    pool: str
    state: str
    model: str
    offline: bool
    total: int
    judged: int
    ok: int
    invalid: int
    failed: int
    sent: int
    cached: int
    cost_usd: float | None
    seconds: float
    summary: str

    @property
    def finished(self) -> bool:
        return self.state == "finished"

    def to_pandas(self) -> pd.DataFrame:
        return _frame({f.name: getattr(self, f.name) for f in fields(self) if f.name != "summary"})


@dataclass(frozen=True)
class CalibrationSample:
    """A calibration sample drawn from a judged pool: ``holdout`` items feed the gate, ``tuning``
    items may guide the judge's prompt."""

    name: str
    pool: str
    seed: int
    size: int
    holdout: int
    tuning: int
    queries: int
    by_judge_grade: dict[int, int]
    notes: tuple[str, ...] = ()

    def to_pandas(self) -> pd.DataFrame:
        return _frame({f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("by_judge_grade", "notes")})


@dataclass(frozen=True)
class GateResult:
    """The trust gate on a sample's held-out part: ``verdict`` is ``pass``, ``fail`` or
    ``inconclusive`` (the exit status of ``workbench calibrate gate`` is 0, 1, 2)."""

    sample: str
    verdict: str
    reasons: tuple[str, ...]
    n: int
    more_labels_needed: int | None
    #: The judge configuration's key (:mod:`workbench.services.calibration.verdicts`).
    judge: str | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def to_pandas(self) -> pd.DataFrame:
        return _frame({"sample": self.sample, "verdict": self.verdict, "n": self.n,
                       "more_labels_needed": self.more_labels_needed, "reasons": "; ".join(self.reasons)})


_FIGURES = ("tpr", "tnr", "precision", "kappa", "kappa_graded", "kappa_linear", "kappa_quadratic", "msd", "exact")


@dataclass(frozen=True)
class CalibrationReport:
    """The judge's agreement with the SMEs on a sample's part (``workbench calibrate report``).

    ``figures`` maps each figure (``tpr``, ``tnr``, ``precision``, ``kappa``, ...) to its value and
    ``intervals`` to its bootstrap interval; both are empty before any item of the part is labelled.
    ``body`` is the full report, the shape ``calibrate report --format json`` prints."""

    sample: str
    pool: str
    part: str
    items: int
    labelled: int
    labelled_in_part: int
    gate: GateResult
    figures: dict[str, float]
    intervals: dict[str, tuple[float, float]]
    body: dict = field(repr=False, default_factory=dict)

    def to_pandas(self) -> pd.DataFrame:
        """One row per agreement figure: ``figure``, ``value``, ``low``, ``high``."""

        nan = float("nan")
        return lazylibs.pandas.DataFrame([{"figure": name, "value": value, "low": self.intervals.get(name, (nan, nan))[0],
                                           "high": self.intervals.get(name, (nan, nan))[1]}
                                          for name, value in self.figures.items()], columns=["figure", "value", "low", "high"])


@dataclass(frozen=True)
class LearnedJudge:
    """A judge learned from a sample's tuning labels (:meth:`Project.judge_learn`): its
    configuration key, the chosen model, the operating point (``rule`` ``targets``: it meets the
    gate's TPR/TNR targets cross-validated on the tuning part; ``kappa``: none did, the largest
    κ) with its cross-validated figures, and the grades it gave the pool. It is trusted only once
    :meth:`Project.gate` passes it (``judge=config``) on the held-out part, which it never saw."""

    config: str
    label: str
    pool: str
    sample: str
    sources: tuple[str, ...]
    features: tuple[str, ...]
    tuning: int
    relevant: int
    model: str
    threshold: float
    rule: str
    cv_tpr: float
    cv_tnr: float
    cv_kappa: float
    graded: int
    grade_counts: dict[int, int]
    seed: int
    created: bool
    notes: tuple[str, ...] = ()
    summary: str = field(repr=False, default="")

    def to_pandas(self) -> pd.DataFrame:
        return _frame({f.name: getattr(self, f.name) for f in fields(self)
                       if f.name not in ("features", "grade_counts", "notes", "summary", "sources")})


@dataclass(frozen=True)
class Evaluation:
    """Stored runs scored against the project's qrels (``workbench eval --runs``).

    ``aggregate`` is ``{run: {measure: mean}}``, as the CLI's JSON ``aggregate`` per run;
    ``results`` holds each run's :class:`~workbench.core.metrics.evaluation.EvaluationResult`
    (per-query values, counts). ``qrels`` states the policy the qrels were built by."""

    results: dict[str, EvaluationResult]
    measures: tuple[str, ...]
    labels: str
    qrels: str
    fingerprint: str
    notes: tuple[str, ...]
    evaluation_id: int | None

    @property
    def aggregate(self) -> dict[str, dict[str, float]]:
        return {name: dict(res.aggregate) for name, res in self.results.items()}

    def per_query(self, run: str) -> pd.DataFrame:
        """One run's values per query (indexed by ``query_id``, one column per measure)."""
        if run not in self.results:
            raise InputError(f"run {run!r} is not in this evaluation; it has {', '.join(self.results)}")
        return self.results[run].per_query

    def counts(self, run: str) -> dict[str, int]:
        return self.results[run].counts()

    def to_pandas(self) -> pd.DataFrame:
        """The means: one row per run (index ``run``), one column per measure."""

        table = lazylibs.pandas.DataFrame.from_dict(self.aggregate, orient="index")
        table.index.name = "run"
        return table


@dataclass(frozen=True)
class Comparison:
    """Paired tests of runs against the first (the baseline), as ``workbench compare --runs``.

    ``table`` has one row per (measure, run): means, ``delta``, the bootstrap ``ci_low`` and
    ``ci_high``, ``p_value``, ``p_adjusted`` (Benjamini-Hochberg) and wins/ties/losses."""

    baseline: str
    runs: tuple[str, ...]
    measures: tuple[str, ...]
    test: str
    seed: int
    n_resamples: int
    table: pd.DataFrame = field(repr=False)

    def to_pandas(self) -> pd.DataFrame:
        return self.table.copy()


# -- the project ------------------------------------------------------------------------------------

class Project:
    """A project database (a DuckDB file) and the settings operations on it use.

    Open an existing project with :meth:`open`, make one with :meth:`create`. The object holds no
    open connection; each method opens the file for its operation.
    """

    def __init__(self, path: str | Path, *, config: str | Path | None = None) -> None:
        self.path = Path(path)
        self.config = config

    def __repr__(self) -> str:
        return f"Project({str(self.path)!r})"

    # -- opening --------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, *, config: str | Path | None = None) -> Project:
        """An existing project; :class:`~workbench.errors.StoreError` when there is none at ``path``
        (migrations pending from an older version are applied)."""

        with lazy.project_lifecycle.open_project(path):
            pass
        return cls(path, config=config)

    @classmethod
    def create(cls, path: str | Path, *, demo: bool = False, config: str | Path | None = None) -> Project:
        """Create the project database (``workbench init``); with ``demo`` load the demo handbook,
        its queries and reference SME labels, and prepare a ``sections`` chunking, a ``bm25`` run
        and a ``demo`` pool (``workbench init --demo``). Creating an existing project keeps it."""

        project = cls(path, config=config)
        lazy.project_lifecycle.init_project(path, demo=demo, settings=project.settings())
        return project

    def settings(self, **overrides: Any) -> Settings:
        """The resolved settings; ``overrides`` as ``{"judge.model": "x"}``-style dotted keys
        (``None`` values are ignored; :func:`workbench.services.settings.project_settings`, as the
        CLI builds them)."""

        return lazy.settings.project_settings(self.path, self.config, overrides)

    def _db(self):
        return lazy.project_lifecycle.open_project(self.path)

    def status(self) -> dict[str, int]:
        """Rows per table (``workbench status``'s counts)."""

        with self._db() as db:
            return dict(lazy.project_lifecycle.project_status(db, min_overlap=self.settings().get("evaluation", "min_overlap")).counts)

    # -- imports --------------------------------------------------------------------------------
    def _import(self, kind: str, path: str | Path, **options: Any) -> ImportSummary:
        with self._db() as db:
            return lazy.ingest.import_file(db, kind, path, **options)

    def import_corpus(self, path: str | Path, *, format: str | None = None, name: str | None = None,
                      id_field: str | None = None, text_field: str | None = None,
                      title_field: str | None = None) -> ImportSummary:
        """Import documents (BEIR/JSONL, a folder of .txt/.md files, or SMART), all or nothing."""
        return self._import("corpus", path, format=format, name=name, id_field=id_field, text_field=text_field,
                            title_field=title_field)

    def import_queries(self, path: str | Path, *, format: str | None = None, name: str | None = None,
                       id_field: str | None = None, text_field: str | None = None) -> ImportSummary:
        """Import queries (JSONL, TSV ``query_id<TAB>text``, SMART, cranfield), all or nothing."""
        return self._import("queries", path, format=format, name=name, id_field=id_field, text_field=text_field)

    def import_qrels(self, path: str | Path, *, format: str | None = None, name: str | None = None,
                     assessor: str | None = None, skip_unknown: bool = False) -> ImportSummary:
        """Import judgments (TREC, BEIR TSV, JSONL rows, span JSONL, cranqrel), all or nothing."""
        return self._import("qrels", path, format=format, name=name, assessor=assessor, skip_unknown=skip_unknown)

    def import_run(self, path: str | Path, *, name: str | None = None, format: str | None = None,
                   skip_unknown: bool = False) -> ImportSummary:
        """Import a TREC run (document or chunk level, detected from its ids) as run ``name``
        (default: the file stem)."""
        return self._import("run", path, format=format, name=name, skip_unknown=skip_unknown)

    # -- chunk, retrieve, pool ------------------------------------------------------------------
    def chunk(self, name: str, strategy: str = "section", *, size: int | None = None, overlap: int | None = None,
              unit: str | None = None) -> Chunking:
        """Chunk every document into a new chunking ``name`` (strategies: ``section``,
        ``fixed``, ``sentences``, ...; ``workbench chunk``)."""

        with self._db() as db:
            s = lazy.chunking.create_chunking(db, name, strategy, size=size, overlap=overlap, unit=unit)
        return s

    def retrieve(self, retriever: Retriever, *, name: str, chunking: str | None = None, k: int = 100,
                 **options: Any) -> RunInfo:
        """Run a retriever and store its run ``name`` (``workbench retrieve RETRIEVER``).

        ``options`` are the retriever's parameters, as in the registry
        (:data:`workbench.services.retrieval.registry.RETRIEVERS`; ``workbench retrieve
        RETRIEVER --help`` lists them as flags); those not given take their defaults. An option
        the retriever does not take raises :class:`~workbench.errors.ConfigError`. The
        retrievers and their options (from the registry):

        {retrievers}
        """

        chosen = make_options(retriever, options)
        with self._db() as db:
            return run_retriever(db, retriever, name=name, chunking=chunking, k=k, options=chosen)

    def runs(self) -> pd.DataFrame:
        """The stored runs with their level, chunking, queries, rows and latency p50/p95."""

        with self._db() as db:
            return lazy.retrieval_runs.list_runs(db)

    def run(self, name: str, *, level: Literal["doc", "chunk"] = "doc") -> Run:
        """A stored run as the metric engine's :class:`~workbench.core.metrics.qrels_and_runs.Run`
        at ``level`` (at document level a chunk run ranks each document by its best chunk),
        as ``evaluate`` scores it."""

        with self._db() as db:
            known = lazy.retrieval_runs.list_runs(db)["name"].astype(str).tolist()
            if name not in known:
                raise InputError(f"no run named {name!r} in the project; known runs: {', '.join(known) or 'none yet'}")
            return lazy.evaluation_evaluate.stored_run(db, name, level)

    def pool(self, name: str, runs: Sequence[str], *, depth: int | None = None, add: bool = False) -> Pool:
        """Pool the top ``depth`` of each run (``[pool] depth`` by default) into pool ``name``;
        with ``add`` add ``runs`` to the existing pool at its own depth. The request and its
        rules: :class:`workbench.services.pooling.request.PoolRequest`."""

        request = lazy.pooling_request.PoolRequest(name, runs, depth, add=add).check()
        with self._db() as db:
            return request.run(db, self.settings())

    # -- judge ----------------------------------------------------------------------------------
    def judge(self, pool: str, *, api_key: str | None = None, progress: Callable[[Progress], None] | None = None,
              **options: Any) -> JudgeReport:
        """Grade the pool's pairs with the LLM judge and block until the job ends (``workbench
        judge``). ``model="offline-lexical"`` is the offline baseline (no LLM, no network).

        ``progress`` is called after every stored batch with a
        :class:`~workbench.services.judge.runner.Progress` (``done``, ``total``, ``ok``,
        ``invalid``, ``failed``, ``cached``, ``cost_usd``, ``elapsed``). Running it again resumes;
        answers are cached, so nothing is paid for twice. ``api_key``: the server's key (default
        ``OPENAI_API_KEY``).

        The judge options (:data:`workbench.services.judge.request.OPTIONS`, as ``workbench
        judge`` takes them; None: the configured ``[judge]`` value):

        {options}
        """

        request = from_keywords(pool, options)
        spec = request.resolve(self.settings(), api_key=api_key)
        r = request.run(self.path, spec, on_progress=progress)
        j = r.job
        return JudgeReport(job_id=r.job_id, pool=r.pool, state=r.state, model=spec.model, offline=spec.offline,
                           total=int(j["total"]), judged=int(j["judged"]), ok=int(j["ok"]), invalid=int(j["invalid"]),
                           failed=int(j["failed"]), sent=r.sent, cached=r.cached,
                           cost_usd=None if spec.price is None else float(j["cost_usd"]), seconds=r.elapsed,
                           summary=r.summary())

    # -- calibration ----------------------------------------------------------------------------
    def calibration_sample(self, pool: str, *, size: int | None = None, seed: int = 0, name: str | None = None,
                           holdout_share: float | None = None, judge: str | None = None,
                           design: Literal["pairs", "queries"] = "pairs",
                           queries: int | None = None) -> CalibrationSample:
        """Draw and store a calibration sample from the judged ``pool`` (``workbench calibrate
        sample``); named ``POOL-seedS`` (``POOL-queries-seedS`` for ``design="queries"``) unless
        ``name``. Samples are never overwritten. ``judge``: the judge configuration whose grades
        stratify it (key, key prefix or model), needed when several graded the pool.
        ``design="queries"`` draws ``queries`` whole queries (for judge-corrected scores)
        instead of pairs. The request and its rules:
        :class:`workbench.services.calibration.request.SampleRequest`."""

        request = lazy.calibration_request.SampleRequest(pool, size=size, seed=seed, design=design, queries=queries,
                                                         holdout_share=holdout_share, name=name, judge=judge).check()
        with self._db() as db:
            s = request.run(db, self.settings())
        return CalibrationSample(s["name"], s["pool"], s["seed"], s["size"], s["holdout"], s["tuning"], s["queries"],
                                 dict(s["by_judge_grade"]), tuple(s["notes"]))

    def calibration_items(self, sample: str) -> pd.DataFrame:
        """The sample's items as an SME sees them, without the judge's grade: ``position``,
        ``query_id``, ``doc_id``, ``chunk_id``, ``start``, ``end``, ``part``, ``query``, ``title``
        and ``passage`` (the span to judge)."""

        with self._db() as db:
            samples = lazy.calibration_workflow.list_samples(db)
            row = samples[samples["name"] == sample]
            if row.empty:
                raise InputError(f"there is no calibration sample named {sample!r}")
            items = [lazy.calibration_workflow.item(db, sample, position) for position in range(int(row.iloc[0]["items"]))]
        records = [{**{k: v for k, v in it.items() if k not in ("text", "description", "tags")},
                    "passage": (it["text"] or "")[it["start"]:it["end"]]} for it in items]
        return lazylibs.pandas.DataFrame(records)

    def label(self, sample: str, grades: Mapping[int, int], *, annotator: str) -> int:
        """Store an SME's grades (0-3) of the sample's items, ``{position: grade}``, as the Label
        page does (each replacing the annotator's earlier label of that item); returns how many
        were stored. All in one transaction (a bad grade or position stores none of them)."""

        if not isinstance(grades, Mapping):
            raise ConfigError("label() takes the grades as {position: grade}, e.g. {0: 3, 1: 0}")
        labels = {int(position): grade.item() if hasattr(grade, "item") else grade
                  for position, grade in grades.items()}
        with self._db() as db:
            lazy.calibration_workflow.save_labels(db, sample, annotator, labels)
        return len(grades)

    def activate_sample(self, sample: str | None) -> str | None:
        """Make ``sample`` the one SMEs open by default on the Label page (None: no active
        sample), as ``workbench calibrate activate``."""

        with self._db() as db:
            return lazy.calibration_routing.set_active(db, sample)

    def assign(self, sample: str, annotators: Sequence[str], *, overlap: int = 1, per_annotator: int | None = None,
               seed: int = 0) -> dict[str, list[int]]:
        """Hand ``sample``'s pairs out to ``annotators`` (``workbench calibrate assign``):
        ``overlap`` SMEs per pair, at most ``per_annotator`` pairs each, in an order drawn with
        ``seed``. The Label page then serves each SME only their pairs, and :meth:`label`
        refuses the others. Returns ``{annotator: [positions]}``."""

        names = _names(annotators, "annotators")
        with self._db() as db:
            return lazy.calibration_routing.assign(db, sample, names, overlap=overlap, per_annotator=per_annotator, seed=seed)["assigned"]

    def set_guidelines(self, sample: str, path: str | Path) -> str:
        """Store the Markdown file at ``path`` as the labelling guidelines of ``sample``
        (``workbench calibrate guidelines``); SMEs read them on the Label card. Returns their
        SHA-256."""

        text = lazy.calibration_guidelines.read_file(path)
        with self._db() as db:
            return lazy.calibration_guidelines.set_guidelines(db, sample, text, source=str(path))["sha256"]

    def _report_options(self, *, part: str, seed: int, resamples: int | None, weighted: bool,
                        high_risk: Sequence[str] | None):
        settings = self.settings()
        tags = (",".join(high_risk) if high_risk is not None else settings.get("calibration", "high_risk_tags"))
        options = lazy.calibration_workflow.ReportOptions(
            threshold=int(settings.get("calibration", "relevant_min_grade")), seed=seed,
            n_boot=resamples if resamples is not None else int(settings.get("calibration", "bootstrap_resamples")),
            part=part, weighted=weighted, high_risk_tags=tuple(t.strip() for t in tags.split(",") if t.strip()),
            high_risk_rate=float(settings.get("calibration", "high_risk_min_rate")))
        return lazy.core_calibration_gate.GateThresholds.from_settings(settings), options

    @staticmethod
    def _gate_result(sample: str, n: int, verdict: dict, judge: dict | None = None) -> GateResult:
        return GateResult(sample, verdict["verdict"], tuple(verdict["reasons"]), int(n), verdict.get("more_labels_needed"),
                          (judge or {}).get("key"))

    def calibration_report(self, sample: str | None = None, *, part: Literal["holdout", "tuning", "all"] = "holdout",
                           seed: int = 0, resamples: int | None = None, weighted: bool = True,
                           high_risk: Sequence[str] | None = None, judge: str | None = None) -> CalibrationReport:
        """One judge configuration's agreement with the SMEs on the sample's ``part`` (the newest
        sample by default; ``judge``: key, key prefix or model, default the sample's own), as
        ``workbench calibrate report``; the verdict is stored (the configuration is gated)."""

        thresholds, options = self._report_options(part=part, seed=seed, resamples=resamples, weighted=weighted,
                                                    high_risk=high_risk)
        with self._db() as db:
            body = lazy.calibration_workflow.report(db, sample, thresholds=thresholds, options=options, judge=judge)
        agreement = body["agreement"] or {}
        figures = {k: float(agreement[k]) if agreement[k] is not None else float("nan")
                   for k in _FIGURES if k in agreement}
        intervals = {k: (float(lo) if lo is not None else float("nan"), float(hi) if hi is not None else float("nan"))
                     for k, (lo, hi) in agreement.get("ci", {}).items()}
        return CalibrationReport(body["sample"], body["pool"], body["part"], body["items"], body["labelled"],
                                 body["labelled_in_part"], self._gate_result(body["sample"], body["labelled_in_part"],
                                                                             body["gate"], body["judge"]),
                                 figures, intervals, body)

    def gate(self, sample: str | None = None, *, seed: int = 0, resamples: int | None = None,
             high_risk: Sequence[str] | None = None, judge: str | None = None) -> GateResult:
        """The trust gate of one judge configuration (``judge``: key, key prefix or model; default
        the sample's own) on the sample's held-out part (``workbench calibrate gate --judge``):
        LLM labels count in the merged qrels only for a configuration with its own pass."""

        thresholds, options = self._report_options(part="holdout", seed=seed, resamples=resamples, weighted=True,
                                                    high_risk=high_risk)
        with self._db() as db:
            body = lazy.calibration_workflow.gate(db, sample, thresholds=thresholds, options=options, judge=judge)
        return self._gate_result(body["sample"], body["n"], body["gate"], body["judge"])

    def judge_learn(self, sample: str, *, sources: Sequence[str] | None = None, seed: int = 0,
                    dense: bool = True) -> LearnedJudge:
        """Learn a judge from the sample's tuning labels and grade its pool with it (``workbench
        judge learn``): a calibrated model on the ``sources`` configurations' grades (key, key
        prefix or model; default every configuration that graded the pool) and retrieval signals
        (``dense``: with the dense cosine of the project's encoder), fitted and cross-validated on
        the tuning part only. Gate it with ``gate(sample, judge=result.config)``."""

        chosen = _names(sources, "sources") if sources is not None else None
        with self._db() as db:
            r = lazy.judge_learned.learn(db, sample, sources=chosen, seed=int(seed), settings=self.settings(),
                                         dense=lazy.judge_learned.DenseOptions(enabled=bool(dense)))
        op = r.operating
        return LearnedJudge(r.config, r.label, r.pool, r.sample, tuple(r.sources), tuple(r.features), r.tuning,
                            r.relevant, r.model, op.threshold, op.rule, op.tpr, op.tnr, op.kappa, r.graded,
                            dict(r.grade_counts), r.seed, r.created, tuple(r.notes), r.summary())

    # -- qrels, evaluate, compare ---------------------------------------------------------------
    def qrels(self, *, labels: Labels = "merged", level: Literal["doc", "chunk"] = "doc",
              chunking: str | None = None, keep_unanswerable: bool = False) -> Qrels:
        """The project's qrels by the ``[qrels]`` policy narrowed to ``labels``, as the metric
        engine's :class:`~workbench.core.metrics.qrels_and_runs.Qrels` (what
        :func:`workbench.evaluate` takes). Queries marked unanswerable are left out unless
        ``keep_unanswerable`` (as ``workbench export qrels``)."""

        with self._db() as db:
            project = lazy.qrels_rule.project_qrels(db, level=level, chunking=chunking, source=labels, settings=self.settings())
            if not keep_unanswerable:
                project, _ = lazy.qrels_answerability.without_unanswerable(db, project)
        return project.to_qrels()

    def evaluate(self, *, runs: Sequence[str], measures: Sequence[str], labels: Labels = "merged",
                 level: Literal["doc", "chunk"] | None = None, chunking: str | None = None, rel: int = 1,
                 condensed: bool = False, include_no_relevant: bool = False,
                 missing_as_zero: bool = True, store: bool = True) -> Evaluation:
        """Score stored ``runs`` against the project's qrels (``workbench eval --runs``); the
        evaluation is stored (the app's Evaluate page lists it) unless ``store=False``."""

        runs, measures = _names(runs, "runs"), _names(measures, "measures")
        with self._db() as db:
            done = lazy.evaluation_evaluate.evaluate_project(db, runs, measures, labels=labels, level=level, chunking=chunking, rel=rel,
                                                             condensed=condensed, include_no_relevant=include_no_relevant,
                                                             missing_as_zero=missing_as_zero, store=store, settings=self.settings())
        return Evaluation(dict(done.results), tuple(measures), labels, done.qrels.statement(), done.qrels.fingerprint,
                          tuple(done.notes), done.evaluation_id)

    def compare(self, *, runs: Sequence[str], measures: Sequence[str], labels: Labels = "merged",
                level: Literal["doc", "chunk"] | None = None, chunking: str | None = None, rel: int = 1,
                test: Literal["randomization", "bootstrap", "ttest"] = "randomization", seed: int = 0,
                n_resamples: int = 10_000) -> Comparison:
        """Paired tests of ``runs`` against the first (``workbench compare --runs``)."""

        runs, measures = _names(runs, "runs"), _names(measures, "measures")
        with self._db() as db:
            report, _ = lazy.evaluation_evaluate.compare_project(db, runs, measures, labels=labels, level=level, chunking=chunking, rel=rel,
                                                                 test=test, seed=seed, n_resamples=n_resamples, settings=self.settings())
        r = report.result
        return Comparison(r.baseline, tuple(runs), tuple(dict.fromkeys(measures)), r.test, r.seed, r.n_resamples,
                          r.table.copy())


def _names(values: Sequence[str] | str, what: str) -> list[str]:
    if isinstance(values, str):
        raise ConfigError(f"{what}= takes a list of names, like {what}=[{values!r}]")
    names = [str(v) for v in values]
    if not names:
        raise ConfigError(f"give at least one of {what}=")
    return names


# -- errors in the API's words -------------------------------------------------------------------

#: The CLI command a service message names (``{command:WORDS}``) as the Project method that does
#: the same; commands not listed are the method of the same name (words joined by ``_``).
_METHODS = {"init": "Project.create", "calibrate sample": "calibration_sample",
            "calibrate activate": "activate_sample", "calibrate guidelines": "set_guidelines",
            "calibrate report": "calibration_report", "calibrate gate": "gate", "eval": "evaluate",
            "import corpus": "import_corpus", "import queries": "import_queries", "import qrels": "import_qrels",
            "import run": "import_run", "export qrels": "qrels"}


#: Service field keys whose keyword argument has another name (the judge's from its options).
_ARGUMENTS = field_arguments()


def _argument(key: str) -> str:
    key = key.replace("-", "_").lstrip("_")
    return _ARGUMENTS.get(key, key)


def _as_call(words: str) -> str:
    """``pool --name demo --runs NEW --add`` as ``pool(name='demo', runs='NEW', add=True)``; a
    leading ``--db PATH`` is the project (``Project.open(PATH)`` / ``Project.create(PATH)``)."""

    try:
        tokens = lazylibs.shlex.split(words)
    except ValueError:
        tokens = words.split()
    path = None
    if tokens[:1] == ["--db"] and len(tokens) > 1:
        path, tokens = tokens[1], tokens[2:]
    command = []
    while tokens and not tokens[0].startswith("-"):
        command.append(tokens.pop(0))
    args = []
    while tokens:
        flag = tokens.pop(0)
        if tokens and not tokens[0].startswith("-"):
            args.append(f"{_argument(flag)}={tokens.pop(0)!r}")
        else:
            args.append(f"{_argument(flag)}=True")
    name = _METHODS.get(" ".join(command), "_".join(command) or "open")
    if name == "Project.create":
        return f"`Project.create({path!r})`" if path else "`Project.create(PATH)`"
    call = f"{name}({', '.join(args)})"
    return f"`Project.open({path!r}).{call}`" if path else f"`Project.{call}`"


def _python_value(text: str) -> str:
    """A value a message shows as Python: a number, ``True``/``False``/``None`` or a metavariable
    (``K``, ``NAME``) as it is, other text quoted (``model='offline-lexical'``)."""

    if re.fullmatch(r"-?\d+(\.\d+)?|[A-Z][A-Z0-9_]*|True|False|None", text):
        return text
    return repr(text)


#: :meth:`workbench.errors.WorkbenchError.render`'s words for Python callers.
API_WORDS = {"name": lambda key: f"{_argument(key)}=",
             "action": lambda key: f"pass {_argument(key)}=",
             "command": _as_call,
             "valued": lambda kind, key, value: f"{_argument(key)}={_python_value(value)}"}


def _speaks_python(method):
    """``method`` with its :class:`~workbench.errors.WorkbenchError` worded for Python callers
    (keyword arguments and Project methods, never CLI flags); the error is the same object."""

    @functools.wraps(method)
    def call(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except WorkbenchError as exc:
            exc.words = API_WORDS
            raise

    return call


def _judge_signature():
    """``Project.judge``'s signature with its judge options as keyword arguments (declared once,
    :data:`workbench.services.judge.request.OPTIONS`), for ``help()`` and editors."""

    keyword = inspect.Parameter.KEYWORD_ONLY
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
              inspect.Parameter("pool", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)]
    params += [inspect.Parameter(o.kwarg, keyword, default=o.default, annotation=f"{o.kind.__name__} | None")
               for o in JUDGE_OPTIONS if o.kwarg and o.name != "pool"]
    params += [inspect.Parameter("api_key", keyword, default=None, annotation="str | None"),
               inspect.Parameter("progress", keyword, default=None, annotation="Callable[[Progress], None] | None")]
    return inspect.Signature(params, return_annotation="JudgeReport")


Project.judge.__signature__ = _judge_signature()
Project.judge.__doc__ = Project.judge.__doc__.replace(
    "{options}", keywords_doc(lambda text: render_text(text, **API_WORDS)).strip())


def _retrievers_doc() -> str:
    """One bullet per retriever of the registry, for :meth:`Project.retrieve`'s docstring."""

    lines = []
    for spec in RETRIEVERS.values():
        scope = {"required": " over ``chunking``", "optional": ""}.get(spec.chunking, "")
        names = ", ".join(f"``{p.name}``" + (" (required)" if p.required else f" = {p.default!r}")
                          for p in spec.parameters)
        lines.append(f"* ``{spec.name}``{scope}: {spec.help}; {names or 'no options'}")
    return "\n        ".join(lines)


if Project.retrieve.__doc__:  # None under python -OO
    Project.retrieve.__doc__ = Project.retrieve.__doc__.replace("{retrievers}", _retrievers_doc())

for _name, _value in list(vars(Project).items()):
    if _name.startswith("_"):
        continue
    if isinstance(_value, classmethod):
        setattr(Project, _name, classmethod(_speaks_python(_value.__func__)))
    elif isinstance(_value, staticmethod):
        setattr(Project, _name, staticmethod(_speaks_python(_value.__func__)))
    elif callable(_value):
        setattr(Project, _name, _speaks_python(_value))
del _name, _value
