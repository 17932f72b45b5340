"""Tables ``pools`` and ``pool_pairs`` and the view ``pool_provenance``: the pool record, its
pairs (with judging priority) and which run put each pair there at which rank.

Provenance (migration 15): a depth-k pool's provenance is each pooled run's rows with
``rank <= k``. ``pool_runs`` names the (pool, run) whose provenance the view reads from
``run_rows`` at the pool's depth (nothing is copied); ``pool_provenance_rows`` holds provenance
stored as rows (pools of older projects whose rows differ from that derivation, rows written
by hand). Readers use the view ``pool_provenance`` (``pool, query_id, doc_id, chunk_id, run,
rank``), their union."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.store.database import Cursor, Database, arrow_query_df, one_row


def create_pool(cur: Cursor, name: str, *, level: str, chunking: str | None, depth: int, runs: list[str]) -> None:
    cur.execute(
        "INSERT INTO pools (name, level, chunking, depth, runs) VALUES (?, ?, ?, ?, ?)",
        [name, level, chunking, int(depth), json.dumps(list(runs))],
    )


def update_pool_runs(cur: Cursor, name: str, runs: list[str]) -> None:
    cur.execute(
        "UPDATE pools SET runs = ?, updated_at = current_timestamp WHERE name = ?",
        [json.dumps(list(runs)), name],
    )


def read_pool(db: Database, name: str) -> dict | None:
    """The pool record as a dict (``runs`` parsed), or None when there is no such pool."""
    rows = db.query_all(
        "SELECT name, level, chunking, depth, runs::VARCHAR, created_at, updated_at FROM pools WHERE name = ?",
        [name],
    )
    if not rows:
        return None
    name, level, chunking, depth, runs, created, updated = rows[0]
    return {"name": name, "level": level, "chunking": chunking, "depth": int(depth),
            "runs": json.loads(runs), "created_at": created, "updated_at": updated}


def read_pools(db: Database) -> pd.DataFrame:
    """Every pool with its pair and query counts."""
    return db.query_df(
        """SELECT p.name, p.level, p.chunking, p.depth, p.runs::VARCHAR AS runs,
                  count(x.query_id) AS pairs, count(DISTINCT x.query_id) AS queries,
                  p.created_at, p.updated_at
           FROM pools p LEFT JOIN pool_pairs x ON x.pool = p.name
           GROUP BY ALL ORDER BY p.created_at, p.name"""
    )


def read_pool_pair_counts(db: Database) -> pd.DataFrame:
    """Every pool's ``name, level, chunking, pairs`` in the order of :func:`read_pools`, without
    its distinct queries (counting those is a second hash table over every pair)."""
    return db.query_df(
        """SELECT p.name, p.level, p.chunking, count(x.query_id) AS pairs
           FROM pools p LEFT JOIN pool_pairs x ON x.pool = p.name
           GROUP BY p.name, p.level, p.chunking, p.created_at ORDER BY p.created_at, p.name"""
    )


def read_pool_pairs(db: Database, name: str) -> pd.DataFrame:
    return arrow_query_df(
        db,
        """SELECT query_id, doc_id, chunk_id, priority, rrf_score FROM pool_pairs
           WHERE pool = ? ORDER BY query_id, priority""",
        [name],
    )


def read_pool_provenance(db: Database, name: str) -> pd.DataFrame:
    return arrow_query_df(
        db,
        """SELECT query_id, doc_id, chunk_id, run, rank FROM pool_provenance
           WHERE pool = ? ORDER BY run, query_id, rank""",
        [name],
    )


def derive_pool_provenance(cur: Cursor, pool: str, runs: list[str]) -> None:
    """Record that ``runs``' provenance in ``pool`` is their run rows with ``rank <=`` the pool's
    depth: one ``pool_runs`` row per run (``pool`` must exist; a run already recorded is not
    recorded twice). The rows themselves are read from ``run_rows`` through the view."""
    cur.execute(
        """INSERT INTO pool_runs (pool, run)
           SELECT DISTINCT ?, u.run FROM (SELECT unnest(?::VARCHAR[]) AS run) u
           WHERE NOT EXISTS (SELECT 1 FROM pool_runs x WHERE x.pool = ? AND x.run = u.run)
           ORDER BY u.run""",
        [pool, list(runs), pool],
    )
    cur.fetchall()


# -- Set work for the pooling service -------------------------------------------------------
# Building or extending a pool of millions of pairs stays inside DuckDB: the pairs are
# grouped in a temporary table of the unit of work (``_pool_stage``), only integers cross
# into numpy (pair row ids, query codes, per-run ranks), and the priorities computed there
# are joined back to the staged ids when the pairs are written. Strings never reach pandas.

_STAGE = "_pool_stage"


def _item(level: str) -> str:
    """The run_rows / pool_provenance column that names a pooled item at ``level``."""
    return "chunk_id" if level == "chunk" else "doc_id"


@dataclass(frozen=True)
class StagedPairs:
    """Pairs staged in ``_pool_stage``, read back as numbers sorted by (query_id, item id).

    ``rid``: row id in the stage (to write the pair later); ``query``: query code (0.., in
    query_id order); ``ranks``: per run (in the order asked) the pair's rank, 0 if absent;
    ``rows``: how many staged run rows the pair has (more than its non-zero ranks means a run
    lists the pair twice); ``top``: the query's highest priority already in the pool (0 if
    none; only when staging pairs to add to a pool).
    """

    rid: np.ndarray
    query: np.ndarray
    ranks: list[np.ndarray]
    rows: np.ndarray
    top: np.ndarray
    queries: int


def summarise_run_rows(cur: Cursor, runs: list[str], depth: int, level: str) -> pd.DataFrame:
    """Per run (ordered by name): ``run, rows, missing, min_rank`` of its rows with
    ``rank <= depth`` (``missing``: rows without an item id at ``level``)."""
    item = _item(level)
    return cur.execute(
        f"""SELECT run, count(*) AS rows, count(*) FILTER (WHERE {item} IS NULL) AS missing,
                   min(rank) AS min_rank
            FROM run_rows WHERE run IN (SELECT unnest(?::VARCHAR[])) AND rank <= ?
            GROUP BY run ORDER BY run""",
        [list(runs), int(depth)],
    ).df()


def first_duplicate_run_row(cur: Cursor, runs: list[str], depth: int, level: str) -> tuple | None:
    """The first ``(run, query_id, item)`` (in that order) listed twice within ``depth``."""
    item = _item(level)
    row = cur.execute(
        f"""SELECT run, query_id, {item} FROM run_rows
            WHERE run IN (SELECT unnest(?::VARCHAR[])) AND rank <= ?
            GROUP BY ALL HAVING count(*) > 1 ORDER BY ALL LIMIT 1""",
        [list(runs), int(depth)],
    ).fetchall()
    return tuple(row[0]) if row else None


def _pivot(runs: list[str]) -> str:
    return ", ".join(f"min(h.rank) FILTER (WHERE h.run = ?) AS r{j}" for j in range(len(runs)))


def stage_new_pool_pairs(cur: Cursor, pool: str, pool_runs: list[str], new_runs: list[str], depth: int,
                         level: str) -> StagedPairs:
    """Stage the pairs that ``new_runs`` (rows with ``rank <= depth``) bring to ``pool``: those
    not among its pairs yet, with their ranks in ``pool_runs`` (from the pool's provenance,
    ordinarily none) and in ``new_runs``. ``pool_runs + new_runs`` is the order of ranks."""
    item = _item(level)
    runs = list(pool_runs) + list(new_runs)
    cur.execute(
        f"""CREATE TEMP TABLE {_STAGE} AS
            WITH new_rows AS (
                SELECT run, query_id, {item} AS item, doc_id, rank FROM run_rows
                WHERE run IN (SELECT unnest(?::VARCHAR[])) AND rank <= ?),
            fresh AS (
                SELECT DISTINCT n.query_id, n.item FROM new_rows n
                ANTI JOIN (SELECT query_id, {item} AS item FROM pool_pairs WHERE pool = ?) p
                ON p.query_id = n.query_id AND p.item = n.item),
            hits AS (
                SELECT run, query_id, item, doc_id, rank FROM new_rows
                UNION ALL
                SELECT run, query_id, {item} AS item, doc_id, rank FROM pool_provenance WHERE pool = ?)
            SELECT h.query_id, h.item, any_value(h.doc_id) AS doc_id, count(*) AS n, {_pivot(runs)}
            FROM hits h SEMI JOIN fresh f ON f.query_id = h.query_id AND f.item = h.item
            GROUP BY h.query_id, h.item""",
        [list(new_runs), int(depth), pool, pool, *runs],
    )
    cur.fetchall()
    return _read_stage(cur, len(runs), pool)


class DuplicateRunRows(Exception):
    """A pooled run lists a (query, item) pair twice within the depth (found by
    :func:`write_fused_pool_pairs`; the transaction is aborted, find the row with
    :func:`first_duplicate_run_row` after the rollback)."""


_DUPLICATE_MARK = "workbench-pool: a run lists a pair twice"


def write_fused_pool_pairs(cur: Cursor, pool: str, runs: list[str], depth: int, level: str, *,
                           k: int) -> tuple[int, int]:
    """Write the depth-``depth`` union of ``runs`` as ``pool``'s pairs in one statement;
    return ``(pairs, queries)``.

    Per (query, item) with rank ``r_j`` in run ``j`` (``runs`` order, absent runs skipped):
    ``rrf_score = Σ_j 1 / (k + r_j)``, summed left to right in ``runs`` order with the same
    float operations as :func:`workbench.core.pooling.fusion.fuse_wide` (bit-identical
    scores); ``priority`` is the pair's position within its query by ``round(rrf_score, 12)``
    descending (numpy's round: half-to-even of ``score · 1e12``, divided by ``1e12``), then
    item id ascending, as ``fuse_wide`` ranks. Chunk pools store the chunk and its document,
    document pools ``chunk_id`` NULL. Nothing passes through Python: the union, the scores
    and the priorities are computed where the rows are.

    Raises :class:`DuplicateRunRows` (the transaction is then aborted) when a run lists a
    pair twice within the depth: the pair has more rows than runs that rank it.
    """
    item = _item(level)
    n = len(runs)
    contributions = " + ".join(
        f"coalesce(1.0::DOUBLE / (?::DOUBLE + r{j}::DOUBLE), 0.0::DOUBLE)" for j in range(n))
    present = " + ".join(f"(r{j} IS NOT NULL)::BIGINT" for j in range(n))
    chunk = "item" if level == "chunk" else "NULL"
    try:
        cur.execute(
            f"""INSERT INTO pool_pairs (pool, query_id, doc_id, chunk_id, priority, rrf_score)
                WITH u AS (
                    SELECT h.query_id, h.{item} AS item, any_value(h.doc_id) AS doc_id, count(*) AS n,
                           {_pivot(runs)}
                    FROM run_rows h WHERE h.run IN (SELECT unnest(?::VARCHAR[])) AND h.rank <= ?
                    GROUP BY h.query_id, h.{item}),
                s AS (SELECT query_id, item, doc_id, n, {contributions} AS score, {present} AS present FROM u)
                SELECT ?, query_id, doc_id, {chunk},
                       CASE WHEN n > present THEN error('{_DUPLICATE_MARK}')
                            ELSE row_number() OVER (PARTITION BY query_id
                                                    ORDER BY round_even(score * 1e12, 0) / 1e12 DESC, item)
                       END,
                       score
                FROM s""",
            [*runs, list(runs), int(depth), *([float(k)] * n), pool],
        )
    except Exception as exc:  # duckdb's error() raises InvalidInputException; others propagate
        if _DUPLICATE_MARK in str(exc):
            raise DuplicateRunRows(pool) from None
        raise
    pairs = int(one_row(cur.fetchone())[0])
    return pairs, count_pool_pairs(cur, pool)[1]


def _read_stage(cur: Cursor, n_runs: int, pool: str | None) -> StagedPairs:
    ranks = ", ".join(f"s.r{j}" for j in range(n_runs))
    top, params = ("0", []) if pool is None else ("coalesce(t.top, 0)", [pool])
    join_top = "" if pool is None else (
        "LEFT JOIN (SELECT query_id, max(priority) AS top FROM pool_pairs WHERE pool = ? "
        "GROUP BY query_id) t ON t.query_id = s.query_id"
    )
    res = cur.execute(
        f"""SELECT s.rowid AS rid, q.qc, s.n, {top} AS top, {ranks}
            FROM {_STAGE} s
            JOIN (SELECT query_id, row_number() OVER (ORDER BY query_id) - 1 AS qc
                  FROM (SELECT DISTINCT query_id FROM {_STAGE})) q ON q.query_id = s.query_id
            {join_top}
            ORDER BY s.query_id, s.item""",
        params,
    ).fetchnumpy()
    rid = np.asarray(res["rid"], dtype=np.int64)
    query = np.asarray(res["qc"], dtype=np.int64)
    return StagedPairs(
        rid=rid,
        query=query,
        ranks=[np.asarray(np.ma.filled(res[f"r{j}"], 0), dtype=np.int64) for j in range(n_runs)],
        rows=np.asarray(res["n"], dtype=np.int64),
        top=np.asarray(res["top"], dtype=np.int64),
        queries=int(query.max()) + 1 if len(query) else 0,
    )


def write_staged_pool_pairs(cur: Cursor, pool: str, level: str, rid: np.ndarray, priority: np.ndarray,
                            rrf_score: np.ndarray) -> int:
    """Append the staged pairs ``rid`` to ``pool`` with their priority and RRF score (chunk
    pools store the chunk and its document, document pools ``chunk_id`` NULL)."""
    if len(rid) == 0:
        return 0
    frame = pd.DataFrame({
        "rid": np.asarray(rid, dtype=np.int64),
        "priority": np.asarray(priority, dtype=np.int64),
        "rrf_score": np.asarray(rrf_score, dtype=np.float64),
    })
    chunk = "s.item" if level == "chunk" else "NULL"
    cur.register("_incoming_pool_pairs", frame)
    cur.execute(
        f"""INSERT INTO pool_pairs (pool, query_id, doc_id, chunk_id, priority, rrf_score)
            SELECT ?, s.query_id, s.doc_id, {chunk}, x.priority, x.rrf_score
            FROM {_STAGE} s JOIN _incoming_pool_pairs x ON s.rowid = x.rid""",
        [pool],
    )
    n = int(one_row(cur.fetchone())[0])
    cur.unregister("_incoming_pool_pairs")
    return n


def drop_staged_pool_pairs(cur: Cursor) -> None:
    cur.execute(f"DROP TABLE IF EXISTS {_STAGE}")


def count_pool_pairs(cur: Cursor, pool: str) -> tuple[int, int]:
    """``(pairs, queries)`` of ``pool``."""
    n, q = one_row(cur.execute(
        "SELECT count(*), count(DISTINCT query_id) FROM pool_pairs WHERE pool = ?", [pool]
    ).fetchone())
    return int(n), int(q)


# -- Pool diagnostics as aggregates ---------------------------------------------------------

def read_pool_sizes(db: Database, pool: str) -> pd.DataFrame:
    """``query_id, pool_size`` (pairs per query) of ``pool``, ordered by query_id."""
    return arrow_query_df(
        db,
        """SELECT query_id, count(*) AS pool_size FROM pool_pairs WHERE pool = ?
           GROUP BY query_id ORDER BY query_id""",
        [pool],
    )


def read_provenance_patterns(db: Database, pool: str, runs: list[str], level: str
                             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pool's provenance patterns (see :func:`core.pooling.pattern_stats`):
    ``(per_run, rows, pairs)`` — per pattern the provenance rows of each of ``runs`` per
    pair, the pair's provenance rows in all, and how many pairs have the pattern."""
    item = _item(level)
    counts = ", ".join(f"count(*) FILTER (WHERE run = ?) AS c{j}" for j in range(len(runs)))
    cur = db.cursor()
    try:
        res = cur.execute(
            f"""SELECT {", ".join(f"c{j}" for j in range(len(runs)))}, n, count(*) AS pairs
                FROM (SELECT {counts}, count(*) AS n FROM pool_provenance WHERE pool = ?
                      GROUP BY query_id, {item})
                GROUP BY ALL""",
            [*runs, pool],
        ).fetchnumpy()
    finally:
        cur.close()
    per_run = np.column_stack([np.asarray(res[f"c{j}"], dtype=np.int64) for j in range(len(runs))]) \
        if runs else np.zeros((len(res["n"]), 0), dtype=np.int64)
    return per_run, np.asarray(res["n"], dtype=np.int64), np.asarray(res["pairs"], dtype=np.int64)


def _with_keys(db: Database, keys: pd.DataFrame, sql: str, params: list, *, frame: bool):
    cur = db.cursor()
    try:
        cur.register("_pool_keys", keys)
        cur.execute(sql, params)
        out = cur.df() if frame else cur.fetchall()
        cur.unregister("_pool_keys")
        return out
    finally:
        cur.close()


def count_pool_pairs_among(db: Database, pool: str, level: str, keys: pd.DataFrame) -> int:
    """How many pairs of ``pool`` are among ``keys`` (``query_id, item`` as strings)."""
    if keys.empty:
        return 0
    item = _item(level)
    rows = _with_keys(
        db, keys,
        f"""SELECT count(*) FROM pool_pairs p
            SEMI JOIN _pool_keys k ON k.query_id = p.query_id AND k.item = p.{item}
            WHERE p.pool = ?""",
        [pool], frame=False,
    )
    return int(rows[0][0])


def read_unique_pool_pairs_among(db: Database, pool: str, level: str, keys: pd.DataFrame) -> pd.DataFrame:
    """``run_id, query_id, <item>``: pairs among ``keys`` (``query_id, item`` as strings) that
    exactly one provenance row of ``pool`` put in the pool, with that row's run."""
    item = _item(level)
    if keys.empty:
        return pd.DataFrame({"run_id": pd.Series(dtype="str"), "query_id": pd.Series(dtype="str"),
                             item: pd.Series(dtype="str")})
    return _with_keys(
        db, keys,
        f"""SELECT any_value(p.run) AS run_id, p.query_id, p.{item}
            FROM pool_provenance p
            SEMI JOIN _pool_keys k ON k.query_id = p.query_id AND k.item = p.{item}
            WHERE p.pool = ?
            GROUP BY p.query_id, p.{item} HAVING count(*) = 1
            ORDER BY ALL""",
        [pool], frame=True,
    )


# -- Deletion ---------------------------------------------------------------------------------

def pools_using(db: Database, *, runs: list[str] | None = None, chunking: str | None = None) -> list[str]:
    """Pools that pooled any of ``runs`` or hold items of ``chunking``."""
    names: set[str] = set()
    if runs:
        names.update(r[0] for r in db.query_all(
            "SELECT name FROM pools WHERE list_has_any(CAST(runs AS VARCHAR[]), ?::VARCHAR[])", [list(runs)]))
    if chunking is not None:
        names.update(r[0] for r in db.query_all("SELECT name FROM pools WHERE chunking = ?", [chunking]))
    return sorted(names)


def count_pool_rows(db: Database, names: list[str]) -> tuple[int, int]:
    """``(pairs, provenance rows)`` of the pools ``names``."""
    pairs = db.query_value("SELECT count(*) FROM pool_pairs WHERE pool IN (SELECT unnest(?::VARCHAR[]))",
                           [list(names)])
    prov = db.query_value("SELECT count(*) FROM pool_provenance WHERE pool IN (SELECT unnest(?::VARCHAR[]))",
                          [list(names)])
    return int(pairs), int(prov)


def delete_pools(cur: Cursor, names: list[str]) -> None:
    """Delete pools with their pairs and provenance (judgments are not touched)."""
    for table, column in (("pool_provenance_rows", "pool"), ("pool_runs", "pool"), ("pool_pairs", "pool"),
                          ("pools", "name")):
        cur.execute(f"DELETE FROM {table} WHERE {column} IN (SELECT unnest(?::VARCHAR[]))", [list(names)])


def count_pool_pairs_judged(db: Database, pool: str, source: str, *, only_queries: list[str] | None = None,
                            without_queries: list[str] | None = None) -> int:
    """How many pairs of ``pool`` have an ``ok`` graded judgment of ``source`` on their (query,
    document): a document pool's labelled pairs, counted in SQL without reading the judgments.
    ``only_queries`` / ``without_queries``: count only pairs of (not of) those queries."""
    where = ["p.pool = ?"]
    params: list[str | list[str]] = [pool]
    if only_queries is not None:
        where.append("p.query_id IN (SELECT unnest(?::VARCHAR[]))")
        params.append([str(q) for q in only_queries])
    if without_queries:
        where.append("p.query_id NOT IN (SELECT unnest(?::VARCHAR[]))")
        params.append([str(q) for q in without_queries])
    return int(db.query_value(
        f"""SELECT count(*) FROM pool_pairs p
            WHERE {' AND '.join(where)} AND EXISTS (SELECT 1 FROM judgments j
                  WHERE j.query_id = p.query_id AND j.doc_id = p.doc_id AND j.source = ?
                    AND j.status = 'ok' AND j.grade IS NOT NULL)""",
        [*params, source]))
