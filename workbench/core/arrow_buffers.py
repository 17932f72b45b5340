"""pyarrow <-> numpy without pandas.

pyarrow's own conversions (``Array.to_numpy``, ``np.asarray(array)``, ``pa.array(ndarray)``,
``pa.scalar``) go through its pandas shim, which imports pandas: +40 MB of memory and ~0.5 s
for a process that never touches a DataFrame (``workbench eval``). These read and write the
buffers directly instead.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def to_numpy(arr: pa.Array | pa.ChunkedArray, dtype) -> np.ndarray:
    """Values of a fixed-width pyarrow array (chunked or not) as a new, writable numpy array.

    Null slots hold whatever the buffer holds: check :func:`valid_mask` where nulls can occur.
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


def valid_mask(arr: pa.Array) -> np.ndarray | None:
    """Boolean numpy mask of the non-null slots of ``arr``; None when it has no null."""
    if arr.null_count == 0:
        return None
    bits = np.frombuffer(arr.buffers()[0], dtype=np.uint8)
    return np.unpackbits(bits, count=arr.offset + len(arr), bitorder="little")[arr.offset:].astype(bool)


def from_numpy(values: np.ndarray) -> pa.Array:
    """A null-free numpy array of int32/uint32/int64/float64 as a pyarrow array (zero copy)."""
    values = np.ascontiguousarray(values)
    kind = {np.dtype(np.int32): pa.int32(), np.dtype(np.uint32): pa.uint32(), np.dtype(np.int64): pa.int64(),
            np.dtype(np.float64): pa.float64()}
    return pa.Array.from_buffers(kind[values.dtype], len(values), [None, pa.py_buffer(values)])


