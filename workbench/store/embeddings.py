"""Table ``embeddings``: the dense embedding cache, one float vector per (chunking, model, chunk_id).

Vectors are written and read through Arrow (no row loop): writing 10,000 x 384 floats is one
INSERT ... SELECT over a registered Arrow table, reading is one ``to_arrow_table`` whose list
column is flattened and reshaped with numpy.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from workbench.errors import StoreError
from workbench.store.database import Cursor, Database, where_equal


def write_embeddings(cur: Cursor, chunking: str, model: str, chunk_ids, vectors: np.ndarray) -> int:
    """Append ``vectors[i]`` as the embedding of ``chunk_ids[i]`` in ``cur``'s transaction.

    ``vectors`` is an ``(n, dim)`` array (stored as FLOAT[], i.e. float32). Returns ``n``.
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    ids = [str(c) for c in chunk_ids]
    if vectors.ndim != 2 or vectors.shape[0] != len(ids):
        raise StoreError(
            f"embeddings for chunking {chunking!r} / model {model!r}: got {len(ids)} chunk ids "
            f"but a vector array of shape {vectors.shape}; pass one row per chunk id"
        )
    if not ids:
        return 0
    n, dim = vectors.shape
    offsets = pa.array(np.arange(0, (n + 1) * dim, dim, dtype=np.int64), type=pa.int64())
    column = pa.LargeListArray.from_arrays(offsets, pa.array(vectors.ravel(), type=pa.float32()))
    table = pa.table({
        "chunking": pa.array([chunking] * n, type=pa.string()),
        "model": pa.array([model] * n, type=pa.string()),
        "chunk_id": pa.array(ids, type=pa.string()),
        "vector": column,
    })
    cur.register("_incoming_embeddings", table)
    cur.execute(
        "INSERT INTO embeddings (chunking, model, chunk_id, vector) "
        "SELECT chunking, model, chunk_id, vector::FLOAT[] FROM _incoming_embeddings"
    )
    cur.unregister("_incoming_embeddings")
    return n


def read_embeddings(db: Database, chunking: str, model: str) -> tuple[list[str], np.ndarray]:
    """Cached ``(chunk_ids, vectors)`` of one (chunking, model); ``vectors`` is ``(n, dim)`` float32.

    No cache yet: ``([], array of shape (0, 0))``.
    """
    cur = db.cursor()
    try:
        table = cur.sql(
            "SELECT chunk_id, vector FROM embeddings WHERE chunking = ? AND model = ? ORDER BY chunk_id",
            params=[chunking, model],
        ).to_arrow_table()
    finally:
        cur.close()
    if table.num_rows == 0:
        return [], np.zeros((0, 0), dtype=np.float32)
    ids = table.column("chunk_id").to_pylist()
    vectors = table.column("vector").combine_chunks()
    flat = vectors.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    dim = len(flat) // table.num_rows
    if dim * table.num_rows != len(flat):
        raise StoreError(
            f"cached embeddings of chunking {chunking!r} / model {model!r} have mixed dimensions; "
            f"delete them (`DELETE FROM embeddings WHERE chunking = '{chunking}'`) and re-run"
        )
    return ids, flat.reshape(table.num_rows, dim)


def count_embeddings(db: Database, chunking: str | None = None, model: str | None = None) -> int:
    """Rows in the cache, optionally of one chunking and/or model."""
    clause, params = where_equal(chunking=chunking, model=model)
    return int(db.query_value(f"SELECT count(*) FROM embeddings {clause}", params))


def read_embeddings_of(db: Database, chunking: str, model: str, ids) -> tuple[list[str], np.ndarray]:
    """Cached ``(ids found, vectors)`` of the given ``ids`` only (one (chunking, model)), so a
    caller working in blocks holds one block of vectors; an id cached twice (two interrupted
    writes) counts once. Nothing found: ``([], array of shape (0, 0))``."""
    ids = list(dict.fromkeys(str(i) for i in ids))
    if not ids:
        return [], np.zeros((0, 0), dtype=np.float32)
    cur = db.cursor()
    try:
        table = cur.sql(
            "SELECT chunk_id, any_value(vector) AS vector FROM embeddings "
            "WHERE chunking = ? AND model = ? AND chunk_id IN (SELECT unnest(?::VARCHAR[])) GROUP BY chunk_id",
            params=[chunking, model, ids],
        ).to_arrow_table()
    finally:
        cur.close()
    if table.num_rows == 0:
        return [], np.zeros((0, 0), dtype=np.float32)
    found = table.column("chunk_id").to_pylist()
    flat = table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
    dim = len(flat) // table.num_rows
    if dim * table.num_rows != len(flat):
        raise StoreError(f"cached embeddings of {chunking!r} / model {model!r} have mixed dimensions; "
                         f"delete them (`DELETE FROM embeddings WHERE chunking = '{chunking}'`) and re-run")
    return found, flat.reshape(table.num_rows, dim)
