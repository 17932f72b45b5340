"""The judge configuration: which judge, model, server, prompt and parameters, resolved from
settings (``[judge]``; CLI flags are settings overrides) and the API key.

The key comes from the caller or ``OPENAI_API_KEY``; it lives only on the spec (its ``repr``
hides it) and is handed to the HTTP client, never stored. Which key goes to which URL is
:func:`key_for`'s rule: the server's key only to the configured base URL or ``[judge]
allowed_hosts``, another URL only with a key typed for it. On the command line and in the Python
API the flags and arguments are the operator's own configuration; the Judge page's Server URL is
not (:mod:`workbench.services.judge.launch` applies the rule for it). With no key and the OpenAI URL, or
with ``model = "offline-lexical"``, the spec is the offline baseline (``spec.offline``).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from urllib.parse import urlparse

from workbench.config import Settings
from workbench.errors import ConfigError
from workbench.llm.outcome import RESPONSE_FORMATS
from workbench.llm.prompts import load_prompt
from workbench.services import lazy

OFFLINE_MODEL = "offline-lexical"


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
    #: The server as found before the job: ``host`` (of the base URL) and ``server_model`` (the
    #: model as ``GET /models`` lists it, or None); part of the job and cache keys.
    server: dict = field(default_factory=dict)
    #: The capability probe's result (:class:`workbench.llm.client.Capabilities` as a dict), once
    #: known; its ``format`` is part of the cache key.
    caps: dict | None = None
    #: Few-shot examples in the prompt (:func:`with_few_shot`): ``{"k", "sample", "seed",
    #: "positions"}`` (the tuning-part pairs used), stored with the job; None for zero-shot.
    few_shot: dict | None = None
    #: Whether the operator set the request timeout (``[judge] timeout``, ``--timeout``, the
    #: environment): it is then used as given, not grown with the probe's latency.
    timeout_set: bool = False

    @property
    def offline(self) -> bool:
        return self.model == OFFLINE_MODEL

    @property
    def judge(self) -> str:
        return OFFLINE_MODEL if self.offline else "llm"

    @property
    def requested_format(self) -> str:
        value = str(self.settings.get("response_format", "auto"))
        return "text" if value == "none" else value

    @property
    def response_format(self) -> str | None:
        """The format used for the whole job (the probe's choice), None before the probe."""
        return (self.caps or {}).get("format")

    def key_params(self, response_format: str | None) -> dict:
        """``params`` plus the server identity and a response format (offline: ``params``)."""
        if self.offline:
            return dict(self.params)
        # The server's model counts only where it differs from the name asked for (a llama.cpp
        # server answers any name with the model it loaded), so the key can be computed without
        # asking the server whenever the two agree (the app finds its job that way).
        served = self.server.get("server_model")
        return {**self.params, "host": self.server.get("host") or base_url_host(self.base_url),
                "server_model": served if served and served != self.model else None,
                "response_format": response_format}

    @property
    def cache_prefix(self) -> str:
        params = self.key_params(self.response_format or guess_format(self))
        return cache_prefix(self.model, self.prompt_hash, params)

    @property
    def config_key(self) -> str:
        """The job key: model, prompt, parameters, server host and model, the *requested* format,
        samples and aggregate (the chosen format is stored with the job)."""
        prefix = cache_prefix(self.model, self.prompt_hash, self.key_params(self.requested_format))
        text = json.dumps({"prefix": prefix, "samples": self.samples, "aggregate": self.aggregate},
                          sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def stored_params(self) -> dict:
        """What the job row keeps in ``params``: the cache parameters and the probe's result."""
        if self.offline:
            return dict(self.params)
        out = {**self.key_params(self.response_format), "requested_format": self.requested_format,
               "probe": self.caps}
        if self.few_shot is not None:
            out["few_shot"] = dict(self.few_shot)
        return out

    def cost(self, prompt_tokens: int, completion_tokens: int, *, batch: bool = False) -> float | None:
        if self.price is None:
            return None
        value = (prompt_tokens * self.price[0] + completion_tokens * self.price[1]) / 1e6
        return value * (self.batch_discount if batch else 1.0)


def cache_prefix(model: str, prompt_hash: str, params: dict) -> str:
    """The first part of every cache key: ``model 0x1f prompt_hash 0x1f params_json 0x1f``."""
    return f"{model}\x1f{prompt_hash}\x1f{json.dumps(params, sort_keys=True)}\x1f"


def base_url_host(base_url: str | None) -> str | None:
    """``host[:port]`` of a base URL (part of the job and cache keys)."""
    return urlparse(base_url).netloc or None if base_url else None


def guess_format(spec: "JudgeSpec") -> str:
    """Before a probe: the format a job would most likely use (estimates only)."""
    if spec.output == "single_token":
        return "text"
    return {"auto": "json_schema", "json_object": "json_object+schema"}.get(spec.requested_format,
                                                                            spec.requested_format)


MAX_TIMEOUT = 900.0
#: the request timeout is at least this many times the probe's latency (request_timeout)
TIMEOUT_PER_PROBE_LATENCY = 40.0


def request_timeout(spec: "JudgeSpec") -> float:
    """Seconds before a judgment request is abandoned.

    A timeout the operator set (``[judge] timeout``, ``--timeout``, ``WORKBENCH_JUDGE_TIMEOUT``;
    :attr:`JudgeSpec.timeout_set`) is used as given: whoever sets a short timeout wants a hung
    request abandoned then, even on a server whose probe was fast. Otherwise the default
    (``[judge] timeout`` in :data:`workbench.config.DEFAULTS`) grows to 40 times the capability probe's latency when that is longer (a judgment's prompt
    and reply are ~50 times the probe's), at most 900 s: a slow local server gets the time it
    needs. The latency is the median of the probe's requests (:data:`workbench.services.judge.
    probe.PROBE_LATENCY_SAMPLES`), so one slow probe (a cold cache, a busy moment) does not set
    it."""
    configured = float(spec.settings.get("timeout") or 60.0)
    if spec.timeout_set:
        return configured
    latency = float((spec.caps or {}).get("latency_s") or 0.0)
    return max(configured, min(MAX_TIMEOUT, TIMEOUT_PER_PROBE_LATENCY * latency))


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: str | None) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an http(s) URL, lower-cased, the port made explicit; None for
    anything else (no host, another scheme, a port that is not a number)."""
    try:
        parsed = urlparse(str(url or "").strip())
        port = parsed.port
    except ValueError:
        return None
    scheme, host = parsed.scheme.lower(), (parsed.hostname or "").lower().rstrip(".")
    if scheme not in _DEFAULT_PORTS or not host:
        return None
    return scheme, host, port or _DEFAULT_PORTS[scheme]


def _listed(origin: tuple[str, str, int], entry: str) -> bool:
    """Whether an ``[judge] allowed_hosts`` entry (``host``, ``host:port`` or ``*.domain``)
    names the URL's host (and port, when the entry gives one)."""
    entry = entry.strip().lower().rstrip(".")
    port = None
    if entry.startswith("["):  # [IPv6] or [IPv6]:port
        entry, _, rest = entry[1:].partition("]")
        port = int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    elif entry.count(":") == 1 and entry.rsplit(":", 1)[1].isdigit():  # host:port
        entry, port = entry.rsplit(":", 1)[0], int(entry.rsplit(":", 1)[1])
    if port is not None and port != origin[2]:
        return False
    if entry.startswith("*."):
        return origin[1].endswith(entry[1:])
    return bool(entry) and origin[1] == entry


def server_key_goes_to(base_url: str | None, settings: Settings) -> bool:
    """Whether the server's own API key (``OPENAI_API_KEY``) may be sent to ``base_url``.

    Yes for the configured server: the same scheme, host and port as ``[judge] base_url`` of
    ``settings`` (the operator's configuration: file, ``WORKBENCH_JUDGE_BASE_URL``, command-line
    flags; never what a page typed) or as ``OPENAI_BASE_URL``; and for a host the operator lists
    in ``[judge] allowed_hosts`` (comma-separated ``host``, ``host:port`` or ``*.domain``). No for
    any other URL, and for anything that is not an http(s) URL with a host (a user name in the
    URL does not count: ``https://api.openai.com@elsewhere/`` is ``elsewhere``).
    """
    origin = _origin(base_url)
    if origin is None:
        return False
    judge = settings.values["judge"]
    configured = {_origin(judge.get("base_url")), _origin(os.environ.get("OPENAI_BASE_URL"))}
    if origin in configured:
        return True
    return any(_listed(origin, entry) for entry in str(judge.get("allowed_hosts") or "").split(","))


def key_for(base_url: str | None, settings: Settings, typed_key: str | None = None, *,
            server_key: str | None = None) -> str | None:
    """The API key to send to ``base_url``, or None (send none).

    - ``typed_key`` (not blank): that key; it was typed for this URL by whoever chose the URL;
    - else the server's key (``server_key``; None: ``OPENAI_API_KEY``) when
      :func:`server_key_goes_to` allows ``base_url`` under the operator's ``settings``;
    - else None: the operator's key never goes to a URL somebody else typed (the Judge page's
      Server URL); a server there that needs a key needs its own, typed with it.

    ``settings`` must be the operator's configuration without the request's overrides: the
    Judge page passes :func:`~workbench.config.load_settings` (:mod:`workbench.services.judge.launch`).
    """
    typed = (typed_key or "").strip()
    if typed:
        return typed
    key = server_key if server_key is not None else os.environ.get("OPENAI_API_KEY")
    if key and server_key_goes_to(base_url, settings):
        return key
    return None


def _is_openai(base_url: str) -> bool:
    return (urlparse(base_url).hostname or "").endswith("api.openai.com")


def resolve_spec(settings: Settings, *, api_key: str | None = None) -> JudgeSpec:
    """The judge configuration from ``settings`` (``[judge]``) and the API key (argument, else
    ``OPENAI_API_KEY``). Invalid values raise :class:`ConfigError` naming the setting."""

    j = dict(settings.values["judge"])
    # "" (a front end found no key for this URL, :func:`key_for`) is no key: never the environment's.
    key = (api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")) or None
    model = str(j["model"]).strip()
    base_url = str(j["base_url"]).strip()
    if not model:
        raise ConfigError("judge.model is empty; set {field:model} or [judge] model")
    if not float(j.get("timeout") or 0.0) > 0:
        raise ConfigError(f"judge.timeout must be a positive number of seconds, got {j['timeout']}")
    for name, low in (("concurrency", 1), ("samples", 1), ("max_attempts", 1), ("max_tokens", 1),
                      ("batch_size", 1)):
        if int(j[name]) < low:
            raise ConfigError(f"judge.{name} must be at least {low}, got {j[name]}")
    if j["aggregate"] not in ("majority", "mean"):
        raise ConfigError(f"judge.aggregate must be majority or mean, got {j['aggregate']!r}")

    if j["response_format"] not in RESPONSE_FORMATS:
        raise ConfigError(f"judge.response_format must be one of {', '.join(RESPONSE_FORMATS)}")
    prices = j.get("prices") or {}
    offline = model == OFFLINE_MODEL or (not key and _is_openai(base_url))
    if offline:
        # The offline judge reads no prompt, but a prompt that does not load is still a mistake
        # to report (the same run with a key would fail on it), not to ignore.
        load_prompt(str(j["prompt"]))

        prompt_hash = lazy.core_judging_offline.settings_fingerprint()
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
                     settings=j, template=template, api_key=key,
                     timeout_set=settings.sources.get("judge.timeout", "default") != "default")


def with_few_shot(spec: JudgeSpec, examples: list[dict], *, sample: str, seed: int) -> JudgeSpec:
    """``spec`` with few-shot ``examples`` (from
    :func:`workbench.services.calibration.samples.few_shot_examples`: the tuning part only) in its
    prompt: a new ``prompt_hash`` (the examples are part of it, so the few-shot judge's labels are
    their own configuration for the gate and the cache) and ``few_shot`` recorded with the job."""

    if spec.offline or spec.template is None:
        raise ConfigError("{field:few_shot} needs an LLM judge (the offline baseline reads no prompt); set "
                          "OPENAI_API_KEY or {field:base_url}")
    if not examples:
        raise ConfigError("{field:few_shot} found no example to put in the prompt")
    template = spec.template.with_examples(examples)
    return replace(spec, template=template, prompt_hash=template.prompt_hash,
                   prompt_id=f"{spec.prompt_id}+{len(examples)}shot",
                   few_shot={"k": len(examples), "sample": sample, "seed": int(seed),
                             "positions": [int(e["position"]) for e in examples]})


def system_chars(spec: JudgeSpec) -> int:
    if spec.template is None:
        return 0
    examples = sum(len(e["query"]) + len(e["passage"]) + 160 for e in getattr(spec.template, "examples", ()))
    return (len(spec.template.system) + sum(len(p) for p in spec.template.user_parts if isinstance(p, str)) + 120
            + examples)
