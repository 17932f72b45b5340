"""Before a judge job: what the server is and what it accepts.

:func:`discover` runs before anything is stored or deleted. It reads ``GET /models`` (can the
server be reached, does it take the key, which model does it serve), refuses ``--batch`` in one
line when the server has no Batch API (llama.cpp, vLLM's server, Ollama and LM Studio answer
``GET /batches`` with 404), finds the job of this configuration and, unless that job already
recorded one, runs the capability probe (:meth:`workbench.llm.client.JudgeClient.probe`): the
format found is used for the whole job and stored with it, so the probe runs once per job.

``samples > 1`` at temperature 0 is refused in one line (:func:`check_samples`): greedy decoding
ignores seeds, so the N answers would be byte-identical at N times the cost.

The request timeout grows with the probe's latency (:func:`request_timeout`), the median of
:data:`PROBE_LATENCY_SAMPLES` probe requests: one request can meet a cold start or a busy moment
(a first probe fast enough to leave the configured timeout as it is needs no more).
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from workbench.errors import ConfigError, InputError
from workbench.services import lazy
from workbench.services.judge.runner import DatabaseUse
from workbench.services.judge.spec import (  # noqa: F401
    TIMEOUT_PER_PROBE_LATENCY,
    JudgeSpec,
    base_url_host,
    guess_format,
    request_timeout,
)
from workbench.store import judging as store

#: probe requests whose median latency sets the request timeout
PROBE_LATENCY_SAMPLES = 3


def needs_seed(spec: JudgeSpec) -> bool:
    """Several samples at temperature 0 (refused by :func:`check_samples`)."""
    return spec.samples > 1 and not spec.offline and float(spec.settings["temperature"]) == 0.0


def check_samples(spec: JudgeSpec) -> None:
    """Refuse ``samples > 1`` at temperature 0 (one line, :class:`InputError`): at temperature 0
    a server decodes greedily, which ignores ``seed``, so the N samples would be N identical
    answers for N times the cost (llama.cpp, vLLM and OpenAI alike)."""
    if needs_seed(spec):
        raise InputError(
            f"{{field:samples {spec.samples}}} at temperature 0 would send {spec.samples} requests per pair for "
            f"{spec.samples} identical answers (greedy decoding ignores seeds); set {{field:temperature 0.7}} "
            f"(or [judge] temperature) for self-consistency, or use {{field:samples 1}}")


def _client(spec: JudgeSpec, *, retry: bool = True):
    s = spec.settings
    return lazy.llm_client.JudgeClient(lazy.llm_client.ClientConfig(
        base_url=spec.base_url, model=spec.model, temperature=float(s["temperature"]),
        max_tokens=int(s["max_tokens"]), timeout=2.0 * float(s.get("timeout") or 60.0),
        max_attempts=int(s["max_attempts"]) if retry else 1, backoff_initial=float(s["backoff_initial"]),
        backoff_max=float(s["backoff_max"]), response_format=s["response_format"]), spec.api_key)


async def _ask(spec: JudgeSpec, what: str, *, batch: bool = False, retry: bool = True):
    client = _client(spec, retry=retry)
    try:
        if what == "server":
            return await client.server_info(batch=batch)
        # A first probe fast enough that 40x it stays under the configured timeout cannot change
        # the timeout (request_timeout), nor can any probe when the operator set the timeout:
        # no more probes then.
        settled = (float("inf") if spec.timeout_set
                   else float(spec.settings.get("timeout") or 60.0) / TIMEOUT_PER_PROBE_LATENCY)
        return (await client.probe(spec.template, latency_samples=PROBE_LATENCY_SAMPLES,
                                   settled_below_s=settled)).as_dict()
    except lazy.llm_client.ProbeInconclusive as exc:
        # The probe met server trouble, not a refusal: the job asks in the format it would
        # most likely have chosen, and the next run probes again (nothing is stored).
        return {"format": guess_format(spec), "logprobs": True, "latency_s": 0.0, "server_model": None,
                "refused": [], "seed": None, "inconclusive": str(exc)}
    except lazy.llm_client.ServerProblem as exc:
        raise ConfigError(str(exc)) from None
    finally:
        await client.aclose()


def identify(spec: JudgeSpec, *, batch: bool = False, probe: bool = True) -> JudgeSpec:
    """``spec`` with the server's identity (``spec.server``: the base URL's host and the model
    ``GET /models`` names), the first step of :func:`discover`, which skips it for a spec that
    has one (and ``batch`` false). Touches no project: the Judge page asks before it opens the
    file for its estimate, so the file is never held during a request. ``probe=False``: one
    request, no retries, and an unreachable server gives no model instead of an error."""
    if spec.offline:
        return spec
    try:
        server_model = asyncio.run(_ask(spec, "server", batch=batch, retry=probe))
    except ConfigError:
        if probe:
            raise
        server_model = None  # an estimate works without the server
    return replace(spec, server={"host": base_url_host(spec.base_url), "server_model": server_model})


def discover(db, pool: str, spec: JudgeSpec, *, batch: bool = False, probe: bool = True) -> JudgeSpec:
    """``spec`` with the server identity and the job's capabilities (module doc). ``db``: an open
    :class:`~workbench.store.database.Database` or a path (opened briefly). ``probe=False``
    (estimates) sends no chat request: it reuses a stored probe, and works without the server (it
    asks ``GET /models`` once, without the retries and their back-off: the Judge page estimates on
    every script run, and must not pause for a server that is not there). Raises
    :class:`ConfigError` in one line when the server cannot be used as asked; nothing is stored."""

    if spec.offline:
        return spec
    check_samples(spec)
    if not spec.server or batch:
        spec = identify(spec, batch=batch, probe=probe)
    with DatabaseUse(db, float(spec.settings.get("db_wait", 30.0))) as opened:
        job = store.find_job(opened, pool, spec.config_key)
    caps = ((job or {}).get("params") or {}).get("probe")
    if caps is None and probe:
        caps = asyncio.run(_ask(spec, "probe"))
        caps["server_model"] = spec.server.get("server_model")
    return replace(spec, caps=caps) if caps is not None else spec
