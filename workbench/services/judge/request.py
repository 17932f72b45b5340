"""One judge request for every front end: the options declared once (:data:`OPTIONS`), the frozen
request they make (:class:`JudgeRequest`), its one check (:meth:`JudgeRequest.check`) and its one
resolution into a judge configuration (:meth:`JudgeRequest.resolve`).

The CLI (``workbench judge``), the Python API (``Project.judge``) and the Judge page only *build*
a request: the CLI's flags, the API's keyword arguments and the page's labels are generated from
:data:`OPTIONS` (:func:`add_arguments`, :func:`from_keywords`, :func:`page_fields`), so a new judge
option is one :class:`JudgeOption` here (plus its ``[judge]`` default in :mod:`workbench.config`
when it is a setting, and the code that uses it). The page's job process reads the request as JSON
(:meth:`JudgeRequest.to_json` / :meth:`JudgeRequest.from_json`,
:mod:`workbench.services.judge.worker`), not as a command line.

The rules, each one message naming its field (``{field:KEY}``, worded by each front end):

- ``limit``: None (all pairs) or at least 1 (the page's "0 = all" is None);
- ``budget``: :func:`check_budget`: dollars, 0 = no cap (also over ``[judge] budget_usd``), a
  negative or not finite number refused;
- ``few_shot``: None (none) or at least 1 (:func:`workbench.services.judge.few_shot.check_k`);
  ``few_shot_sample`` only with ``few_shot``; the offline judge takes no examples;
- a named model that cannot run (no key, the OpenAI URL) is refused, never silently replaced by the
  offline baseline (the page asks for the substitution and warns: ``page=True``);
- every value has its option's type (an API caller may pass anything).

This module imports only the standard library and :mod:`workbench.errors` at the top: the CLI
builds its parser from :data:`OPTIONS` at start-up.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any

from workbench.errors import ConfigError, InputError
from workbench.services.judge.limits import check_budget, check_limit
from workbench.services.judge.spec import key_for, resolve_spec

if TYPE_CHECKING:
    import argparse

    from workbench.config import Settings
    from workbench.services.judge.spec import JudgeSpec

OFFLINE = "offline-lexical"


@dataclass(frozen=True)
class JudgeOption:
    """One judge option, declared once.

    ``name``: the request's attribute and the field errors name (``{field:NAME}``); ``kind``: its
    type (``int``, ``float``, ``str``, ``bool``); ``help``: one line for ``--help``, the API's
    docstring and the page's tooltip; ``default``: the request's value when not given (None: the
    configured ``[judge]`` value, or off); ``setting``: the ``[judge]`` key the option overrides
    (None: it is not a setting); ``flag``: the CLI flag (None: not on the command line);
    ``kwarg``: the ``Project.judge`` keyword (None: not in the API); ``label`` and ``control``: the
    Judge page's label and control kind (:class:`workbench.ui.words.Field`; None: not on the page);
    ``low``/``high``: the page control's bounds; ``metavar``/``choices``: for ``--help``."""

    name: str
    kind: type
    help: str
    default: Any = None
    setting: str | None = None
    flag: str | None = None
    kwarg: str | None = None
    label: str | None = None
    control: str = "text"
    low: float | None = None
    high: float | None = None
    metavar: str | None = None
    choices: tuple[str, ...] | None = None

    @property
    def where(self) -> str:
        """Where the configured default lives, for help text: ``[judge] budget_usd``."""
        return f"[judge] {self.setting}" if self.setting else ""


def _option(name: str, kind: type, help: str, *, flag: bool = True, kwarg: str | None = "", **more) -> JudgeOption:
    return JudgeOption(name, kind, help, flag=("--" + name.replace("_", "-")) if flag else None,
                       kwarg=name if kwarg == "" else kwarg, **more)


