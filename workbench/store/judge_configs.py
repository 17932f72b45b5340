"""Judge configurations: the unit of trust.

A judge configuration is what the judge already keys its jobs by (``judge_jobs.config_key``:
model, prompt and its hash with any few-shot examples, parameters, server host and model, the
requested response format, samples and aggregate; :attr:`workbench.services.judge.spec.JudgeSpec.config_key`).
Every LLM judgment made by a job carries that job's key. An LLM judgment without a job (written
by an older version, or by hand) belongs to the configuration ``mp-<md5(model|prompt_hash)>``.

:data:`KEY_SQL` is that key as a SQL expression over ``judgments j`` joined with
``judge_jobs jj`` by :data:`JOIN_SQL`; every read that groups or filters LLM grades by
configuration uses these two fragments, so the configuration of a grade is derived one way.
"""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.database import Database

#: Joins each judgment ``j`` to the job ``jj`` that made it (none for people's labels).
JOIN_SQL = "LEFT JOIN judge_jobs jj ON jj.job_id = j.job_id"
#: The configuration key of an LLM judgment ``j`` (see the module docstring).
KEY_SQL = ("coalesce(jj.config_key, 'mp-' || md5(coalesce(j.model, '') || '|' || coalesce(j.prompt_hash, '')))")


def read_configurations(db: Database) -> pd.DataFrame:
    """Every judge configuration that stored an ``ok`` grade, oldest first: ``config, model,
    prompt_hash, prompt_id, host, response_format, samples, aggregate, few_shot, graded,
    first_job``. ``few_shot`` is the number of examples in the prompt (0: zero-shot),
    ``graded`` its ``ok`` grades (judgments: a pair graded twice counts twice), ``first_job`` the configuration's first job id
    (None without a job)."""
    frame = db.query_df(
        # Grouped twice: first by the raw columns the key is made of (a cheap hash aggregate
        # over every LLM judgment), then by the key over those few groups, so the md5 and the
        # join run once per (job, model, prompt) rather than once per judgment.
        f"""WITH r AS (
               SELECT j.job_id, j.model, j.prompt_hash,
                      count(*) AS graded,  -- rows, not distinct pairs: read on every qrels request
                      min(j.judgment_id) AS first_judgment
               FROM judgments j
               WHERE j.source = 'llm' AND j.status = 'ok' AND j.grade IS NOT NULL
               GROUP BY j.job_id, j.model, j.prompt_hash),
           g AS (
               SELECT {KEY_SQL} AS config, any_value(coalesce(j.model, '')) AS model,
                      any_value(coalesce(j.prompt_hash, '')) AS prompt_hash, sum(j.graded) AS graded,
                      min(j.job_id) AS first_job, min(j.first_judgment) AS first_judgment
               FROM r j {JOIN_SQL}
               GROUP BY ALL)
           SELECT g.config, g.model, g.prompt_hash, coalesce(jj.prompt_id, '') AS prompt_id,
                  json_extract_string(jj.params, '$.host') AS host,
                  coalesce(json_extract_string(jj.params, '$.response_format'),
                           json_extract_string(jj.params, '$.requested_format')) AS response_format,
                  coalesce(jj.samples, 1)::BIGINT AS samples, coalesce(jj.aggregate, 'majority') AS aggregate,
                  json_extract(jj.params, '$.few_shot')::VARCHAR AS few_shot,
                  g.graded::BIGINT AS graded, g.first_job
           FROM g LEFT JOIN judge_jobs jj ON jj.job_id = g.first_job
           ORDER BY g.first_judgment""")
    frame["few_shot"] = [int(json.loads(v).get("k", 0)) if isinstance(v, str) and v not in ("", "null") else 0
                         for v in frame["few_shot"]]
    return frame


def few_shot_by_config(db: Database) -> dict[str, dict]:
    """``{config: few_shot}`` of every configuration whose job ran with few-shot examples
    (``params.few_shot``: k, sample, seed, positions; the latest job's when several)."""
    rows = db.query_all(
        """SELECT config_key, json_extract(params, '$.few_shot')::VARCHAR FROM judge_jobs
           WHERE json_extract(params, '$.few_shot') IS NOT NULL ORDER BY job_id""")
    return {str(k): json.loads(f) for k, f in rows if f and f != "null"}


def config_of_judgments(db: Database, judgment_ids: list[int]) -> dict[int, str]:
    """``{judgment_id: config}`` of the given LLM judgments."""
    if not judgment_ids:
        return {}
    rows = db.query_all(
        f"""SELECT j.judgment_id, {KEY_SQL} FROM judgments j {JOIN_SQL}
            WHERE j.judgment_id IN (SELECT unnest(?::BIGINT[]))""", [[int(i) for i in judgment_ids]])
    return {int(i): str(k) for i, k in rows}
