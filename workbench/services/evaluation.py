"""Evaluation of run files: what ``workbench eval``, ``compare`` and ``stages`` (and the app)
share.

* :func:`run_names` - the one rule that names runs given as files.
* :func:`evaluate_files` - score several run files against one qrels file, refusing inputs
  that would give a meaningless number (an empty run, no query in common, every query
  excluded).
* :func:`distributions` - each measure's per-query distribution (median, p10, zeros).
* :func:`compare_files` - paired significance tests of runs against a baseline.

Every failure is an :class:`~workbench.errors.InputError` (bad input, exit code 3 in the CLI)
or a :class:`~workbench.errors.ConfigError` (bad option, exit code 2), naming the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.errors import ConfigError, InputError, clip

if TYPE_CHECKING:
    from workbench.core.comparison import Comparison
    from workbench.core.evaluation import EvaluationResult

DISTRIBUTION_STATS = ("mean", "median", "p10", "zeros", "n")


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


def _check_measures(measures: Sequence[str]) -> None:
    from workbench.core.measures import parse_measures

    if not measures:
        raise ConfigError("give at least one measure, e.g. -m ndcg@10 -m recall@100")
    parse_measures(list(measures))  # fail on a bad name before reading any file


def _nothing_to_evaluate(result: EvaluationResult, qrels, run, rel: int, run_path: str) -> None:
    """Refuse a run sharing no query with the qrels, and a result with no query to average
    over, saying why."""
    from workbench.core.arrow_buffers import dictionary_encode

    # every run query only in the run (counted only then: a pass over the run's ids)
    if result.n_only_in_run and result.n_only_in_run == len(dictionary_encode(run.query_ids).dictionary):
        run_queries = dictionary_encode(run.query_ids).dictionary.to_pylist()
        qrels_queries = dictionary_encode(qrels.query_ids).dictionary.to_pylist()
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
) -> dict[str, EvaluationResult]:
    """``{run name: result}`` for every run file, in the order given (names by
    :func:`run_names` unless given).

    Refused with :class:`InputError` naming the file: unreadable or malformed files, qrels
    without a judgment, a run without a result line, a run sharing no query with the qrels,
    and an evaluation where every query is excluded (e.g. a threshold above every grade).
    """
    from workbench.core.evaluation import evaluate
    from workbench.core.readers import read_qrels, read_trec_run

    _check_measures(measures)
    if not runs:
        raise ConfigError("give at least one run file")
    names = list(names) if names is not None else run_names(runs)
    q = read_qrels(qrels)
    if not len(q):
        raise InputError("no judgments in the qrels file", path=str(qrels))
    results = {}
    for name, path in zip(names, runs):
        run = read_trec_run(path, name=name)
        if not len(run):
            raise InputError("the run has no result lines", path=str(path))
        result = evaluate(q, run, list(measures), rel=rel, condensed=condensed,
                          include_no_relevant=include_no_relevant, missing_as_zero=missing_as_zero,
                          duplicates=duplicates)
        _nothing_to_evaluate(result, q, run, rel, str(path))
        results[name] = result
    return results


def distributions(result: EvaluationResult) -> dict[str, dict[str, float | int]]:
    """Per measure: ``mean``, ``median``, ``p10`` (10th percentile, linear interpolation),
    ``zeros`` (share of queries scoring exactly 0, in [0, 1]) and ``n`` (queries with a
    defined score) of the per-query values, NaN left out."""
    from workbench.core.distribution import summarize

    out = {}
    for label, values in result.scores.items():
        s = summarize(values)
        out[label] = {"mean": s.mean, "median": s.median, "p10": s.p10, "zeros": s.share_zero, "n": s.count}
    return out


@dataclass(frozen=True)
class ComparisonReport:
    """A :class:`~workbench.core.comparison.Comparison` with the runs' files and the
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
    with the first (the baseline) by :func:`workbench.core.comparison.compare_runs`."""
    from workbench.core.comparison import compare_runs

    if len(runs) < 2:
        raise ConfigError("compare needs at least two run files (the baseline first)")
    if n_resamples < 1:
        raise ConfigError(f"the number of resamples must be at least 1, got {n_resamples}")
    measures = list(dict.fromkeys(measures))
    results = evaluate_files(qrels, runs, measures, rel=rel)
    tables = {name: res.per_query for name, res in results.items()}
    # columns are labelled as given; only the requested ones (not e.g. RBP residuals)
    result = compare_runs(tables, measures, test=test, seed=seed, n_resamples=n_resamples)
    return ComparisonReport(
        result=result,
        run_files={name: str(path) for name, path in zip(results, runs)},
        missing_from_run={name: list(res.missing_from_run) for name, res in results.items()},
    )
