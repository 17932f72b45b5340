"""Per-query difference of runs against a baseline, with both runs' top results side by side:
what ``workbench compare --per-query`` prints and the Evaluate page's "Per-query difference" shows.

For each measure and each run after the first: every query's value for the baseline and the
run, ``delta = run − baseline``, and each side's top ``k`` results in the engine's order (score
descending, ties by id descending) with their grade, ``None`` when the item is unjudged (no
label, or a label below 0). Queries are sorted by ``delta`` ascending (where the run loses most
first), ties by query id. A query is listed when both runs have a value for it; one the measure
excludes (NaN: no relevant item at its threshold) is left out. Values are scored as ``eval`` and
``compare`` score them (a query a run does not answer scores 0 and has an empty top list).

* :func:`query_diffs` - the computation, on the engine's value types (:class:`Qrels`,
  :class:`Run`, :class:`EvaluationResult`) held in memory.
* :func:`per_query_diff` - run files against a qrels file (``compare QRELS RUN RUN --per-query``).
* :func:`stored_per_query_diff` - the project's stored runs against the qrels they were scored
  with (``compare --runs A,B --per-query`` and the Evaluate page).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from workbench import lazylibs
from workbench.errors import ConfigError
from workbench.services import lazy
from workbench.services.evaluation.evaluate import evaluate_files, run_names, stored_run

if TYPE_CHECKING:
    import pandas as pd

    from workbench.core.metrics.evaluation import EvaluationResult
    from workbench.core.metrics.qrels_and_runs import Qrels, Run

DEFAULT_TOP = 5


@dataclass(frozen=True)
class QueryDiff:
    """One query of one comparison: values, delta and both top lists of ``(item_id, grade)``."""

    measure: str
    baseline: str
    run: str
    query_id: str
    baseline_value: float
    run_value: float
    delta: float
    baseline_top: tuple[tuple[str, int | None], ...]
    run_top: tuple[tuple[str, int | None], ...]

    def to_json(self) -> dict:
        def top(items):
            return [{"id": i, "grade": g} for i, g in items]

        return {"measure": self.measure, "baseline": self.baseline, "run": self.run, "query_id": self.query_id,
                "baseline_value": self.baseline_value, "run_value": self.run_value, "delta": self.delta,
                "baseline_top": top(self.baseline_top), "run_top": top(self.run_top)}


def top_items(run: dict[str, dict[str, float]], query_id: str, grades: dict[str, int], k: int):
    """The top ``k`` of one query of a run (``{query: {item: score}}``) in trec_eval's order,
    each with its grade (``None`` when unjudged)."""
    scored = run.get(query_id, {})
    by_id = sorted(scored.items(), key=lambda kv: kv[0].encode(), reverse=True)  # ties: id descending
    ordered = sorted(by_id, key=lambda kv: -kv[1])[:k]  # stable: score descending
    out = []
    for item, _ in ordered:
        g = grades.get(item)
        out.append((item, g if g is not None and g >= 0 else None))
    return tuple(out)


def _check(n_runs: int, k: int) -> None:
    if n_runs < 2:
        raise ConfigError("a per-query comparison needs at least two runs (the baseline first)")
    if k < 1:
        raise ConfigError(f"{{field:top}} must be at least 1, got {k}")


def query_diffs(qrels: Qrels, runs: Mapping[str, Run], results: Mapping[str, EvaluationResult],
                measures: Sequence[str], *, k: int = DEFAULT_TOP) -> list[QueryDiff]:
    """Every query's difference of each run from the first of ``results`` (the baseline), per
    measure (module docstring): ``results`` are the runs' scores against ``qrels``, ``runs``
    (by the same names) give the top lists. Measures in the order given, then runs in order."""
    names = list(results)
    _check(len(names), k)
    judged = qrels.to_dict()
    tops = {name: runs[name].to_dict() for name in names}
    base = names[0]
    out: list[QueryDiff] = []
    for m in dict.fromkeys(measures):
        base_values = dict(zip(results[base].query_ids.astype(str).tolist(), results[base].scores[m].tolist()))
        for name in names[1:]:
            values = dict(zip(results[name].query_ids.astype(str).tolist(), results[name].scores[m].tolist()))
            rows = []
            for q in sorted(set(base_values) & set(values)):
                a, b = base_values[q], values[q]
                if math.isnan(a) or math.isnan(b):
                    continue  # the measure excludes the query (no relevant item at its threshold)
                grades = judged.get(q, {})
                rows.append(QueryDiff(m, base, name, q, a, b, b - a, top_items(tops[base], q, grades, k),
                                      top_items(tops[name], q, grades, k)))
            rows.sort(key=lambda r: (r.delta, r.query_id))
            out.extend(rows)
    return out


def per_query_diff(qrels: str | Path, runs: Sequence[str | Path], measures: Sequence[str], *, rel: int = 1,
                   k: int = DEFAULT_TOP) -> list[QueryDiff]:
    """:func:`query_diffs` of run files against a qrels file, scored by
    :func:`~workbench.services.evaluation.evaluate.evaluate_files` (runs named by ``run_names``)."""

    _check(len(runs), k)
    measures = list(dict.fromkeys(measures))
    names = run_names(runs)
    results = evaluate_files(qrels, runs, measures, rel=rel, names=names)
    loaded = {name: lazy.core_metrics_readers.read_trec_run(path, name=name) for name, path in zip(names, runs)}
    return query_diffs(lazy.core_metrics_readers.read_qrels(qrels), loaded, results, measures, k=k)


def stored_per_query_diff(db, results: Mapping[str, EvaluationResult], qrels: pd.DataFrame, level: str,
                          measures: Sequence[str], *, k: int = DEFAULT_TOP) -> list[QueryDiff]:
    """:func:`query_diffs` of stored runs already scored against the project's qrels: ``results``
    by run name (the first is the baseline), as
    :func:`~workbench.services.evaluation.evaluate.evaluate_project` gives them; ``qrels`` the
    table they were scored against (``query_id, item_id, grade``); ``level`` (``doc`` or
    ``chunk``) the level they were scored at, which is how the top lists are read
    (:func:`~workbench.services.evaluation.evaluate.stored_run`: at document level a document
    takes its best chunk's score)."""

    _check(len(results), k)
    judged = lazy.core_metrics_qrels_and_runs.Qrels(lazylibs.pyarrow.array(qrels["query_id"].astype(str).tolist(), type=lazylibs.pyarrow.string()),
                                                    lazylibs.pyarrow.array(qrels["item_id"].astype(str).tolist(), type=lazylibs.pyarrow.string()),
                                                    qrels["grade"].to_numpy(dtype=lazylibs.numpy.int64))
    runs = {name: stored_run(db, name, level) for name in results}
    return query_diffs(judged, runs, results, measures, k=k)
