"""Document qrels summarised in SQL: what the Qrels page shows, without reading the labels.

The rule is :func:`workbench.core.qrels_policy.merge_qrels` at document level on the labels
:mod:`workbench.store.qrels_labels` reads (the caller decides the admission: tiers, the judge
configurations the gate admits, queries left out):

1. ``grade(tier, assessor, q, d)`` = max grade over that assessor's spans of ``d`` for ``q``;
2. ``grade(tier, q, d)`` = the assessors' grades combined by ``sme_rule`` (``max``, ``min``,
   ``lower_median``: the ``(n-1)//2``-th of the sorted grades, ``majority``: most votes, a
   tie to the higher or lower grade by ``ties``);
3. ``grade(q, d)`` = the grade of the first tier of ``order`` that graded ``d`` for ``q``.

A million admitted LLM labels are aggregated by DuckDB; only counts cross into Python.
"""

from __future__ import annotations

from collections.abc import Sequence

from workbench.store.database import Database
from workbench.store.judge_configs import KEY_SQL
from workbench.store.qrels_labels import FROM_SQL

_COMBINE = {"max": "max(grade)", "min": "min(grade)",
            "lower_median": "list_sort(list(grade))[(count(*) - 1) // 2 + 1]"}


def _admitted(order: list[str], tiers: list[str], llm_configs: list[str] | None,
              without_queries: list[str]) -> tuple[str, list]:
    """The admitted labels as a query: ``query_id, doc_id, grade, r, assessor`` (``r``:
    the label's tier's 1-based place in ``order``, worked out from the judgment's source and
    adjudication as :data:`TIER_SQL` names the tier).
    ``llm_configs`` (None: every configuration) is matched on the few distinct (job, model,
    prompt) of the LLM judgments, so the configuration key is not computed per judgment."""
    place = {t: (order.index(t) + 1 if t in tiers and t in order else "NULL")
             for t in ("llm", "imported", "adjudicated", "sme")}
    rank = (f"CASE WHEN j.source = 'llm' THEN {place['llm']} WHEN j.source = 'imported' THEN {place['imported']} "
            f"WHEN a.judgment_id IS NOT NULL THEN {place['adjudicated']} ELSE {place['sme']} END")
    where = ["j.status = 'ok'", "j.grade IS NOT NULL"]
    params: list = []
    if without_queries:
        where.append("j.query_id NOT IN (SELECT unnest(?::VARCHAR[]))")
        params.append(list(without_queries))
    if llm_configs is not None:
        where.append(f"""(j.source <> 'llm' OR (coalesce(j.job_id, -1), coalesce(j.model, ''),
                                                coalesce(j.prompt_hash, '')) IN (
              SELECT (coalesce(j.job_id, -1), coalesce(j.model, ''), coalesce(j.prompt_hash, ''))
              FROM (SELECT DISTINCT job_id, model, prompt_hash FROM judgments WHERE source = 'llm') j
                   LEFT JOIN judge_jobs jj ON jj.job_id = j.job_id
              WHERE {KEY_SQL} IN (SELECT unnest(?::VARCHAR[]))))""")
        params.append(list(llm_configs))
    return (f"""SELECT * FROM (
                  SELECT j.query_id, j.doc_id, j.grade::BIGINT AS grade, ({rank})::BIGINT AS r,
                         CASE WHEN j.source = 'llm'
                              THEN coalesce(j.model, '') || '|' || coalesce(j.prompt_hash, '')
                              ELSE coalesce(j.assessor, '') END AS assessor
                  {FROM_SQL}
                  WHERE {' AND '.join(where)})
                WHERE r IS NOT NULL""", params)


def _tier_bits(order: list[str], tiers: list[str]) -> tuple[int, int]:
    """``(people, llm)``: the bits ``2^r`` of the admitted people's tiers and of the ``llm``
    tier (``r`` as :func:`_admitted` places them; 0 for a tier not admitted)."""
    def bit(t: str) -> int:
        return 1 << (order.index(t) + 1) if t in tiers and t in order else 0

    return bit("imported") | bit("adjudicated") | bit("sme"), bit("llm")


