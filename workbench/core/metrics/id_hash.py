"""64-bit hashes of string ids, read from pyarrow's buffers eight bytes at a time.

``id_hash(column)`` gives one uint64 per string: with ``L`` the string's length in bytes and
``w_0, w_1, ...`` its bytes taken eight at a time as little-endian integers (the last word
zero-padded)::

    h = L * 0x9E3779B97F4A7C15 xor w_0;  h = fmix(h) xor w_k for k >= 1;  hash = fmix(h)

where ``fmix`` is MurmurHash3's 64-bit finaliser (a bijection). Equal strings get equal
hashes in every process (no salt); different strings may collide (probability about 2^-64 a
pair), so callers verify what they match on the strings themselves. Each word is one gather
from a sliding 8-byte view of the data buffer, so the cost is about one pass over n * ceil(L/8)
words, not a Python object or a hash-table insert per string (pyarrow's ``dictionary_encode``
of millions of distinct ids spends most of its time in cache misses of its table).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from workbench.core.metrics.arrow_buffers import take

try:  # the kernel by name: importing pyarrow.compute is start-up cost (see arrow_buffers)
    from pyarrow._compute import call_function
except ImportError:  # pragma: no cover - a pyarrow that moved its private module
    from pyarrow.compute import call_function


_C = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S = np.uint64(33)
#: the low i bytes of a word (i = 0..8)
_MASKS = np.array([(1 << (8 * i)) - 1 for i in range(9)], dtype=np.uint64)
#: rows worked on at a time by a row-wise step (strings hashed here; keys sorted or probed in
#: :mod:`~workbench.core.metrics.ranking`): its temporaries (a few 8-byte numbers per row) then
#: stay in the processor's cache, and the same few blocks of memory serve every slice
BLOCK_ROWS = 1 << 15


def fmix(h: np.ndarray, scratch: np.ndarray | None = None) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser, in place; returns ``h``. ``scratch``: an array of h's
    shape and dtype to hold the shifts (else one is made)."""
    tmp = np.empty_like(h) if scratch is None else scratch
    for m in (_M1, _M2):
        h ^= np.right_shift(h, _S, out=tmp)
        h *= m
    h ^= np.right_shift(h, _S, out=tmp)
    return h


def _offsets(chunk: pa.Array) -> np.ndarray:
    width = np.int64 if pa.types.is_large_string(chunk.type) or pa.types.is_large_binary(chunk.type) else np.int32
    return np.frombuffer(chunk.buffers()[1], dtype=width, count=len(chunk) + 1,
                         offset=chunk.offset * np.dtype(width).itemsize)


def _hash_chunk(chunk: pa.Array, h: np.ndarray) -> np.ndarray:
    """The hashes of ``chunk``'s strings, written into ``h`` (uint64, one per string)."""
    n = len(chunk)
    offsets = _offsets(chunk)
    lo, hi = int(offsets[0]), int(offsets[-1])
    lengths = np.diff(offsets)
    h[...] = lengths
    h *= _C
    if hi == lo:
        return fmix(h)
    data = chunk.buffers()[2]
    # the text plus 8 zero bytes, so that an 8-byte read at any string start stays inside
    padded = np.zeros(hi - lo + 8, dtype=np.uint8)
    padded[: hi - lo] = np.frombuffer(data, dtype=np.uint8, count=hi)[lo:]
    # word i = the 8 bytes starting at byte i (unaligned, overlapping: a strided view, no copy)
    words = np.ndarray(shape=(hi - lo + 1,), dtype="<u8", buffer=padded, strides=(1,))
    # intp: a gather with int32 positions converts them on every pass
    starts = offsets[:-1].astype(np.intp)
    if lo:
        starts -= lo
    shortest, longest = int(lengths.min()), int(lengths.max())
    scratch = np.empty(n, dtype=np.uint64)  # fmix's shifts: one array for every pass
    rows = None  # None: every row still has bytes at this word
    for k in range(0, longest, 8):
        if rows is not None:
            rows = rows[lengths[rows] > k]
        elif shortest <= k:
            rows = np.flatnonzero(lengths > k)
        if rows is None:
            w = words[starts + k if k else starts]
            if shortest < k + 8:
                # keep only the string's own bytes of its last word
                w &= _MASKS[np.minimum(lengths - k, 8) if k or longest > 8 else lengths]
            if k:
                fmix(h, scratch)
            h ^= w
        else:
            w = words[starts[rows] + k]
            if int(lengths[rows].min()) < k + 8:
                w &= _MASKS[np.minimum(lengths[rows] - k, 8)]
            h[rows] = (fmix(h[rows]) if k else h[rows]) ^ w
    del words, padded
    return fmix(h, scratch) if n else h


