"""Evaluate a run against qrels: the metric engine's entry point, ``from workbench import evaluate``.

It joins the inputs (:mod:`~workbench.core.metrics.ranking`), runs the measures' kernels
(:mod:`~workbench.core.metrics.kernels`, named by :mod:`~workbench.core.metrics.measures`) and averages them.

Conventions (the single place they are written down; docs/metrics.md repeats them)
----------------------------------------------------------------------------------
Ranking
    Score descending, ties broken by doc_id descending (byte-wise), as trec_eval. The rank
    column of a run file is ignored. Scores are float64 (pytrec_eval rounds them to float32).
Relevance
    ``rel`` (default 1) binarises every binary measure: relevant <=> grade >= rel. A measure
    can carry its own threshold, e.g. ``P(rel=2)@10``. Graded measures (ndcg, ndcg_exp, err)
    use the raw grades and ignore the evaluation's ``rel`` (trec_eval's ndcg ignores ``-l``);
    with a measure-level ``rel`` their grades below it count 0 (ranx's ``-l``).
    Labels < 0 mean "pooled but not judged": neither relevant nor judged.
Denominators
    precision@k divides by k even when fewer docs were retrieved; recall@k, map and map@k
    divide by R (qrels rows with grade >= rel); nDCG's ideal ranking uses every judged grade of
    the query, cut at k. ``mrr`` has no cutoff (trec_eval's recip_rank); ``mrr@k`` is the
    reciprocal rank when the first relevant doc is within the top k, else 0.
Queries
    * In qrels but no relevant document (R = 0): excluded from the averages and listed in
      ``excluded_no_relevant``; ``include_no_relevant=True`` scores them (0 for most measures)
      as trec_eval does. "Relevant" follows each measure's own threshold: ``AP(rel=2)``
      excludes the queries without a grade >= 2 document even when ``rel`` is 1, so
      ``-m "AP(rel=2)"`` and ``--rel 2 -m AP`` give the same values, per query and in the
      mean. When the measures of one evaluation use different thresholds, ``per_query`` has a
      row for every query some measure scores and NaN where a measure excluded the query;
      each mean is over that measure's own queries (``counts_by_measure()``).
    * In qrels but missing from the run: scored 0 (trec_eval ``-c``, ir_measures);
      ``missing_as_zero=False`` averages over queries in both only (pytrec_eval).
    * Only in the run: ignored and listed in ``only_in_run``.
Condensed lists
    ``condensed=True`` drops docs without a label >= 0 from each ranking before scoring
    (trec_eval ``-J``, Sakai 2007).
Duplicates
    A doc repeated within one query of a run is an error naming query, doc and line;
    ``duplicates="first"`` keeps its first occurrence.

Differences from trec_eval's defaults: queries with no relevant doc are excluded (trec_eval
scores them), missing queries count 0 (trec_eval 9 needs ``-c``), scores are not truncated to
float32 (pytrec_eval), judged@k divides by min(k, retrieved) (trec_eval's unj@k divides by k),
and RBP's residuals are 1 for a query missing from the run (trec_eval -c prints 0). RBP reports
two residuals: ``.residual`` is the spec's p^n (what the ranks below the list could add) and
``.residual_unjudged`` is trec_eval's rbp_resid (p^n plus the weight of the unjudged ranks).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from workbench import lazylibs
from workbench.core.metrics.arrow_buffers import take
from workbench.core.metrics.kernels import RESIDUAL_SUFFIX, UNJUDGED_RESIDUAL_SUFFIX, compute
from workbench.core.metrics.measures import Measure, parse_measures
from workbench.core.metrics.qrels_and_runs import Qrels, Run, qrels_from_dict
from workbench.core.metrics.ranking import rank_run
from workbench.core.metrics.readers import (
    DEFAULT_BLOCK_ROWS,
    RunParts,
    read_qrels,
    read_trec_run,
    read_trec_run_parts,
)
from workbench.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["EvaluationResult", "evaluate", "load_qrels", "load_run"]


@dataclass(frozen=True)
class EvaluationResult:
    """Scores of one run. ``per_query`` has one row per evaluated query, one column per measure
    (named as given; RBP adds ``<name>.residual``, p^n, and ``<name>.residual_unjudged``,
    trec_eval's rbp_resid); ``aggregate`` is the mean of each column.

    ``query_ids`` (sorted) and ``scores`` (label -> one float64 per query id) hold the same
    numbers as ``per_query``; that DataFrame is built on first access, so an evaluation that
    only reads ``aggregate`` never imports pandas.
    """

    aggregate: dict[str, float]
    measures: dict[str, Measure]
    query_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=object), repr=False, compare=False)
    scores: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    excluded_no_relevant: tuple[str, ...] = ()
    missing_from_run: tuple[str, ...] = ()
    only_in_run: tuple[str, ...] = ()
    run_name: str | None = None
    settings: dict = field(default_factory=dict)
    #: per measure label (RBP residuals included): its relevance threshold, the queries it
    #: excluded for having no relevant document and the queries it scored 0 as missing
    thresholds: dict[str, int] = field(default_factory=dict)
    excluded_by_measure: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    missing_by_measure: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    #: queries in both the qrels and the run whose retrieved ids are none of them in the qrels
    #: (every document unjudged: the query scores 0 whatever the run did)
    no_judged_retrieved: tuple[str, ...] = field(default=(), repr=False)
    #: queries in both the qrels and the run
    n_common: int = 0
    #: project evaluation only (None in file mode): the unanswerable queries the run answered,
    #: left out of the ranking measures on purpose (issue 13) and not counted as ``only_in_run``
    excluded_unanswerable: tuple[str, ...] | None = None

    @cached_property
    def per_query(self) -> pd.DataFrame:
        """One row per evaluated query (index ``query_id``, str), one column per measure."""

        index = lazylibs.pandas.Index(self.query_ids.astype(str), name="query_id", dtype=str)
        return lazylibs.pandas.DataFrame({label: v for label, v in self.scores.items()}, index=index)

    @property
    def n_queries(self) -> int:
        """Queries averaged over."""
        return len(self.query_ids)

    @property
    def n_excluded_no_relevant(self) -> int:
        return len(self.excluded_no_relevant)

    @property
    def n_missing_from_run(self) -> int:
        """Queries in qrels (with relevant docs) absent from the run: scored 0 or dropped."""
        return len(self.missing_from_run)

    @property
    def n_only_in_run(self) -> int:
        return len(self.only_in_run)

    @property
    def single_threshold(self) -> bool:
        """True when every measure uses the same relevance threshold (the usual case)."""
        return len(set(self.thresholds.values())) <= 1

    def counts(self) -> dict[str, int]:
        """Query counts of the whole evaluation. With several thresholds: ``queries_evaluated``
        counts the rows of ``per_query`` (scored by at least one measure),
        ``excluded_no_relevant`` the queries every measure excluded, ``missing_from_run`` the
        rows missing from the run. A project evaluation adds ``excluded_unanswerable`` (the
        unanswerable queries the run answered, left out of ranking measures)."""
        return {
            "queries_evaluated": self.n_queries,
            "excluded_no_relevant": self.n_excluded_no_relevant,
            "missing_from_run": self.n_missing_from_run,
            "only_in_run": self.n_only_in_run,
        } | ({} if self.excluded_unanswerable is None else {"excluded_unanswerable": len(self.excluded_unanswerable)})

    def counts_by_measure(self) -> dict[str, dict[str, int]]:
        """Per measure label: ``rel`` (its threshold), ``queries_evaluated`` (its non-NaN
        values), ``excluded_no_relevant`` and ``missing_from_run`` under its threshold."""
        return {
            label: {
                "rel": self.thresholds[label],
                "queries_evaluated": int(np.count_nonzero(~np.isnan(values))),
                "excluded_no_relevant": len(self.excluded_by_measure.get(label, ())),
                "missing_from_run": len(self.missing_by_measure.get(label, ())),
            }
            for label, values in self.scores.items()
        }


def load_qrels(qrels: Qrels | Mapping | str | Path) -> Qrels | Mapping:
    if isinstance(qrels, (str, Path)):
        return read_qrels(qrels)
    if isinstance(qrels, (Qrels, Mapping)):
        return qrels
    raise InputError(f"qrels must be a path, a dict or a Qrels, got {type(qrels).__name__}")


def load_run(run: Run | Mapping | str | Path) -> Run | Mapping:
    if isinstance(run, (str, Path)):
        return read_trec_run(run)
    if isinstance(run, (Run, Mapping)):
        return run
    raise InputError(f"run must be a path, a dict or a Run, got {type(run).__name__}")


@dataclass
class _Scored:
    """One part's per-query results: its queries (a set no other part shares), each measure's
    values, and what the selection of queries needs."""

    ids: np.ndarray
    values: dict[str, np.ndarray]
    in_qrels: np.ndarray
    in_run: np.ndarray
    judged_hit: np.ndarray  # a retrieved document has a label >= 0
    has_rel: dict[int, np.ndarray]  # threshold -> some qrels grade >= it


def _score(pair: list, parsed: list, rel: int, thresholds: set[int], condensed: bool, duplicates: str) -> _Scored:
    """Rank and score one ``[qrels, run]`` pair; the list is emptied once the run is ranked
    (its columns are then no longer needed)."""
    ranked = rank_run(*pair, duplicates=duplicates)
    pair.clear()
    if condensed:
        ranked = ranked.condensed()
    values = compute(ranked, parsed, rel)
    nq = ranked.n_queries
    # a query whose every retrieved id is unjudged (NaN grade): usually ids of another kind
    judged_hit = np.bincount(ranked.qidx[~np.isnan(ranked.grade)], minlength=nq) > 0
    has_rel = {t: np.bincount(ranked.judged_qidx[ranked.judged_grade >= t], minlength=nq) > 0 for t in thresholds}
    return _Scored(ranked.query_ids, values, ranked.in_qrels, ranked.in_run, judged_hit, has_rel)


def _dict_parts(qrels: Mapping, run: Mapping, block_rows: int) -> Iterator[list]:
    """Nested dicts as (qrels, run) pairs of whole queries with about ``block_rows`` run rows
    each (run queries in their order), then the qrels' queries the run does not have. One pair,
    the dicts themselves, when the run fits (or is not a dict of dicts: the join words that)."""
    inners = list(run.values())
    if not all(type(v) is dict for v in inners):
        yield [qrels, run]
        return
    counts = np.fromiter(map(len, inners), dtype=np.int64, count=len(inners))
    if counts.sum() <= block_rows:
        yield [qrels, run]
        return
    keys = list(run)
    # cut before the query that would take a block past block_rows (a bigger query: a block alone)
    ends = np.cumsum(counts)
    starts = [0]
    while starts[-1] < len(keys):
        base = ends[starts[-1] - 1] if starts[-1] else 0
        stop = int(np.searchsorted(ends, base + block_rows, side="right"))
        starts.append(max(stop, starts[-1] + 1))
    get = qrels.get
    for lo, hi in zip(starts[:-1], starts[1:]):
        block = keys[lo:hi]
        yield [{k: v for k in block if (v := get(k)) is not None}, dict(zip(block, inners[lo:hi]))]
    rest = {k: v for k, v in qrels.items() if k not in run}
    if rest:
        yield [rest, {}]


def _column_parts(qrels: Qrels, run: RunParts) -> Iterator[list]:
    """The qrels split like the run's parts (the same hash of the query id), paired with them."""
    parts = iter(run)
    if run.n_parts == 1:
        yield [qrels, next(parts)]
        return
    part = run.part_of(qrels.query_ids)
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(run.n_parts + 1))
    del part
    for p in range(run.n_parts):
        rows = order[bounds[p]:bounds[p + 1]]
        yield [Qrels(take(qrels.query_ids, rows), take(qrels.doc_ids, rows), qrels.grades[rows],
                     lines=None if qrels.lines is None else qrels.lines[rows], source=qrels.source),
               next(parts)]


