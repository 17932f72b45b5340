"""Evaluation of run files: what ``workbench eval``, ``compare`` and ``stages`` (and the app)
share.

* :func:`run_names` - the one rule that names runs given as files.
* :func:`evaluate_files` - score several run files against one qrels file, refusing inputs
  that would give a meaningless number (an empty run, no query in common, every query
  excluded).
* :func:`distributions` - each measure's per-query distribution (median, p10, zeros).
* :func:`compare_files` - paired significance tests of runs against a baseline.
* :func:`evaluate_project` / :func:`compare_project` - the same for runs stored in the project,
  scored against the project's qrels (:mod:`workbench.services.qrels.rule`, one rule) and stored
  (:mod:`workbench.store.evaluations`); :func:`stored_evaluations` lists them, newest first.

Every failure is an :class:`~workbench.errors.InputError` (bad input, exit code 3 in the CLI)
or a :class:`~workbench.errors.ConfigError` (bad option, exit code 2), naming the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from workbench import lazylibs
from workbench.core.formats import LABEL_SOURCES
from workbench.core.metrics.measures import parse_measures
from workbench.errors import ConfigError, InputError, clip
from workbench.services import access, lazy

if TYPE_CHECKING:
    from workbench.core.metrics.comparison import Comparison
    from workbench.core.metrics.evaluation import EvaluationResult


def run_names(paths: Sequence[str | Path]) -> list[str]:
    """Names for runs given as files: the shortest distinguishing path suffix.

    A run is named by its file name without the extension (``runs/bm25.txt`` -> ``bm25``).
    When several runs would get the same name, each of them takes one more parent folder,
    again and again, until the names differ (``x/a/run.txt``, ``x/b/run.txt`` -> ``a/run``,
    ``b/run``; ``a/x.run``, ``x.run`` -> ``a/x``, ``x``). The same path given twice is
    numbered: ``x``, ``x#2``. Paths are taken as written (not resolved).
    """
    parts = []
    for p in paths:
        path = Path(p).with_suffix("")
        parts.append(path.parts[1:] if path.anchor else path.parts or (str(p),))
    depth = [1] * len(parts)

    def name(i: int) -> str:
        return "/".join(parts[i][-depth[i]:])

    while True:
        groups: dict[str, list[int]] = {}
        for i in range(len(parts)):
            groups.setdefault(name(i), []).append(i)
        grew = False
        for members in groups.values():
            # growing helps only when the paths differ somewhere (the same path twice: numbered)
            if len({parts[i] for i in members}) > 1:
                for i in members:
                    if depth[i] < len(parts[i]):
                        depth[i] += 1
                        grew = True
        if not grew:
            break
    seen: dict[str, int] = {}
    out = []
    for i in range(len(parts)):
        n = name(i)
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n}#{seen[n]}")
    return out


def check_measures(measures: Sequence[str]) -> None:

    if not measures:
        raise ConfigError("give at least one measure, e.g. -m ndcg@10 -m recall@100")
    parse_measures(list(measures))  # fail on a bad name before reading any file


def _nothing_to_evaluate(result: EvaluationResult, qrels, run, rel: int, run_path: str) -> None:
    """Refuse a run sharing no query with the qrels, and a result with no query to average
    over, saying why."""

    # every run query only in the run: then only_in_run lists them all
    if result.n_only_in_run and not result.n_common:
        run_queries = result.only_in_run
        qrels_queries = lazy.core_metrics_arrow_buffers.dictionary_encode(qrels.query_ids).dictionary.to_pylist()
        raise InputError(
            f"no query in common with the qrels {clip(str(qrels.source))}: the run has "
            f"{len(run_queries)} queries (e.g. {clip(min(run_queries))}), the qrels "
            f"{len(qrels_queries)} (e.g. {clip(min(qrels_queries))}); check that both use the same query ids",
            path=run_path,
        )
    if result.n_queries:
        return
    top = int(qrels.grades.max()) if len(qrels) else 0
    thresholds = sorted(set(result.thresholds.values())) or [rel]
    raise InputError(
        f"nothing to evaluate: no query has a relevant document (grade >= {thresholds[0]}); the "
        f"highest grade in the qrels is {top}; lower the relevance threshold or include queries "
        "without relevant documents",
        path=str(qrels.source),
    )


def _chunking_of(item_id: str) -> str | None:
    """The chunking named by a chunk id (``<chunking>:<doc_id>:<seq>``), else None."""
    name, sep, rest = item_id.partition(":")
    doc, sep2, seq = rest.rpartition(":")
    return name if sep and sep2 and name and doc and seq.isdigit() else None


def _no_judged_id(result: EvaluationResult, qrels, run, run_path: str) -> None:
    """Refuse a run none of whose retrieved ids (on the queries it shares with the qrels) is in
    the qrels: every document is unjudged, so every measure is 0 whatever the run did. The usual
    cause is ids of another kind (a chunk run against document qrels, or the reverse), named
    with its fix."""
    if not result.n_common or len(result.no_judged_retrieved) < result.n_common:
        return
    run_id = str(run.first_doc_id)
    qrels_id = str(qrels.doc_ids[0].as_py())
    run_chunking, qrels_chunking = _chunking_of(run_id), _chunking_of(qrels_id)
    if run_chunking and not qrels_chunking:
        why = (f"the run ranks chunks of chunking {run_chunking!r} (e.g. {clip(run_id)}) and the qrels grade "
               f"documents (e.g. {clip(qrels_id)}); export chunk qrels ({{command:export qrels --level chunk "
               f"--chunking {run_chunking}}}) or score a document-level run")
    elif qrels_chunking and not run_chunking:
        why = (f"the qrels grade chunks of chunking {qrels_chunking!r} (e.g. {clip(qrels_id)}) and the run ranks "
               f"documents (e.g. {clip(run_id)}); export document qrels ({{command:export qrels}} without "
               f"{{field:level chunk}}) or score a chunk run of {qrels_chunking!r}")
    else:
        why = (f"the run's ids (e.g. {clip(run_id)}) are not the qrels' ids (e.g. {clip(qrels_id)}); check "
               f"that both name the same documents (or chunks of the same chunking)")
    raise InputError(f"no retrieved id is in the qrels {clip(str(qrels.source))} on any of the "
                     f"{result.n_common:,} queries they share, so every score would be 0: {why}", path=run_path)


def evaluate_files(
    qrels: str | Path,
    runs: Sequence[str | Path],
    measures: Sequence[str],
    *,
    rel: int = 1,
    condensed: bool = False,
    include_no_relevant: bool = False,
    missing_as_zero: bool = True,
    duplicates: str = "error",
    names: Sequence[str] | None = None,
    block_rows: int | None = None,
) -> dict[str, EvaluationResult]:
    """``{run name: result}`` for every run file, in the order given (names by
    :func:`run_names` unless given). A run file larger than ``block_rows`` rows (default
    :data:`~workbench.core.metrics.readers.DEFAULT_BLOCK_ROWS`) is scored in parts of whole
    queries (:func:`~workbench.core.metrics.readers.read_trec_run_parts`): the same values,
    memory bounded by the part.

    Refused with :class:`InputError` naming the file: unreadable or malformed files, qrels
    without a judgment, a run without a result line, a run sharing no query with the qrels,
    a run none of whose retrieved ids is in the qrels (chunk ids against document qrels, say),
    and an evaluation where every query is excluded (e.g. a threshold above every grade).
    Queries where only some of them retrieve nothing judged are in each result's
    ``no_judged_retrieved`` (the CLI warns).
    """

    check_measures(measures)
    if not runs:
        raise ConfigError("give at least one run file")
    names = list(names) if names is not None else run_names(runs)
    q = lazy.core_metrics_readers.read_qrels(qrels)
    if not len(q):
        raise InputError("no judgments in the qrels file", path=str(qrels))
    results = {}
    for name, path in zip(names, runs):
        with lazy.core_metrics_readers.read_trec_run_parts(path, name=name, block_rows=block_rows or lazy.core_metrics_readers.DEFAULT_BLOCK_ROWS) as run:
            if not len(run):
                raise InputError("the run has no result lines", path=str(path))
            result = lazy.core_metrics_evaluation.evaluate(q, run, list(measures), rel=rel, condensed=condensed,
                                                           include_no_relevant=include_no_relevant, missing_as_zero=missing_as_zero,
                                                           duplicates=duplicates)
        _nothing_to_evaluate(result, q, run, rel, str(path))
        _no_judged_id(result, q, run, str(path))
        results[name] = result
    return results


def distributions(result: EvaluationResult) -> dict[str, dict[str, float | int]]:
    """Per measure: ``mean``, ``median``, ``p10`` (10th percentile, linear interpolation),
    ``zeros`` (share of queries scoring exactly 0, in [0, 1]) and ``n`` (queries with a
    defined score) of the per-query values, NaN left out."""

    out = {}
    for label, values in result.scores.items():
        s = lazy.core_metrics_distribution.summarize(values)
        out[label] = {"mean": s.mean, "median": s.median, "p10": s.p10, "zeros": s.share_zero, "n": s.count}
    return out


@dataclass(frozen=True)
class ComparisonReport:
    """A :class:`~workbench.core.metrics.comparison.Comparison` with the runs' files and the
    queries each run lacked (scored 0)."""

    result: Comparison
    run_files: dict[str, str]
    missing_from_run: dict[str, list[str]] = field(default_factory=dict)


def compare_files(
    qrels: str | Path,
    runs: Sequence[str | Path],
    measures: Sequence[str],
    *,
    rel: int = 1,
    test: str = "randomization",
    seed: int = 0,
    n_resamples: int = 10_000,
) -> ComparisonReport:
    """Score every run per query (a query missing from a run scores 0), then compare each run
    with the first (the baseline) by :func:`workbench.core.metrics.comparison.compare_runs`."""

    if len(runs) < 2:
        raise ConfigError("compare needs at least two run files (the baseline first)")
    if n_resamples < 1:
        raise ConfigError(f"the number of resamples must be at least 1, got {n_resamples}")
    measures = list(dict.fromkeys(measures))
    results = evaluate_files(qrels, runs, measures, rel=rel)
    tables = {name: res.per_query for name, res in results.items()}
    # columns are labelled as given; only the requested ones (not e.g. RBP residuals)
    result = lazy.core_metrics_comparison.compare_runs(tables, measures, test=test, seed=seed, n_resamples=n_resamples)
    return ComparisonReport(
        result=result,
        run_files={name: str(path) for name, path in zip(results, runs)},
        missing_from_run={name: list(res.missing_from_run) for name, res in results.items()},
    )


# -- stored runs against the project's qrels ------------------------------------------------

LABELS = LABEL_SOURCES


@dataclass(frozen=True)
class ProjectEvaluation:
    """Results of stored runs against the project's qrels (:func:`evaluate_project`).

    ``qrels`` is the :class:`~workbench.services.qrels.rule.ProjectQrels` scored against (its
    ``statement()`` states the policy); ``notes`` says what the numbers do not cover (runs
    missing documents, LLM labels left out, unanswerable queries dropped); ``evaluation_id`` is
    the stored evaluation (None when not stored).
    """

    results: dict
    qrels: object
    labels: str
    notes: tuple[str, ...] = ()
    evaluation_id: int | None = None


def _run_scope(info, level: str | None, chunking: str | None) -> tuple[str, str | None]:
    """The level and chunking to evaluate at: the runs' own unless asked; chunk level needs
    every run to be a chunk run of that chunking (chunk ids belong to one chunking)."""

    levels = sorted(set(info["level"].astype(str)))
    if level is None:
        if len(levels) > 1:
            raise ConfigError(f"the runs mix document and chunk runs ({', '.join(info['name'])}); "
                              f"{{set_field:level doc}} to score all of them by document")
        level = levels[0]
    if level not in ("doc", "chunk"):
        raise ConfigError(f"unknown level {level!r}; expected doc or chunk")
    if level == "doc":
        return "doc", None
    chunkings = {None if lazylibs.pandas.isna(c) else str(c) for c in info["chunking"]}
    doc_runs = info.loc[info["level"].astype(str) != "chunk", "name"].tolist()
    if doc_runs:
        raise ConfigError(f"run {doc_runs[0]!r} ranks documents, not chunks; evaluate it with {{field:level doc}}")
    if chunking is None:
        if len(chunkings) > 1:
            raise ConfigError("the runs use different chunkings; evaluate them with {field:level doc}")
        chunking = next(iter(chunkings))
    elif chunkings != {chunking}:
        raise ConfigError(f"the runs are chunk runs of {', '.join(sorted(map(str, chunkings)))}, not of "
                          f"{chunking!r}; chunk qrels must use the runs' chunking (or {{set_field:level doc}})")
    return "chunk", chunking


def stored_run(db, name: str, level: str):
    """A stored run as the engine's :class:`Run` at ``level``: at document level a chunk run
    gives each document its best-scoring chunk's score (the document's first appearance)."""

    rows = lazy.store_runs.read_run_rows(db, name)
    if level == "chunk":
        items = rows["chunk_id"].where(rows["chunk_id"].notna(), rows["doc_id"])
        rows = rows.assign(item=items.astype(str))
    else:
        rows = (rows.assign(item=rows["doc_id"].astype(str))
                .sort_values(["query_id", "score"], ascending=[True, False], kind="stable")
                .drop_duplicates(["query_id", "item"]))
    return lazy.core_metrics_qrels_and_runs.Run(lazylibs.pyarrow.array(rows["query_id"].astype(str).tolist(), type=lazylibs.pyarrow.string()),
                                                lazylibs.pyarrow.array(rows["item"].tolist(), type=lazylibs.pyarrow.string()),
                                                rows["score"].to_numpy(dtype=lazylibs.numpy.float64), name=name, source=f"stored run {name}")


def evaluate_project(
    db,
    runs: Sequence[str],
    measures: Sequence[str],
    *,
    labels: str = "merged",
    level: str | None = None,
    chunking: str | None = None,
    rel: int = 1,
    condensed: bool = False,
    include_no_relevant: bool = False,
    missing_as_zero: bool = True,
    policy=None,
    store: bool = True,
    settings=None,
) -> ProjectEvaluation:
    """Score stored ``runs`` against the project's qrels (the one rule of
    :mod:`workbench.services.qrels.rule`, narrowed to ``labels``) and store the evaluation.

    Queries marked unanswerable (:mod:`workbench.services.evaluation.abstention`) are dropped from the
    qrels first (nothing to retrieve, so no ranking score). Same refusals as
    :func:`evaluate_files` (an empty run, no query in common, every query excluded), plus
    unknown run names and a level the runs cannot be scored at.
    """

    from workbench.services.coverage import coverage_notes
    from workbench.services.qrels.answerability import unanswerable_ids, without_unanswerable
    from workbench.services.qrels.rule import project_qrels

    if store:
        access.require("build")  # storing an evaluation is a write: viewers and annotators may not
    check_measures(measures)
    runs = list(dict.fromkeys(runs))
    if not runs:
        raise ConfigError("give at least one stored run, e.g. {field:runs bm25,dense}")
    if labels not in LABELS:
        raise ConfigError(f"unknown labels {labels!r}; expected one of {', '.join(LABELS)}")
    info = lazy.store_runs.read_run_info(db, runs)
    unknown = [r for r in runs if r not in set(info["name"])]
    if unknown:
        known = ", ".join(lazy.store_runs.read_run_info(db)["name"]) or "none yet"
        raise InputError(f"no run named {clip(unknown[0])} in the project; known runs: {known}")
    info = info.set_index("name").loc[runs].reset_index()
    level, chunking = _run_scope(info, level, chunking)
    qrels = project_qrels(db, level=level, chunking=chunking, source=labels, policy=policy, settings=settings)
    notes = list(qrels.notes)
    qrels, left_out = without_unanswerable(db, qrels)
    # every unanswerable query is out of the ranking measures, whether the qrels or a run held it
    unanswerable = set(map(str, unanswerable_ids(db)))
    if qrels.table.empty:
        raise InputError(f"the project has no qrels to evaluate against ({qrels.statement()}); label pairs "
                         f"on the Label page, import qrels, or pass the calibration gate for LLM labels")
    notes += coverage_notes(db, runs)
    q = qrels.to_qrels()
    results = {}
    for name in runs:
        run = stored_run(db, name, level)
        if not len(run):
            raise InputError(f"run {clip(name)} has no rows")
        result = lazy.core_metrics_evaluation.evaluate(q, run, list(measures), rel=rel, condensed=condensed,
                                                       include_no_relevant=include_no_relevant, missing_as_zero=missing_as_zero)
        _nothing_to_evaluate(result, q, run, rel, f"run {name}")
        results[name] = _count_unanswerable(result, unanswerable, set(left_out), run)
    excluded = sorted(set().union(*(r.excluded_unanswerable or () for r in results.values())))
    if excluded:
        notes.append(f"{len(excluded):,} unanswerable queries left out of ranking measures "
                     f"({', '.join(excluded[:5])}{', ...' if len(excluded) > 5 else ''})")
    evaluation_id = None
    if store:
        means = lazylibs.pandas.DataFrame([{"run": n, "measure": m, "value": float(v), "queries": int(r.counts()["queries_evaluated"])}
                                           for n, r in results.items() for m, v in r.aggregate.items()])
        values = lazylibs.pandas.concat([lazylibs.pandas.DataFrame({"run": n, "measure": m, "query_id": r.query_ids.astype(str),
                                                                    "value": lazylibs.numpy.asarray(v, dtype="float64")})
                                         for n, r in results.items() for m, v in r.scores.items()], ignore_index=True)
        with db.transaction() as tx:
            evaluation_id = lazy.store_evaluations.write_evaluation(
                tx, runs=runs, measures=list(measures), labels=labels, level=level, chunking=chunking,
                policy=qrels.policy.as_dict(), fingerprint=qrels.fingerprint, qrels_rows=len(qrels.table),
                settings={"rel": rel, "condensed": condensed, "include_no_relevant": include_no_relevant,
                          "missing_as_zero": missing_as_zero},
                notes=notes, means=means, values=values)
    return ProjectEvaluation(results, qrels, labels, tuple(notes), evaluation_id)


def _count_unanswerable(result: EvaluationResult, unanswerable: set[str], left_out: set[str],
                        run) -> EvaluationResult:
    """``result`` with the unanswerable queries moved out of ``only_in_run`` into
    ``excluded_unanswerable`` (their own count: left out on purpose, not missing from the
    qrels): those the qrels held (``left_out``) and those the run answered."""

    in_run = set(map(str, lazy.core_metrics_arrow_buffers.dictionary_encode(run.query_ids).dictionary.to_pylist()))
    excluded = tuple(sorted((unanswerable & in_run) | left_out))
    return replace(result, only_in_run=tuple(q for q in result.only_in_run if q not in unanswerable),
                   excluded_unanswerable=excluded)


def stored_evaluations(db):
    """Every stored evaluation, newest first, with its means in a column ``means``
    (``{run: {measure: value}}``): the history the Evaluate page shows."""

    table = lazy.store_evaluations.read_evaluations(db)
    means = lazy.store_evaluations.read_means(db, table["evaluation_id"].tolist()) if len(table) else None
    nested: dict[int, dict] = {}
    if means is not None:
        for e, run, m, v in zip(means["evaluation_id"], means["run"], means["measure"], means["value"]):
            nested.setdefault(int(e), {}).setdefault(str(run), {})[str(m)] = float(v)
    table["means"] = [nested.get(int(e), {}) for e in table["evaluation_id"]]
    return table


def stored_evaluation_values(db, evaluation_id: int):
    """Per-query values of one stored evaluation: ``run, measure, query_id, value``."""

    return lazy.store_evaluations.read_values(db, evaluation_id)


def compare_project(
    db,
    runs: Sequence[str],
    measures: Sequence[str],
    *,
    labels: str = "merged",
    level: str | None = None,
    chunking: str | None = None,
    rel: int = 1,
    test: str = "randomization",
    seed: int = 0,
    n_resamples: int = 10_000,
    policy=None,
    settings=None,
) -> tuple[ComparisonReport, ProjectEvaluation]:
    """:func:`compare_files` for stored runs (the first is the baseline), scored by
    :func:`evaluate_project` (the evaluation is stored)."""

    if len(list(dict.fromkeys(runs))) < 2:
        raise ConfigError("compare needs at least two runs (the baseline first)")
    if n_resamples < 1:
        raise ConfigError(f"the number of resamples must be at least 1, got {n_resamples}")
    measures = list(dict.fromkeys(measures))
    done = evaluate_project(db, runs, measures, labels=labels, level=level, chunking=chunking, rel=rel,
                            policy=policy, settings=settings)
    tables = {name: res.per_query for name, res in done.results.items()}
    result = lazy.core_metrics_comparison.compare_runs(tables, measures, test=test, seed=seed, n_resamples=n_resamples)
    report = ComparisonReport(result=result, run_files={name: f"stored run {name}" for name in done.results},
                              missing_from_run={name: list(res.missing_from_run) for name, res in done.results.items()})
    return report, done
