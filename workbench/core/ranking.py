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

Fast paths: two nested dicts are joined with plain dict look-ups; columnar inputs are joined
through the qrels' doc dictionary (pyarrow) and a sorted-key search. The run's own doc ids are
hashed only when 64-bit fingerprints of (query, doc) cannot rule out a duplicate, which is rare:
hashing a million distinct ids costs more than the whole rest of the evaluation. A run whose
rows are already grouped by query in descending score order (the usual case) is not re-sorted.
No pandas on these paths (see :func:`workbench.core.readers.to_numpy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain, islice, repeat
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from workbench.core.readers import (
    Qrels, Run, from_numpy, qrels_from_dict, read_trec_qrels, read_trec_run, run_from_dict, to_numpy, valid_mask,
)
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
    rank: np.ndarray  # int32 per row (int64 beyond 2**31 rows), 1-based
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
    dtype = np.int32 if n < 2**31 - 1 else np.int64  # int32: half the memory traffic
    if n == 0:
        return np.zeros(0, dtype=dtype)
    starts = np.flatnonzero(np.r_[True, qidx[1:] != qidx[:-1]]).astype(dtype)
    ranks = np.arange(1, n + 1, dtype=dtype)
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
            _, codes = np.unique(docs_at(order[pos]), return_inverse=True)  # rank in string order
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
    return to_numpy(enc.indices, np.int32), enc.dictionary


def _duplicate_rows(keys: np.ndarray) -> np.ndarray:
    """Rows (ascending) whose key already occurred on an earlier row."""
    if len(keys) < 2:
        return np.zeros(0, dtype=np.intp)
    order = np.argsort(keys, kind="stable")  # equal keys keep their row order
    sk = keys[order]
    return np.sort(order[1:][sk[1:] == sk[:-1]])


_MASKS = np.array([(1 << (8 * i)) - 1 for i in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_K = [np.uint64(k) for k in (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0xD6E8FEB86659FD93)]


def _fingerprints(strings: pa.Array) -> np.ndarray | None:
    """A 64-bit fingerprint per string (equal strings, equal fingerprints), from its length and
    the 8-byte words at its start, middle and end: exact content for ids up to 24 bytes. None
    for an array this cannot read (then the caller uses a hash table)."""
    if not isinstance(strings, pa.StringArray) or strings.null_count:
        return None
    n = len(strings)
    out = np.empty(n, dtype=np.uint64)
    if n == 0:
        return out
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int32, count=n + 1, offset=4 * strings.offset)
    end = int(offsets[-1])
    raw = np.frombuffer(strings.buffers()[2], dtype=np.uint8, count=end) if end else np.zeros(0, np.uint8)
    step = 1 << 20  # in slices: small temporaries are reused instead of page-faulted in anew
    for a in range(0, n, step):
        b = min(a + step, n)
        lo, hi = int(offsets[a]), int(offsets[b])
        data = np.zeros(hi - lo + 16, dtype=np.uint8)  # padded: every 8-byte read stays inside
        data[: hi - lo] = raw[lo:hi]
        # words[i] = the 8 bytes from byte i (little endian), an overlapping view without a copy
        words = np.ndarray(shape=(hi - lo + 9,), dtype="<u8", buffer=data, strides=(1,))
        start = offsets[a:b] - lo
        length = offsets[a + 1:b + 1] - offsets[a:b]
        mask = _MASKS[np.minimum(length, 8)]  # bytes of a short id beyond its end do not count
        tail = np.maximum(length - 8, 0)
        h = out[a:b]
        np.multiply(words[start] & mask, _K[0], out=h)
        h ^= h >> np.uint64(29)
        h += (words[start + tail // 2] & mask) * _K[1]
        h ^= h >> np.uint64(32)
        h += (words[start + tail] & mask) * _K[2]
        h ^= h >> np.uint64(29)
        h += length.astype(np.uint64) * _K[3]
    return out


def _surely_no_duplicate(rq: np.ndarray, docs: pa.Array) -> bool:
    """True when no (query, doc) pair repeats, proved by fingerprints; False means maybe."""
    fp = _fingerprints(docs)
    if fp is None:
        return False
    fp += rq.astype(np.uint64) * _K[0]
    fp ^= fp >> np.uint64(31)
    fp.sort()  # numpy's vectorised sort: a few ms for a million keys, far below a hash table
    return not np.any(fp[1:] == fp[:-1])


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

    if _surely_no_duplicate(rq, run.doc_ids):
        # the common case: join each run row straight to the qrels' doc dictionary
        found = pc.index_in(run.doc_ids, value_set=qd_dict, memory_pool=_POOL)
        run_qd = to_numpy(found, np.int32)
        valid = valid_mask(found)
        if valid is not None:
            run_qd[~valid] = -1
        del found, valid
        grade = _grades(qrels, qkey, nqd, rq, run_qd)
        doc_ids = run.doc_ids

        def docs_at(rows: np.ndarray) -> np.ndarray:
            return np.array(doc_ids.take(from_numpy(rows.astype(np.int64))).to_pylist(), dtype=object)

        return universe, qq, qrels.grades, rq, run.scores, grade, docs_at

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
    found = pc.index_in(rd_dict, value_set=qd_dict, memory_pool=_POOL)
    to_qd = to_numpy(found, np.int32)
    valid = valid_mask(found)
    if valid is not None:
        to_qd[~valid] = -1
    del found, valid
    run_qd = to_qd[rd_codes]
    del to_qd
    grade = _grades(qrels, qkey, nqd, rq, run_qd)
    del run_qd
    score = run.scores
    if keep is not None:
        rq, score, grade, rd_codes = rq[keep], score[keep], grade[keep], rd_codes[keep]

    def docs_at(rows: np.ndarray) -> np.ndarray:
        return np.array(rd_dict.take(from_numpy(rd_codes[rows])).to_pylist(), dtype=object)

    return universe, qq, qrels.grades, rq, score, grade, docs_at


def _grades(qrels: Qrels, qkey: np.ndarray, nqd: int, rq: np.ndarray, run_qd: np.ndarray) -> np.ndarray:
    """Grade of each run row (NaN: no label); ``run_qd`` is its doc's code in the qrels (-1: none)."""
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
    return grade


def _join_dicts(qrels: Mapping, run: Mapping) -> tuple:
    universe = list(qrels)
    position = {q: i for i, q in enumerate(universe)}
    # one isinstance per distinct type, not per query (the ABC check costs ~0.3 us a call)
    qtypes, rtypes = set(map(type, qrels.values())), set(map(type, run.values()))
    if not all(issubclass(t, Mapping) for t in qtypes):
        raise InputError("qrels must be a dict of query_id -> {doc_id: grade}")
    if not all(issubclass(t, Mapping) for t in rtypes):
        raise InputError("run must be a dict of query_id -> {doc_id: score}")
    qvalues = dict.values if all(issubclass(t, dict) for t in qtypes) else _values
    rvalues = dict.values if all(issubclass(t, dict) for t in rtypes) else _values
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
        qgrade_arr = np.fromiter(chain.from_iterable(map(qvalues, qrels.values())), np.float64,
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
        score = np.fromiter(chain.from_iterable(map(rvalues, run.values())), np.float64, count=n_rows)
    except (TypeError, ValueError):
        raise InputError("run scores must be numbers") from None
    if np.isnan(score).any():
        raise InputError("run scores must be numbers, found NaN")
    qq = np.repeat(np.arange(len(qcounts), dtype=np.int64), qcounts)
    rq = np.repeat(rcodes, rcounts)
    inners = list(run.values())
    starts = np.cumsum(rcounts) - rcounts  # first row of each run query

    def docs_at(rows: np.ndarray) -> np.ndarray:
        """Doc ids of some rows; only needed to break ties, so usually a few."""
        if len(rows) > n_rows // 32:  # many ties: one pass over all doc ids is cheaper
            return np.fromiter(chain.from_iterable(inners), dtype=object, count=n_rows)[rows]
        which = np.searchsorted(starts, rows, side="right") - 1  # empty queries share a start
        out = np.empty(len(rows), dtype=object)
        # the k-th key of a query's dict: islice skips in C
        out[:] = [next(islice(inners[w], k, None)) for w, k in zip(which.tolist(), (rows - starts[which]).tolist())]
        return out

    return universe, qq, qgrade_arr.astype(np.int64), rq, score, grade, docs_at


def _values(mapping: Mapping):
    return mapping.values()


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