def _qrels_sql(order: list[str], tiers: list[str], llm_configs, without_queries, sme_rule: str,
               ties: str) -> tuple[str, list]:
    """CTEs ending in ``w(query_id, doc_id, grade, r)`` (``r``: the winning tier's 1-based
    place in ``order``): the document qrels (module docstring), and ``p`` (one row per pair
    with an admitted label: ``n`` labels, ``b`` the set of their tiers as bits ``2^r``, so
    ``b & people <> 0``: one is a person's, ``b & llm <> 0``: one is an LLM judgment, with the
    masks of :func:`_tier_bits`; what a pool's coverage counts). A pair with one admitted label
    (most of a judged project's) takes that label's grade and tier in the one aggregate that
    makes ``p`` (``g0 = min(grade)`` over its one label, ``r = log2(b) = bit_count(b - 1)``;
    read only where ``n = 1``: three plain aggregates, not a min, an arg_min and two bool_or);
    only pairs with several go through steps 1-3, so a million labels are grouped once rather
    than four times. ``s`` is read twice rather than materialized: held, its million rows (an
    assessor string each) would stay in memory for the few pairs with several labels; a second
    scan of the judgments costs less."""
    body, params = _admitted(order, tiers, llm_configs, without_queries)
    if sme_rule in _COMBINE:
        combine = f"SELECT query_id, doc_id, r, {_COMBINE[sme_rule]} AS grade FROM a GROUP BY ALL"
    else:  # majority: most votes, then the higher (or lower) grade
        combine = f"""SELECT query_id, doc_id, r,
                             arg_max(grade, {{'votes': votes, 'grade': {'grade' if ties == 'higher' else '-grade'}}}) AS grade
                      FROM (SELECT query_id, doc_id, r, grade, count(*) AS votes FROM a GROUP BY ALL)
                      GROUP BY ALL"""
    sql = f"""WITH s AS NOT MATERIALIZED ({body}),
              p AS MATERIALIZED (
                  SELECT query_id, doc_id, count(*) AS n, bit_or(1::BIGINT << r) AS b, min(grade) AS g0
                  FROM s GROUP BY query_id, doc_id),
              a AS (SELECT query_id, doc_id, r, assessor, max(grade) AS grade
                    FROM s SEMI JOIN (SELECT query_id, doc_id FROM p WHERE n > 1) m USING (query_id, doc_id)
                    GROUP BY ALL),
              t AS ({combine}),
              w AS (SELECT query_id, doc_id, g0 AS grade, bit_count(b - 1)::BIGINT AS r FROM p WHERE n = 1
                    UNION ALL
                    SELECT query_id, doc_id, arg_min(grade, r) AS grade, min(r) AS r FROM t GROUP BY query_id, doc_id)"""
    return sql, params


