"""Turn qrels + run into ranked lists: one flat set of arrays for the whole run.

The result, :class:`RankedLists`, holds one row per retrieved document, grouped by query
(contiguous) and in rank order inside each query, with the document's grade joined from the
qrels (NaN when the document carries no label or a label below 0). The measures in
:mod:`workbench.core.metrics` are segment reductions over these arrays; no Python loop runs
over queries.

Ranking convention (trec_eval's): score descending, ties broken by doc_id descending,
compared byte-wise (UTF-8 byte order equals code-point order, so Python string order is
used). The rank column of a run file is ignored. Scores are float64 (pytrec_eval uses float32,
so two scores that differ only beyond float32 precision tie there but not here).

A doc_id repeated within one query of a run is an error naming query, doc and line
(``duplicates="first"`` keeps the first occurrence instead). Repeated (query, doc) pairs in
qrels are an error too.

Fast paths: two nested dicts are joined with plain dict look-ups; columnar inputs are
dictionary-encoded with pyarrow and joined with a sorted-key search. A run whose rows are
already grouped by query in descending score order (the usual case) is not re-sorted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from workbench.core.readers import Qrels, Run, qrels_from_dict, read_trec_qrels, read_trec_run, run_from_dict
from workbench.errors import InputError


@dataclass(frozen=True, eq=False)
class RankedLists:
    """Flat, query-grouped ranked lists joined with their judgments.

    Queries are numbered 0..n_queries-1 over the union of qrels and run queries; ``query_ids``
    maps the number back to the id. Row arrays (``qidx``, ``rank``, ``grade``) are aligned.
    ``judged_qidx``/``judged_grade`` are the qrels rows with a label >= 0.
    """

    query_ids: np.ndarray  # object array of str, one per query number
    in_qrels: np.ndarray  # bool per query: has at least one qrels row (any label)
    in_run: np.ndarray  # bool per query: has at least one run row
    qidx: np.ndarray  # int64 per row
    rank: np.ndarray  # int64 per row, 1-based
    grade: np.ndarray  # float64 per row; NaN = unjudged
    judged_qidx: np.ndarray
    judged_grade: np.ndarray

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    def condensed(self) -> RankedLists:
        """Drop unjudged rows and re-rank (trec_eval -J, Sakai's condensed lists)."""
        keep = ~np.isnan(self.grade)
        qidx = self.qidx[keep]
        return RankedLists(
            self.query_ids, self.in_qrels, self.in_run, qidx, group_ranks(qidx), self.grade[keep],
            self.judged_qidx, self.judged_grade,
        )


def group_ranks(qidx: np.ndarray) -> np.ndarray:
    """1-based position of each row inside its (contiguous) query group."""
    n = len(qidx)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, qidx[1:] != qidx[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, n]))
    return np.arange(1, n + 1, dtype=np.int64) - first


def _order(qidx: np.ndarray, score: np.ndarray, docs_at: Callable[[np.ndarray], np.ndarray]) -> np.ndarray | None:
    """Row order for (query, score desc, doc_id desc); None when the rows are already in it."""
    n = len(qidx)
    order: np.ndarray | None = None
    if n > 1:
        same_q = qidx[1:] == qidx[:-1]
        grouped = np.count_nonzero(~same_q) + 1 == len(np.unique(qidx))
        if not grouped or np.any(same_q & (score[1:] > score[:-1])):
            order = np.lexsort((-score, qidx))
            qidx, score = qidx[order], score[order]
            same_q = qidx[1:] == qidx[:-1]
        tied = same_q & (score[1:] == score[:-1])
        if tied.any():
            if order is None:
                order = np.arange(n)
            # rows that belong to a tie group, and a number per group
            member = np.r_[tied, False] | np.r_[False, tied]
            pos = np.flatnonzero(member)
            group = np.cumsum(~np.r_[False, tied][pos])
            codes, _ = pd.factorize(docs_at(order[pos]), sort=True)
            sub = np.lexsort((-codes, group))
            order[pos] = order[pos][sub]
    return order


