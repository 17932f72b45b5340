"""Running a judge job: pages of pending units, cache look-ups, bounded concurrent requests,
batched writes (see :mod:`workbench.services.judge.jobs` for the rules it keeps).

The runner never keeps the project open: :func:`open_briefly` opens it for one page read or one
batch write (waiting, bounded, while another process holds it) and closes it again.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from workbench.core.judging.ensemble import aggregate_grades, aggregate_status
from workbench.core.judging.offline import grade_pair
from workbench.errors import ConfigError, StoreError, StoreLockedError
from workbench.llm.outcome import CANNOT_CONNECT, CallOutcome
from workbench.services import lazy
from workbench.services.judge.spec import JudgeSpec, request_timeout, system_chars
from workbench.store import judging as store
from workbench.store.database import Database

PAGE_UNITS = 2000
CANCEL_GRACE_SECONDS = 5.0
FAILURE_RUN = 20


# -- opening the project briefly -------------------------------------------------------------

def open_briefly(db_path, wait: float = 30.0, *, migrate: bool = True) -> Database:
    """Open the project, waiting with backoff (bounded by ``wait`` seconds) while another process
    holds it (:class:`Database`'s ``wait``); then :class:`StoreLockedError` names the holder.
    ``migrate=False`` skips the schema check (a write) for the runner's page reads and batch
    writes, whose project was migrated when the job started (and for the Judge page's reads after
    its first open), and opens the file as a *visit*: attached to the process's one DuckDB
    instance and detached at close (:mod:`workbench.store.database`), so the lock is held exactly
    as long but no DuckDB instance is started per visit (figures in docs/performance.md). A
    missing project is an error, never created."""
    path = Path(db_path)
    if not path.exists():
        raise StoreError(f"no project database at {path}; create one with {{command}}", command=f"--db {path} init")
    return Database(path, migrate=migrate, wait=max(0.0, wait), visit=not migrate, create=False)


#: One brief visit to a project at a time in this process. DuckDB shares one open instance of a
#: file between the connections of a process, but a thread that connects while another thread is
#: closing the last connection can get a second instance of the same file (the file lock does not
#: stop a process from itself), and the two would overwrite each other's writes at checkpoint.
#: The runner reads its next page while a batch is being written, so visits are serialised here.
_VISIT = threading.RLock()


class DatabaseUse:
    """``with DatabaseUse(target) as db``: an open Database as is, or a path opened briefly (one such
    visit at a time in the process, see :data:`_VISIT`)."""

    def __init__(self, target, wait: float = 30.0, *, migrate: bool = True):
        self.target, self.wait, self.migrate, self.db, self.owned = target, wait, migrate, None, False

    def __enter__(self) -> Database:
        if isinstance(self.target, Database):
            self.db = self.target
        else:
            _VISIT.acquire()
            try:
                self.db = open_briefly(self.target, self.wait, migrate=self.migrate)
            except BaseException:
                _VISIT.release()
                raise
            self.owned = True
        return self.db

    def __exit__(self, *exc):
        if self.owned:
            try:
                self.db.close()
            finally:
                _VISIT.release()


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

class OfflineGrader:
    async def grade(self, query: str, description: str | None, passage: str):

        started = time.perf_counter()
        result = grade_pair(query, passage, description=description)
        return CallOutcome(status="ok", grade=int(result.grade), reason=result.reason,
                           raw_response=json.dumps({k: round(float(v), 6) for k, v in result.features.items()}),
                           latency_ms=(time.perf_counter() - started) * 1000.0, http_calls=0)

    async def aclose(self):
        return None


class LLMGrader:
    def __init__(self, spec: JudgeSpec):
        s = spec.settings
        self.spec = spec
        # Every attempt takes a slot of the client's adaptive limit (AIMD, starting at the
        # configured concurrency): a slow server sheds load instead of piling up timeouts.
        self.client = lazy.llm_client.JudgeClient(lazy.llm_client.ClientConfig(
            base_url=spec.base_url, model=spec.model, temperature=float(s["temperature"]),
            max_tokens=int(s["max_tokens"]), timeout=request_timeout(spec), max_attempts=int(s["max_attempts"]),
            backoff_initial=float(s["backoff_initial"]), backoff_max=float(s["backoff_max"]),
            response_format=s["response_format"], requests_per_minute=int(s["requests_per_minute"]),
            tokens_per_minute=int(s["tokens_per_minute"]), concurrency=int(spec.concurrency)), spec.api_key)
        if spec.caps:
            self.client.use(lazy.llm_client.Capabilities.from_dict(spec.caps))
        self.system_chars = system_chars(spec)

    async def grade(self, query: str, description: str | None, passage: str, sample: int | None = None):
        messages = self.spec.template.render(query, passage, description)
        chars = sum(len(m["content"]) for m in messages)
        # Several samples of a pair: each its own seed (sample index + 1), so they can differ.
        seed = sample + 1 if sample is not None and self.spec.samples > 1 else None
        return await self.client.judge(self.spec.template, messages, estimated_tokens=chars // 4, seed=seed)

    async def aclose(self):
        await self.client.aclose()


# -- the runner -------------------------------------------------------------------------------

def cached_outcome(hit):
    """The stored answer of a cache hit (a row of ``store.cache_hits``) as a
    :class:`workbench.llm.client.CallOutcome` (imported here: the offline judge never loads
    the client module)."""

    probs = json.loads(hit.probabilities) if isinstance(hit.probabilities, str) else None
    return CallOutcome(status="ok", grade=int(hit.grade), reason=nan_none(hit.reason),
                       raw_response=nan_none(hit.raw_response),
                       probabilities={int(k): v for k, v in probs.items()} if probs else None,
                       expected_grade=nan_none(hit.expected_grade))


def nan_none(value):
    if value is None:
        return None
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        pass
    return value


class Runner:
    def __init__(self, db_path, job: dict, pool_info: dict, spec: JudgeSpec, *, limit, budget, on_progress,
                 cancel: threading.Event | None, batch: bool):
        self.db_path, self.job, self.pool_info, self.spec = db_path, job, pool_info, spec
        self.limit, self.budget, self.on_progress, self.cancel, self.batch = limit, budget, on_progress, cancel, batch
        s = spec.settings
        self.wait = float(s["db_wait"])
        self.batch_size = int(s["batch_size"])
        self.flush_seconds = float(s["flush_seconds"])
        self.buffer: list[dict] = []
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
        self._flush_scheduled = False
        self._flush_tasks: set[asyncio.Task] = set()
        self._db_thread: ThreadPoolExecutor | None = None
        self.last_write = 0.0  # monotonic time of the last visit that wrote and read the state
        self.consecutive_failed = 0
        # In-run sharing of answers by (cache_key, sample); see `_work`. `write_seq` counts the
        # completed batch writes; a page's cache look-up sees the writes counted when it began.
        self.sending: dict[tuple, list[dict]] = {}
        self.answered: dict[tuple, list] = {}
        self.write_seq = 0
        self.dispatched_seq = 0
        # The tail: every unit is queued and taken, the last requests are in flight. The buffer
        # is written then, while they are, so that the write after the last answer is small.
        self._all_queued = False
        self._queued = self._taken = 0
        self._tail_flushed = False

    # -- recording ------------------------------------------------------------------------
    def _sample_row(self, unit: dict, outcome, *, from_cache=False, cached_from=None) -> dict:
        cost = 0.0 if from_cache else self.spec.cost(outcome.prompt_tokens, outcome.completion_tokens,
                                                     batch=self.batch)
        probs = json.dumps({str(k): v for k, v in outcome.probabilities.items()}) if outcome.probabilities else None
        return {"job_id": self.job["job_id"], "query_id": unit["query_id"], "doc_id": unit["doc_id"],
                "chunk_id": nan_none(unit["chunk_id"]), "start": int(unit["start"]), "end": int(unit["end"]),
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

        gone = [r for r in rows if r["status"] == "failed" and not r["from_cache"]
                and (r["error"] or "").startswith(CANNOT_CONNECT)]
        if gone:
            # Nothing listens at the base URL any more (the server was stopped or crashed): stop
            # now, and leave these pairs pending (not failed) so that running again resumes them.
            rows = [r for r in rows if r not in gone]
            if not self.stop_reason:
                self.stop_reason = "failing"
                self.batch_message = (f"stopped: the judge server at {self.spec.base_url} went away "
                                      f"({gone[0]['error'].splitlines()[0][:200]}); start it again, then run "
                                      f"the same command to resume")
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
                        f"stopped: the last {self.consecutive_failed} requests all failed "
                        f"({row['error'].splitlines()[0][:300]}); "
                        f"check the server, then run again ({{field:retry_failed}} also re-judges the failed pairs)")
        self.buffer.extend(rows)

    # -- writing ---------------------------------------------------------------------------
    def close_db_thread(self) -> None:
        if self._db_thread is not None:
            self._db_thread.shutdown(wait=True)
            self._db_thread = None

    async def in_db_thread(self, fn, *args):
        """Run ``fn(*args)`` (one visit to the project) on the runner's one database thread, off
        the event loop. One thread, not a pool: visits are serialised anyway (:data:`_VISIT`),
        and DuckDB's allocations spread over many threads' malloc arenas grew the process's
        memory with the length of the run."""
        if self._db_thread is None:
            self._db_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-db")
        return await asyncio.get_running_loop().run_in_executor(self._db_thread, fn, *args)

    def _write(self, rows: list[dict]) -> str | None:
        """One transaction: the samples, the judgments of the pairs they complete, the counters.
        Returns the job's state as stored (to notice a cancel from another process)."""
        frame = pd.DataFrame(rows, columns=store.SAMPLE_COLUMNS)
        with DatabaseUse(self.db_path, self.wait, migrate=False) as db, db.transaction() as tx:
            state = store.job_state(tx, self.job["job_id"])
            if frame.empty:
                return state
            store.write_samples(tx, frame)
            # One sample per pair: every stored sample completes its pair, whose judgment is new
            # (a pending unit has no sample, and samples and judgments are written together), so
            # the judgments come from the frame itself, without reading the samples back.
            complete = frame if self.spec.samples == 1 else \
                store.complete_pairs(tx, self.job["job_id"], self.spec.samples, frame)
            judgments = self._judgments(complete)
            store.write_job_judgments(tx, judgments)
            # The judgment counters grow by the judgments written here (exact: they are all new);
            # the run recounts them from the table when it ends.
            status = judgments["status"] if len(judgments) else pd.Series([], dtype=object)
            store.add_job_counts(
                tx, self.job["job_id"], cached=int(frame["from_cache"].sum()),
                sent=int((~frame["from_cache"]).sum()), http_calls=int(frame["http_calls"].fillna(0).sum()),
                prompt_tokens=int(frame["prompt_tokens"].fillna(0).sum()),
                completion_tokens=int(frame["completion_tokens"].fillna(0).sum()),
                cost_usd=float(frame["cost_usd"].fillna(0).sum()), judged=int(len(judgments)),
                ok=int((status == "ok").sum()), invalid=int((status == "invalid").sum()),
                failed=int((status == "failed").sum()))
            return state

    def _judgments(self, samples: pd.DataFrame) -> pd.DataFrame:

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
                "query_id": first["query_id"], "doc_id": first["doc_id"], "chunk_id": nan_none(first["chunk_id"]),
                "start": int(first["start"]), "end": int(first["end"]),
                "grade": grade if status == "ok" else None, "source": "llm",
                "assessor": self.spec.model, "prompt_hash": self.spec.prompt_hash, "model": self.spec.model,
                "reason": nan_none(lead["reason"]),
                "raw_response": nan_none(lead["raw_response"]) if len(group) == 1 else
                json.dumps([nan_none(r) for r in group["raw_response"]]),
                "status": status,
                "error": None if status == "ok" and len(group) == 1 else ("; ".join(errors) or None),
                "prompt_tokens": int(group["prompt_tokens"].fillna(0).sum()),
                "completion_tokens": int(group["completion_tokens"].fillna(0).sum()),
                "cost_usd": float(group["cost_usd"].fillna(0).sum()),
                "latency_ms": nan_none(group["latency_ms"].max()),
                "job_id": int(self.job["job_id"]),
                "samples": json.dumps(grades) if self.spec.samples > 1 else None,
                "grade_spread": spread if self.spec.samples > 1 else None,
                "probabilities": nan_none(lead["probabilities"]),
                "expected_grade": nan_none(lead["expected_grade"]),
                "cached": int(group["from_cache"].sum()),
            })
        return pd.DataFrame(out)

    def request_flush(self) -> None:
        """Schedule one write of the buffer unless one is already waiting."""
        if not self._flush_scheduled:
            self._flush_scheduled = True
            task = asyncio.get_running_loop().create_task(self.flush())
            self._flush_tasks.add(task)  # kept: a failed write is raised at the end, never dropped

            def forget(done: asyncio.Task) -> None:
                if done.cancelled() or done.exception() is None:
                    self._flush_tasks.discard(done)

            task.add_done_callback(forget)

    async def flush(self, *, check_state: bool = False) -> None:
        """Write the buffer (and read the job's state) in one short visit to the project; with an
        empty buffer only when ``check_state`` (the periodic check for a cancel)."""
        async with self.flush_lock:
            self._flush_scheduled = False
            if not self.buffer and not check_state:
                return
            rows, self.buffer = self.buffer, []
            try:
                state = await self.in_db_thread(self._write, rows)
            except StoreLockedError as exc:
                # Keep the results and try again at the next flush; the last attempt raises.
                self.buffer = rows + self.buffer
                self.write_error = exc
                return
            self.write_error = None
            self.last_write = time.monotonic()
            if rows:
                self.write_seq += 1
                for row in rows:
                    entry = self.answered.get((row["cache_key"], row["sample"]))
                    if entry is not None and entry[1] is None:
                        entry[1] = self.write_seq
                self._evict()
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

    async def run(self, next_page, total: int, grader, ready=None) -> None:
        """Judge every pending unit: ``next_page(after)`` reads the next page of pending units
        after the unit key ``after`` (``PAGE_UNITS``; the first a smaller one) with their texts
        and their cache hits, in one visit to the project. A producer keeps the next page loaded
        while ``concurrency`` workers send the current one, so requests never wait for a page
        read or a write, and memory holds about two pages whatever the pool's size. ``ready`` (a coroutine, e.g. the server
        check) runs while the first page loads; workers start after it."""
        self.flush_lock = asyncio.Lock()
        self._flusher_stop = asyncio.Event()
        self.total = total
        self._report()
        n = max(1, int(self.spec.concurrency))
        queue: asyncio.Queue = asyncio.Queue(maxsize=max(PAGE_UNITS, 2 * n))
        flusher = asyncio.create_task(self._flusher())
        producer = asyncio.create_task(self._produce(next_page, queue, n))
        workers: list[asyncio.Task] = []
        try:
            if ready is not None:
                await ready
            workers = [asyncio.create_task(self._work(queue, grader)) for _ in range(n)]
            await self._supervise(workers, producer, queue, n)
            for task in workers:
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()
            if producer.done() and not producer.cancelled() and producer.exception() is not None:
                raise producer.exception()
        finally:
            # Writes are never cancelled (a cancelled await would leave its thread writing while
            # the next write starts): the flusher is told to end and awaited.
            self._flusher_stop.set()
            for task in [producer, *workers]:
                task.cancel()
            await asyncio.gather(producer, flusher, *workers, return_exceptions=True)
            await self.flush()
            await asyncio.gather(*self._flush_tasks, return_exceptions=True)
            failed_writes = [t for t in self._flush_tasks if not t.cancelled() and t.exception() is not None]
            if failed_writes:
                raise failed_writes[0].exception()
            self.close_db_thread()
            if self.buffer:  # still locked after waiting: say so (results of this batch are lost)
                raise self.write_error or StoreError("could not write the last judgments")

    async def _supervise(self, workers, producer, queue: asyncio.Queue, n: int) -> None:
        """Wait for the workers. On a stop, end the producer and wake idle workers; a cancel
        waits a little for the requests in flight, then abandons them (they are judged again on
        resume, as after a kill). A producer that fails (the project could not be read) ends
        the run with its error."""
        grace_until = None
        stopping = False
        while True:
            _, pending = await asyncio.wait(workers, timeout=0.2)
            if not pending:
                return
            if producer.done() and not producer.cancelled() and producer.exception() is not None:
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)
                return
            if self._should_stop() and not stopping:
                stopping = True
                producer.cancel()
                await asyncio.gather(producer, return_exceptions=True)
                while not queue.empty():
                    queue.get_nowait()
                for _ in range(n):
                    queue.put_nowait(None)
            if stopping and self.stop_reason == "cancelled":
                grace_until = grace_until or time.monotonic() + CANCEL_GRACE_SECONDS
                if time.monotonic() >= grace_until:
                    for task in pending:
                        task.cancel()
                    await asyncio.gather(*pending, return_exceptions=True)
                    return

    async def _flusher(self):
        """Every ``flush_seconds``: write what is buffered and read the job's state (a cancel from
        another process), unless a batch write did both within that time."""
        while not self._flusher_stop.is_set():
            try:
                await asyncio.wait_for(self._flusher_stop.wait(), self.flush_seconds)
            except asyncio.TimeoutError:
                if self.buffer or time.monotonic() - self.last_write >= self.flush_seconds:
                    await self.flush(check_state=True)

    async def _produce(self, next_page, queue: asyncio.Queue, n: int) -> None:
        """Read page after page (keyset paging: each after the last unit of the one before),
        record its cache hits, queue the rest; then one end mark per worker."""
        after = None
        while not self._should_stop():
            seq = self.write_seq
            page, hits = await self.in_db_thread(next_page, after)
            if page.empty:
                break
            units = page.to_dict("records")
            after = store.unit_key(units[-1])
            rest = self._take_hits(units, hits)
            await self._written_enough()
            for unit in rest:
                unit["_seq"] = seq
                self._queued += 1
                await queue.put(unit)
        self._all_queued = True
        for _ in range(n):
            await queue.put(None)

    def _take_hits(self, units: list[dict], hits: pd.DataFrame) -> list[dict]:
        """Record the units the stored cache answers; return the others."""
        if hits.empty:
            return units
        hit_map = {(r.cache_key, int(r.sample)): r for r in hits.itertuples(index=False)}
        rest, cached_rows = [], []
        for unit in units:
            hit = hit_map.get((unit["cache_key"], int(unit["sample"])))
            if hit is None:
                rest.append(unit)
                continue
            cached_rows.append(self._sample_row(unit, cached_outcome(hit), from_cache=True,
                                                cached_from=int(hit.sample_id)))
        if cached_rows:
            self._record(cached_rows)
        return rest

    def _evict(self) -> None:
        """Forget shared answers that every page still to dispatch can find in the project: the
        answer is stored (write ``w``) and the pages read before write ``w`` are dispatched."""
        stale = [k for k, (_, written) in self.answered.items()
                 if written is not None and written <= self.dispatched_seq]
        for key in stale:
            del self.answered[key]

    async def _work(self, queue: asyncio.Queue, grader) -> None:
        """Take units one by one. Units sharing a (cache key, sample) are sent once per run: a
        unit whose key is in flight joins that request, one whose answer is not yet findable in
        the project takes it (``from_cache``). The budget check uses an upper bound of a
        request's cost: characters / 3 prompt tokens (denser than the estimate's / 4) and the
        longest reply allowed, so that the requests in flight when the cap is reached cannot
        carry the spend past it."""
        per_request = 1 if self.spec.output == "single_token" else int(self.spec.settings["max_tokens"])
        sys_chars = system_chars(self.spec)
        while True:
            unit = await queue.get()
            if unit is None or self._should_stop():
                return
            self._taken += 1
            seq = unit.pop("_seq")
            if seq > self.dispatched_seq:
                self.dispatched_seq = seq
                self._evict()
            key = (unit["cache_key"], int(unit["sample"]))
            joined = self.sending.get(key)
            if joined is not None:
                joined.append(unit)
                continue
            answer = self.answered.get(key)
            if answer is not None:
                self._record([self._sample_row(unit, answer[0], from_cache=True)])
                await self._written_enough()
                continue
            guess = self.spec.cost((int(unit["text_chars"]) + sys_chars) // 3 + 1, per_request) or 0.0
            if self.budget and self.spec.price is not None and \
                    self.spent + self.inflight_cost + guess > self.budget:
                self.stop_reason = "budget"
                return
            self.inflight_cost += guess
            self.sending[key] = []
            try:
                sample = {"sample": int(unit["sample"])} if self.spec.samples > 1 else {}
                outcome = await grader.grade(unit["query_text"], nan_none(unit["description"]), unit["passage"],
                                             **sample)
            finally:
                self.inflight_cost -= guess
                members = self.sending.pop(key)
            self.answered[key] = [outcome, None]
            rows = [self._sample_row(unit, outcome)]
            rows += [self._sample_row(m, outcome, from_cache=True) for m in members]
            self.sent += 1
            self._record(rows)
            if self._all_queued and self._taken == self._queued and not self._tail_flushed:
                self._tail_flushed = True
                self.request_flush()  # the tail: write now, while the last requests are in flight
            await self._written_enough()

    async def _written_enough(self) -> None:
        """A full batch is written in the background; a buffer grown to four batches (the writes
        fall behind, e.g. the offline judge or a run of cache hits) waits for the write, so
        memory stays bounded whatever the pool's size."""
        if len(self.buffer) >= 4 * self.batch_size:
            await self.flush()
        elif len(self.buffer) >= self.batch_size:
            self.request_flush()


async def run_with_close(runner: Runner, next_page, total: int, grader) -> None:
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
        ready = None
        if isinstance(grader, LLMGrader) and not grader.spec.server:  # (the probe has checked it)
            async def check() -> None:
                problem = await grader.client.check_server()
                if problem:
                    raise ConfigError(problem)

            ready = check()  # runs while the first page is read
        await runner.run(next_page, total, grader, ready)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        await grader.aclose()
