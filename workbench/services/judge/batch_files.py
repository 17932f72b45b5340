"""The offline batch path: write the requests to a file, run them anywhere, store the results.

``judge --batch-file OUT.jsonl`` writes the OpenAI Batch API input file (one ``{"custom_id",
"method": "POST", "url": "/v1/chat/completions", "body"}`` per line, the format of
:mod:`workbench.llm.batch`) for the job's pending pairs that the cache cannot answer; ``vllm
run-batch -i OUT.jsonl -o RESULTS.jsonl``, the OpenAI or Together batch endpoints run it.
``judge --batch-results RESULTS.jsonl`` stores a results file (``{"custom_id", "response":
{"status_code", "body"}, "error"}`` per line) with the online path's rules: the cache answers
what it can, each reply is validated by :func:`workbench.llm.batch.read_output` (``ok``,
``invalid`` with its raw reply kept, or ``failed``, never an invented grade), and pairs the file
does not mention stay pending.

No server is asked anything: the file's server is unknown, so the job's key carries the base
URL's host and no server model, and the format is the strictest one the batch endpoints accept
(``json_schema``, or the forced ``--response-format``); both commands of one configuration find
the same job. ``custom_id`` is ``"<sample>:<cache_key>"``.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

from workbench.errors import InputError
from workbench.services.judge.jobs import JobReport
from workbench.services.judge.runner import DatabaseUse, Runner, cached_outcome, nan_none
from workbench.services.judge.spec import JudgeSpec, base_url_host
from workbench.services.output_file import write_lines
from workbench.store import judging as store
from workbench.store.pools import read_pool

FILE_FORMATS = {"auto": "json_schema", "json_schema": "json_schema", "json_object": "json_object",
                "text": "text"}


@dataclass
class BatchFileReport:
    path: Path
    job_id: int
    requests: int
    cached: int
    pending: int

    def summary(self, *, data: bool = False) -> str:
        """One line; with ``data`` the option it names stays a placeholder (``{field:batch_results}``,
        :mod:`workbench.errors`) for a page to word, else it is rendered as the CLI says it."""
        from workbench.errors import render_text

        text = (f"wrote {self.requests:,} requests for judge job {self.job_id} to {self.path} "
                f"({self.pending:,} judgments to make, {self.cached:,} answered by the cache: "
                f"{{field:batch_results}} stores them with the results)")
        return text if data else render_text(text)


def file_spec(spec: JudgeSpec) -> JudgeSpec:
    """``spec`` for the file path: no server model, the file format (module doc)."""
    fmt = "text" if spec.output == "single_token" else FILE_FORMATS.get(spec.requested_format, "json_schema")
    return replace(spec, server={"host": base_url_host(spec.base_url), "server_model": None},
                   caps={"format": fmt, "logprobs": True, "latency_s": 0.0, "server_model": None,
                         "refused": [], "seed": None, "file": True})


def _client(spec: JudgeSpec):
    from workbench.llm.client import Capabilities, ClientConfig, JudgeClient

    client = JudgeClient(ClientConfig(base_url=spec.base_url, model=spec.model,
                                      temperature=float(spec.settings["temperature"]),
                                      max_tokens=int(spec.settings["max_tokens"])), spec.api_key)
    client.use(Capabilities.from_dict(spec.caps))
    return client


def _pool(db, pool: str) -> dict:
    info = read_pool(db, pool)
    if info is None:
        raise InputError(f"no pool named {pool!r}; see {{command:status}} for the pools")
    return info


def _job(db, pool: str, spec: JudgeSpec, *, create: bool) -> dict | None:
    job = store.find_job(db, pool, spec.config_key)
    if job is None and create:
        with db.transaction() as tx:
            store.create_job(tx, pool=pool, judge=spec.judge, model=spec.model, base_url=spec.base_url,
                             prompt_id=spec.prompt_id, prompt_hash=spec.prompt_hash, params=spec.stored_params(),
                             samples=spec.samples, aggregate=spec.aggregate, config_key=spec.config_key,
                             budget_usd=None)
        job = store.find_job(db, pool, spec.config_key)
    return job


def write_batch_file(db_path, pool: str, spec: JudgeSpec, out, *, limit: int | None = None,
                     force: bool = False) -> BatchFileReport:
    """Write the Batch API input file of the job's pending pairs (module doc)."""
    from workbench.llm import batch as api

    if spec.offline:
        raise InputError("{field:batch_file} writes requests for an LLM; the offline judge needs none")
    spec = file_spec(spec)
    client = _client(spec)
    with DatabaseUse(db_path, float(spec.settings["db_wait"])) as db:
        info = _pool(db, pool)
        job = _job(db, pool, spec, create=True)
        units = store.pending_units(db, job_id=job["job_id"], pool=pool, level=info["level"],
                                    prefix=spec.cache_prefix, samples=spec.samples, limit=limit, with_text=True)
        hits = store.cache_hits(db, units)
    hit_keys = {(r.cache_key, int(r.sample)) for r in hits.itertuples(index=False)}
    lines, seen, cached = [], set(), 0
    for unit in units.to_dict("records"):
        key = (unit["cache_key"], int(unit["sample"]))
        if key in hit_keys:
            cached += 1
            continue
        if key in seen:
            continue
        seen.add(key)
        messages = spec.template.render(unit["query_text"], unit["passage"], nan_none(unit["description"]))
        seed = int(unit["sample"]) + 1 if spec.samples > 1 else None
        body = client.request_body(spec.template, messages, seed=seed)
        lines.append(api.request_line(f"{int(unit['sample'])}:{unit['cache_key']}", body) + "\n")
    asyncio.run(client.aclose())
    write_lines(Path(out), lines, force=force)
    return BatchFileReport(Path(out), int(job["job_id"]), len(lines), cached, len(units))


