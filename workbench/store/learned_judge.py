"""Reads behind the learned judge (:mod:`workbench.services.judge.learned`) and the import of an
external judge's grades (:mod:`workbench.services.judge.imported`): a pool's pairs with their
spans, their texts in blocks, their grades per judge configuration and their run signals.

Pairs are always in the order ``query_id, doc_id, chunk_id`` (a missing chunk id first), so
the blocks of :func:`pair_text_block` line up with :func:`pool_pair_spans`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pandas as pd

from workbench.store.database import Database, arrow_query_df
from workbench.store.judge_configs import JOIN_SQL, KEY_SQL

_ORDER = "p.query_id, p.doc_id, coalesce(p.chunk_id, '')"


def _span_sql(level: str) -> tuple[str, str]:
    if level == "chunk":
        return 'k.start AS start, k."end" AS "end"', "JOIN chunks k ON k.chunk_id = p.chunk_id"
    return '0 AS start, length(d.text) AS "end"', ""


def pool_pair_spans(db: Database, pool: str, level: str) -> pd.DataFrame:
    """``query_id, doc_id, chunk_id, start, end`` of every pool pair whose query, document (and
    chunk) exist, in pair order."""
    span, chunks = _span_sql(level)
    return arrow_query_df(
        db,
        f"""SELECT p.query_id, p.doc_id, p.chunk_id, {span}
            FROM pool_pairs p JOIN queries q ON q.query_id = p.query_id JOIN documents d ON d.doc_id = p.doc_id
            {chunks}
            WHERE p.pool = ? ORDER BY {_ORDER}""", [pool])


def pair_text_block(db: Database, pool: str, level: str, offset: int, limit: int) -> pd.DataFrame:
    """``query_text, passage`` of pairs ``offset .. offset + limit`` in pair order (the query's
    text and description joined by a space)."""
    span, chunks = _span_sql(level)
    return db.query_df(
        f"""WITH s AS (
                SELECT p.query_id, p.doc_id, p.chunk_id, {span},
                       q.text || ' ' || coalesce(q.description, '') AS query_text, d.text AS doc_text
                FROM pool_pairs p JOIN queries q ON q.query_id = p.query_id JOIN documents d ON d.doc_id = p.doc_id
                {chunks}
                WHERE p.pool = ? ORDER BY {_ORDER} LIMIT ? OFFSET ?)
            SELECT query_text, substr(doc_text, start + 1, "end" - start) AS passage FROM s""",
        [pool, int(limit), int(offset)])


def pair_text_blocks(db: Database, pool: str, level: str, block: int) -> Iterator[pd.DataFrame]:
    """The rows of :func:`pair_text_block` for every pair in pair order, about ``block`` at a time,
    from one streaming query on a cursor of its own (one sort of the pool, where paging with
    OFFSET sorts it again for every block)."""
    span, chunks = _span_sql(level)
    yield from _stream(db, f"""WITH s AS (
                SELECT p.query_id, p.doc_id, p.chunk_id, {span},
                       q.text || ' ' || coalesce(q.description, '') AS query_text, d.text AS doc_text
                FROM pool_pairs p JOIN queries q ON q.query_id = p.query_id JOIN documents d ON d.doc_id = p.doc_id
                {chunks}
                WHERE p.pool = ?)
            SELECT query_text, substr(doc_text, start + 1, "end" - start) AS passage FROM s
            ORDER BY query_id, doc_id, coalesce(chunk_id, '')""", [pool], block)


def passage_blocks(db: Database, pool: str, level: str, block: int) -> Iterator[list[str]]:
    """The texts of :func:`passage_block` for every distinct passage, about ``block`` at a time,
    from one streaming query."""
    if level == "chunk":
        sql = """SELECT substr(d.text, k.start + 1, k."end" - k.start) AS text
                 FROM (SELECT DISTINCT doc_id, chunk_id FROM pool_pairs WHERE pool = ?) p
                 JOIN chunks k ON k.chunk_id = p.chunk_id JOIN documents d ON d.doc_id = p.doc_id
                 ORDER BY p.doc_id, p.chunk_id"""
    else:
        sql = """SELECT d.text AS text FROM (SELECT DISTINCT doc_id FROM pool_pairs WHERE pool = ?) p
                 JOIN documents d ON d.doc_id = p.doc_id ORDER BY p.doc_id"""
    for frame in _stream(db, sql, [pool], block):
        yield [str(t) if t is not None else "" for t in frame["text"]]


def _stream(db: Database, sql: str, params: list, block: int) -> Iterator[pd.DataFrame]:
    cur = db.cursor()
    try:
        reader = cur.sql(sql, params=params).to_arrow_reader(int(block))
        for batch in reader:
            if batch.num_rows:
                yield batch.to_pandas()
    finally:
        cur.close()


def count_passages(db: Database, pool: str) -> int:
    """Distinct (document, chunk) items of the pool."""
    return int(db.query_value("SELECT count(*) FROM (SELECT DISTINCT doc_id, chunk_id FROM pool_pairs WHERE pool = ?)",
                              [pool]))


def passage_block(db: Database, pool: str, level: str, offset: int, limit: int) -> list[str]:
    """Texts of the pool's distinct passages ``offset .. offset + limit`` (ordered by id)."""
    if level == "chunk":
        sql = """SELECT substr(d.text, k.start + 1, k."end" - k.start)
                 FROM (SELECT DISTINCT doc_id, chunk_id FROM pool_pairs WHERE pool = ?) p
                 JOIN chunks k ON k.chunk_id = p.chunk_id JOIN documents d ON d.doc_id = p.doc_id
                 ORDER BY p.doc_id, p.chunk_id LIMIT ? OFFSET ?"""
    else:
        sql = """SELECT d.text FROM (SELECT DISTINCT doc_id FROM pool_pairs WHERE pool = ?) p
                 JOIN documents d ON d.doc_id = p.doc_id ORDER BY p.doc_id LIMIT ? OFFSET ?"""
    return [str(r[0] or "") for r in db.query_all(sql, [pool, int(limit), int(offset)])]