# --- joins --------------------------------------------------------------------------------
def _encode(arr: pa.Array) -> tuple[np.ndarray, pa.Array]:
    enc = arr.dictionary_encode() if len(arr) else pa.DictionaryArray.from_arrays(pa.array([], pa.int32()), arr)
    return np.asarray(enc.indices, dtype=np.int64), enc.dictionary


def _duplicate_rows(keys: np.ndarray) -> np.ndarray:
    return np.flatnonzero(pd.Series(keys).duplicated(keep="first").to_numpy())


def _raise_duplicate(kind: str, source: str | None, lines: np.ndarray | None, row: int, first_row: int,
                     qid: str, doc: str, reread: Callable[[], np.ndarray | None]) -> None:
    if lines is None and source is not None:
        lines = reread()
    line = int(lines[row]) if lines is not None else None
    first = f" (first at line {int(lines[first_row])})" if lines is not None else ""
    hint = "; pass duplicates='first' (CLI: --keep-first-duplicate) to keep the first" if kind == "run" else ""
    raise InputError(f"{kind}: document {doc!r} appears twice for query {qid!r}{first}{hint}", path=source, line=line)


def _join_columns(qrels: Qrels, run: Run, duplicates: str) -> tuple:
    qq_codes, qq_dict = _encode(qrels.query_ids)
    rq_codes, rq_dict = _encode(run.query_ids)
    universe = qq_dict.to_pylist()
    position = {q: i for i, q in enumerate(universe)}
    run_map = np.empty(len(rq_dict), dtype=np.int64)
    for i, q in enumerate(rq_dict.to_pylist()):
        j = position.get(q)
        if j is None:
            j = position[q] = len(universe)
            universe.append(q)
        run_map[i] = j
    qq = qq_codes
    rq = run_map[rq_codes]

    # qrels: one key per (query, doc)
    qd_codes, qd_dict = _encode(qrels.doc_ids)
    nqd = max(len(qd_dict), 1)
    qkey = qq * nqd + qd_codes
    dup = _duplicate_rows(qkey)
    if len(dup):
        row = int(dup[0])
        first_row = int(np.flatnonzero(qkey == qkey[row])[0])
        _raise_duplicate("qrels", qrels.source, qrels.lines, row, first_row, universe[qq[row]],
                         qd_dict[qd_codes[row]].as_py(),
                         lambda: read_trec_qrels(qrels.source, careful=True).lines if qrels.source else None)

    # run: duplicates, then the join through the qrels' doc dictionary
    rd_codes, rd_dict = _encode(run.doc_ids)
    rkey_self = rq * max(len(rd_dict), 1) + rd_codes
    dup = _duplicate_rows(rkey_self)
    keep: np.ndarray | None = None
    if len(dup):
        if duplicates != "first":
            row = int(dup[0])
            first_row = int(np.flatnonzero(rkey_self == rkey_self[row])[0])
            _raise_duplicate("run", run.source, run.lines, row, first_row, universe[rq[row]],
                             rd_dict[rd_codes[row]].as_py(),
                             lambda: read_trec_run(run.source, careful=True).lines if run.source else None)
        keep = np.ones(len(rq), dtype=bool)
        keep[dup] = False
    to_qd = pc.index_in(rd_dict, value_set=qd_dict).fill_null(-1)
    run_qd = np.asarray(to_qd, dtype=np.int64)[rd_codes]
    sort_q = np.argsort(qkey, kind="stable")
    skeys = qkey[sort_q]
    rkey = rq * nqd + run_qd
    pos = np.searchsorted(skeys, rkey)
    pos[pos == len(skeys)] = 0
    hit = (run_qd >= 0) & (skeys[pos] == rkey) if len(skeys) else np.zeros(len(rkey), dtype=bool)
    grade = np.full(len(rkey), np.nan)
    grade[hit] = qrels.grades[sort_q[pos[hit]]]
    score = run.scores
    if keep is not None:
        rq, score, grade, rd_codes = rq[keep], score[keep], grade[keep], rd_codes[keep]

    def docs_at(rows: np.ndarray) -> np.ndarray:
        return rd_dict.take(pa.array(rd_codes[rows])).to_numpy(zero_copy_only=False)

    return universe, qq, qrels.grades, rq, score, grade, docs_at


