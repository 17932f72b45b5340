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

The file's server may not be the one that runs it, so the job's key carries the base URL's host
and no server model; both commands of one configuration find the same job. The request format
(:func:`file_format`) is one the target server accepts: a forced ``--response-format``
(``json_object`` is written as ``json_object`` with a ``schema``, which llama.cpp enforces as a
grammar and other servers ignore); with ``auto``, the capability probe's choice when the base
URL's server answers it (llama.cpp refuses ``json_schema`` and gets ``json_object`` with a
schema), else ``json_schema``, the Batch APIs' format (OpenAI's own URL is never probed). The
format is stored with the job when the file is first written, and ``--batch-results`` and later
files of the job use it. ``custom_id`` is ``"<sample>:<cache_key>"``.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

from workbench.core.formats.lines import decode_utf8, load_json_line, split_lines
from workbench.errors import InputError, render_text
from workbench.llm import batch as api
from workbench.llm.client import Capabilities, ClientConfig, JudgeClient, ServerProblem
from workbench.services.judge.jobs import JobReport
from workbench.services.judge.runner import DatabaseUse, Runner, cached_outcome, nan_none
from workbench.services.judge.spec import JudgeSpec, base_url_host
from workbench.services.output_file import write_lines
from workbench.store import judging as store
from workbench.store.pools import read_pool

FILE_FORMATS = {"auto": "json_schema", "json_schema": "json_schema", "json_object": "json_object+schema",
                "text": "text"}
#: seconds the file's capability probe waits for the server (one try)
FILE_PROBE_TIMEOUT = 20.0


@dataclass
class BatchFileReport:
    path: Path
    job_id: int
    requests: int
    cached: int
    pending: int

    format: str = "json_schema"

    def summary(self, *, data: bool = False) -> str:
        """One line; with ``data`` the option it names stays a placeholder (``{field:batch_results}``,
        :mod:`workbench.errors`) for a page to word, else it is rendered as the CLI says it."""

        text = (f"wrote {self.requests:,} requests for judge job {self.job_id} to {self.path} "
                f"({self.pending:,} judgments to make, {self.cached:,} answered by the cache: "
                f"{{field:batch_results}} stores them with the results); format {self.format}")
        return text if data else render_text(text)


def file_spec(spec: JudgeSpec, fmt: str | None = None) -> JudgeSpec:
    """``spec`` for the file path: no server model, the format ``fmt`` (default: the forced
    format's, else ``json_schema``; module doc)."""
    if spec.output == "single_token":
        fmt = "text"
    fmt = fmt or FILE_FORMATS.get(spec.requested_format, "json_schema")
    return replace(spec, server={"host": base_url_host(spec.base_url), "server_model": None},
                   caps={"format": fmt, "logprobs": True, "latency_s": 0.0, "server_model": None,
                         "refused": [], "seed": None, "file": True})


def file_format(spec: JudgeSpec) -> str:
    """The request format of a new job's file (module doc): forced, probed, or ``json_schema``."""

    if spec.output == "single_token":
        return "text"
    if spec.requested_format != "auto":
        return FILE_FORMATS.get(spec.requested_format, "json_schema")
    host = base_url_host(spec.base_url) or ""
    if not spec.base_url or host.endswith("openai.com"):
        return "json_schema"
    client = JudgeClient(ClientConfig(base_url=spec.base_url, model=spec.model, max_tokens=8,
                                      timeout=FILE_PROBE_TIMEOUT, max_attempts=1), spec.api_key)

    async def ask() -> str:
        try:
            return (await client.probe(spec.template)).format
        finally:
            await client.aclose()

    try:
        return asyncio.run(ask())
    except ServerProblem:  # not reachable, or it failed the probe: the Batch APIs' format
        return "json_schema"


def _client(spec: JudgeSpec):

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

    if spec.offline:
        raise InputError("{field:batch_file} writes requests for an LLM; the offline judge needs none")
    spec = file_spec(spec)
    with DatabaseUse(db_path, float(spec.settings["db_wait"])) as db:
        _pool(db, pool)
        job = _job(db, pool, spec, create=False)
    # The format of the job's first file, else one the server accepts (asked outside the project).
    fmt = _job_format(job) or file_format(spec)
    spec = file_spec(spec, fmt)
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
    return BatchFileReport(Path(out), int(job["job_id"]), len(lines), cached, len(units), fmt)


def _job_format(job: dict | None) -> str | None:
    """The format a job's files were written in (stored with the job), None for a new job."""
    return (((job or {}).get("params") or {}).get("probe") or {}).get("format")


def read_results(path) -> dict[str, dict]:
    """``custom_id`` -> output line of a Batch API results (or errors) file; bad lines are
    refused with their line number."""

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
        spec = file_spec(spec, _job_format(job))  # the cache keys of the format the file was written in
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

    unit_rows = units.to_dict("records")
    hit_map = {(r.cache_key, int(r.sample)): r for r in hits.itertuples(index=False)}
    outcomes: dict[str, object] = {}  # custom_id -> the outcome of its results line
    for unit in unit_rows:
        custom_id = f"{int(unit['sample'])}:{unit['cache_key']}"
        if (unit["cache_key"], int(unit["sample"])) not in hit_map and custom_id in rows \
                and custom_id not in outcomes:
            outcomes[custom_id] = api.read_output(client, spec.template, rows[custom_id])
    # Every line failed (the server that ran the file refused the requests, or was not there):
    # nothing of it is stored, the pairs stay pending, and the run ends with the server's error.
    all_failed = bool(outcomes) and all(o.status == "failed" for o in outcomes.values())

    async def go():
        runner.flush_lock = asyncio.Lock()
        runner.total = len(units)
        recorded: set[str] = set()
        for unit in unit_rows:
            hit = hit_map.get((unit["cache_key"], int(unit["sample"])))
            if hit is not None:
                runner._record([runner._sample_row(unit, cached_outcome(hit), from_cache=True,
                                                   cached_from=int(hit.sample_id))])
                continue
            custom_id = f"{int(unit['sample'])}:{unit['cache_key']}"
            if custom_id not in outcomes or all_failed:
                continue  # stays pending
            known.add(custom_id)
            if custom_id in recorded:
                runner._record([runner._sample_row(unit, outcomes[custom_id], from_cache=True)])
                continue
            recorded.add(custom_id)
            runner.sent += 1
            runner._record([runner._sample_row(unit, outcomes[custom_id])])
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
            unknown = len(set(rows) - known - (set(outcomes) if all_failed else set()))
            message = (f"{remaining:,} judgments still to make (not in {Path(path).name}); write them with "
                       f"{{field:batch_file}} and run the batch again" if remaining else "")
            if all_failed:
                first = next(iter(outcomes.values())).error or "no answer"
                message = (f"stopped: all {len(outcomes):,} results in {Path(path).name} failed, nothing stored "
                           f"(the first: {first.splitlines()[0][:300]}); the pairs stay pending: fix the server "
                           f"or the requests, then write them again with {{field:batch_file}}")
            if unknown:
                message = (message + "; " if message else "") + \
                    f"{unknown:,} results in the file match no pending pair of this job (already stored or another job)"
            store.update_job(tx, job["job_id"], state=state, message=message or None, finished=True)
        final = store.read_job(db, job["job_id"])
    return JobReport(job_id=job["job_id"], pool=pool, state=state, message=message, spec=spec, job=final,
                     units_run=runner.done, sent=runner.sent, cached=runner.cached,
                     elapsed=time.monotonic() - runner.started, errors=sorted(runner.errors.items(),
                                                                              key=lambda kv: -kv[1]))
