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
    in another live process or in another thread is refused. Without ``budget_usd`` (and no
    ``[judge] budget_usd``) a resumed job keeps the budget it was started with. Blocking; call it in a thread or a
    subprocess from the app. Re-running a finished job sends nothing; ``retry_failed`` first
    drops the job's failed and invalid samples so they are judged again. ``on_progress(p)``
    gets a :class:`Progress` after every batch write; ``cancel`` is a ``threading.Event``.

``cancel_job(db_path, job_id)``  asks a running job (in any process) to stop after its in-flight
    requests; the runner notices at its next batch write (``state`` cancelling -> cancelled).
``job_status(db_path, job_id) -> dict``, ``list_jobs(db_path, pool=None) -> list[dict]``
    The stored job rows (state, counts, tokens, cost, budget, message, times, pid, heartbeat).
``list_failures(db_path, job_id, limit=None) -> DataFrame``  failed and invalid samples with
    their error and raw reply.
``job_judgments(db_path, job_id) -> DataFrame``  the job's judgments.
``preview_prompt(db_path, pool, spec) -> dict | None``  the messages for the pool's first pair.
``ensemble(db_path, job_ids, method="majority") -> DataFrame``  several judge configurations
    combined per pair (grade, spread, each job's grade); computed, not stored.

Job states: ``running``, ``batch`` (a batch is on the server), ``cancelling``, ``cancelled``,
``budget`` (stopped at the budget), ``stopped`` (work left, e.g. a batch that ended early),
``finished``; the reads show a running job whose process is gone as ``interrupted``. A run
stops on ``cancel``, SIGINT or SIGTERM: it waits up to 5 s for the requests in flight, writes
what it has, and ends ``cancelled``.

``db_path`` may also be an open :class:`~workbench.store.database.Database` for the reads.

Storage and locking. The runner never keeps the project open: it opens the file, reads or writes
one batch, and closes it (writes every ``batch_size`` results or ``flush_seconds``). A writer that
finds the file locked retries with backoff for up to ``db_wait`` seconds, then names the holder.
Every batch write is one transaction (samples, judgments, counters), so a process killed at any
moment loses only its in-flight requests; running again resumes with the units that have no
stored sample, and ends with the same judgments as an uninterrupted run.

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
import hashlib
import json
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pandas as pd

from workbench.config import Settings
from workbench.errors import ConfigError, InputError, StoreError, StoreLockedError
from workbench.store import judging as store
from workbench.store.database import Database
from workbench.store.pools import read_pool

OFFLINE_MODEL = "offline-lexical"
PAGE_UNITS = 2000
CANCEL_GRACE_SECONDS = 5.0
FAILURE_RUN = 20
_ACTIVE: set[int] = set()  # jobs running in this process (the app may start runs in threads)
_ACTIVE_LOCK = threading.Lock()
STATES_ACTIVE = ("running", "batch", "cancelling")


# -- configuration --------------------------------------------------------------------------

@dataclass(frozen=True)
class JudgeSpec:
    """A resolved judge configuration (see :func:`resolve_spec`)."""

    model: str
    base_url: str | None
    prompt_id: str
    prompt_hash: str
    output: str
    params: dict
    samples: int
    aggregate: str
    concurrency: int
    price: tuple[float, float] | None
    batch_discount: float
    settings: dict
    template: object = field(repr=False, default=None)
    api_key: str | None = field(repr=False, default=None)

    @property
    def offline(self) -> bool:
        return self.model == OFFLINE_MODEL

    @property
    def judge(self) -> str:
        return OFFLINE_MODEL if self.offline else "llm"

    @property
    def cache_prefix(self) -> str:
        return cache_prefix(self.model, self.prompt_hash, self.params)

    @property
    def config_key(self) -> str:
        text = json.dumps({"prefix": self.cache_prefix, "samples": self.samples, "aggregate": self.aggregate},
                          sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def cost(self, prompt_tokens: int, completion_tokens: int, *, batch: bool = False) -> float | None:
        if self.price is None:
            return None
        value = (prompt_tokens * self.price[0] + completion_tokens * self.price[1]) / 1e6
        return value * (self.batch_discount if batch else 1.0)


def cache_prefix(model: str, prompt_hash: str, params: dict) -> str:
    """The first part of every cache key: ``model 0x1f prompt_hash 0x1f params_json 0x1f``."""
    return f"{model}\x1f{prompt_hash}\x1f{json.dumps(params, sort_keys=True)}\x1f"


def _is_openai(base_url: str) -> bool:
    return (urlparse(base_url).hostname or "").endswith("api.openai.com")


def resolve_spec(settings: Settings, *, api_key: str | None = None) -> JudgeSpec:
    """The judge configuration from ``settings`` (``[judge]``) and the API key (argument, else
    ``OPENAI_API_KEY``). Invalid values raise :class:`ConfigError` naming the setting."""
    from workbench.llm.prompts import load_prompt

    j = dict(settings.values["judge"])
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY") or None
    model = str(j["model"]).strip()
    base_url = str(j["base_url"]).strip()
    if not model:
        raise ConfigError("judge.model is empty; set --model or [judge] model")
    for name, low in (("concurrency", 1), ("samples", 1), ("max_attempts", 1), ("max_tokens", 1),
                      ("batch_size", 1)):
        if int(j[name]) < low:
            raise ConfigError(f"judge.{name} must be at least {low}, got {j[name]}")
    if j["aggregate"] not in ("majority", "mean"):
        raise ConfigError(f"judge.aggregate must be majority or mean, got {j['aggregate']!r}")
    from workbench.llm.client import RESPONSE_FORMATS

    if j["response_format"] not in RESPONSE_FORMATS:
        raise ConfigError(f"judge.response_format must be one of {', '.join(RESPONSE_FORMATS)}")
    prices = j.get("prices") or {}
    offline = model == OFFLINE_MODEL or (not key and _is_openai(base_url))
    if offline:
        from workbench.core import offline_judge

        prompt_hash = offline_judge.settings_fingerprint()
        return JudgeSpec(model=OFFLINE_MODEL, base_url=None, prompt_id=OFFLINE_MODEL, prompt_hash=prompt_hash,
                         output="offline", params={}, samples=1, aggregate="majority",
                         concurrency=1, price=(0.0, 0.0), batch_discount=1.0, settings=j)
    if not base_url.startswith(("http://", "https://")):
        raise ConfigError(f"judge.base_url {base_url!r} is not an http(s) URL")
    template = load_prompt(str(j["prompt"]))
    params = {"temperature": float(j["temperature"]), "output": template.output}
    if template.output != "single_token":
        params["max_tokens"] = int(j["max_tokens"])
    price = prices.get(model)
    if price is not None:
        if not (isinstance(price, (list, tuple)) and len(price) == 2):
            raise ConfigError(f"judge.prices.{model} must be [input USD per 1M tokens, output USD per 1M tokens]")
        price = (float(price[0]), float(price[1]))
    return JudgeSpec(model=model, base_url=base_url, prompt_id=template.id, prompt_hash=template.prompt_hash,
                     output=template.output, params=params, samples=int(j["samples"]), aggregate=j["aggregate"],
                     concurrency=int(j["concurrency"]), price=price, batch_discount=float(j["batch_discount"]),
                     settings=j, template=template, api_key=key)


# -- opening the project briefly -------------------------------------------------------------

def open_briefly(db_path, wait: float = 30.0, *, migrate: bool = True) -> Database:
    """Open the project, waiting with backoff (bounded by ``wait`` seconds) while another process
    holds it (:class:`Database`'s ``wait``); then :class:`StoreLockedError` names the holder.
    ``migrate=False`` skips the schema check (a write) for the runner's batch writes, whose
    project was migrated when the job started. A missing project is an error, never created."""
    path = Path(db_path)
    if not path.exists():
        raise StoreError(f"no project database at {path}; create one with `workbench --db {path} init`")
    return Database(path, migrate=migrate, wait=max(0.0, wait))


class _Use:
    """``with _Use(target) as db``: an open Database as is, or a path opened briefly."""

    def __init__(self, target, wait: float = 30.0, *, migrate: bool = True):
        self.target, self.wait, self.migrate, self.db, self.owned = target, wait, migrate, None, False

    def __enter__(self) -> Database:
        if isinstance(self.target, Database):
            self.db = self.target
        else:
            self.db, self.owned = open_briefly(self.target, self.wait, migrate=self.migrate), True
        return self.db

    def __exit__(self, *exc):
        if self.owned:
            self.db.close()


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
        from workbench.store.pools import read_pools

        names = ", ".join(read_pools(db)["name"].astype(str)) or "none yet (create one with `workbench pool`)"
        raise InputError(f"no pool named {pool!r}; pools: {names}")
    return info


def _system_chars(spec: JudgeSpec) -> int:
    if spec.template is None:
        return 0
    return len(spec.template.system) + sum(len(p) for p in spec.template.user_parts if isinstance(p, str)) + 120


def estimate(db_path, pool: str, spec: JudgeSpec, *, limit: int | None = None, batch: bool = False) -> Estimate:
    """What running the job would send and cost (no request is made). Tokens are characters / 4
    of the rendered prompt (template plus texts), completions ``estimate_completion_tokens`` per
    request (1 for single-token prompts)."""
    with _Use(db_path, float(spec.settings.get("db_wait", 30.0))) as db:
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
        prompt_tokens = int(((sending["text_chars"] + _system_chars(spec)) // 4).sum()) if len(sending) else 0
        completion_tokens = per_request * len(sending)
    cost = spec.cost(prompt_tokens, completion_tokens, batch=batch)
    return Estimate(pool=pool, pairs=pairs, units=total_units, already_judged=total_units - len(units),
                    cached=cached, to_send=0 if spec.offline else len(sending), prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens, cost_usd=cost, model=spec.model,
                    price_known=spec.price is not None)


# -- progress and report ---------------------------------------------------------------------

@dataclass
class Progress:
    """Cumulative for this run: units done of ``total``, failures, cost so far (whole job)."""

    done: int
    total: int
    ok: int
    invalid: int
    failed: int
    cached: int
    cost_usd: float | None
    elapsed: float


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

    def summary(self) -> str:
        j = self.job
        cost = "unknown (no price)" if self.spec.price is None else f"${j['cost_usd']:,.4f}"
        judge = (f"{OFFLINE_MODEL} (offline lexical baseline, not an LLM)" if self.spec.offline else
                 f"{self.spec.model} at {self.spec.base_url}, prompt {self.spec.prompt_id} "
                 f"({self.spec.prompt_hash[:12]})")
        lines = [
            f"judge job {self.job_id} on pool {self.pool}: {self.state}",
            f"  judge     {judge}" + (f", {self.spec.samples} samples ({self.spec.aggregate})"
                                      if self.spec.samples > 1 else ""),
            f"  pairs     {j['judged']:,} of {j['total']:,} judged: {j['ok']:,} ok, {j['invalid']:,} invalid, "
            f"{j['failed']:,} failed",
            f"  this run  {self.units_run:,} judgments in {self.elapsed:,.1f} s ({self.rate:,.1f}/s); "
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
        return "\n".join(lines)


# -- graders ---------------------------------------------------------------------------------

class _OfflineGrader:
    async def grade(self, query: str, description: str | None, passage: str):
        from workbench.core.offline_judge import grade_pair
        from workbench.llm.client import CallOutcome

        started = time.perf_counter()
        result = grade_pair(query, passage, description=description)
        return CallOutcome(status="ok", grade=int(result.grade), reason=result.reason,
                           raw_response=json.dumps({k: round(float(v), 6) for k, v in result.features.items()}),
                           latency_ms=(time.perf_counter() - started) * 1000.0, http_calls=0)

    async def aclose(self):
        return None


class _LLMGrader:
    def __init__(self, spec: JudgeSpec):
        from workbench.llm.client import ClientConfig, JudgeClient

        s = spec.settings
        self.spec = spec
        self.client = JudgeClient(ClientConfig(
            base_url=spec.base_url, model=spec.model, temperature=float(s["temperature"]),
            max_tokens=int(s["max_tokens"]), timeout=float(s["timeout"]), max_attempts=int(s["max_attempts"]),
            backoff_initial=float(s["backoff_initial"]), backoff_max=float(s["backoff_max"]),
            response_format=s["response_format"], requests_per_minute=int(s["requests_per_minute"]),
            tokens_per_minute=int(s["tokens_per_minute"])), spec.api_key)
        self.system_chars = _system_chars(spec)

    async def grade(self, query: str, description: str | None, passage: str):
        messages = self.spec.template.render(query, passage, description)
        chars = sum(len(m["content"]) for m in messages)
        return await self.client.judge(self.spec.template, messages, estimated_tokens=chars // 4)

    async def aclose(self):
        await self.client.aclose()


# -- the runner -------------------------------------------------------------------------------

def _nan_none(value):
    if value is None:
        return None
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value


class _Runner:
    def __init__(self, db_path, job: dict, pool_info: dict, spec: JudgeSpec, *, limit, budget, on_progress,
                 cancel: threading.Event | None, batch: bool):
        self.db_path, self.job, self.pool_info, self.spec = db_path, job, pool_info, spec
        self.limit, self.budget, self.on_progress, self.cancel, self.batch = limit, budget, on_progress, cancel, batch
        s = spec.settings
        self.wait = float(s["db_wait"])
        self.batch_size = int(s["batch_size"])
        self.flush_seconds = float(s["flush_seconds"])
        self.buffer: list[dict] = []
        self.pending_pairs: list[dict] = []
        self.stop_reason: str | None = None
        self.spent = float(job.get("cost_usd") or 0.0)
        self.inflight_cost = 0.0
        self.done = self.ok = self.invalid = self.failed = self.cached = self.sent = 0
        self.total = 0
        self.errors: dict[str, int] = {}
        self.started = time.monotonic()
        self.flush_lock: asyncio.Lock | None = None
        self.write_error: BaseException | None = None
        self.batch_message = ""
        self._finished = False
        self._flush_scheduled = False
        self.consecutive_failed = 0

    # -- recording ------------------------------------------------------------------------
    def _sample_row(self, unit: dict, outcome, *, from_cache=False, cached_from=None) -> dict:
        cost = 0.0 if from_cache else self.spec.cost(outcome.prompt_tokens, outcome.completion_tokens,
                                                     batch=self.batch)
        probs = json.dumps({str(k): v for k, v in outcome.probabilities.items()}) if outcome.probabilities else None
        return {"job_id": self.job["job_id"], "query_id": unit["query_id"], "doc_id": unit["doc_id"],
                "chunk_id": _nan_none(unit["chunk_id"]), "start": int(unit["start"]), "end": int(unit["end"]),
                "sample": int(unit["sample"]), "cache_key": unit["cache_key"], "status": outcome.status,
                "grade": outcome.grade if outcome.status == "ok" else None, "reason": outcome.reason,
                "raw_response": outcome.raw_response, "error": outcome.error, "probabilities": probs,
                "expected_grade": outcome.expected_grade,
                "prompt_tokens": 0 if from_cache else outcome.prompt_tokens,
                "completion_tokens": 0 if from_cache else outcome.completion_tokens,
                "latency_ms": None if from_cache else outcome.latency_ms, "cost_usd": cost,
                "http_calls": 0 if from_cache else outcome.http_calls, "from_cache": bool(from_cache),
                "cached_from": cached_from}

    def _record(self, rows: list[dict]) -> None:
        for row in rows:
            self.done += 1
            if row["from_cache"]:
                self.cached += 1
            status = row["status"]
            setattr(self, status, getattr(self, status) + 1)
            if row["error"]:
                kind = row["error"].split(";")[0].split(":")[0] if status == "failed" else row["error"].split(";")[0]
                self.errors[kind] = self.errors.get(kind, 0) + 1
            if row["cost_usd"]:
                self.spent += row["cost_usd"]
            if not row["from_cache"]:
                # Circuit breaker: a run of failures with nothing answered in between means the
                # server is down or refusing us; stop instead of failing every remaining pair.
                self.consecutive_failed = self.consecutive_failed + 1 if status == "failed" else 0
                if self.consecutive_failed >= max(FAILURE_RUN, 2 * self.spec.concurrency) and not self.stop_reason:
                    self.stop_reason = "failing"
                    self.batch_message = (
                        f"stopped: the last {self.consecutive_failed} requests all failed ({row['error']}); "
                        f"check the server, then run again (--retry-failed also re-judges the failed pairs)")
        self.buffer.extend(rows)

    # -- writing ---------------------------------------------------------------------------
    def _write(self, rows: list[dict]) -> str | None:
        """One transaction: the samples, the judgments of the pairs they complete, the counters.
        Returns the job's state as stored (to notice a cancel from another process)."""
        frame = pd.DataFrame(rows, columns=store.SAMPLE_COLUMNS)
        with _Use(self.db_path, self.wait, migrate=False) as db, db.transaction() as tx:
            state = store.job_state(tx, self.job["job_id"])
            if frame.empty:
                return state
            store.write_samples(tx, frame)
            complete = store.complete_pairs(tx, self.job["job_id"], self.spec.samples, frame)
            judgments = self._judgments(complete)
            store.write_job_judgments(tx, judgments)
            store.add_job_counts(
                tx, self.job["job_id"], cached=int(frame["from_cache"].sum()),
                sent=int((~frame["from_cache"]).sum()), http_calls=int(frame["http_calls"].fillna(0).sum()),
                prompt_tokens=int(frame["prompt_tokens"].fillna(0).sum()),
                completion_tokens=int(frame["completion_tokens"].fillna(0).sum()),
                cost_usd=float(frame["cost_usd"].fillna(0).sum()))
            store.recount_job(tx, self.job["job_id"])
            return state

    def _judgments(self, samples: pd.DataFrame) -> pd.DataFrame:
        from workbench.services.judge_ensemble import aggregate_grades, aggregate_status

        if samples.empty:
            return pd.DataFrame()
        if self.spec.samples == 1:
            # One sample per pair: the judgment is the sample (columns copied, no per-pair loop).
            ok = samples["status"] == "ok"
            return pd.DataFrame({
                "query_id": samples["query_id"], "doc_id": samples["doc_id"], "chunk_id": samples["chunk_id"],
                "start": samples["start"], "end": samples["end"], "grade": samples["grade"].where(ok),
                "source": "llm", "assessor": self.spec.model, "prompt_hash": self.spec.prompt_hash,
                "model": self.spec.model, "reason": samples["reason"], "raw_response": samples["raw_response"],
                "status": samples["status"], "error": samples["error"].where(~ok),
                "prompt_tokens": samples["prompt_tokens"].fillna(0).astype("int64"),
                "completion_tokens": samples["completion_tokens"].fillna(0).astype("int64"),
                "cost_usd": samples["cost_usd"].fillna(0.0).astype("float64"), "latency_ms": samples["latency_ms"],
                "job_id": int(self.job["job_id"]), "samples": None, "grade_spread": None,
                "probabilities": samples["probabilities"], "expected_grade": samples["expected_grade"],
                "cached": samples["from_cache"].astype("int64"),
            })
        out = []
        for _, group in samples.groupby(["query_id", "doc_id", "chunk_id"], dropna=False, sort=True):
            group = group.sort_values("sample")
            statuses = list(group["status"])
            grades = [int(g) if s == "ok" else None for g, s in zip(group["grade"], statuses)]
            status = aggregate_status(statuses)
            grade, spread = aggregate_grades(grades, self.spec.aggregate)
            first = group.iloc[0]
            ok_rows = group[group["status"] == "ok"]
            lead = ok_rows.iloc[0] if len(ok_rows) else first
            errors = [e for e in group["error"] if isinstance(e, str) and e]
            out.append({
                "query_id": first["query_id"], "doc_id": first["doc_id"], "chunk_id": _nan_none(first["chunk_id"]),
                "start": int(first["start"]), "end": int(first["end"]),
                "grade": grade if status == "ok" else None, "source": "llm",
                "assessor": self.spec.model, "prompt_hash": self.spec.prompt_hash, "model": self.spec.model,
                "reason": _nan_none(lead["reason"]),
                "raw_response": _nan_none(lead["raw_response"]) if len(group) == 1 else
                json.dumps([_nan_none(r) for r in group["raw_response"]]),
                "status": status,
                "error": None if status == "ok" and len(group) == 1 else ("; ".join(errors) or None),
                "prompt_tokens": int(group["prompt_tokens"].fillna(0).sum()),
                "completion_tokens": int(group["completion_tokens"].fillna(0).sum()),
                "cost_usd": float(group["cost_usd"].fillna(0).sum()),
                "latency_ms": _nan_none(group["latency_ms"].max()),
                "job_id": int(self.job["job_id"]),
                "samples": json.dumps(grades) if self.spec.samples > 1 else None,
                "grade_spread": spread if self.spec.samples > 1 else None,
                "probabilities": _nan_none(lead["probabilities"]),
                "expected_grade": _nan_none(lead["expected_grade"]),
                "cached": int(group["from_cache"].sum()),
            })
        return pd.DataFrame(out)

    def request_flush(self) -> None:
        """Schedule one write of the buffer unless one is already waiting."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().create_task(self.flush())

    async def flush(self, *, check_state: bool = False) -> None:
        """Write the buffer (and read the job's state) in one short visit to the project; with an
        empty buffer only when ``check_state`` (the periodic check for a cancel)."""
        async with self.flush_lock:
            self._flush_scheduled = False
            if not self.buffer and not check_state:
                return
            rows, self.buffer = self.buffer, []
            try:
                state = await asyncio.to_thread(self._write, rows)
            except StoreLockedError as exc:
                # Keep the results and try again at the next flush; the last attempt raises.
                self.buffer = rows + self.buffer
                self.write_error = exc
                return
            self.write_error = None
            if state == "cancelling" and self.stop_reason is None:
                self.stop_reason = "cancelled"
            self._report()

    def _report(self):
        if self.on_progress is not None:
            self.on_progress(Progress(done=self.done, total=self.total, ok=self.ok, invalid=self.invalid,
                                      failed=self.failed, cached=self.cached,
                                      cost_usd=self.spent if self.spec.price is not None else None,
                                      elapsed=time.monotonic() - self.started))

    # -- running ---------------------------------------------------------------------------
    def _should_stop(self) -> bool:
        if self.stop_reason:
            return True
        if self.cancel is not None and self.cancel.is_set():
            self.stop_reason = "cancelled"
            return True
        return False

    async def run(self, next_page, total: int, grader) -> None:
        """Judge page after page (``next_page()`` reads the next ``PAGE_UNITS`` pending units), so
        memory stays flat however large the pool is."""
        self.flush_lock = asyncio.Lock()
        self.total = total
        self._report()
        flusher = asyncio.create_task(self._flusher())
        try:
            while not self._should_stop():
                page = await asyncio.to_thread(next_page)
                if page.empty:
                    break
                before = self.done
                await self._page(page, grader)
                if self.done == before:  # nothing of the page could be judged (its pairs are gone)
                    break
        finally:
            self._finished = True
            flusher.cancel()
            try:
                await flusher
            except asyncio.CancelledError:
                pass
            await self.flush()
            if self.buffer:  # still locked after waiting: say so (results of this batch are lost)
                raise self.write_error or StoreError("could not write the last judgments")

    async def _flusher(self):
        while True:
            await asyncio.sleep(self.flush_seconds)
            await self.flush(check_state=True)

    async def _page(self, page: pd.DataFrame, grader) -> None:
        """Judge one page of units (with their texts): cache hits first, then the rest, each
        distinct (cache key, sample) sent once by ``concurrency`` workers."""
        def load():
            with _Use(self.db_path, self.wait, migrate=False) as db:
                return store.cache_hits(db, page)

        hits = await asyncio.to_thread(load)
        texts = {(r.query_id, r.doc_id, _nan_none(r.chunk_id)): r for r in page.itertuples(index=False)}
        hit_map = {(r.cache_key, int(r.sample)): r for r in hits.itertuples(index=False)}
        groups: dict[tuple, list[dict]] = {}
        cached_rows = []
        for unit in page.to_dict("records"):
            key = (unit["cache_key"], int(unit["sample"]))
            hit = hit_map.get(key)
            if hit is not None:
                from workbench.llm.client import CallOutcome

                probs = json.loads(hit.probabilities) if isinstance(hit.probabilities, str) else None
                outcome = CallOutcome(status="ok", grade=int(hit.grade), reason=_nan_none(hit.reason),
                                      raw_response=_nan_none(hit.raw_response),
                                      probabilities={int(k): v for k, v in probs.items()} if probs else None,
                                      expected_grade=_nan_none(hit.expected_grade))
                cached_rows.append(self._sample_row(unit, outcome, from_cache=True, cached_from=int(hit.sample_id)))
            else:
                groups.setdefault(key, []).append(unit)
        if cached_rows:
            self._record(cached_rows)
        queue: asyncio.Queue = asyncio.Queue()
        for members in groups.values():
            queue.put_nowait(members)
        # The budget check uses an upper bound of a request's cost: characters / 3 prompt tokens
        # (denser than the estimate's / 4) and the longest reply allowed, so that the requests in
        # flight when the cap is reached cannot carry the spend past it.
        per_request = 1 if self.spec.output == "single_token" else int(self.spec.settings["max_tokens"])
        sys_chars = _system_chars(self.spec)

        async def worker():
            while not self._should_stop():
                try:
                    members = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                unit = members[0]
                text = texts.get((unit["query_id"], unit["doc_id"], _nan_none(unit["chunk_id"])))
                if text is None:  # the pair left the pool or its chunk was deleted meanwhile
                    continue
                guess = self.spec.cost((int(unit["text_chars"]) + sys_chars) // 3 + 1, per_request) or 0.0
                if self.budget and self.spec.price is not None and \
                        self.spent + self.inflight_cost + guess > self.budget:
                    self.stop_reason = "budget"
                    return
                self.inflight_cost += guess
                try:
                    outcome = await grader.grade(text.query_text, _nan_none(text.description), text.passage)
                finally:
                    self.inflight_cost -= guess
                rows = [self._sample_row(unit, outcome)]
                rows += [self._sample_row(m, outcome, from_cache=True) for m in members[1:]]
                self.sent += 1
                self._record(rows)
                if len(self.buffer) >= self.batch_size:
                    self.request_flush()

        n = max(1, min(self.spec.concurrency, queue.qsize()))
        tasks = [asyncio.create_task(worker()) for _ in range(n)]
        grace_until = None
        while True:
            done, pending = await asyncio.wait(tasks, timeout=0.2)
            if not pending:
                break
            if self._should_stop() and self.stop_reason == "cancelled":
                # A cancel waits a little for the requests in flight, then abandons them (they
                # are judged again on resume, as after a kill).
                grace_until = grace_until or time.monotonic() + CANCEL_GRACE_SECONDS
                if time.monotonic() >= grace_until:
                    for task in pending:
                        task.cancel()
                    await asyncio.gather(*pending, return_exceptions=True)
                    break
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise task.exception()
        await self.flush()


# -- public operations -------------------------------------------------------------------------

def _pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _prepare(db_path, pool: str, spec: JudgeSpec, *, limit, budget, retry_failed, batch) -> tuple[dict, dict]:
    with _Use(db_path, float(spec.settings["db_wait"])) as db:
        info = _pool_info(db, pool)
        job = store.find_job(db, pool, spec.config_key)
        with db.transaction() as tx:
            if job is None:
                job_id = store.create_job(
                    tx, pool=pool, judge=spec.judge, model=spec.model, base_url=spec.base_url,
                    prompt_id=spec.prompt_id, prompt_hash=spec.prompt_hash, params=spec.params,
                    samples=spec.samples, aggregate=spec.aggregate, config_key=spec.config_key, budget_usd=budget)
            else:
                job_id = job["job_id"]
                if job["state"] in STATES_ACTIVE and job["pid"] != os.getpid() and _pid_alive(job["pid"]):
                    raise StoreError(f"judge job {job_id} on pool {pool} is running in process {job['pid']}; "
                                     f"wait for it or cancel it first")
            effective = budget if budget is not None else (job or {}).get("budget_usd")
            if effective and spec.price is None:
                raise ConfigError(
                    f"a budget needs the price of {spec.model}: add it to [judge.prices] in the configuration "
                    f'("{spec.model}" = [input USD per 1M tokens, output USD per 1M tokens])')
            if retry_failed:
                store.delete_retryable(tx, job_id)
                store.recount_job(tx, job_id)
        total = store.count_pool_pairs_for_job(db, pool, info["level"], limit)
        with db.transaction() as tx:
            # No budget given: the job keeps the one it was started with.
            kept = {"budget_usd": budget} if budget is not None else {}
            store.update_job(tx, job_id, state="batch" if batch else "running", total=total, pid=os.getpid(),
                             message=None, base_url=spec.base_url, started=True, heartbeat=True, **kept)
        return store.read_job(db, job_id), info


def run_job(db_path, pool: str, spec: JudgeSpec, *, limit: int | None = None, budget_usd: float | None = None,
            retry_failed: bool = False, batch: bool = False, on_progress=None,
            cancel: threading.Event | None = None) -> JobReport:
    """Start or resume the pool's judge job (see the module doc) and return its report."""
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be a positive number of pairs, got {limit}")
    budget = budget_usd if budget_usd is not None else (float(spec.settings.get("budget_usd") or 0.0) or None)
    if budget is not None and budget <= 0:
        raise InputError(f"--budget must be a positive amount in USD, got {budget}")
    if batch and spec.offline:
        raise InputError("--batch sends requests to an OpenAI-compatible server; the offline judge needs none")
    job, info = _prepare(db_path, pool, spec, limit=limit, budget=budget, retry_failed=retry_failed, batch=batch)
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


def _run_prepared(db_path, pool, spec, job, info, *, limit, budget, batch, on_progress, cancel) -> JobReport:
    runner = _Runner(db_path, job, info, spec, limit=limit, budget=budget, on_progress=on_progress,
                     cancel=cancel, batch=batch)
    unit_args = dict(job_id=job["job_id"], pool=pool, level=info["level"], samples=spec.samples, limit=limit)

    def next_page() -> pd.DataFrame:
        with _Use(db_path, runner.wait, migrate=False) as db:
            return store.pending_units(db, prefix=spec.cache_prefix, page=PAGE_UNITS, with_text=True, **unit_args)

    with _Use(db_path, runner.wait) as db:
        total = store.count_pending_units(db, **unit_args)
        units = store.pending_units(db, prefix=spec.cache_prefix, **unit_args) if batch else None
    state, message = "finished", ""
    try:
        if not total:
            pass  # nothing to judge: no client is made, nothing is sent
        elif batch:
            from workbench.services.judge_batch import run_batch

            asyncio.run(run_batch(runner, units, _LLMGrader(spec)))
        else:
            grader = _OfflineGrader() if spec.offline else _LLMGrader(spec)
            asyncio.run(_run_with_close(runner, next_page, total, grader))
    except KeyboardInterrupt:
        runner.stop_reason = "cancelled"
    finally:
        if runner.stop_reason == "budget":
            state = "budget"
            message = (f"stopped: the budget of ${budget:,.2f} is reached (spent ${runner.spent:,.4f}); "
                       f"raise --budget and run again to continue")
        elif runner.stop_reason == "cancelled":
            state, message = "cancelled", "cancelled; run the same command again to resume"
        elif runner.stop_reason == "batch-pending":
            state, message = "batch", runner.batch_message
        elif runner.stop_reason == "failing":
            state, message = "stopped", runner.batch_message
        with _Use(db_path, runner.wait) as db:
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
                   f"`workbench judge --pool {pool} --retry-failed` judges them again")
    errors = sorted(runner.errors.items(), key=lambda kv: -kv[1])
    return JobReport(job_id=job["job_id"], pool=pool, state=state, message=message, spec=spec, job=final,
                     units_run=runner.done, sent=runner.sent, cached=runner.cached,
                     elapsed=time.monotonic() - runner.started, errors=errors)


async def _run_with_close(runner: _Runner, next_page, total: int, grader) -> None:
    loop = asyncio.get_running_loop()
    installed = []
    if threading.current_thread() is threading.main_thread():
        def stop(sig):
            if runner.stop_reason == "cancelled":  # asked twice: the next one ends the process
                loop.remove_signal_handler(sig)
                installed.remove(sig)
            runner.stop_reason = "cancelled"

        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop, sig)
                installed.append(sig)
            except (NotImplementedError, RuntimeError, ValueError):
                pass
    try:
        if isinstance(grader, _LLMGrader):
            problem = await grader.client.check_server()
            if problem:
                raise ConfigError(problem)
        await runner.run(next_page, total, grader)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        await grader.aclose()


def preview_prompt(db_path, pool: str, spec: JudgeSpec) -> dict | None:
    """The messages the judge would send for the pool's first pair (by priority), with the pair's
    ids: ``{"query_id", "doc_id", "chunk_id", "messages"}``; None for the offline judge or an
    empty pool. For the Judge page's "rendered prompt" view."""
    if spec.offline or spec.template is None:
        return None
    with _Use(db_path, float(spec.settings.get("db_wait", 30.0))) as db:
        info = _pool_info(db, pool)
        units = store.pending_units(db, job_id=-1, pool=pool, level=info["level"], prefix=spec.cache_prefix,
                                    samples=1, limit=1, with_text=True)
    if units.empty:
        return None
    row = units.iloc[0]
    return {"query_id": row["query_id"], "doc_id": row["doc_id"], "chunk_id": _nan_none(row["chunk_id"]),
            "messages": spec.template.render(row["query_text"], row["passage"], _nan_none(row["description"]))}


def cancel_job(db_path, job_id: int) -> dict:
    """Ask job ``job_id`` to stop (state ``cancelling``; the runner stops at its next write). A job
    whose process is gone is marked ``cancelled`` at once."""
    with _Use(db_path) as db:
        job = store.read_job(db, job_id)
        if job is None:
            raise InputError(f"no judge job {job_id}")
        with db.transaction() as tx:
            if job["state"] in STATES_ACTIVE and _pid_alive(job["pid"]):
                store.update_job(tx, job_id, state="cancelling")
            elif job["state"] in STATES_ACTIVE:
                store.update_job(tx, job_id, state="cancelled", message="cancelled (its process had ended)",
                                 finished=True)
        return store.read_job(db, job_id)


def _live(job: dict) -> dict:
    """The job with ``alive`` (its process runs) and a ``running``/``cancelling`` job whose process
    is gone shown as ``interrupted`` (resume it by running it again)."""
    job["alive"] = _pid_alive(job.get("pid")) if job["state"] in STATES_ACTIVE else False
    if job["state"] in ("running", "cancelling") and not job["alive"]:
        job["state"] = "interrupted"
    return job


def job_status(db_path, job_id: int) -> dict:
    with _Use(db_path) as db:
        job = store.read_job(db, job_id)
    if job is None:
        raise InputError(f"no judge job {job_id}")
    return _live(job)


def list_jobs(db_path, pool: str | None = None) -> list[dict]:
    with _Use(db_path) as db:
        return [_live(job) for job in store.read_jobs(db, pool)]


def ensemble(db_path, job_ids: list[int], method: str = "majority") -> pd.DataFrame:
    """Several judge configurations' judgments of the same pairs combined: per pair (present in
    every job) ``grade`` by ``method`` over the ok grades (see :mod:`judge_ensemble`), ``spread``,
    and one ``grade_<job_id>`` column per job (null when not ok). Computed, not stored: the
    stored judgments stay one per job."""
    from workbench.services.judge_ensemble import aggregate_grades

    if len(job_ids) < 2:
        raise InputError("an ensemble needs at least two judge jobs")
    key = ["query_id", "doc_id", "chunk_id"]
    merged = None
    with _Use(db_path) as db:
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
    with _Use(db_path) as db:
        return store.job_failures(db, job_id, limit)


def job_judgments(db_path, job_id: int) -> pd.DataFrame:
    with _Use(db_path) as db:
        return store.job_judgments(db, job_id)
