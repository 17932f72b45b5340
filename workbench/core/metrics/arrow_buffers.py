"""pyarrow <-> numpy without pandas.

pyarrow's own conversions (``Array.to_numpy``, ``np.asarray(array)``, ``pa.array(ndarray)``,
``pa.scalar``) go through its pandas shim, which imports pandas: memory and start-up time
(docs/performance.md) for a process that never touches a DataFrame (``workbench eval``). These
read and write the buffers directly instead.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def to_numpy(arr: pa.Array | pa.ChunkedArray, dtype) -> np.ndarray:
    """Values of a fixed-width pyarrow array (chunked or not) as a new, writable numpy array.

    Null slots hold whatever the buffer holds: use it on null-free arrays only.
    """
    dtype = np.dtype(dtype)
    if arr.type.bit_width != 8 * dtype.itemsize or pa.types.is_boolean(arr.type):
        raise TypeError(f"cannot view {arr.type} as {dtype}")
    chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
    parts = [
        np.frombuffer(c.buffers()[1], dtype=dtype, count=len(c), offset=c.offset * dtype.itemsize)
        for c in chunks
        if len(c)
    ]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def from_numpy(values: np.ndarray) -> pa.Array:
    """A null-free numpy array of int32/uint32/int64/float64 as a pyarrow array (zero copy)."""
    values = np.ascontiguousarray(values)
    kind = {np.dtype(np.int32): pa.int32(), np.dtype(np.uint32): pa.uint32(), np.dtype(np.int64): pa.int64(),
            np.dtype(np.float64): pa.float64()}
    return pa.Array.from_buffers(kind[values.dtype], len(values), [None, pa.py_buffer(values)])




# --- compute kernels without importing pyarrow.compute ------------------------------------
# ``import pyarrow.compute`` builds a Python wrapper (with a parsed docstring) for each of its
# hundreds of kernels, once per process (docs/performance.md). The kernels
# themselves live in pyarrow._compute and are called by name here.
try:
    from pyarrow._compute import RankOptions, call_function
except ImportError:  # pragma: no cover - a pyarrow that moved its private module
    from pyarrow.compute import RankOptions, call_function


def dictionary_encode(arr: pa.Array, memory_pool: pa.MemoryPool | None = None) -> pa.DictionaryArray:
    """pyarrow's ``dictionary_encode``: codes in first-appearance order and the dictionary."""
    return call_function("dictionary_encode", [arr], None, memory_pool)


def dense_rank(arr: pa.Array) -> np.ndarray:
    """1-based dense ranks of the values in ascending order (strings compare as bytes)."""
    ranks = call_function("rank", [arr], RankOptions(sort_keys="ascending", tiebreaker="dense"))
    return to_numpy(ranks, np.uint64)


def has_empty_string(column: pa.Array | pa.ChunkedArray) -> bool:
    """True when some value of a string column is "" (read from its offsets, no kernel)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for chunk in chunks:
        if not len(chunk):
            continue
        width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        offsets = np.frombuffer(chunk.buffers()[1], dtype=width, count=len(chunk) + 1,
                                offset=chunk.offset * np.dtype(width).itemsize)
        if np.any(offsets[1:] == offsets[:-1]):
            return True
    return False


def take(arr: pa.Array, rows: np.ndarray) -> pa.Array:
    """``arr[rows]`` (``Array.take`` would import pyarrow.compute)."""
    return call_function("take", [arr, from_numpy(np.asarray(rows, dtype=np.int64))])


_HASH_BASE = np.uint64(0x100000001B3)  # FNV-1a's 64-bit prime
_HASH_POWERS = np.ones(1, dtype=np.uint64)
_HASH_SLICE = 1 << 20


def string_hash(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A 64-bit hash of each string of a null-free string column, the same in every process.

    h(s) = mix(sum_i s[i] * B^i + len(s) * C) over the UTF-8 bytes s[i] (mod 2^64, B = FNV's
    prime, C an odd constant), then a murmur-style finaliser so that every bit depends on every
    byte. Vectorised over all the bytes at once: the cost is one pass over them, whatever the
    lengths. Python's own ``hash`` would do, but it is salted per process and needs one Python
    object per string.
    """
    global _HASH_POWERS
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    # slices of 2^20 strings: the temporaries (three 8-byte numbers per byte of text) stay
    # bounded however long the column (a whole column at once: docs/performance.md)
    chunks = [c.slice(i, _HASH_SLICE) for c in chunks for i in range(0, len(c), _HASH_SLICE)]
    out = []
    for chunk in chunks:
        n = len(chunk)
        if not n:
            continue
        width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        offsets = np.frombuffer(chunk.buffers()[1], dtype=width, count=n + 1,
                                offset=chunk.offset * np.dtype(width).itemsize).astype(np.int64)
        data = chunk.buffers()[2]
        lo, hi = int(offsets[0]), int(offsets[-1])
        raw = np.frombuffer(data, dtype=np.uint8, count=hi, offset=0)[lo:] if data is not None and hi > lo \
            else np.zeros(0, dtype=np.uint8)
        lengths = np.diff(offsets)
        starts = offsets[:-1] - lo
        longest = int(lengths.max())
        if longest > len(_HASH_POWERS):
            powers = np.full(longest, _HASH_BASE, dtype=np.uint64)
            powers[0] = 1
            _HASH_POWERS = np.cumprod(powers, dtype=np.uint64)  # wraps mod 2^64, as meant
        position = np.arange(len(raw), dtype=np.int64) - np.repeat(starts, lengths)
        terms = np.append(raw.astype(np.uint64) * _HASH_POWERS[position], np.uint64(0))
        # reduceat gives the element at an empty segment's start: those get 0 below
        h = np.add.reduceat(terms, np.minimum(starts, len(raw))) if len(raw) else np.zeros(n, dtype=np.uint64)
        h[lengths == 0] = 0
        h += lengths.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(33)
        h *= np.uint64(0xC4CEB9FE1A85EC53)
        h ^= h >> np.uint64(33)
        out.append(h)
    return np.concatenate(out) if out else np.zeros(0, dtype=np.uint64)