#: The judge options, in ``--help`` order.
OPTIONS: tuple[JudgeOption, ...] = (
    _option("pool", str, "the pool to judge (see {command:status}); required", metavar="P",
            label="Pool", control="choice"),
    _option("model", str, "model name (default [judge] model); offline-lexical for the baseline", metavar="M",
            setting="model", label="Model"),
    _option("base_url", str, "OpenAI-compatible endpoint, e.g. http://localhost:8000/v1", metavar="U",
            setting="base_url", label="Server URL"),
    _option("prompt", str, "prompt template id or .md path (default [judge] prompt)", metavar="ID",
            setting="prompt", label="Prompt", control="choice"),
    _option("few_shot", int, "put K SME-graded examples in the prompt, stratified by grade, from the calibration "
            "sample's tuning part only (never the held-out part); the examples are part of the prompt hash, so "
            "the gate judges this configuration on its own labels", metavar="K",
            label="Examples from the tuning part (0 = none)", control="number", low=0),
    _option("few_shot_sample", str, "with {field:few_shot}: the calibration sample to take them from (default: the newest "
            "sample with SME labels on its tuning part)", metavar="NAME", label="Sample to take them from",
            control="choice"),
    _option("few_shot_seed", int, "with {field:few_shot}: the seed that picks the examples (default 0; stored with the job)",
            default=0, metavar="N", label="Seed that picks them", control="number", low=0),
    _option("concurrency", int, "requests in flight (default [judge] concurrency)", metavar="C",
            setting="concurrency", label="Parallel requests", control="number", low=1, high=256),
    _option("limit", int, "judge only the first N pairs in priority order", metavar="N",
            label="Pairs to judge (0 = all)", control="number", low=0),
    _option("budget", float, "stop cleanly before spending more than this (0: no cap; default: [judge] budget_usd)",
            kwarg="budget_usd", metavar="USD", setting="budget_usd", label="Budget in USD (0 = no cap)",
            control="number", low=0.0),
    _option("samples", int, "answers per pair, aggregated (self-consistency; needs {field:temperature} above 0)",
            metavar="N", setting="samples", label="Samples per pair", control="number", low=1, high=20),
    _option("temperature", float, "sampling temperature (default [judge] temperature, 0)", metavar="T",
            setting="temperature"),
    _option("retry_failed", bool, "judge the failed and invalid pairs again", default=False,
            label="Retry failed", control="choice"),
    _option("batch", bool, "use the Batch API (submit, poll, collect; resumable)", default=False, kwarg=None),
    _option("response_format", str, "structured output: auto (default) probes the server once per job and uses "
            "the strictest format it accepts; the others force one",
            setting="response_format", choices=("auto", "json_schema", "json_object", "text")),
    _option("timeout", float, "seconds before a request is abandoned, used as given (default: 60, grown to 40x "
            "the probe's latency on a slow server)", metavar="S", setting="timeout"),
)

OPTION: dict[str, JudgeOption] = {o.name: o for o in OPTIONS}


_KIND_WORDS = {int: "a whole number", float: "a number", str: "text", bool: "True or False"}


def _typed(option: JudgeOption, value: Any) -> Any:
    """``value`` as the option's type (an int for a float option is a float); anything else is
    refused naming the field."""
    if value is None:
        return None
    kind = option.kind
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    raise ConfigError(f"{{field:{option.name}}} must be {_KIND_WORDS[kind]}, got {value!r}", field=option.name)


