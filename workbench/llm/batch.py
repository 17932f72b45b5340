"""OpenAI Batch API: write the request file, submit, poll, download, read the results.

The request file is the Batch API's JSONL (one ``{"custom_id", "method": "POST", "url":
"/v1/chat/completions", "body": {...}}`` per line), the same file ``vllm run-batch -i FILE -o OUT``
accepts. :func:`read_output` reads the output lines (``{"custom_id", "response": {"status_code",
"body"}, "error"}``) into :class:`~workbench.llm.client.CallOutcome` values with the same
validation as online requests. A batch has no conversation, so an invalid reply gets no repair
attempt here: it is ``invalid`` (raw text kept) and ``--retry-failed`` judges it again online.
"""

from __future__ import annotations

import io
import json

from workbench.llm.client import CallOutcome, JudgeClient, read_completion
from workbench.llm.prompts import PromptTemplate

ENDPOINT = "/v1/chat/completions"
DONE = ("completed", "failed", "expired", "cancelled")


def request_line(custom_id: str, body: dict) -> str:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body},
                      ensure_ascii=False)


async def submit(client: JudgeClient, lines: list[str]) -> str:
    """Upload the request file and create the batch; returns the batch id."""
    data = ("\n".join(lines) + "\n").encode("utf-8")
    uploaded = await client._client.files.create(file=("judge-requests.jsonl", io.BytesIO(data)), purpose="batch")
    batch = await client._client.batches.create(input_file_id=uploaded.id, endpoint=ENDPOINT,
                                                completion_window="24h")
    return batch.id


async def status(client: JudgeClient, batch_id: str):
    """The batch object (``status``, ``output_file_id``, ``error_file_id``, ``request_counts``)."""
    return await client._client.batches.retrieve(batch_id)


async def download(client: JudgeClient, file_id: str | None) -> list[dict]:
    if not file_id:
        return []
    content = await client._client.files.content(file_id)
    return [json.loads(line) for line in content.text.splitlines() if line.strip()]


def read_output(client: JudgeClient, template: PromptTemplate, row: dict) -> CallOutcome:
    """One output line as an outcome (``ok``, ``invalid`` or ``failed``, never a made-up grade)."""
    response = row.get("response") or {}
    error = row.get("error")
    code = response.get("status_code")
    body = response.get("body")
    if error or code != 200 or not isinstance(body, dict):
        message = (error or {}).get("message") if isinstance(error, dict) else error
        if not message and isinstance(body, dict):
            message = (body.get("error") or {}).get("message")
        return CallOutcome(status="failed", error=client.scrub(f"batch request failed: HTTP {code}: {message}"),
                           http_calls=0)
    outcome = CallOutcome(status="failed", http_calls=0)
    parsed, raw = read_completion(template, body, outcome)
    outcome.raw_response = client.scrub(raw)
    if parsed.grade is None:
        outcome.status = "invalid"
        outcome.error = client.scrub(f"invalid reply: {parsed.problem} (batch mode: no repair attempt)")
        outcome.reason = parsed.reason
        return outcome
    outcome.status = "ok"
    outcome.grade = parsed.grade
    outcome.reason = client.scrub(parsed.reason)
    outcome.probabilities = parsed.probabilities
    outcome.expected_grade = parsed.expected_grade
    return outcome