def evaluate(
    qrels: Qrels | Mapping | str | Path,
    run: Run | RunParts | Mapping | str | Path,
    measures: str | Measure | Sequence[str | Measure],
    *,
    rel: int = 1,
    condensed: bool = False,
    include_no_relevant: bool = False,
    missing_as_zero: bool = True,
    duplicates: str = "error",
    block_rows: int = DEFAULT_BLOCK_ROWS,
) -> EvaluationResult:
    """Score ``run`` against ``qrels`` with each measure, per query and macro-averaged.

    ``qrels``: ``{query_id: {doc_id: grade}}``, a path (TREC, BEIR TSV or JSONL) or
    :class:`~workbench.core.metrics.readers.Qrels`. ``run``: ``{query_id: {doc_id: score}}``, a TREC run
    path, :class:`~workbench.core.metrics.readers.Run` or
    :class:`~workbench.core.metrics.readers.RunParts`. ``measures``: names such as ``"ndcg@10"``,
    ``"P(rel=2)@10"``, ``"RBP(p=0.8)"`` or :class:`Measure` objects. See the module docstring
    for the conventions and switches.

    ``block_rows``: a run path or a dict of dicts with more rows is scored in parts of whole
    queries of about that many rows (a file is first split by a hash of the query id, so its
    order does not matter), one part in memory at a time. Every measure is a function of one
    query's rows, so the values do not depend on it; only the peak memory does.
    """
    if isinstance(rel, bool) or not isinstance(rel, (int, np.integer)):
        raise InputError(f"rel must be an integer, got {rel!r}")
    if duplicates not in ("error", "first"):
        raise ValueError("duplicates must be 'error' or 'first'")
    parsed = parse_measures(measures)
    # which queries each threshold scores (a measure's own rel, else the evaluation's)
    thresholds = {label: int(rel if m.rel is None else m.rel) for label, m in parsed}
    q = load_qrels(qrels)
    opened = isinstance(run, (str, Path))
    r = read_trec_run_parts(run, block_rows=block_rows) if isinstance(run, (str, Path)) \
        else run if isinstance(run, RunParts) else load_run(run)
    run_name = getattr(r, "name", None)
    try:
        if isinstance(r, RunParts):
            pairs = _column_parts(q if isinstance(q, Qrels) else qrels_from_dict(q), r)
        elif isinstance(q, Mapping) and isinstance(r, Mapping):
            pairs = _dict_parts(q, r, block_rows)
        else:
            pairs = iter([[q, r]])
        # the pairs are lists that _score empties: a run read here is freed before the measures
        del q
        parts = [_score(pair, parsed, int(rel), set(thresholds.values()), condensed, duplicates) for pair in pairs]
    finally:
        if opened and isinstance(r, RunParts):  # opened: read_trec_run_parts made it
            r.close()
    del r
    return _assemble(parts, parsed, thresholds, int(rel), run_name, condensed=condensed,
                     include_no_relevant=include_no_relevant, missing_as_zero=missing_as_zero,
                     duplicates=duplicates)