def read_results(path) -> dict[str, dict]:
    """``custom_id`` -> output line of a Batch API results (or errors) file; bad lines are
    refused with their line number."""
    from workbench.core.formats.lines import decode_utf8, load_json_line, split_lines

    path = Path(path)
    if not path.is_file():
        raise InputError(f"no batch results file at {path}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=str(path)) from None
    rows: dict[str, dict] = {}
    # bytes decoded here: a byte that is not UTF-8 is named with its line, never a traceback
    for number, line in enumerate(split_lines(decode_utf8(data, str(path))), 1):
        if not line.strip():
            continue
        row = load_json_line(line, str(path), number,
                             invalid="not JSON ({msg} at column {column}); expected one Batch API output "
                                     "object per line")
        if not isinstance(row, dict) or not isinstance(row.get("custom_id"), str):
            raise InputError("no custom_id; expected one Batch API output object per line "
                             '({"custom_id", "response", "error"})', path=str(path), line=number)
        rows[row["custom_id"]] = row
    return rows


def store_batch_results(db_path, pool: str, spec: JudgeSpec, path, *, limit: int | None = None,
                        on_progress=None) -> JobReport:
    """Store a results file into the job that ``--batch-file`` wrote it for (module doc)."""
    from workbench.llm import batch as api

    if spec.offline:
        raise InputError("{field:batch_results} stores LLM answers; the offline judge makes none")
    rows = read_results(path)
    spec = file_spec(spec)
    with DatabaseUse(db_path, float(spec.settings["db_wait"])) as db:
        info = _pool(db, pool)
        job = _job(db, pool, spec, create=False)
        if job is None:
            raise InputError(f"no judge job of this configuration on pool {pool}: write the requests with "
                             f"{{field:batch_file}} first (same {{field:model}}, {{field:base_url}}, {{field:prompt}} and options)")
        units = store.pending_units(db, job_id=job["job_id"], pool=pool, level=info["level"],
                                    prefix=spec.cache_prefix, samples=spec.samples, limit=limit)
        hits = store.cache_hits(db, units)
        with db.transaction() as tx:
            store.update_job(tx, job["job_id"], state="running", pid=os.getpid(), message=None, started=True,
                             heartbeat=True, total=store.count_pool_pairs_for_job(db, pool, info["level"], limit))
        job = store.read_job(db, job["job_id"])
    runner = Runner(db_path, job, info, spec, limit=limit, budget=None, on_progress=on_progress, cancel=None,
                    batch=True)
    client = _client(spec)
    known = set()

    async def go():
        runner.flush_lock = asyncio.Lock()
        runner.total = len(units)
        hit_map = {(r.cache_key, int(r.sample)): r for r in hits.itertuples(index=False)}
        answered: dict[str, object] = {}
        for unit in units.to_dict("records"):
            hit = hit_map.get((unit["cache_key"], int(unit["sample"])))
            if hit is not None:
                runner._record([runner._sample_row(unit, cached_outcome(hit), from_cache=True,
                                                   cached_from=int(hit.sample_id))])
                continue
            custom_id = f"{int(unit['sample'])}:{unit['cache_key']}"
            row = rows.get(custom_id)
            if row is None:
                continue  # stays pending
            known.add(custom_id)
            if custom_id in answered:
                runner._record([runner._sample_row(unit, answered[custom_id], from_cache=True)])
                continue
            outcome = api.read_output(client, spec.template, row)
            answered[custom_id] = outcome
            runner.sent += 1
            runner._record([runner._sample_row(unit, outcome)])
            if len(runner.buffer) >= runner.batch_size:
                await runner.flush()
        await runner.flush()
        await client.aclose()

    try:
        asyncio.run(go())
    finally:
        runner.close_db_thread()
    with DatabaseUse(db_path, runner.wait, migrate=False) as db:
        with db.transaction() as tx:
            store.recount_job(tx, job["job_id"])
            remaining = store.count_pending_units(db, job_id=job["job_id"], pool=pool, level=info["level"],
                                                  samples=spec.samples, limit=limit)
            state = "stopped" if remaining else "finished"
            unknown = len(set(rows) - known)
            message = (f"{remaining:,} judgments still to make (not in {Path(path).name}); write them with "
                       f"{{field:batch_file}} and run the batch again" if remaining else "")
            if unknown:
                message = (message + "; " if message else "") + \
                    f"{unknown:,} results in the file match no pending pair of this job (already stored or another job)"
            store.update_job(tx, job["job_id"], state=state, message=message or None, finished=True)
        final = store.read_job(db, job["job_id"])
    return JobReport(job_id=job["job_id"], pool=pool, state=state, message=message, spec=spec, job=final,
                     units_run=runner.done, sent=runner.sent, cached=runner.cached,
                     elapsed=time.monotonic() - runner.started, errors=sorted(runner.errors.items(),
                                                                              key=lambda kv: -kv[1]))
