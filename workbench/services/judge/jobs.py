"""The judge service: grade every pair of a pool with an LLM (or the offline baseline).

Service API (shared by ``workbench judge`` and the app's Judge page)
-------------------------------------------------------------------

``spec = resolve_spec(settings, api_key=None)``
    The judge configuration from settings (``[judge]``; CLI flags are settings overrides). The API
    key comes from ``api_key`` or ``OPENAI_API_KEY``; it is kept only on the spec (``repr``
    hides it) and handed to the HTTP client, never stored. With no key and the OpenAI URL, or
    with ``model = "offline-lexical"``, the spec is the offline baseline (``spec.offline``).

``estimate(db_path, pool, spec, limit=None) -> Estimate``
    Pairs, units (pair x sample), how many the cache answers, tokens (characters / 4) and cost.

``run_job(db_path, pool, spec, *, limit, budget_usd, retry_failed, batch, on_progress, cancel) -> JobReport``
    Start or resume the pool's job for this configuration and run it until every unit is
    judged, the budget is reached, or it is cancelled. One run per job at a time: a job running
    in another live process or in another thread is refused. Each run sets the job's budget:
    ``budget_usd`` (else ``[judge] budget_usd``); a run without either has no budget, even when an
    earlier run of the job had one (a dropped ``--budget`` is not kept). Blocking; call it in a thread or a
    subprocess from the app. Re-running a finished job sends nothing; ``retry_failed`` first
    drops the job's failed and invalid samples so they are judged again. ``on_progress(p)``
    gets a :class:`Progress` after every batch write; ``cancel`` is a ``threading.Event``.

``cancel_job(db_path, job_id)``  asks a running job (in any process) to stop after its in-flight
    requests; the runner notices at its next batch write (``state`` cancelling -> cancelled).
``job_status(db_path, job_id) -> dict``, ``list_jobs(db_path, pool=None) -> list[dict]``
    The stored job rows (state, counts, tokens, cost, budget, message, times, pid, heartbeat). A
    job's ``message`` names options as placeholders (``{field:budget}``, :mod:`workbench.errors`):
    each front end words it (``workbench.errors.render_text``).
``list_failures(db_path, job_id, limit=None) -> DataFrame``  failed and invalid samples with
    their error and raw reply.
``job_judgments(db_path, job_id) -> DataFrame``  the job's judgments.
``preview_prompt(db_path, pool, spec, query_id=None) -> dict | None``  the messages for the pool's
    first pair (or a query's first pair), few-shot examples included.
``ensemble(db_path, job_ids, method="majority") -> DataFrame``  several judge configurations
    combined per pair (grade, spread, each job's grade); computed, not stored.

Before a job runs (:mod:`workbench.services.judge.probe`): ``GET /models`` (reachable, key
accepted, the model the server serves), for ``batch`` ``GET /batches`` (a server without a Batch
API is refused in one line, before anything is stored or deleted), and once per job the
capability probe choosing the response format (stored with the job, shown in its summary). The
base URL's host, the server's model and the format are part of the job and cache keys. The offline
batch path (``--batch-file`` / ``--batch-results``) is :mod:`workbench.services.judge.batch_files`.

Job states: ``running``, ``batch`` (a batch is on the server), ``cancelling``, ``cancelled``,
``budget`` (stopped at the budget), ``stopped`` (work left, e.g. a batch that ended early),
``finished``; the reads show a running job whose process is gone as ``interrupted``. A run
stops on ``cancel``, SIGINT or SIGTERM: it waits up to 5 s for the requests in flight, writes
what it has, and ends ``cancelled``.

``db_path`` may also be an open :class:`~workbench.store.database.Database` for the reads.

Storage and locking. The runner never keeps the project open: it opens the file, reads or writes
one batch, and closes it (writes every ``batch_size`` results or ``flush_seconds``). Pending
pairs stream in pages of ``PAGE_UNITS`` (keyset paging in priority order; the next page is read
while the current one is sent), so memory does not grow with the pool. A writer that
finds the file locked retries with backoff for up to ``db_wait`` seconds, then names the holder.
Every batch write is one transaction (samples, judgments, counters), so a process killed at any
moment loses only its in-flight requests and the answers of its unwritten batch (at most
``batch_size`` results or ``flush_seconds`` of work); running again sends those again, resumes
with the units that have no stored sample, and ends with the same judgments as an uninterrupted
run.

Jobs and the cache. A job is (pool, judge configuration); the configuration key is the cache
prefix plus the samples and aggregate. Units are (pool pair, sample index). Cache key per unit:
see :mod:`workbench.store.judging`; an ``ok`` sample with the same key and sample index, from
any job, pool or chunking, answers the unit without a request and is recorded as a sample of
this job with ``from_cache`` and ``cached_from`` (its provenance). Units of one run sharing a key
are sent once.

Cost = prompt_tokens x input price + completion_tokens x output price (per 1M tokens, price table
``[judge.prices]``; batch requests x ``batch_discount``). The budget cap stops dispatching when
spent + the estimated cost of the requests in flight reaches it; the job ends ``budget`` with a
message saying so, and a later run with a higher budget resumes it.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass

import pandas as pd

from workbench.core.judging.ensemble import aggregate_grades
from workbench.core.judging.offline import grade_pair
from workbench.errors import ConfigError, InputError, StoreError, render_text
from workbench.llm.prompts import available_prompts  # noqa: F401 - part of the service API (prompt ids)
from workbench.services import access, processes, visibility
from workbench.services.judge.limits import check_budget, check_limit  # noqa: F401 - check_budget: the API
from workbench.services.judge.runner import (  # noqa: F401 - Progress and open_briefly are part of the API
    PAGE_UNITS,
    DatabaseUse,
    LLMGrader,
    OfflineGrader,
    Progress,
    Runner,
    nan_none,
    open_briefly,
    run_with_close,
)
from workbench.services.judge.spec import (  # noqa: F401 - re-exported: the service API in one module
    OFFLINE_MODEL,
    JudgeSpec,
    cache_prefix,
    resolve_spec,
    system_chars,
)
from workbench.services.pooling.pools import pool_preview
from workbench.store import judging as store
from workbench.store.corpus import read_queries
from workbench.store.database import Database, sigint_held
from workbench.store.pools import read_pool, read_pools

_ACTIVE: set[int] = set()  # jobs running in this process (the app may start runs in threads)
_ACTIVE_LOCK = threading.Lock()
STATES_ACTIVE = ("running", "batch", "cancelling")


# -- estimate --------------------------------------------------------------------------------

@dataclass
class Estimate:
    pool: str
    pairs: int
    units: int
    already_judged: int
    cached: int
    to_send: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    model: str
    price_known: bool

    def summary(self) -> str:
        cost = f"${self.cost_usd:,.4f}" if self.cost_usd is not None else \
            f"unknown (no price for {self.model} in [judge.prices])"
        return (f"pool {self.pool}: {self.pairs:,} pairs, {self.units:,} judgments to make "
                f"({self.already_judged:,} already judged by this job, {self.cached:,} answered by the cache); "
                f"{self.to_send:,} requests to send, about {self.prompt_tokens:,} prompt + "
                f"{self.completion_tokens:,} completion tokens (characters / 4), estimated cost {cost}")


def _pool_info(db: Database, pool: str) -> dict:
    info = read_pool(db, pool)
    if info is None:
        names = ", ".join(read_pools(db)["name"].astype(str)) or "none yet (create one with {command:pool})"
        raise InputError(f"no pool named {pool!r}; pools: {names}")
    return info


def estimate(db_path, pool: str, spec: JudgeSpec, *, limit: int | None = None, batch: bool = False) -> Estimate:
    """What running the job would send and cost (no judgment request is made; ``GET /models``
    names the server's model when it answers). Tokens are characters / 4
    of the rendered prompt (template plus texts), completions ``estimate_completion_tokens`` per
    request (1 for single-token prompts)."""
    if not spec.offline and spec.caps is None:
        from workbench.services.judge.probe import discover

        spec = discover(db_path, pool, spec, probe=False)  # the job's stored format, if any
    with DatabaseUse(db_path, float(spec.settings.get("db_wait", 30.0))) as db:
        info = _pool_info(db, pool)
        job = store.find_job(db, pool, spec.config_key)
        job_id = job["job_id"] if job else -1
        pairs = store.count_pool_pairs_for_job(db, pool, info["level"], limit)
        units = store.pending_units(db, job_id=job_id, pool=pool, level=info["level"], prefix=spec.cache_prefix,
                                    samples=spec.samples, limit=limit)
        hits = store.cache_hits(db, units)
    total_units = pairs * spec.samples
    if units.empty:
        cached, sending = 0, units
    else:
        hit_keys = set(zip(hits["cache_key"], hits["sample"].astype(int)))
        mask = [(k, int(s)) in hit_keys for k, s in zip(units["cache_key"], units["sample"])]
        cached = int(sum(mask))
        sending = units[[not m for m in mask]].drop_duplicates(["cache_key", "sample"])
    per_request = 1 if spec.output == "single_token" else int(spec.settings.get("estimate_completion_tokens", 60))
    if spec.offline:
        prompt_tokens = completion_tokens = 0
    else:
        prompt_tokens = int(((sending["text_chars"] + system_chars(spec)) // 4).sum()) if len(sending) else 0
        completion_tokens = per_request * len(sending)
    cost = spec.cost(prompt_tokens, completion_tokens, batch=batch)
    return Estimate(pool=pool, pairs=pairs, units=total_units, already_judged=total_units - len(units),
                    cached=cached, to_send=0 if spec.offline else len(sending), prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens, cost_usd=cost, model=spec.model,
                    price_known=spec.price is not None)


def rate_text(done: int, seconds: float) -> str:
    """A throughput as people read it: ``12.5/s`` from one per second up, below that ``1 per
    12 s`` (``1 per 2.5 s`` under ten seconds), so a slow local server does not print
    ``0.0/s``; ``none`` when nothing was done."""
    if done <= 0 or seconds <= 0:
        return "none" if done <= 0 else f"{done:,}/s"
    rate = done / seconds
    if rate >= 1.0:
        return f"{rate:,.1f}/s"
    each = seconds / done
    return f"1 per {each:.1f} s" if each < 9.95 else f"1 per {each:,.0f} s"


@dataclass
class JobReport:
    job_id: int
    pool: str
    state: str
    message: str
    spec: JudgeSpec
    job: dict
    units_run: int
    sent: int
    cached: int
    elapsed: float
    errors: list[tuple[str, int]]

    @property
    def rate(self) -> float:
        return self.units_run / self.elapsed if self.elapsed > 0 else 0.0

    def summary(self, *, data: bool = False) -> str:
        """What the job did, as lines; ``message`` (stored with the job, like every job's status
        text) names options as placeholders (``{field:budget}``, ``{command:...}``, see
        :mod:`workbench.errors`): with ``data`` they are kept for a page to word, else rendered as
        the CLI says them."""

        j = self.job
        cost = "unknown (no price)" if self.spec.price is None else f"${j['cost_usd']:,.4f}"
        judge = (f"{OFFLINE_MODEL} (offline lexical baseline, not an LLM)" if self.spec.offline else
                 f"{self.spec.model} at {self.spec.base_url}, prompt {self.spec.prompt_id} "
                 f"({self.spec.prompt_hash[:12]}), {format_words(self.spec)}")
        lines = [
            f"judge job {self.job_id} on pool {self.pool}: {self.state}",
            f"  judge     {judge}" + (f", {self.spec.samples} samples ({self.spec.aggregate})"
                                      if self.spec.samples > 1 else ""),
            ("  pairs     " + (f"{j['judged']:,} of {j['total']:,} judged" if j['judged'] <= j['total'] else
                                 f"{j['judged']:,} judged (all {j['total']:,} asked for)")
             + f": {j['ok']:,} ok, {j['invalid']:,} invalid, "
             f"{j['failed']:,} failed"),
            f"  this run  {self.units_run:,} judgments in {self.elapsed:,.1f} s ({rate_text(self.units_run, self.elapsed)}); "
            + ("graded offline, no requests" if self.spec.offline else f"{self.sent:,} requests")
            + f", {self.cached:,} from the cache",
            f"  tokens    {j['prompt_tokens']:,} prompt + {j['completion_tokens']:,} completion; "
            f"HTTP calls {j['http_calls']:,}; cost {cost}"
            + (f" of budget ${j['budget_usd']:,.2f}" if j.get("budget_usd") else ""),
        ]
        for error, n in self.errors[:5]:
            lines.append(f"  error     {n:,} x {error[:150]}")
        if self.message:
            lines.append(f"  {self.message}")
        text = "\n".join(lines)
        return text if data else render_text(text)


def format_words(spec: JudgeSpec) -> str:
    """How the job asks for structured output, for the summary: ``format json_object+schema
    (auto; refused: json_schema)``."""
    caps = spec.caps or {}
    fmt = caps.get("format") or "not probed"
    if spec.output == "single_token":
        fmt = "single token, " + ("with logprobs" if caps.get("logprobs", True) else "no logprobs (refused)")
    how = "auto" if spec.requested_format == "auto" else "forced"
    refused = [r.split(":")[0] for r in caps.get("refused") or []]
    return f"format {fmt} ({how}" + (f"; refused: {', '.join(refused)})" if refused else ")")


# -- public operations -------------------------------------------------------------------------

def _prepare(db_path, pool: str, spec: JudgeSpec, *, limit, budget, retry_failed, batch,
             migrated: bool = False) -> tuple[dict, dict]:
    """Create or resume the job (state running, this process). ``migrated``: this run has
    opened (and so checked and migrated) the project already; this open is then a visit."""
    with DatabaseUse(db_path, float(spec.settings["db_wait"]), migrate=not migrated) as db:
        info = _pool_info(db, pool)
        job = store.find_job(db, pool, spec.config_key)
        with db.transaction() as tx:
            if job is None:
                job_id = store.create_job(
                    tx, pool=pool, judge=spec.judge, model=spec.model, base_url=spec.base_url,
                    prompt_id=spec.prompt_id, prompt_hash=spec.prompt_hash, params=spec.stored_params(),
                    samples=spec.samples, aggregate=spec.aggregate, config_key=spec.config_key, budget_usd=budget)
            else:
                job_id = job["job_id"]
                if job["state"] in STATES_ACTIVE and job["pid"] != os.getpid() and processes.pid_alive(job["pid"]):
                    raise StoreError(f"judge job {job_id} on pool {pool} is running in process {job['pid']}; "
                                     f"wait for it or cancel it first")
            if budget and spec.price is None:
                raise ConfigError(
                    f"a budget needs the price of {spec.model}: add it to [judge.prices] in the configuration "
                    f'("{spec.model}" = [input USD per 1M tokens, output USD per 1M tokens])')
            if retry_failed:
                store.delete_retryable(tx, job_id)
                store.recount_job(tx, job_id)
        total = store.count_pool_pairs_for_job(db, pool, info["level"], limit)
        with db.transaction() as tx:
            # This run's budget, or none: a --budget dropped since an earlier run is not kept.
            store.update_job(tx, job_id, state="batch" if batch else "running", total=total, pid=os.getpid(),
                             message=None, base_url=spec.base_url, started=True, heartbeat=True,
                             budget_usd=budget)
        return store.read_job(db, job_id), info


def run_job(db_path, pool: str, spec: JudgeSpec, *, limit: int | None = None, budget_usd: float | None = None,
            retry_failed: bool = False, batch: bool = False, on_progress=None,
            cancel: threading.Event | None = None) -> JobReport:
    """Start or resume the pool's judge job (see the module doc) and return its report."""
    access.require("judge")
    check_limit(limit)
    budget = check_budget(budget_usd if budget_usd is not None else spec.settings.get("budget_usd"))
    if batch and spec.offline:
        raise InputError("{field:batch} sends requests to an OpenAI-compatible server; the offline judge needs none")
    migrated = False
    if not spec.offline and spec.caps is None:
        from workbench.services.judge.probe import discover

        with DatabaseUse(db_path, float(spec.settings.get("db_wait", 30.0))) as db:
            _pool_info(db, pool)  # an unknown pool is refused before the server is asked anything
        migrated = not isinstance(db_path, Database)
        spec = discover(db_path, pool, spec, batch=batch)  # before anything is stored or deleted
    job, info = _prepare(db_path, pool, spec, limit=limit, budget=budget, retry_failed=retry_failed, batch=batch,
                         migrated=migrated)
    budget = job.get("budget_usd") or None
    with _ACTIVE_LOCK:
        if job["job_id"] in _ACTIVE:
            raise StoreError(f"judge job {job['job_id']} on pool {pool} is already running in this process")
        _ACTIVE.add(job["job_id"])
    try:
        return _run_prepared(db_path, pool, spec, job, info, limit=limit, budget=budget, batch=batch,
                             on_progress=on_progress, cancel=cancel)
    finally:
        with _ACTIVE_LOCK:
            _ACTIVE.discard(job["job_id"])


def first_page_units(concurrency: int) -> int:
    """Units in a run's first page: ``min(PAGE_UNITS, max(64, 4 * concurrency))``, enough to keep
    every worker busy while the next page is read."""
    return min(PAGE_UNITS, max(64, 4 * int(concurrency or 1)))


def _run_prepared(db_path, pool, spec, job, info, *, limit, budget, batch, on_progress, cancel) -> JobReport:
    runner = Runner(db_path, job, info, spec, limit=limit, budget=budget, on_progress=on_progress,
                     cancel=cancel, batch=batch)
    unit_args = {"job_id": job["job_id"], "pool": pool, "level": info["level"], "samples": spec.samples,
                 "limit": limit}

    def next_page(after: tuple | None) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The next page of pending units after the unit key ``after``, and their cache hits. The
        first page is small (:func:`first_page_units`): the requests start after reading it, and
        the next, full page is read while they are sent."""
        size = PAGE_UNITS if after is not None else first_page_units(spec.concurrency)
        with DatabaseUse(db_path, runner.wait, migrate=False) as db:
            page = store.pending_units(db, prefix=spec.cache_prefix, page=size, with_text=True,
                                       after=after, **unit_args)
            return page, store.cache_hits(db, page)

    with DatabaseUse(db_path, runner.wait, migrate=False) as db:
        total = store.count_pending_units(db, **unit_args)
        units = store.pending_units(db, prefix=spec.cache_prefix, **unit_args) if batch else None
    state, message = "finished", ""
    try:
        if not total:
            pass  # nothing to judge: no client is made, nothing is sent
        elif batch:
            from workbench.services.judge.batch import run_batch

            asyncio.run(run_batch(runner, units, LLMGrader(spec)))
        else:
            grader = OfflineGrader() if spec.offline else LLMGrader(spec)
            asyncio.run(run_with_close(runner, next_page, total, grader))
    except KeyboardInterrupt:
        runner.stop_reason = "cancelled"
    finally:
        runner.close_db_thread()
        if runner.stop_reason == "budget":
            state = "budget"
            message = (f"stopped: the budget of ${budget:,.2f} is reached (spent ${runner.spent:,.4f}); "
                       f"raise {{field:budget}} and run again to continue")
        elif runner.stop_reason == "cancelled":
            state, message = "cancelled", "cancelled; run the same command again to resume"
        elif runner.stop_reason == "batch-pending":
            state, message = "batch", runner.batch_message
        elif runner.stop_reason == "failing":
            state, message = "stopped", runner.batch_message
        # The closing bookkeeping is short and must not be cut by Ctrl-C: the batches are
        # already stored, and an interrupted close would leave the job 'running' and report
        # "nothing was changed". A Ctrl-C here is held until it is done (the summary then tells
        # the truth about what was stored).
        with sigint_held(), DatabaseUse(db_path, runner.wait, migrate=False) as db:
            with db.transaction() as tx:
                store.recount_job(tx, job["job_id"])
                remaining = store.count_pending_units(db, **unit_args)
                if state == "finished" and remaining:
                    state, message = "stopped", f"{remaining:,} judgments still to make; run again to resume"
                store.update_job(tx, job["job_id"], state=state, message=message or None,
                                 finished=state in ("finished", "cancelled", "budget", "stopped"))
            final = store.read_job(db, job["job_id"])
    if state == "finished" and final["failed"] + final["invalid"]:
        message = (f"{final['failed'] + final['invalid']:,} pairs failed or gave invalid output; "
                   f"{{command:judge --pool {pool} --retry-failed}} judges them again")
    if state == "finished" and not total:
        scope = f"the first {limit:,} pairs" if limit is not None else "every pair"
        message = f"nothing left to judge: {scope} of pool {pool} already judged by job {job['job_id']}" + (
            f"; {message}" if message else "")
    errors = sorted(runner.errors.items(), key=lambda kv: -kv[1])
    return JobReport(job_id=job["job_id"], pool=pool, state=state, message=message, spec=spec, job=final,
                     units_run=runner.done, sent=runner.sent, cached=runner.cached,
                     elapsed=time.monotonic() - runner.started, errors=errors)


def example_pair(db_path, pool: str, query_id: str) -> dict | None:
    """The first pair (by priority) of ``query_id`` in ``pool`` as a judge receives it:
    ``{"query_id", "doc_id", "chunk_id", "query", "description", "passage"}`` (``query``: the
    query's text, "" for a query the project does not hold; ``description``: None when it has
    none); None for a query without pairs. Reads no label or judgment: it is what the Judge
    page's example shows to every role."""

    with DatabaseUse(db_path) as db:
        pairs = pool_preview(db, pool, str(query_id), limit=1)
        if pairs.empty:
            return None
        queries = read_queries(db)
    query = queries.loc[queries["query_id"] == str(query_id)]
    row = pairs.iloc[0]
    return {"query_id": str(query_id), "doc_id": row["doc_id"], "chunk_id": nan_none(row["chunk_id"]),
            "query": str(query.iloc[0]["text"]) if len(query) else "",
            "description": nan_none(query.iloc[0]["description"]) if len(query) else None,
            "passage": str(row["text"])}


def preview_prompt(db_path, pool: str, spec: JudgeSpec, *, query_id: str | None = None) -> dict | None:
    """The messages the judge would send for the pool's first pair (by priority; with
    ``query_id``, that query's first pair), few-shot examples included when ``spec`` has them
    (:mod:`workbench.services.judge.few_shot`), with the pair's ids:
    ``{"query_id", "doc_id", "chunk_id", "messages", "examples"}`` (``examples``: how many are in
    the prompt, 0 for zero-shot); None for the offline judge, an empty pool or a query without
    pairs. For the Judge page's "What the judge sees"."""
    if spec.offline or spec.template is None:
        return None
    examples = len(getattr(spec.template, "examples", ()))
    with DatabaseUse(db_path, float(spec.settings.get("db_wait", 30.0))) as db:
        if query_id is not None:
            pair = example_pair(db, pool, str(query_id))
            if pair is None:
                return None
            return {"query_id": pair["query_id"], "doc_id": pair["doc_id"], "chunk_id": pair["chunk_id"],
                    "messages": spec.template.render(pair["query"], pair["passage"], pair["description"]),
                    "examples": examples}
        info = _pool_info(db, pool)
        units = store.pending_units(db, job_id=-1, pool=pool, level=info["level"], prefix=spec.cache_prefix,
                                    samples=1, limit=1, with_text=True)
    if units.empty:
        return None
    row = units.iloc[0]
    return {"query_id": row["query_id"], "doc_id": row["doc_id"], "chunk_id": nan_none(row["chunk_id"]),
            "messages": spec.template.render(row["query_text"], row["passage"], nan_none(row["description"])),
            "examples": examples}


def cancel_job(db_path, job_id: int) -> dict:
    """Ask job ``job_id`` to stop (state ``cancelling``; the runner stops at its next write). A job
    whose process is gone is marked ``cancelled`` at once."""
    access.require("judge")
    with DatabaseUse(db_path) as db:
        job = store.read_job(db, job_id)
        if job is None:
            raise InputError(f"no judge job {job_id}")
        with db.transaction() as tx:
            if job["state"] in STATES_ACTIVE and processes.pid_alive(job["pid"]):
                store.update_job(tx, job_id, state="cancelling")
            elif job["state"] in STATES_ACTIVE:
                store.update_job(tx, job_id, state="cancelled", message="cancelled (its process had ended)",
                                 finished=True)
        return store.read_job(db, job_id)


def _live(job: dict) -> dict:
    """The job with ``alive`` (its process runs) and a ``running``/``cancelling`` job whose process
    is gone shown as ``interrupted`` (resume it by running it again)."""
    job["alive"] = processes.pid_alive(job.get("pid")) if job["state"] in STATES_ACTIVE else False
    if job["state"] in ("running", "cancelling") and not job["alive"]:
        job["state"] = "interrupted"
    return job


def job_status(db_path, job_id: int) -> dict:
    with DatabaseUse(db_path) as db:
        job = store.read_job(db, job_id)
    if job is None:
        raise InputError(f"no judge job {job_id}")
    return _live(job)


def list_jobs(db_path, pool: str | None = None) -> list[dict]:
    with DatabaseUse(db_path) as db:
        return [_live(job) for job in store.read_jobs(db, pool)]


def ensemble(db_path, job_ids: list[int], method: str = "majority") -> pd.DataFrame:
    """Several judge configurations' judgments of the same pairs combined: per pair (present in
    every job) ``grade`` by ``method`` over the ok grades (see :mod:`judge_ensemble`), ``spread``,
    and one ``grade_<job_id>`` column per job (null when not ok). Computed, not stored: the
    stored judgments stay one per job."""

    visibility.require_read("judge_output")
    if len(job_ids) < 2:
        raise InputError("an ensemble needs at least two judge jobs")
    key = ["query_id", "doc_id", "chunk_id"]
    merged = None
    with DatabaseUse(db_path) as db:
        for job_id in job_ids:
            frame = store.job_judgments(db, job_id)
            frame = frame.assign(**{f"grade_{job_id}": frame["grade"].where(frame["status"] == "ok")})
            frame = frame[key + [f"grade_{job_id}"]]
            merged = frame if merged is None else merged.merge(frame, on=key, how="inner")
    columns = [f"grade_{j}" for j in job_ids]
    results = [aggregate_grades([None if pd.isna(v) else int(v) for v in row], method)
               for row in merged[columns].itertuples(index=False)]
    merged["grade"] = pd.array([g for g, _ in results], dtype="Int8")
    merged["spread"] = [s for _, s in results]
    return merged[key + ["grade", "spread"] + columns]


def list_failures(db_path, job_id: int, limit: int | None = None) -> pd.DataFrame:
    """Failed and invalid samples with the judge's raw reply: judge output, refused to annotators."""
    visibility.require_read("judge_output")
    with DatabaseUse(db_path) as db:
        return store.job_failures(db, job_id, limit)


def job_judgments(db_path, job_id: int) -> pd.DataFrame:
    visibility.require_read("judge_output")
    with DatabaseUse(db_path) as db:
        return store.job_judgments(db, job_id)


def offline_preview(query: str, passage: str, description: str | None = None):
    """The offline baseline's grade and reason for one pair, computed now (the Judge page's
    "What the judge sees"): judge output, refused to annotators (:mod:`workbench.services.visibility`)."""

    visibility.require_read("judge_output")
    return grade_pair(query, passage, description=description)