def pool_config_grades(db: Database, pool: str, configs: list[str]) -> pd.DataFrame:
    """``query_id, doc_id, chunk_id, config, grade``: each configuration's latest ``ok`` grade of
    each pool pair (configurations as :mod:`workbench.store.judge_configs` derives them)."""
    return arrow_query_df(
        db,
        f"""SELECT p.query_id, p.doc_id, p.chunk_id, {KEY_SQL} AS config,
                   arg_max(j.grade, j.judgment_id)::BIGINT AS grade
            FROM pool_pairs p
            JOIN judgments j ON j.query_id = p.query_id AND j.doc_id = p.doc_id
                 AND j.chunk_id IS NOT DISTINCT FROM p.chunk_id
            {JOIN_SQL}
            WHERE p.pool = ? AND j.source = 'llm' AND j.status = 'ok' AND j.grade IS NOT NULL
              AND {KEY_SQL} IN (SELECT unnest(?::VARCHAR[]))
            GROUP BY ALL""", [pool, list(configs)])


def pool_run_signals(db: Database, pool: str) -> pd.DataFrame:
    """``query_id, doc_id, chunk_id, run, rank, score``: each pooled run's rank of each pool pair
    (its best, when it listed the pair twice) and the run's score there (NULL when the run's
    rows are not stored)."""
    return arrow_query_df(
        db,
        """SELECT pv.query_id, pv.doc_id, pv.chunk_id, pv.run, min(pv.rank)::DOUBLE AS rank,
                  max(r.score)::DOUBLE AS score
           FROM pool_provenance pv
           LEFT JOIN run_rows r ON r.run = pv.run AND r.query_id = pv.query_id AND r.doc_id = pv.doc_id
                AND r.chunk_id IS NOT DISTINCT FROM pv.chunk_id
           WHERE pv.pool = ? GROUP BY ALL""", [pool])


def configs_of_judge(db: Database, judge: str) -> set[str]:
    """Configuration keys of the jobs whose ``judge`` is ``judge`` (``learned``, ``imported-judge``)."""
    return {str(r[0]) for r in db.query_all("SELECT DISTINCT config_key FROM judge_jobs WHERE judge = ?", [judge])}


def job_has_judgments(db: Database, job_id: int) -> int:
    return int(db.query_value("SELECT count(*) FROM judgments WHERE job_id = ?", [int(job_id)]))


def pool_query_texts(db: Database, pool: str) -> pd.DataFrame:
    """``query_id, text`` of the pool's queries (the text alone, as the dense retriever encodes it)."""
    return db.query_df("""SELECT q.query_id, q.text FROM queries q
                          WHERE q.query_id IN (SELECT DISTINCT query_id FROM pool_pairs WHERE pool = ?)
                          ORDER BY q.query_id""", [pool])


def pool_dense_runs(db: Database, pool: str) -> list[tuple[str, dict]]:
    """``(run, params)`` of the pool's provenance runs made by the dense retriever, by name."""
    rows = db.query_all("""SELECT r.name, r.params::VARCHAR FROM runs r
                           WHERE r.retriever = 'dense'
                             AND r.name IN (SELECT DISTINCT run FROM pool_provenance WHERE pool = ?)
                           ORDER BY r.name""", [pool])
    return [(str(name), json.loads(params) if params else {}) for name, params in rows]