def doc_qrels_counts(db: Database, *, order: list[str], tiers: list[str], llm_configs: list[str] | None,
                     without_queries: list[str], sme_rule: str, ties: str, left_out: list[str],
                     pools: Sequence[str] = ()) -> dict:
    """Counts of the document qrels (module docstring) without the queries ``left_out`` (their
    rows are dropped after the rule, and the ones that had rows are named): ``rows, queries,
    by_grade, by_tier, left_out`` (sorted ids of ``left_out`` that had qrels) and ``pools``:
    ``{pool: (pairs with an admitted label, pairs with an admitted person's label, pairs with
    an admitted LLM label)}`` of the document pools ``pools`` (every qrels row of an admission
    is a pair with one of its labels, left-out queries included: coverage counts the rule's
    qrels). The admitted LLM labels themselves are counted per configuration by
    :func:`llm_label_counts`, not here. The qrels rows are first counted per (query, grade,
    tier), a few rows a query; the per-grade, per-tier and total counts and the distinct queries
    are summed from those (grouping the million rows once, not once per grouping set)."""
    sql, params = _qrels_sql(order, tiers, llm_configs, without_queries, sme_rule, ties)
    people, llm = _tier_bits(order, tiers)
    out: dict = dict(rows=0, queries=0, by_grade={}, by_tier={}, pools={str(p): (0, 0, 0) for p in pools})
    left = [str(q) for q in left_out]
    had_left = 0
    rows = db.query_all(
        f"""{sql}, k AS (SELECT *, query_id IN (SELECT unnest(?::VARCHAR[])) AS out_
                      FROM (SELECT query_id, grade, r, count(*) AS n FROM w GROUP BY ALL))
            SELECT 'q' AS kind, out_, grade, list_extract(?::VARCHAR[], r) AS tier, sum(n)::BIGINT,
                   count(DISTINCT query_id) FROM k
            GROUP BY GROUPING SETS ((out_, grade), (out_, r), (out_))
            UNION ALL
            SELECT 'p', NULL, count(*) FILTER (WHERE p.b & {llm} <> 0), pp.pool, count(*),
                   count(*) FILTER (WHERE p.b & {people} <> 0)
            FROM pool_pairs pp
            JOIN p ON p.query_id = pp.query_id AND p.doc_id = pp.doc_id
            WHERE pp.pool IN (SELECT unnest(?::VARCHAR[])) GROUP BY pp.pool""",
        [*params, left, list(order), [str(p) for p in pools]])
    for kind, out_, grade, tier, n, q in rows:
        if kind == "p":
            out["pools"][str(tier)] = (int(n), int(q), int(grade))
        elif out_:
            had_left += 0 if grade is not None or tier is not None else int(n)
        elif grade is None and tier is None:
            out["rows"], out["queries"] = int(n), int(q)
        elif tier is None:
            out["by_grade"][int(grade)] = int(n)
        else:
            out["by_tier"][str(tier)] = int(n)
    out["by_grade"] = dict(sorted(out["by_grade"].items()))
    out["by_tier"] = dict(sorted(out["by_tier"].items()))
    out["left_out"] = [str(r[0]) for r in db.query_all(
        f"""{sql} SELECT DISTINCT query_id FROM w WHERE query_id IN (SELECT unnest(?::VARCHAR[]))
            ORDER BY query_id""", [*params, left])] if had_left else []
    return out


def llm_label_counts(db: Database) -> dict[str, int]:
    """``{configuration key: ok graded LLM labels}`` over every query (what the gate admits or
    leaves out, by configuration), grouped on the few distinct (job, model, prompt) first so
    the key (:data:`KEY_SQL`) is computed per group, not per judgment."""
    rows = db.query_all(
        f"""WITH r AS (SELECT job_id, model, prompt_hash, count(*) AS n FROM judgments
                       WHERE source = 'llm' AND status = 'ok' AND grade IS NOT NULL GROUP BY ALL)
            SELECT {KEY_SQL} AS config, sum(j.n) FROM r j LEFT JOIN judge_jobs jj ON jj.job_id = j.job_id
            GROUP BY config""")
    return {str(k): int(n) for k, n in rows}


def doc_qrels_lines(db: Database, *, order: list[str], tiers: list[str], llm_configs: list[str] | None,
                    without_queries: list[str], sme_rule: str, ties: str, left_out: list[str]) -> str:
    """The document qrels as ``query_id\titem_id\tgrade\n`` lines in query, document order
    (code point order, as the rule sorts), without the queries ``left_out``: what a fingerprint hashes."""
    sql, params = _qrels_sql(order, tiers, llm_configs, without_queries, sme_rule, ties)
    return str(db.query_value(
        f"""{sql} SELECT coalesce(string_agg(query_id || chr(9) || doc_id || chr(9) || grade::VARCHAR || chr(10), ''
                                           ORDER BY query_id, doc_id), '')
            FROM w WHERE query_id NOT IN (SELECT unnest(?::VARCHAR[]))""", [*params, [str(q) for q in left_out]]))


def count_doc_pool_pairs_labelled(db: Database, pool: str, *, tiers: list[str], llm_configs: list[str] | None,
                                  without_queries: list[str]) -> int:
    """How many pairs of the document pool ``pool`` have an admitted label (a row in the
    document qrels of that admission: every admitted label makes its pair a qrels row)."""
    if not tiers:
        return 0
    body, params = _admitted(list(tiers), tiers, llm_configs, without_queries)
    return int(db.query_value(
        f"""WITH s AS ({body})
            SELECT count(*) FROM pool_pairs p SEMI JOIN s ON s.query_id = p.query_id AND s.doc_id = p.doc_id
            WHERE p.pool = ?""", [*params, pool]))