@dataclass(frozen=True)
class JudgeRequest:
    """What a judge job is asked to do: one value per :data:`OPTIONS` entry (None: the configured
    default or off), plus ``offline``: the page's choice of the offline baseline (the model
    ``offline-lexical``, the LLM options ignored). See the module doc for the rules."""

    pool: str
    model: str | None = None
    base_url: str | None = None
    prompt: str | None = None
    few_shot: int | None = None
    few_shot_sample: str | None = None
    few_shot_seed: int = 0
    concurrency: int | None = None
    limit: int | None = None
    budget: float | None = None
    samples: int | None = None
    temperature: float | None = None
    retry_failed: bool = False
    batch: bool = False
    response_format: str | None = None
    timeout: float | None = None
    offline: bool = False

    # -- the one check ---------------------------------------------------------------------------
    def check(self) -> JudgeRequest:
        """Refuse a request that breaks a rule of the module doc (one line naming the field);
        returns the request, so a front end can write ``JudgeRequest(...).check()``."""
        for option in OPTIONS:
            _typed(option, getattr(self, option.name))
        if not self.pool:
            raise InputError("{field:pool P} is required: the pool to judge")
        check_limit(self.limit)
        check_budget(self.budget)
        if self.few_shot is not None and not self.offline:
            from workbench.services.judge.few_shot import check_k

            check_k(self.few_shot)
        if self.few_shot_sample is not None and self.few_shot is None:
            raise ConfigError("{field:few_shot_sample} is a {field:few_shot} option; add {field:few_shot K}",
                              field="few_shot_sample")
        return self

    # -- the one resolution ------------------------------------------------------------------------
    def overrides(self) -> dict[str, Any]:
        """The request's ``[judge]`` settings (options with a ``setting``, given, strings stripped);
        the offline request is only its model."""
        if self.offline:
            return {"model": OFFLINE}
        out = {}
        for option in OPTIONS:
            value = getattr(self, option.name)
            if option.setting and value is not None and value != "":
                out[option.setting] = value.strip() if isinstance(value, str) else value
        return out

    def resolve(self, settings: Settings, *, api_key: str | None = None, typed_key: str | None = None,
                page: bool = False) -> JudgeSpec:
        """The judge configuration this request runs with: :meth:`check`, then the request's
        :meth:`overrides` over ``settings`` (the operator's: defaults < file < environment <
        global options; its project is where few-shot examples come from), the key, the few-shot
        examples (:func:`workbench.services.judge.few_shot.apply_few_shot`) and the samples rule
        (:func:`workbench.services.judge.probe.check_samples`).

        The key: on the command line and in the API the request is the operator's own
        configuration: ``api_key``, else ``OPENAI_API_KEY``. With ``page=True`` its Server URL is
        not: the key is :func:`workbench.services.judge.spec.key_for`'s (the server's key,
        ``api_key`` or ``OPENAI_API_KEY``, only for the configured server or ``[judge]
        allowed_hosts`` under ``settings``; else ``typed_key``; else none), and a named model that
        cannot run becomes the offline baseline (the page says so) instead of an error. The
        spec's ``config_key`` is the job's and its ``api_key`` the one the job may send: both are
        decided here, once."""

        self.check()
        if self.budget is None:  # the configured budget applies: the same rule, naming the setting
            check_budget(settings.values["judge"]["budget_usd"], setting=True)
        key = api_key
        if page:
            url = (self.base_url or "").strip() or settings.values["judge"]["base_url"]
            key = "" if self.offline else (key_for(url, settings, typed_key, server_key=api_key) or "")
        spec = resolve_spec(settings.with_overrides({"judge": self.overrides()}), api_key=key)
        if self.few_shot is not None and not self.offline:
            from workbench.services.judge.few_shot import apply_few_shot

            spec = apply_few_shot(settings.db_path, spec, self.few_shot, sample=self.few_shot_sample,
                                  seed=self.few_shot_seed)
        if spec.offline and not page and self.model not in (None, OFFLINE):
            raise ConfigError(f"{{field:model {self.model}}} needs OPENAI_API_KEY (or {{field:base_url}} pointing at "
                              f"your own server); for the offline baseline pass {{field:model {OFFLINE}}}",
                              field="model")
        from workbench.services.judge.probe import check_samples

        check_samples(spec)
        return spec

    def run(self, db_path, spec: JudgeSpec, *, on_progress=None, cancel=None):
        """Run (or resume) the job with ``spec`` (from :meth:`resolve`):
        :func:`workbench.services.judge.jobs.run_job` with the request's limit, budget, retry and
        batch choices."""
        from workbench.services.judge.jobs import run_job

        return run_job(db_path, self.pool, spec, limit=self.limit, budget_usd=self.budget,
                       retry_failed=self.retry_failed, batch=self.batch, on_progress=on_progress, cancel=cancel)

    # -- as data -----------------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> JudgeRequest:
        """The request :meth:`to_json` wrote; an unknown or missing field is refused."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise InputError(f"the judge request is not JSON: {exc}") from None
        known = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or not set(data) <= known or "pool" not in data:
            raise InputError(f"the judge request must be an object with pool and only {', '.join(sorted(known))}")
        return cls(**data)


def from_keywords(pool: str, options: dict[str, Any]) -> JudgeRequest:
    """The request of a ``Project.judge(pool, **options)`` call: each keyword must be an option's
    ``kwarg`` (a ``TypeError`` otherwise, as Python says for an unknown keyword) and of its type."""
    by_kwarg = {o.kwarg: o for o in OPTIONS if o.kwarg and o.name != "pool"}
    unknown = sorted(set(options) - set(by_kwarg))
    if unknown:
        raise TypeError(f"judge() got an unexpected keyword argument {unknown[0]!r}; "
                        f"it takes {', '.join(by_kwarg)}")
    for k, v in options.items():
        _typed(by_kwarg[k], v)  # refused here when of another type; kept as given (its message quotes it)
    return JudgeRequest(pool, **{by_kwarg[k].name: v for k, v in options.items() if v is not None})


def from_namespace(args: argparse.Namespace) -> JudgeRequest:
    """The request of parsed ``workbench judge`` arguments (:func:`add_arguments`'s flags)."""
    values = {o.name: getattr(args, o.name) for o in OPTIONS if o.flag and getattr(args, o.name, None) is not None}
    return JudgeRequest(**values)


def add_arguments(parser: argparse.ArgumentParser, say=lambda text: text) -> None:
    """The judge options as ``workbench judge`` flags (every option with a ``flag``); ``say``
    words a help text's placeholders (``{field:few_shot}``) as the CLI does."""
    for o in OPTIONS:
        if not o.flag:
            continue
        if o.kind is bool:
            parser.add_argument(o.flag, dest=o.name, action="store_true", help=say(o.help))
        else:
            parser.add_argument(o.flag, dest=o.name, type=o.kind, metavar=None if o.choices else o.metavar,
                                choices=o.choices, default=o.default, help=say(o.help))


def keywords_doc(say=lambda text: text) -> str:
    """The API's keyword arguments and their help (``say`` words the placeholders), for
    ``Project.judge``'s docstring."""
    return "\n".join(f"        * ``{o.kwarg}`` ({o.kind.__name__}): {say(o.help)}"
                     for o in OPTIONS if o.kwarg and o.name != "pool")


def field_arguments() -> dict[str, str]:
    """Fields whose API keyword has another name (``budget`` -> ``budget_usd``)."""
    return {o.name: o.kwarg for o in OPTIONS if o.kwarg and o.kwarg != o.name}

