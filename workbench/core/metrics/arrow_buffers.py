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


def take(arr: pa.Array, rows: np.ndarray) -> pa.Array:
    """``arr[rows]`` (``Array.take`` would import pyarrow.compute)."""
    return call_function("take", [arr, from_numpy(np.asarray(rows, dtype=np.int64))])
