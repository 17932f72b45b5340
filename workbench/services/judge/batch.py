"""Batch mode of the judge (``workbench judge --batch``): one Batch API job per judge job.

Steps: answer what the cache can; write the remaining requests (one per distinct cache key and
sample, ``custom_id = "<sample>:<cache_key>"``) as Batch API JSONL; upload and create the batch;
store its id on the judge job (state ``batch``); poll every ``poll_seconds``; download the output
and error files; read each line with the online validation (:func:`workbench.llm.batch.read_output`)
and store the samples and judgments like an online run. Resumable by batch id: a run that finds
the job's batch id polls that batch instead of submitting a new one, so an interrupted run (or a
cancelled one: the remote batch keeps going) is collected by running the command again. Units the
output does not mention stay pending and go into the next batch. The budget is checked against
the batch's estimated cost before it is submitted.
"""

from __future__ import annotations

import asyncio

import pandas as pd

from workbench.llm import batch as api
from workbench.services.judge.runner import PAGE_UNITS, DatabaseUse, cached_outcome, nan_none
from workbench.services.judge.spec import system_chars
from workbench.store import judging as store


async def run_batch(runner, units: pd.DataFrame, grader) -> None:

    runner.flush_lock = asyncio.Lock()
    runner.total = len(units)
    client = grader.client
    spec = runner.spec
    info = runner.pool_info
    try:
        if units.empty:
            return
        groups: dict[str, list[dict]] = {}
        lines: list[str] = []
        guess = 0.0
        batch_id = runner.job.get("batch_id")
        for start in range(0, len(units), PAGE_UNITS):
            page = units.iloc[start:start + PAGE_UNITS]

            def load(page=page):
                with DatabaseUse(runner.db_path, runner.wait) as db:
                    return (store.unit_texts(db, pool=info["name"], level=info["level"], keys=page),
                            store.cache_hits(db, page))

            texts, hits = await asyncio.to_thread(load)
            texts = {(r.query_id, r.doc_id, nan_none(r.chunk_id)): r for r in texts.itertuples(index=False)}
            hit_map = {(r.cache_key, int(r.sample)): r for r in hits.itertuples(index=False)}
            cached = []
            for unit in page.to_dict("records"):
                hit = hit_map.get((unit["cache_key"], int(unit["sample"])))
                if hit is not None:
                    cached.append(runner._sample_row(unit, cached_outcome(hit), from_cache=True,
                                                     cached_from=int(hit.sample_id)))
                    continue
                custom_id = f"{int(unit['sample'])}:{unit['cache_key']}"
                if custom_id not in groups:
                    text = texts.get((unit["query_id"], unit["doc_id"], nan_none(unit["chunk_id"])))
                    if text is None:
                        continue
                    groups[custom_id] = []
                    if not batch_id:
                        messages = spec.template.render(text.query_text, text.passage, nan_none(text.description))
                        lines.append(api.request_line(custom_id, client.request_body(spec.template, messages)))
                        per_request = 1 if spec.output == "single_token" else 60
                        guess += spec.cost((int(unit["text_chars"]) + system_chars(spec)) // 4, per_request,
                                           batch=True) or 0.0
                groups[custom_id].append(unit)
            if cached:
                runner._record(cached)
                await runner.flush()
        if not groups:
            return
        if not batch_id:
            if runner.budget and spec.price is not None and runner.spent + guess > runner.budget:
                runner.stop_reason = "budget"
                return
            batch_id = await api.submit(client, lines)

            def remember():
                with DatabaseUse(runner.db_path, runner.wait) as db, db.transaction() as tx:
                    store.update_job(tx, runner.job["job_id"], batch_id=batch_id, state="batch")

            await asyncio.to_thread(remember)
        poll = float(spec.settings.get("poll_seconds", 10.0))
        while True:
            batch = await api.status(client, batch_id)
            if batch.status in api.DONE:
                break
            if runner._should_stop():
                runner.stop_reason = "batch-pending"
                runner.batch_message = (f"batch {batch_id} is {batch.status} on the server; "
                                        f"run the same command again to collect it")
                return
            await asyncio.sleep(poll)
        rows = await api.download(client, batch.output_file_id) + await api.download(client, batch.error_file_id)
        by_id = {row.get("custom_id"): row for row in rows}
        for custom_id, members in groups.items():
            row = by_id.get(custom_id)
            if row is None:
                continue  # stays pending: the next run sends it again
            outcome = api.read_output(client, spec.template, row)
            outcome.http_calls = 0
            recorded = [runner._sample_row(members[0], outcome)]
            recorded += [runner._sample_row(m, outcome, from_cache=True) for m in members[1:]]
            runner.sent += 1
            runner._record(recorded)
            if len(runner.buffer) >= runner.batch_size:
                await runner.flush()
        await runner.flush()

        def forget():
            with DatabaseUse(runner.db_path, runner.wait) as db, db.transaction() as tx:
                store.update_job(tx, runner.job["job_id"], batch_id=None)

        await asyncio.to_thread(forget)
        if batch.status != "completed":
            runner.batch_message = f"batch {batch_id} ended {batch.status}"
    finally:
        await runner.flush()
        await grader.aclose()
