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
from itertools import chain, repeat
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
    ranks = np.arange(1, n + 1, dtype=np.int64)
    ranks -= np.repeat(starts, np.diff(np.r_[starts, n]))
    return ranks


def _order(qidx: np.ndarray, score: np.ndarray, docs_at: Callable[[np.ndarray], np.ndarray]) -> np.ndarray | None:
    """Row order for (query, score desc, doc_id desc); None when the rows are already in it."""
    n = len(qidx)
    order: np.ndarray | None = None
    if n > 1:
        same_q = qidx[1:] == qidx[:-1]
        grouped = np.count_nonzero(~same_q) + 1 == np.count_nonzero(np.bincount(qidx))
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
_POOL = pa.system_memory_pool()


def _encode(arr: pa.Array) -> tuple[np.ndarray, pa.Array]:
    if not len(arr):
        return np.zeros(0, dtype=np.int32), arr
    # glibc's pool: the hash table freed here is reused by the numpy arrays that follow
    # (mimalloc would keep it to itself and raise the peak memory)
    enc = pc.dictionary_encode(arr, memory_pool=_POOL)
    # int32 codes: half the memory of int64; widened only where keys are combined
    return np.asarray(enc.indices).astype(np.int32, copy=False), enc.dictionary


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
    run_map = np.empty(len(rq_dict), dtype=np.int32)
    for i, q in enumerate(rq_dict.to_pylist()):
        j = position.get(q)
        if j is None:
            j = position[q] = len(universe)
            universe.append(q)
        run_map[i] = j
    qq = qq_codes
    rq = run_map[rq_codes]
    del rq_codes

    # qrels: one key per (query, doc)
    qd_codes, qd_dict = _encode(qrels.doc_ids)
    nqd = max(len(qd_dict), 1)
    qkey = qq.astype(np.int64) * nqd + qd_codes
    dup = _duplicate_rows(qkey)
    if len(dup):
        row = int(dup[0])
        first_row = int(np.flatnonzero(qkey == qkey[row])[0])
        _raise_duplicate("qrels", qrels.source, qrels.lines, row, first_row, universe[qq[row]],
                         qd_dict[qd_codes[row]].as_py(),
                         lambda: read_trec_qrels(qrels.source, careful=True).lines if qrels.source else None)

    # run: duplicates, then the join through the qrels' doc dictionary
    rd_codes, rd_dict = _encode(run.doc_ids)
    # Only a doc that occurs on several rows can be a duplicate: hash just those rows' keys.
    shared = np.flatnonzero(np.bincount(rd_codes, minlength=len(rd_dict))[rd_codes] > 1)
    shared_keys = rq[shared].astype(np.int64) * max(len(rd_dict), 1) + rd_codes[shared]
    dup = shared[_duplicate_rows(shared_keys)]
    keep: np.ndarray | None = None
    if len(dup):
        if duplicates != "first":
            row = int(dup[0])
            first_row = int(shared[np.flatnonzero(shared_keys == shared_keys[shared == row][0])[0]])
            _raise_duplicate("run", run.source, run.lines, row, first_row, universe[rq[row]],
                             rd_dict[rd_codes[row]].as_py(),
                             lambda: read_trec_run(run.source, careful=True).lines if run.source else None)
        keep = np.ones(len(rq), dtype=bool)
        keep[dup] = False
    del shared, shared_keys
    to_qd = np.asarray(pc.index_in(rd_dict, value_set=qd_dict, memory_pool=_POOL).fill_null(-1)).astype(
        np.int32, copy=False)
    run_qd = to_qd[rd_codes]
    del to_qd
    sort_q = np.argsort(qkey, kind="stable")
    skeys = qkey[sort_q]
    grade = np.full(len(rq), np.nan)
    cand = np.flatnonzero(run_qd >= 0)  # only docs that occur in the qrels at all
    if len(cand) and len(skeys):
        rkey = rq[cand].astype(np.int64) * nqd + run_qd[cand]
        pos = np.searchsorted(skeys, rkey)
        pos[pos == len(skeys)] = 0
        hit = skeys[pos] == rkey
        grade[cand[hit]] = qrels.grades[sort_q[pos[hit]]]
    del run_qd, cand
    score = run.scores
    if keep is not None:
        rq, score, grade, rd_codes = rq[keep], score[keep], grade[keep], rd_codes[keep]

    def docs_at(rows: np.ndarray) -> np.ndarray:
        return rd_dict.take(pa.array(rd_codes[rows])).to_numpy(zero_copy_only=False)

    return universe, qq, qrels.grades, rq, score, grade, docs_at


def _join_dicts(qrels: Mapping, run: Mapping) -> tuple:
    universe = list(qrels)
    position = {q: i for i, q in enumerate(universe)}
    for inner in qrels.values():
        if not isinstance(inner, Mapping):
            raise InputError("qrels must be a dict of query_id -> {doc_id: grade}")
    for inner in run.values():
        if not isinstance(inner, Mapping):
            raise InputError("run must be a dict of query_id -> {doc_id: score}")
    qcounts = np.fromiter(map(len, qrels.values()), dtype=np.int64, count=len(qrels))
    rcounts = np.fromiter(map(len, run.values()), dtype=np.int64, count=len(run))
    rcodes = np.empty(len(run), dtype=np.int64)
    for i, qid in enumerate(run):
        j = position.get(qid)
        if j is None:
            j = position[qid] = len(universe)
            universe.append(qid)
        rcodes[i] = j
    n_rows = int(rcounts.sum())
    empty: dict = {}
    nan = float("nan")
    try:
        qgrade_arr = np.fromiter(chain.from_iterable(map(dict.values, qrels.values())), np.float64,
                                 count=int(qcounts.sum()))
        # one dict look-up per run row; missing -> NaN (unjudged)
        grade = np.fromiter(
            chain.from_iterable(
                map(qrels.get(q, empty).get, inner, repeat(nan)) for q, inner in run.items()
            ),
            np.float64,
            count=n_rows,
        )
    except (TypeError, ValueError):
        raise InputError("qrels grades must be integers") from None
    if np.isnan(qgrade_arr).any() or (qgrade_arr != np.round(qgrade_arr)).any():
        raise InputError("qrels grades must be integers (e.g. 0, 1, 2, 3; -1 for unjudged)")
    try:
        score = np.fromiter(chain.from_iterable(map(dict.values, run.values())), np.float64, count=n_rows)
    except (TypeError, ValueError):
        raise InputError("run scores must be numbers") from None
    if np.isnan(score).any():
        raise InputError("run scores must be numbers, found NaN")
    qq = np.repeat(np.arange(len(qcounts), dtype=np.int64), qcounts)
    rq = np.repeat(rcodes, rcounts)
    doc_arr: list[np.ndarray] = []

    def docs_at(rows: np.ndarray) -> np.ndarray:
        if not doc_arr:  # only needed to break ties: built on first use
            doc_arr.append(np.fromiter(chain.from_iterable(run.values()), dtype=object, count=n_rows))
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
