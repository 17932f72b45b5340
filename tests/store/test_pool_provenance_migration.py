"""Migration 15 (pool provenance read from run_rows) on a project made with the old schema.

The old project (migrations 1-14, written with plain DuckDB as the old code wrote it) holds
document runs, pooled at depth 2:

    A  q1: cats 1, dogs 2, plants 3      q2: plants 1, stocks 2
    B  q1: dogs 1, stocks 2              q2: plants 1, cats 2
    C  q1: cats 1, plants 2              q2: dogs 1

Pool ``p`` (A, B, depth 2) has the provenance the old ``build_pool`` copied (each run's rows
with rank <= 2). Pool ``h`` (A, C, depth 1) has A's copied rows, C's rows hand-edited (rank 7
where C has rank 1) and rows of a run ``r9`` it does not pool: those differ from the
derivation and must stay as they were.
"""

from __future__ import annotations

import json

import duckdb

from workbench.services.pooling.pools import add_runs, pool_stats
from workbench.services.project.deletion import delete
from workbench.store.database import Database
from workbench.store.migrations import MIGRATIONS
from workbench.store.pools import read_pool_provenance

RUNS = {
    "A": [("q1", "cats", 1), ("q1", "dogs", 2), ("q1", "plants", 3), ("q2", "plants", 1), ("q2", "stocks", 2)],
    "B": [("q1", "dogs", 1), ("q1", "stocks", 2), ("q2", "plants", 1), ("q2", "cats", 2)],
    "C": [("q1", "cats", 1), ("q1", "plants", 2), ("q2", "dogs", 1)],
}


def _old_project(path) -> None:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE schema_migrations (seq INTEGER PRIMARY KEY, name VARCHAR NOT NULL, "
                "applied_at TIMESTAMP NOT NULL DEFAULT current_timestamp)")
    for m in MIGRATIONS:
        if m.seq <= 14:
            con.execute(m.sql)
            con.execute("INSERT INTO schema_migrations (seq, name) VALUES (?, ?)", [m.seq, m.name])
    for doc in ("cats", "dogs", "plants", "stocks"):
        con.execute("INSERT INTO documents (doc_id, text) VALUES (?, ?)", [doc, f"about {doc}"])
    for q in ("q1", "q2"):
        con.execute("INSERT INTO queries (query_id, text) VALUES (?, ?)", [q, q])
    for run, rows in RUNS.items():
        con.execute("INSERT INTO runs (name, retriever, level) VALUES (?, 'imported', 'doc')", [run])
        for q, d, rank in rows:
            con.execute("INSERT INTO run_rows VALUES (?, ?, ?, NULL, ?, ?)", [run, q, d, rank, 1.0 / rank])
    for name, depth, runs in (("p", 2, ["A", "B"]), ("h", 1, ["A", "C"])):
        con.execute("INSERT INTO pools (name, level, depth, runs) VALUES (?, 'doc', ?, ?)",
                    [name, depth, json.dumps(runs)])
        # the old build_pool's copy: each pooled run's rows within the depth
        con.execute("""INSERT INTO pool_provenance (pool, query_id, doc_id, chunk_id, run, rank)
                       SELECT ?, query_id, doc_id, chunk_id, run, rank FROM run_rows
                       WHERE run IN (SELECT unnest(?::VARCHAR[])) AND rank <= ?""", [name, runs, depth])
        pairs = con.execute("SELECT DISTINCT query_id, doc_id FROM pool_provenance WHERE pool = ? ORDER BY ALL",
                            [name]).fetchall()
        for i, (q, d) in enumerate(pairs):
            con.execute("INSERT INTO pool_pairs (pool, query_id, doc_id, priority, rrf_score) VALUES (?, ?, ?, ?, 0)",
                        [name, q, d, i + 1])
    con.execute("UPDATE pool_provenance SET rank = 7 WHERE pool = 'h' AND run = 'C'")  # hand-edited
    con.execute("INSERT INTO pool_provenance VALUES ('h', 'q1', 'dogs', NULL, 'r9', 4)")
    con.close()


def _rows(frame) -> list[tuple]:
    return list(frame[["run", "query_id", "doc_id", "rank"]].itertuples(index=False, name=None))


def test_old_pools_keep_their_provenance_and_matching_copies_become_derived(db_path):
    _old_project(db_path)
    with Database(db_path) as db:
        assert db.query_value("SELECT max(seq) FROM schema_migrations") == MIGRATIONS[-1].seq
        # p: the same rows, in the reader's order (run, query, rank), now read from run_rows
        assert _rows(read_pool_provenance(db, "p")) == [
            ("A", "q1", "cats", 1), ("A", "q1", "dogs", 2), ("A", "q2", "plants", 1), ("A", "q2", "stocks", 2),
            ("B", "q1", "dogs", 1), ("B", "q1", "stocks", 2), ("B", "q2", "plants", 1), ("B", "q2", "cats", 2)]
        # h: A's copy matched (derived now); C's edited row and r9's row are kept as stored
        assert _rows(read_pool_provenance(db, "h")) == [
            ("A", "q1", "cats", 1), ("A", "q2", "plants", 1), ("C", "q1", "cats", 7), ("C", "q2", "dogs", 7),
            ("r9", "q1", "dogs", 4)]
        assert db.query_all("SELECT pool, run FROM pool_runs ORDER BY ALL") == [("h", "A"), ("p", "A"), ("p", "B")]
        assert db.query_all("SELECT pool, run, count(*) FROM pool_provenance_rows GROUP BY ALL ORDER BY ALL") == [
            ("h", "C", 2), ("h", "r9", 1)]


def test_a_migrated_pool_grows_and_is_deleted_as_a_new_one(db_path):
    _old_project(db_path)
    with Database(db_path) as db:
        summary = add_runs(db, "p", ["C"])
        assert summary.provenance_added == 3 and summary.pairs_added == 2
        assert _rows(read_pool_provenance(db, "p"))[-3:] == [("C", "q1", "cats", 1), ("C", "q1", "plants", 2),
                                                             ("C", "q2", "dogs", 1)]
        # contributions from the derived provenance: q1 plants (C) and q2 dogs (C) are C's alone,
        # q1 stocks (B) and q2 stocks (A), q2 cats (B) are unique to one run too
        unique = dict(zip(*pool_stats(db, "p", k=2).contributions[["run_id", "unique"]].T.values))
        assert unique == {"A": 1, "B": 2, "C": 2}
        delete(db, "pool", "h")
        assert db.query_value("SELECT count(*) FROM pool_provenance WHERE pool = 'h'") == 0
        assert db.query_value("SELECT count(*) FROM pool_provenance_rows") == 0
        assert db.query_all("SELECT DISTINCT pool FROM pool_runs") == [("p",)]