def _join_dicts(qrels: Mapping, run: Mapping) -> tuple:
    universe = list(qrels)
    position = {q: i for i, q in enumerate(universe)}
    qcounts = np.fromiter((len(v) for v in qrels.values()), dtype=np.int64, count=len(universe))
    qgrades: list = []
    for inner in qrels.values():
        if not isinstance(inner, Mapping):
            raise InputError("qrels must be a dict of query_id -> {doc_id: grade}")
        qgrades.extend(inner.values())
    docs: list = []
    scores: list = []
    grades: list = []
    rcodes = np.empty(len(run), dtype=np.int64)
    rcounts = np.empty(len(run), dtype=np.int64)
    for i, (qid, inner) in enumerate(run.items()):
        if not isinstance(inner, Mapping):
            raise InputError("run must be a dict of query_id -> {doc_id: score}")
        j = position.get(qid)
        if j is None:
            j = position[qid] = len(universe)
            universe.append(qid)
        rcodes[i] = j
        rcounts[i] = len(inner)
        docs.extend(inner)
        scores.extend(inner.values())
        judged = qrels.get(qid)
        # dict.get over the run's keys: the join costs one hash look-up per row
        grades.extend(map(judged.get, inner) if judged else [None] * len(inner))
    try:
        qgrade_arr = np.array(qgrades, dtype=np.float64)
        grade = np.array(grades, dtype=np.float64)  # None -> NaN: unjudged
    except (TypeError, ValueError):
        raise InputError("qrels grades must be integers") from None
    if np.isnan(qgrade_arr).any() or (qgrade_arr != np.round(qgrade_arr)).any():
        raise InputError("qrels grades must be integers (e.g. 0, 1, 2, 3; -1 for unjudged)")
    try:
        score = np.array(scores, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError("run scores must be numbers") from None
    if np.isnan(score).any():
        raise InputError("run scores must be numbers, found NaN")
    qq = np.repeat(np.arange(len(qcounts), dtype=np.int64), qcounts)
    rq = np.repeat(rcodes, rcounts)
    doc_arr: list[np.ndarray] = []

    def docs_at(rows: np.ndarray) -> np.ndarray:
        if not doc_arr:
            doc_arr.append(np.array(docs, dtype=object))
        return doc_arr[0][rows]

    return universe, qq, qgrade_arr.astype(np.int64), rq, score, grade, docs_at


def rank_run(
    qrels: Qrels | Mapping,
    run: Run | Mapping,
    *,
    duplicates: str = "error",
) -> RankedLists:
    """Join ``run`` with ``qrels`` and sort it into :class:`RankedLists`.

    ``duplicates``: ``"error"`` (default) or ``"first"`` (keep a doc's first occurrence).
    """
    if duplicates not in ("error", "first"):
        raise ValueError("duplicates must be 'error' or 'first'")
    if isinstance(qrels, Mapping) and isinstance(run, Mapping):
        joined = _join_dicts(qrels, run)
    else:
        q = qrels if isinstance(qrels, Qrels) else qrels_from_dict(qrels)
        r = run if isinstance(run, Run) else run_from_dict(run)
        joined = _join_columns(q, r, duplicates)
    universe, qq, qgrades, rq, score, grade, docs_at = joined
    order = _order(rq, score, docs_at)
    if order is not None:
        rq, grade = rq[order], grade[order]
    grade[grade < 0] = np.nan  # pooled but unjudged: neither relevant nor judged
    n = len(universe)
    in_qrels = np.zeros(n, dtype=bool)
    in_qrels[qq] = True
    in_run = np.zeros(n, dtype=bool)
    in_run[rq] = True
    judged = qgrades >= 0
    return RankedLists(
        np.array(universe, dtype=object), in_qrels, in_run, rq, group_ranks(rq), grade,
        qq[judged], qgrades[judged],
    )
