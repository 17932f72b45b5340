"""Turn qrels + run into ranked lists: one flat set of arrays for the whole run.

The result, :class:`RankedLists`, holds one row per retrieved document, grouped by query
(contiguous) and in rank order inside each query, with the document's grade joined from the
qrels (NaN when the document carries no label or a label below 0). The measures in
:mod:`workbench.core.metrics.kernels` are segment reductions over these arrays; no Python loop runs
over queries.

Ranking convention (trec_eval's): score descending, ties broken by doc_id descending,
compared byte-wise (UTF-8 byte order equals code-point order, so Python string order is
used). The rank column of a run file is ignored. Scores are float64 (pytrec_eval uses float32,
so two scores that differ only beyond float32 precision tie there but not here).

A doc_id repeated within one query of a run is an error naming query, doc and line
(``duplicates="first"`` keeps the first occurrence instead). Repeated (query, doc) pairs in
qrels are an error too.

Fast paths: two nested dicts are joined with plain dict look-ups on the pairs they share;
columnar inputs get query numbers from one pyarrow dictionary encoding of the query ids (over
qrels and run together) and one 64-bit hash per doc id (:mod:`workbench.core.metrics.id_hash`),
then sorts, binary searches and gathers in numpy; no Python object per row. Every pair matched
on hashes is checked on its strings, and a hash shared by two pairs hands the run to the exact
join (integer codes from a dictionary encoding of the doc ids too), so hashes never change a
value. A run whose rows are already grouped by query in descending score order (the usual case)
is not re-sorted; otherwise rows are grouped by query and each query sorted by score. Doc ids
are compared only where scores tie; the dict and hashed joins compare them only in tie groups
holding a judged document (the order of unjudged documents among themselves changes no
measure).
No pandas on these paths (see :mod:`workbench.core.metrics.arrow_buffers`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import chain, islice, repeat
from operator import itemgetter

import numpy as np
import pyarrow as pa

from workbench.core.metrics.arrow_buffers import (
    dense_rank,
    dictionary_encode,
    take,
    to_numpy,
)
from workbench.core.metrics.id_hash import BLOCK_ROWS, PROBE_ROWS, KeyTable, id_hash, pair_keys, run_heads, same_strings
from workbench.core.metrics.qrels_and_runs import (
    Qrels,
    Run,
    check_grades,
    check_scores,
    qrels_from_dict,
    run_from_dict,
)
from workbench.core.metrics.readers import pair_lines
from workbench.errors import InputError, clip


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
    starts = np.flatnonzero(qidx[1:] != qidx[:-1]) + 1  # every group's first row but the first's
    # ones, with each group's first row stepping back by the previous group's length: the
    # running sum is then 1, 2, ... inside every group (no array of the whole length but this)
    ranks = np.ones(n, dtype=dtype)
    ranks[starts] = 1 - np.diff(np.r_[0, starts])
    return np.cumsum(ranks, out=ranks)


def _descending_key(score: np.ndarray) -> np.ndarray:
    """uint64 keys whose ascending order is the scores' descending order (finite float64;
    -0.0 and 0.0 get the same key, as they compare equal)."""
    bits = (score + 0.0).view(np.uint64)  # + 0.0 turns -0.0 into 0.0
    negative = (bits >> np.uint64(63)).astype(bool)
    ascending = np.where(negative, ~bits, bits | np.uint64(1 << 63))
    return ~ascending


def _sort_rows(qidx: np.ndarray, score: np.ndarray, n_queries: int, grouped: bool) -> np.ndarray:
    """Row order for (query ascending within the grouping, score descending); ties in any order.

    Rows are first grouped by query (nothing to do when they already are; else a stable radix
    sort of 16-bit query numbers), then each group is sorted by score as one row of a padded
    2-D array (``argsort(axis=1)``: many small sorts that stay in cache, faster than one sort of
    all the keys; docs/performance.md), a block of whole groups of about ``_BLOCK_ROWS`` cells at
    a time. Too many queries or too ragged groups fall back to one argsort of a packed 64-bit
    (query, score) key.
    """
    n = len(qidx)
    group: np.ndarray | None = None  # the rows grouped by query; None: they already are
    if grouped:
        qs = qidx
    elif n_queries <= 1 << 16:
        group = np.argsort(qidx.astype(np.uint16), kind="stable")  # numpy: radix sort for 16 bits
        qs = qidx[group]
    else:
        return _sort_packed(qidx, score, n_queries)
    starts = np.flatnonzero(np.r_[True, qs[1:] != qs[:-1]])
    del qs
    glen = np.diff(np.r_[starts, n])
    width = int(glen.max())
    if width * len(glen) > 4 * n + 4096:
        return _sort_packed(qidx, score, n_queries)
    order = np.empty(n, dtype=np.intp)
    ends = np.r_[starts[1:], n]
    columns = np.arange(width)
    # a block of groups at a time (about _BLOCK_ROWS cells): the padded array and its argsort
    # stay in the cache, and the same memory serves every block
    step = max(1, _BLOCK_ROWS // width)
    for g0 in range(0, len(glen), step):
        g1 = min(g0 + step, len(glen))
        r0, r1 = int(starts[g0]), int(ends[g1 - 1])
        lens, first = glen[g0:g1], starts[g0:g1] - r0
        padded = np.full((g1 - g0, width), np.inf)  # + inf pads sort last in every row
        cell = np.arange(r1 - r0) + np.repeat(np.arange(g1 - g0) * width - first, lens)
        padded.ravel()[cell] = -(score[r0:r1] if group is None else score[group[r0:r1]])
        within = np.argsort(padded, axis=1)
        within += first[:, None]  # a row of the block
        picked = within[columns[None, :] < lens[:, None]]
        order[r0:r1] = picked + r0 if group is None else group[r0:r1][picked]
    return order


def _sort_packed(qidx: np.ndarray, score: np.ndarray, n_queries: int) -> np.ndarray:
    """Row order for (query ascending, score descending) by one argsort of a packed 64-bit
    key: the query number in the high bits, the top bits of the score's descending key below
    it. Rows whose packed keys are equal (true ties, or distinct scores that differ only in the
    dropped low bits) are then put in full score order."""
    desc = _descending_key(score)
    qbits = max(1, int(n_queries - 1).bit_length())
    if qbits > 32:
        return np.lexsort((desc, qidx))
    key = (qidx.astype(np.uint64) << np.uint64(64 - qbits)) | (desc >> np.uint64(qbits))
    order = np.argsort(key)
    sk = key[order]
    eq = sk[1:] == sk[:-1]
    if eq.any():
        member = np.r_[eq, False] | np.r_[False, eq]
        pos = np.flatnonzero(member)
        group = np.cumsum(~np.r_[False, eq][pos])
        sub = np.lexsort((desc[order[pos]], group))
        order[pos] = order[pos][sub]
    return order


@dataclass(frozen=True, eq=False)
class _TieOrder:
    """A row order that moves rows only inside tie groups (adjacent rows of one query with one
    score): row ``rows[i]`` takes row ``src[i]``'s place, every other row stays. What a run
    already in (query, score) order needs: no permutation of all its rows is made, and columns
    equal inside a tie group (query numbers, scores) need no reordering at all."""

    rows: np.ndarray
    src: np.ndarray


def _reorder(values: np.ndarray, order: np.ndarray | _TieOrder | None, *, same_in_ties: bool = False) -> np.ndarray:
    """``values`` (one per row) in ``order`` (:func:`_order`'s result). A :class:`_TieOrder` is
    applied in place (``values`` must be the caller's own array), or not at all when
    ``same_in_ties`` (values equal inside every tie group, such as query numbers and scores)."""
    if order is None:
        return values
    if isinstance(order, _TieOrder):
        if not same_in_ties:
            values[order.rows] = values[order.src]  # the right side is gathered first
        return values
    return values[order]


def _order(qidx: np.ndarray, score: np.ndarray, n_queries: int,
           doc_rank: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray | _TieOrder | None:
    """Row order for (query, score desc, doc_id desc); None when the rows are already in it, a
    :class:`_TieOrder` when only rows of tie groups move (apply either with :func:`_reorder`).

    ``doc_rank(rows, group)`` gives integers in the byte order of those rows' doc ids; it is
    called only for rows whose scores tie, with the number of each row's tie group (rows of a
    group are adjacent). It may give 0 to every row of a group whose order changes no measure
    (no judged document in it: all its grades are "none"); such a group keeps its order.
    """
    n = len(qidx)
    order: np.ndarray | None = None
    if n > 1:
        same_q = qidx[1:] == qidx[:-1]
        grouped = np.count_nonzero(~same_q) + 1 == np.count_nonzero(np.bincount(qidx))
        if not grouped or np.any(same_q & (score[1:] > score[:-1])):
            order = _sort_rows(qidx, score, n_queries, grouped)
            qidx, score = qidx[order], score[order]
            same_q = qidx[1:] == qidx[:-1]
        tied = same_q & (score[1:] == score[:-1])
        if tied.any():
            # rows that belong to a tie group, and a number per group
            member = np.r_[tied, False] | np.r_[False, tied]
            pos = np.flatnonzero(member)
            group = np.cumsum(~np.r_[False, tied][pos])
            ranks = doc_rank(pos if order is None else order[pos], group).astype(np.int64)
            top = int(ranks.max())
            if int(group[-1]) * (top + 1) + top < 2**62:
                # one integer key, group ascending then doc rank descending; the groups are
                # already in order, so a stable sort (timsort: runs) is far cheaper than lexsort
                sub = np.argsort(group * (top + 1) + (top - ranks), kind="stable")
            else:
                sub = np.lexsort((-ranks, group))
            if order is None:  # already in (query, score) order: only the tie groups move
                return _TieOrder(pos, pos[sub])
            order[pos] = order[pos][sub]
    return order


# --- joins --------------------------------------------------------------------------------
_POOL = pa.system_memory_pool()


def _encode(arr: pa.Array) -> tuple[np.ndarray, pa.Array]:
    if not len(arr):
        return np.zeros(0, dtype=np.int32), arr
    # glibc's pool: the hash table freed here is reused by the numpy arrays that follow
    # (mimalloc would keep it to itself and raise the peak memory)
    enc = dictionary_encode(arr, _POOL)
    # int32 codes: half the memory of int64; widened only where keys are combined
    return to_numpy(enc.indices, np.int32), enc.dictionary


def _pair_keys(a: np.ndarray, b: np.ndarray, na: int, nb: int) -> np.ndarray:
    """One integer per (a, b) pair, ``a * nb + b`` (0 <= a < na, 0 <= b < nb): uint32 when
    every pair fits (sorts and hashes faster than int64), else int64."""
    if na * nb <= 2**32:
        return a.astype(np.uint32) * np.uint32(nb) + b.astype(np.uint32)
    return a.astype(np.int64) * nb + b


#: cells of a run sorted at a time (the padded per-query sort, the repeated-doc check)
_BLOCK_ROWS = BLOCK_ROWS


def _repeated(keys: np.ndarray) -> bool:
    """True when some key occurs twice (one sort, no hash table)."""
    if len(keys) < 2:
        return False
    sk = np.sort(keys)
    return bool(np.any(sk[1:] == sk[:-1]))


def _repeated_in_groups(keys: np.ndarray, groups: np.ndarray) -> bool:
    """:func:`_repeated` for keys that can only repeat inside a group (a run's (query, doc)
    keys, ``groups`` its query numbers). When the rows are grouped (each group's rows together)
    and every group has the same number of rows (a run cut at a fixed depth), each group is
    sorted alone as a row of a 2-D array (many small sorts that stay in cache, about a third of
    one sort of all the keys); else one sort of all the keys."""
    n = len(keys)
    probe = groups[:PROBE_ROWS]
    if n >= 4 and np.count_nonzero(probe[1:] != probe[:-1]) * 2 < len(probe):  # scattered: no pass over all
        starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
        width = n // len(starts)
        if width > 1 and width * len(starts) == n and np.all(np.diff(starts) == width) \
                and np.count_nonzero(np.bincount(groups[starts])) == len(starts):  # no group twice
            # a block of groups at a time: the sorted copy stays small (in the cache) and
            # the same memory serves every block
            table = keys.reshape(-1, width)
            step = max(1, _BLOCK_ROWS // width)
            for i in range(0, len(table), step):
                rows = np.sort(table[i:i + step], axis=1)
                if np.any(rows[:, 1:] == rows[:, :-1]):
                    return True
            return False
    return _repeated(keys)


def _duplicate_rows(keys: np.ndarray) -> np.ndarray:
    """Rows (ascending) whose key already occurred on an earlier row."""
    if len(keys) < 2:
        return np.zeros(0, dtype=np.intp)
    order = np.argsort(keys, kind="stable")  # equal keys keep their row order
    sk = keys[order]
    return np.sort(order[1:][sk[1:] == sk[:-1]])


def _raise_duplicate(kind: str, source: str | None, locate: Callable[[], tuple[int | None, int | None]],
                     qid: str, doc: str) -> None:
    """``locate()`` gives the file lines of the repeat and of the first occurrence (None when
    the input came from no file)."""
    line, first_line = locate() if source is not None else (None, None)
    first = f" (first at line {first_line})" if first_line is not None else ""
    hint = "; pass duplicates='first' (CLI: {field:keep_first_duplicate}) to keep the first" if kind == "run" else ""
    raise InputError(f"{kind}: document {clip(doc)} appears twice for query {clip(qid)}{first}{hint}",
                     path=source, line=line)


def _locate(lines: np.ndarray | None, source: str | None, row: int, first_row: int, qid: str,
            doc: str) -> Callable[[], tuple[int | None, int | None]]:
    """Where a repeated pair is: the input's own line numbers, else the first two lines of the
    file that hold the pair (one pass over the file, on this error path only: a careful re-read
    of a 10^8-line file would need tens of GB)."""
    if lines is not None:
        return lambda: (int(lines[row]), int(lines[first_row]))

    def search() -> tuple[int | None, int | None]:
        found = pair_lines(source, qid, doc) if source else []
        return (found[1], found[0]) if len(found) == 2 else (None, None)

    return search


def _shared_codes(first: pa.Array, second: pa.Array) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """Integer codes of two string columns over one dictionary (first-appearance order, the
    first column's values first): one hash pass instead of two plus a look-up between them.
    A column grouped by value (query ids of a file sorted by query) has only the first row of
    each run of equal neighbours encoded, its code repeated over the run: the same codes and
    dictionary (first appearances are heads) from one string comparison per row."""
    if not len(second):
        codes, dictionary = _encode(first)
        return codes, np.zeros(0, dtype=np.int32), dictionary
    if not len(first):
        codes, dictionary = _encode(second)
        return np.zeros(0, dtype=np.int32), codes, dictionary
    heads = [_grouped_heads(first), _grouped_heads(second)]
    if heads[0] is None and heads[1] is None:
        codes, dictionary = _encode(pa.concat_arrays([first, second]))
        return codes[: len(first)], codes[len(first):], dictionary
    cols = [col if at is None else take(col, at) for col, at in zip((first, second), heads)]
    codes, dictionary = _encode(pa.concat_arrays(cols))
    split = [codes[: len(cols[0])], codes[len(cols[0]):]]
    for i, (col, at) in enumerate(zip((first, second), heads)):
        if at is not None:
            split[i] = np.repeat(split[i], np.diff(np.r_[at, len(col)]))
    return split[0], split[1], dictionary


def _grouped_heads(column: pa.Array) -> np.ndarray | None:
    """:func:`~workbench.core.metrics.id_hash.run_heads` of a plain string column (else None)."""
    return run_heads(column) if _plain_strings(column) else None


def _join_columns(qrels: Qrels, run: Run, duplicates: str) -> tuple:
    """Join columnar qrels and run through integer codes (pyarrow dictionary encoding).

    Query numbers: the qrels' queries first, then the run's other queries. Query ids and doc ids
    are each encoded once over both inputs, so a (query, doc) pair has one integer key in the
    qrels and in the run. Every per-row step is a vectorised numpy or pyarrow kernel; no Python
    object is made per row.
    """
    qq, rq, q_dict = _shared_codes(qrels.query_ids, run.query_ids)
    universe = np.array(q_dict.to_pylist(), dtype=object)
    qd, rd, d_dict = _shared_codes(qrels.doc_ids, run.doc_ids)
    nq, nd = max(len(universe), 1), max(len(d_dict), 1)

    # qrels: one key per (query, doc); a repeated pair is an error
    qkey = _pair_keys(qq, qd, nq, nd)
    if _repeated(qkey):
        row = int(_duplicate_rows(qkey)[0])
        first_row = int(np.flatnonzero(qkey == qkey[row])[0])
        qid, doc = universe[qq[row]], d_dict[qd[row]].as_py()
        _raise_duplicate("qrels", qrels.source, _locate(qrels.lines, qrels.source, row, first_row, qid, doc), qid, doc)

    # run: the same keys, sorted once: repeated pairs show as equal neighbours (an error, or
    # dropped after the first), and each qrels key is found by a binary search among them
    score = run.scores
    rkey = _pair_keys(rq, rd, nq, nd)
    by_key = np.argsort(rkey)
    sorted_keys = rkey[by_key]
    if len(sorted_keys) > 1 and np.any(sorted_keys[1:] == sorted_keys[:-1]):
        dup = _duplicate_rows(rkey)
        if duplicates != "first":
            row = int(dup[0])
            first_row = int(np.flatnonzero(rkey == rkey[row])[0])
            qid, doc = universe[rq[row]], d_dict[rd[row]].as_py()
            locate = _locate(None if run.partial else run.lines, run.source, row, first_row, qid, doc)
            _raise_duplicate("run", run.source, locate, qid, doc)
        keep = np.ones(len(rq), dtype=bool)
        keep[dup] = False
        rq, score, rd, rkey = rq[keep], score[keep], rd[keep], rkey[keep]
        by_key = np.argsort(rkey)
        sorted_keys = rkey[by_key]

    # grade of each run row: where its (query, doc) key is among the qrels' keys
    grade = np.full(len(rq), np.nan)
    if len(sorted_keys) and len(qkey):
        at = np.searchsorted(sorted_keys, qkey)
        at[at == len(sorted_keys)] = 0
        hit = sorted_keys[at] == qkey
        grade[by_key[at[hit]]] = qrels.grades[hit]
    del rkey, by_key, sorted_keys

    def doc_rank(rows: np.ndarray, group: np.ndarray | None = None) -> np.ndarray:
        docs = take(d_dict, rd[rows])
        return dense_rank(docs)

    return universe, qq, qrels.grades, rq, score, grade, doc_rank


def _plain_strings(column) -> bool:
    """A null-free, unchunked string array: what the hashed join reads from its buffers."""
    return isinstance(column, pa.Array) and column.null_count == 0 and (
        pa.types.is_string(column.type) or pa.types.is_large_string(column.type))


def _join_hashed(qrels: Qrels, run: Run) -> tuple | None:
    """:func:`_join_columns` through 64-bit hashes of the doc ids; None when the exact join
    must decide (a repeated (query, doc) hash in the qrels or the run, or a matched pair whose
    strings differ), so the result is always the exact join's.

    Query ids are encoded as in :func:`_join_columns` (few distinct values: a small table);
    each doc id gets :func:`~workbench.core.metrics.id_hash.id_hash` (no hash table over the
    millions of distinct docs, whose cache misses were most of a large join) and each (query,
    doc) pair one :func:`~workbench.core.metrics.id_hash.pair_keys`. Repeats are found by
    sorting those keys, a run row's qrels row by a binary search among the qrels keys
    (:class:`~workbench.core.metrics.id_hash.KeyTable`); then every matched pair's query
    number and doc string are compared.
    """
    if not len(run) or not len(qrels.grades) or not (_plain_strings(qrels.doc_ids) and _plain_strings(run.doc_ids)):
        return None
    qq, rq, q_dict = _shared_codes(qrels.query_ids, run.query_ids)
    nq = len(q_dict)
    qkey = pair_keys(qq, id_hash(qrels.doc_ids), nq, in_place=True)
    rkey = pair_keys(rq, id_hash(run.doc_ids), nq, in_place=True)
    if _repeated(qkey) or _repeated_in_groups(rkey, rq):
        return None
    universe = np.array(q_dict.to_pylist(), dtype=object)
    docs = run.doc_ids
    # the run rows whose key is a qrels key, and which qrels row: one search serves the tie
    # breaking (which rows are judged) and the grades (placed in ranked order at the end)
    found, src = KeyTable(qkey).find(rkey, ordered=False)
    judged = np.zeros(len(rkey), dtype=bool)
    judged[found] = True  # a clash only ranks more rows

    def doc_rank(tied: np.ndarray, group: np.ndarray) -> np.ndarray:
        """Doc ranks of the tie groups holding a judged row (the others: 0, any order)."""
        need = _groups_with(group, judged[tied])
        ranks = np.zeros(len(tied), dtype=np.int64)
        if need.any():
            ranks[need] = dense_rank(take(docs, tied[need]))
        return ranks

    def place(order: np.ndarray | _TieOrder | None) -> np.ndarray | None:
        """Grades of the ranked rows; None when two pairs share a key (the exact join decides)."""
        if not np.array_equal(rq[found], qq[src]) or not same_strings(take(docs, found), take(qrels.doc_ids, src)):
            return None
        grade = np.full(len(rkey), np.nan)
        grade[found] = qrels.grades[src]
        return _reorder(grade, order)

    return universe, qq, qrels.grades, rq, run.scores, place, doc_rank


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
    inners = list(run.values())
    try:
        qgrade_arr = _float_values(list(qrels.values()), qvalues, qcounts)
        if qvalues is dict.values and rvalues is dict.values:
            hits = _judged_hits_flat(qrels, run, qgrade_arr, qcounts, rcodes, len(universe))
        else:
            hits = _judged_hits(qrels, run)
    except (TypeError, ValueError, OverflowError):
        raise InputError("qrels grades must be integers") from None
    check_grades(qgrade_arr)
    try:
        score = _float_values(inners, rvalues, rcounts)
    except (TypeError, ValueError, OverflowError):
        raise InputError("run scores must be numbers") from None
    check_scores(score)
    qq = np.repeat(np.arange(len(qcounts), dtype=np.int64), qcounts)
    rq = np.repeat(rcodes, rcounts)
    starts = np.cumsum(rcounts) - rcounts  # first row of each run query

    def docs_at(rows: np.ndarray) -> list:
        """Doc ids of some rows (only needed to break ties): the keys of the queries holding
        them, each query's listed up to its last needed row, in one C loop (``chain`` over
        ``islice``), then picked."""
        if not len(rows):
            return []
        which = np.searchsorted(starts, rows, side="right") - 1  # empty queries share a start
        queries, at = np.unique(which, return_inverse=True)
        within = rows - starts[which]
        sizes = np.zeros(len(queries), dtype=np.int64)
        np.maximum.at(sizes, at, within + 1)  # a query's keys past its last needed row are not listed
        keys = list(chain.from_iterable(map(islice, map(inners.__getitem__, queries.tolist()), sizes.tolist())))
        return _pick(keys, (np.cumsum(sizes) - sizes)[at] + within)

    tie_ranks: list = []  # (rows, their doc ranks, the judged pairs' doc ranks) once ties are ranked

    def doc_rank(every_row: np.ndarray, group: np.ndarray) -> np.ndarray:
        """Ranks of the tied rows' docs, in one ranking with the docs of the judged pairs that
        may tie (so :func:`_place_hits` can find a tied pair's row by its doc's rank). Only
        tie groups that a judged pair may belong to are ranked (the others: 0, any order)."""
        # a judged pair ties only if its (query, score) is that of a tied row: a hash of both
        # picks them (a collision only ranks one more doc, harmlessly); the rows of one tie
        # group share that (query, score), so the groups to rank are those of the pairs' keys
        def key(q: np.ndarray, s: np.ndarray) -> np.ndarray:
            return _descending_key(s) ^ (q.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))

        row_key = key(rq[every_row], score[every_row])
        hit_key = key(rcodes[hits[0]], hits[1])
        maybe = np.flatnonzero(np.isin(hit_key, row_key))
        need = np.isin(row_key, hit_key[maybe])
        rows = every_row[need]
        docs = docs_at(rows)
        docs += _pick(hits[3], maybe)
        try:  # pyarrow sorts strings byte-wise in C (trec_eval's strcmp)
            ranks = dense_rank(pa.array(docs, type=pa.string())).astype(np.int64)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # ids that are not str: Python's order
            ranks = np.unique(np.array(docs, dtype=object), return_inverse=True)[1].astype(np.int64) + 1
        hit_rank = np.zeros(len(hits[0]), dtype=np.int64)
        hit_rank[maybe] = ranks[len(rows):]
        tie_ranks[:] = [rows, ranks[: len(rows)], hit_rank]
        out = np.zeros(len(every_row), dtype=np.int64)
        out[need] = ranks[: len(rows)]
        return out

    def place(order: np.ndarray | _TieOrder | None) -> np.ndarray:
        row_rank = hit_rank = None
        if tie_ranks:
            rows, ranks, hit_rank = tie_ranks
            row_rank = np.zeros(n_rows, dtype=np.int64)
            row_rank[rows] = ranks
            row_rank = _reorder(row_rank, order)
        return _place_hits(hits, _reorder(rq, order, same_in_ties=True), _reorder(score, order, same_in_ties=True),
                           row_rank, hit_rank, rcodes, len(universe))

    return np.array(universe, dtype=object), qq, qgrade_arr.astype(np.int64), rq, score, place, doc_rank


_TOUCH_ROWS = 8192  # values listed per step of _float_values: their objects stay in the L2 cache


def _float_values(inners: list, values: Callable, counts: np.ndarray) -> np.ndarray:
    """The values of the mappings ``inners`` (``values(m)`` lists one's values; ``counts``:
    their lengths), in order, as float64; ``np.fromiter``'s TypeError or ValueError for a
    value that is not a number.

    Done in steps of about ``_TOUCH_ROWS`` values, each first listed (a C loop that only takes
    a reference to each value object) and then converted. The values of dicts built row by row
    lie scattered over the heap, so reading each object is a cache miss; the listing loop does
    so little per value that the processor overlaps many of its misses, while numpy's
    conversion loop does more per value and overlaps fewer. Listed first, the step's objects
    are in the cache when they are converted (docs/performance.md has the measurement)."""
    n = int(counts.sum())
    if n <= _TOUCH_ROWS:
        return np.fromiter(chain.from_iterable(map(values, inners)), np.float64, count=n)
    out = np.empty(n, dtype=np.float64)
    # cut between mappings: each step ends at the first mapping that takes it past _TOUCH_ROWS
    ends = np.cumsum(counts)
    cuts = np.unique(np.searchsorted(ends, np.arange(_TOUCH_ROWS, n, _TOUCH_ROWS), side="left") + 1)
    at, lo = 0, 0
    for hi in [*cuts.tolist(), len(inners)]:
        if hi <= lo:
            continue
        listed = list(chain.from_iterable(map(values, inners[lo:hi])))
        out[at:at + len(listed)] = np.fromiter(listed, np.float64, count=len(listed))
        at, lo = at + len(listed), hi
    if at != n:  # a mapping whose len() is not its number of values
        raise ValueError("a mapping listed fewer values than its length")
    return out


def _groups_with(group: np.ndarray, flag: np.ndarray) -> np.ndarray:
    """Per row: does some row of its group (``group``: non-negative numbers) have ``flag``."""
    if not len(group):
        return np.zeros(0, dtype=bool)
    return (np.bincount(group[flag], minlength=int(group.max()) + 1) > 0)[group]


def _pick(values: list, rows: np.ndarray) -> list:
    """``[values[k] for k in rows]``, the loop in C."""
    if len(rows) == 0:
        return []
    if len(rows) == 1:
        return [values[int(rows[0])]]
    return list(itemgetter(*rows.tolist())(values))


def _judged_hits(qrels: Mapping, run: Mapping) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """The (query, doc) pairs in both: run query ordinal, score, grade and doc of each.

    Only these pairs are visited, through a set intersection of the two dicts' keys per query
    (in C), so the cost follows the judged docs retrieved, not every run row (a dict look-up
    per run row was slower: docs/performance.md)."""
    at: list[int] = []
    sizes: list[int] = []
    scores: list = []
    grades: list = []
    docs: list = []
    # bound methods: this loop runs once per query
    get, at_add, size_add = qrels.get, at.append, sizes.append
    score_add, grade_add, doc_add = scores.extend, grades.extend, docs.extend
    for i, (q, inner) in enumerate(run.items()):
        judged = get(q)
        if judged:
            common = inner.keys() & judged.keys()
            if common:
                at_add(i)
                size_add(len(common))
                doc_add(common)
                score_add(map(inner.__getitem__, common))
                grade_add(map(judged.__getitem__, common))
    which = np.repeat(np.array(at, dtype=np.int64), np.array(sizes, dtype=np.int64))
    return which, np.array(scores, dtype=np.float64), np.array(grades, dtype=np.float64), docs


def _judged_hits_flat(qrels: Mapping, run: Mapping, qgrades: np.ndarray, qcounts: np.ndarray, rcodes: np.ndarray,
                      n_queries: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """:func:`_judged_hits` for dicts of dicts, with no Python code per query: each qrels pair
    (query, doc) is looked up in its query's run dict by one ``map(dict.get, ...)`` over all
    pairs (a C loop), NaN where the run lacks it. ``qgrades``/``qcounts``: the qrels' grades
    (in their order) and pairs per query; ``rcodes``: the query number of each run query
    (qrels queries are numbered 0.. in their order)."""
    run_of = np.full(n_queries, -1, dtype=np.int64)  # query number -> run query ordinal
    run_of[rcodes] = np.arange(len(rcodes))
    empty: dict = {}
    inner = map(run.get, qrels, repeat(empty))  # each qrels query's run dict ({} if none)
    docs = list(chain.from_iterable(map(dict.keys, qrels.values())))
    scores = np.fromiter(map(dict.get, chain.from_iterable(map(repeat, inner, qcounts.tolist())), docs,
                             repeat(np.nan)), np.float64, count=len(docs))
    at = np.flatnonzero(~np.isnan(scores))  # a NaN score is refused later (check_scores)
    which = run_of[np.repeat(np.arange(len(qcounts)), qcounts)[at]]
    return which, scores[at], qgrades[at], _pick(docs, at)


def _place_hits(hits: tuple, sq: np.ndarray, ss: np.ndarray, row_rank: np.ndarray | None,
                hit_rank: np.ndarray | None, rcodes: np.ndarray, n_queries: int) -> np.ndarray:
    """Grades of the ranked rows (NaN: no label) from the judged pairs of :func:`_judged_hits`.

    A pair's row is found by a vectorised binary search inside its query's block of the ranked
    rows, which are in (score, doc rank) descending order: ``row_rank``/``hit_rank`` are the
    doc ranks of the tied rows and of the pairs (one ranking; None when no score ties, 0 for a
    row whose score is unique, where the score alone decides)."""
    which, hscore, hgrade, _ = hits
    n = len(sq)
    grade = np.full(n, np.nan)
    if not len(which):
        return grade
    bounds = np.flatnonzero(np.r_[True, sq[1:] != sq[:-1]]) if n else np.zeros(0, dtype=np.int64)
    first = np.zeros(n_queries, dtype=np.int64)
    length = np.zeros(n_queries, dtype=np.int64)
    first[sq[bounds]] = bounds
    length[sq[bounds]] = np.diff(np.r_[bounds, n])
    q = rcodes[which]
    lo, hi = first[q].copy(), first[q] + length[q]
    # first position in the block whose (score, doc rank) is <= the pair's (both descend)
    for _ in range(int(length.max()).bit_length() + 1):
        active = lo < hi
        if not active.any():
            break
        mid = np.minimum((lo + hi) // 2, n - 1)
        after = ss[mid] > hscore
        if row_rank is not None:
            after |= (ss[mid] == hscore) & (row_rank[mid] > hit_rank)
        right = active & after
        lo = np.where(right, mid + 1, lo)
        hi = np.where(active & ~right, mid, hi)
    grade[lo] = hgrade
    return grade


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
        universe, qq, qgrades, rq, score, place, doc_rank = _join_dicts(qrels, run)
        order = _order(rq, score, len(universe), doc_rank)
        grade = place(order)  # the judged pairs are placed once the rows are ranked
    else:
        q = qrels if isinstance(qrels, Qrels) else qrels_from_dict(qrels)
        r = run if isinstance(run, Run) else run_from_dict(run)
        joined, grade = _join_hashed(q, r), None
        if joined is not None:
            universe, qq, qgrades, rq, score, place, doc_rank = joined
            order = _order(rq, score, len(universe), doc_rank)
            grade = place(order)  # None: a key shared by two pairs
        if grade is None:
            universe, qq, qgrades, rq, score, grade, doc_rank = _join_columns(q, r, duplicates)
            order = _order(rq, score, len(universe), doc_rank)
            grade = _reorder(grade, order)
    rq = _reorder(rq, order, same_in_ties=True)
    grade[grade < 0] = np.nan  # pooled but unjudged: neither relevant nor judged
    n = len(universe)
    in_qrels = np.zeros(n, dtype=bool)
    in_qrels[qq] = True
    in_run = np.zeros(n, dtype=bool)
    in_run[rq] = True
    judged = qgrades >= 0
    return RankedLists(
        universe, in_qrels, in_run, rq, group_ranks(rq), grade,
        qq[judged], qgrades[judged],
    )