def _assemble(parts: list[_Scored], parsed: list, thresholds: dict[str, int], rel: int, run_name: str | None, *,
              condensed: bool, include_no_relevant: bool, missing_as_zero: bool, duplicates: str) -> EvaluationResult:
    """The parts' per-query results as one evaluation: which queries each measure scores,
    the columns sorted by query id, the means."""
    def cat(get) -> np.ndarray:
        return get(parts[0]) if len(parts) == 1 else np.concatenate([get(p) for p in parts])

    ids = cat(lambda p: p.ids)
    values = {label: cat(lambda p, label=label: p.values[label]) for label in parts[0].values}
    in_qrels, in_run, judged_hit = cat(lambda p: p.in_qrels), cat(lambda p: p.in_run), cat(lambda p: p.judged_hit)
    only_run = in_run & ~in_qrels
    common = in_run & in_qrels
    no_judged = common & ~judged_hit
    thresholds = dict(thresholds)
    for label in list(values):
        if label not in thresholds:  # RBP's residuals follow their measure
            suffix = UNJUDGED_RESIDUAL_SUFFIX if label.endswith(UNJUDGED_RESIDUAL_SUFFIX) else RESIDUAL_SUFFIX
            thresholds[label] = thresholds[label[: -len(suffix)]]
    chosen_at, missing_at, no_rel_at = {}, {}, {}
    for t in sorted(set(thresholds.values())):
        has_rel = cat(lambda p, t=t: p.has_rel[t])
        no_rel_at[t] = in_qrels & ~has_rel
        candidates = in_qrels & (has_rel | include_no_relevant)
        missing_at[t] = candidates & ~in_run
        chosen_at[t] = candidates & (in_run | missing_as_zero)
    chosen = np.logical_or.reduce(list(chosen_at.values()))
    missing = np.logical_or.reduce(list(missing_at.values())) & chosen
    no_rel = np.logical_and.reduce(list(no_rel_at.values()))

    rows = np.flatnonzero(chosen)
    rows = rows[np.argsort(ids[rows].astype(str), kind="stable")]
    scores, aggregate = {}, {}
    for label, v in values.items():
        column = np.ascontiguousarray(v[rows], dtype=np.float64)
        scored = chosen_at[thresholds[label]][rows]
        if not scored.all():
            column[~scored] = np.nan  # this measure excludes the query (no relevant doc at its rel)
        scores[label] = column
        kept = column[scored]
        # the column mean as pandas takes it (no bottleneck): pairwise float64 sum / count
        aggregate[label] = float(kept.sum(dtype=np.float64) / len(kept)) if len(kept) else float("nan")
    excluded_by = {label: () if include_no_relevant else tuple(sorted(ids[no_rel_at[t]]))
                   for label, t in thresholds.items()}
    missing_by = {label: tuple(sorted(ids[missing_at[t] & chosen_at[t]])) for label, t in thresholds.items()}
    return EvaluationResult(
        aggregate=aggregate,
        measures=dict(parsed),
        query_ids=ids[rows],
        scores=scores,
        excluded_no_relevant=() if include_no_relevant else tuple(sorted(ids[no_rel])),
        missing_from_run=tuple(sorted(ids[missing])),
        only_in_run=tuple(sorted(ids[only_run])),
        run_name=run_name,
        settings={
            "rel": int(rel),
            "condensed": condensed,
            "include_no_relevant": include_no_relevant,
            "missing_as_zero": missing_as_zero,
            "duplicates": duplicates,
            "residual_suffix": RESIDUAL_SUFFIX,
            "unjudged_residual_suffix": UNJUDGED_RESIDUAL_SUFFIX,
        },
        thresholds=thresholds,
        excluded_by_measure=excluded_by,
        missing_by_measure=missing_by,
        no_judged_retrieved=tuple(sorted(ids[no_judged])),
        n_common=int(np.count_nonzero(common)),
    )
