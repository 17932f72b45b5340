"""What a judgment came to, and the client's names a job needs without a model server: the
offline judge, a cache hit and the configuration check use these, so that they never import
:mod:`workbench.llm.client` and with it the ``openai`` SDK (about a second of CPU at start-up).
:mod:`workbench.llm.client` re-exports every name here."""

from __future__ import annotations

from dataclasses import dataclass, field

#: The ``judge.response_format`` values (``"none"`` is the old name of ``"text"``).
RESPONSE_FORMATS = ("auto", "json_schema", "json_object", "text", "none")
#: How an error starts when nothing listens at the base URL (the job then stops, pairs pending).
CANNOT_CONNECT = "connection error: cannot connect to the server"


@dataclass
class CallOutcome:
    """What one pair (one sample) came to. ``grade`` is None unless ``status == "ok"``."""

    status: str
    grade: int | None = None
    reason: str | None = None
    raw_response: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float | None = None
    http_calls: int = 0
    probabilities: dict[int, float] | None = None
    expected_grade: float | None = None
    extra: dict = field(default_factory=dict)
