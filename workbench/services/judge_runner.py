"""Running a judge job: pages of pending units, cache look-ups, bounded concurrent requests,
batched writes (see :mod:`workbench.services.judge` for the rules it keeps).

The runner never keeps the project open: :func:`open_briefly` opens it for one page read or one
batch write (waiting, bounded, while another process holds it) and closes it again.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from workbench.errors import ConfigError, StoreError, StoreLockedError
from workbench.services.judge_spec import JudgeSpec, _system_chars
from workbench.store import judging as store
from workbench.store.database import Database

PAGE_UNITS = 2000
CANCEL_GRACE_SECONDS = 5.0
FAILURE_RUN = 20


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
            _, pending = await asyncio.wait(tasks, timeout=0.2)
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