def id_hash(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """uint64 hash of each string of a null-free string column (formula in the module docstring)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out = np.empty(len(column), dtype=np.uint64)
    at = 0
    for chunk in chunks:
        for i in range(0, len(chunk), BLOCK_ROWS):
            part = chunk.slice(i, BLOCK_ROWS)
            _hash_chunk(part, out[at:at + len(part)])
            at += len(part)
    return out


def grouped_id_hash(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """:func:`id_hash` of each string, hashing each run of equal neighbours once: a column
    grouped by value (a run file sorted by query) costs one string comparison per row."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    heads = run_heads(arr)
    if heads is None:  # not grouped: hash every row
        return id_hash(arr)
    return np.repeat(id_hash(take(arr, heads)), np.diff(np.r_[heads, len(arr)]))


#: rows looked at first to tell a column not grouped by value, before any pass over all of them
PROBE_ROWS = 1 << 12


def run_heads(arr: pa.Array) -> np.ndarray | None:
    """The first row of each run of equal neighbours in a null-free string array (one string
    comparison per row), or None when there are more than a quarter as many runs as rows (a
    column not grouped by value: working on the heads would save little). The first 4,096 rows
    are checked first, so a scattered column costs no pass over all of its rows."""
    n = len(arr)
    if n < 2:
        return np.zeros(n, dtype=np.intp)
    if n > PROBE_ROWS:  # a scattered column shows it in its first rows: no pass over all of them
        head = run_heads(arr.slice(0, PROBE_ROWS))
        if head is None:
            return None
    differs = call_function("not_equal", [arr.slice(1), arr.slice(0, n - 1)])
    bits = np.unpackbits(np.frombuffer(differs.buffers()[1], dtype=np.uint8), count=n - 1 + differs.offset,
                         bitorder="little")[differs.offset:]
    heads = np.flatnonzero(np.r_[True, bits.view(bool)])
    return None if len(heads) > n // 4 else heads


def pair_keys(query_code: np.ndarray, doc_hash: np.ndarray, n_queries: int, *,
              in_place: bool = False) -> np.ndarray:
    """One uint64 per (query number, doc hash): the query number in the high bits, the doc
    hash's top bits below it, so that sorted keys are grouped by query (a binary search for
    the rows of one query stays in one small region). Equal pairs give equal keys.

    ``in_place=True`` writes the keys over ``doc_hash`` (a uint64 array the caller no longer
    needs) and returns it; the query numbers are widened a slice at a time, so no temporary
    array of the whole length is made."""
    qbits = max(1, int(n_queries - 1).bit_length())
    if not in_place:
        return (query_code.astype(np.uint64) << np.uint64(64 - qbits)) | (doc_hash >> np.uint64(qbits))
    np.right_shift(doc_hash, np.uint64(qbits), out=doc_hash)
    high = np.uint64(64 - qbits)
    for i in range(0, len(doc_hash), BLOCK_ROWS):
        doc_hash[i:i + BLOCK_ROWS] |= query_code[i:i + BLOCK_ROWS].astype(np.uint64) << high
    return doc_hash


def same_strings(a: pa.Array, b: pa.Array) -> bool:
    """True when two string arrays of one length hold the same strings row by row (compared
    on their offsets and bytes: no kernel, no Python object per row)."""
    if len(a) != len(b):
        return False
    if not len(a):
        return True
    oa, ob = _offsets(a), _offsets(b)
    if not np.array_equal(np.diff(oa), np.diff(ob)):
        return False
    ra = np.frombuffer(a.buffers()[2], dtype=np.uint8, count=int(oa[-1]))[int(oa[0]):] if oa[-1] > oa[0] else b""
    rb = np.frombuffer(b.buffers()[2], dtype=np.uint8, count=int(ob[-1]))[int(ob[0]):] if ob[-1] > ob[0] else b""
    return bool(np.array_equal(ra, rb)) if len(ra) else len(rb) == 0


_FIB = np.uint64(0x9E3779B97F4A7C15)  # 2^64 / golden ratio: multiplicative (Fibonacci) hashing
#: a KeyTable whose byte map stays within 2^22 bytes and whose table within 2^21 slots takes
#: twice the room of each: fewer keys not in the table pass the map and fewer probes meet
#: another key (docs/performance.md); bigger ones keep their size (peak memory at scale)
_ROOMY_MAP_BITS, _ROOMY_TABLE_BITS = 22, 21


class KeyTable:
    """uint64 keys without repeats, prepared for :meth:`find` (built once, searched often).

    Both structures below are indexed by top bits of ``key * 0x9E3779B97F4A7C15`` (mod
    2^64; multiplicative hashing: every bit of the key moves them, the query number in the high
    bits of a :func:`pair_keys` key as much as the doc hash; the key's low bits alone are the
    doc's, and most docs are judged for some query, so a map on them drops almost nothing).
    A byte map of about 8 slots per key (16 while small) first drops most probed keys that are
    not in the table (most run rows are unjudged); the rest are looked up in an open-addressing
    table of at least 2 slots per key (4 while small; linear probing from the key's home slot),
    by vectorised rounds: one gather per round, and after the first only the probes that met
    another key go on (fewer than half). A binary search in the sorted keys (the former design)
    made about 20 dependent reads per probe.

    The table is built in rounds as well: the keys still unplaced try their current slot, one
    of those aiming at a free slot wins it, the others move one slot on. A slot once taken
    stays taken, so every slot between a key's home and its place is occupied (the linear
    probing invariant: a search may stop at the first empty slot), and no key is more than
    ``max_probe`` slots from its home.
    """

    def __init__(self, table: np.ndarray):
        table = np.asarray(table, dtype=np.uint64)
        self.n = len(table)
        bits = min(max(10, (8 * self.n).bit_length()), 27)
        if bits < _ROOMY_MAP_BITS:  # a small map: twice the room, half the false hits
            bits += 1
        self.seen_shift = np.uint64(64 - bits)
        mixed = table * _FIB
        self.seen = np.zeros(1 << bits, dtype=bool)
        self.seen[(mixed >> self.seen_shift).astype(np.intp)] = True
        size_bits = max(4, self.n.bit_length() + 1)  # > 2 slots per key
        if size_bits < _ROOMY_TABLE_BITS:  # a small table: > 4 slots per key, shorter probes
            size_bits += 1
        self.mask = (1 << size_bits) - 1
        self.shift = np.uint64(64 - size_bits)
        # the empty-slot mark: a value that is no key (0 unless 0 is a key)
        empty = 0
        while self.n and np.any(table == np.uint64(empty)):
            empty += 1
        self.empty = np.uint64(empty)
        self.slot_key = np.full(1 << size_bits, self.empty, dtype=np.uint64)
        self.slot_row = np.zeros(1 << size_bits, dtype=np.int32 if self.n < 2**31 else np.int64)
        pending = np.arange(self.n, dtype=self.slot_row.dtype)
        at = (mixed >> self.shift).astype(np.intp)
        del mixed
        self.max_probe = 0
        while len(pending):
            free = self.slot_key[at] == self.empty
            cand, cand_at = pending[free], at[free]
            self.slot_row[cand_at] = cand  # of several keys aiming at one free slot, the last written wins
            won = self.slot_row[cand_at] == cand
            self.slot_key[cand_at[won]] = table[cand[won]]
            lost = ~free
            lost[free] = ~won
            if not lost.any():
                break
            pending = pending[lost]
            at = (at[lost] + 1) & self.mask
            self.max_probe += 1

    def find(self, keys: np.ndarray, *, ordered: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, at)``: the positions in ``keys`` whose value is in the table (ascending;
        ``ordered=False``: in no particular order, one sort less), and where (its position in
        the array the table was built from)."""
        if not self.n or not len(keys):
            return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
        # the byte map, a slice of keys at a time: its temporaries stay in the cache
        parts = []
        for i in range(0, len(keys), BLOCK_ROWS):
            mixed = keys[i:i + BLOCK_ROWS] * _FIB
            mixed >>= self.seen_shift
            # shifted values are < 2^63: read as intp (view), not converted (a copy)
            part = np.flatnonzero(self.seen[mixed.view(np.intp)])
            if i:
                part += i
            parts.append(part)
        rows = parts[0] if len(parts) == 1 else np.concatenate(parts)
        wanted = keys[rows]
        other = wanted != self.empty  # the empty-slot mark is no key, but would match an empty slot
        if not other.all():
            rows, wanted = rows[other], wanted[other]
        at = ((wanted * _FIB) >> self.shift).view(np.intp)
        found_rows, found_at = [], []
        for _ in range(self.max_probe + 1):  # a key of the table is at most max_probe slots on
            there = self.slot_key[at]
            hit = there == wanted
            if hit.any():
                found_rows.append(rows[hit])
                found_at.append(self.slot_row[at[hit]].astype(np.intp))
            go_on = ~hit & (there != self.empty)  # an empty slot ends the search
            if not go_on.any():
                break
            rows, wanted, at = rows[go_on], wanted[go_on], (at[go_on] + 1) & self.mask
        if not found_rows:
            return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
        if len(found_rows) == 1:
            return found_rows[0], found_at[0]
        rows, at = np.concatenate(found_rows), np.concatenate(found_at)
        if not ordered:
            return rows, at
        order = np.argsort(rows, kind="stable")
        return rows[order], at[order]


def find_keys(keys: np.ndarray, table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, at)``: the positions in ``keys`` whose value is in ``table`` (uint64 arrays,
    ``table`` without repeats) and where in ``table`` (:class:`KeyTable`)."""
    return KeyTable(table).find(keys)
