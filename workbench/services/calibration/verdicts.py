"""Gate verdicts per judge configuration: the one home of the trust gate.

The unit of trust is the judge configuration (:mod:`workbench.store.judge_configs`): a verdict
belongs to one configuration on one calibration sample and is computed from *that
configuration's* grades of the sample's gated (held-out) pairs against the SMEs' reference
labels. Nothing one configuration earned is credited to another.

Which configurations are gated on a sample:

* the sample's own configuration, the one whose grades stratified it when it was drawn
  (:func:`sample_configuration`), always;
* any other configuration someone gated there (``calibrate gate --judge CONFIG``, ``calibrate
  report --judge CONFIG``, the Calibration page's judge table): its verdict is stored with the
  project and followed from then on.

A configuration graded by the judge after the sample was drawn, and never gated, is
``not gated``: its labels stay out of the qrels however good the first judge was.

A gated configuration that did not grade every labelled held-out pair is ``inconclusive: N
held-out pairs not graded by CONFIG`` (the figures of the pairs it graded are still shown).

Verdicts are stored with the project (``project_meta``, one entry per sample and configuration)
with the fingerprint of the SME labels they used (:func:`labels_fingerprint`) and a key over
every input (labels, the configuration's grades, slice tags, bootstrap, thresholds, high-risk
options). A stored verdict whose key no longer matches is *stale*: it is recomputed when read by
the qrels rule, the status and the report, and the entry replaced (a project opened read-only
recomputes in memory). The process keeps a small memo of keys it has decided, so a page or a
command runs each bootstrap once.

High-risk slices (``[calibration] high_risk_tags``, ``--high-risk``) gate too
(:func:`workbench.core.calibration.gate.decide_slice`, :func:`~workbench.core.calibration.gate.with_slices`):
a slice whose TPR or TNR interval lies below the stricter rate fails the gate, an undecided one
keeps it at most inconclusive.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import pandas as pd

from workbench.core.calibration import agreement as core_agreement
from workbench.core.calibration.agreement import AgreementResult, agreement
from workbench.core.calibration.gate import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    GateResult,
    GateThresholds,
    SliceDecision,
    decide,
    decide_slice,
    gate_on_labels,
    with_slices,
)
from workbench.errors import InputError, StoreError, clip
from workbench.services import lazy
from workbench.services.calibration.reference import (
    ReportOptions,
    gated_part,
    reference_labels,
    restricted_slice_tags,
    slice_tags,
)
from workbench.store import calibration as store
from workbench.store import judge_configs
from workbench.store.database import Database, StoreInterrupted
from workbench.store.meta import read_meta, set_meta

#: A configuration's state over all samples, best first: ``passed`` (a current pass on some
#: sample), ``failed``, ``inconclusive``, ``not gated`` (graded, never gated).
PASSED, FAILED, UNDECIDED, NOT_GATED = "passed", "failed", "inconclusive", "not gated"
_STATE_OF = {PASS: PASSED, FAIL: FAILED, INCONCLUSIVE: UNDECIDED}
#: Bumped whenever what a verdict depends on or how it is decided changes.
RULE_VERSION = 2
_META_PREFIX = "judge_verdict:"


@dataclass(frozen=True)
class JudgeConfiguration:
    """One judge configuration as a person reads it (``label``) and as outputs key it (``key``)."""

    key: str
    model: str
    prompt_hash: str
    prompt_id: str = ""
    host: str | None = None
    response_format: str | None = None
    few_shot: int = 0
    graded: int = 0

    @property
    def short(self) -> str:
        """The first 12 characters of the key: enough to name it in ``--judge``."""
        return self.key[:12]

    @property
    def label(self) -> str:
        """``model/prompt [+k-shot] [@host] (short key)``."""
        prompt = self.prompt_id or (self.prompt_hash[:8] or "?")
        if self.few_shot and "shot" not in prompt:
            prompt += f" +{self.few_shot}-shot"
        where = f" @{self.host}" if self.host else ""
        return f"{self.model or '?'}/{prompt}{where} ({self.short})"

    def as_dict(self) -> dict:
        return {"key": self.key, "label": self.label, "model": self.model or None,
                "prompt_hash": self.prompt_hash or None, "prompt_id": self.prompt_id or None,
                "host": self.host, "response_format": self.response_format, "few_shot": self.few_shot}


def configurations(db: Database) -> list[JudgeConfiguration]:
    """Every configuration with an ``ok`` grade, oldest first."""
    frame = judge_configs.read_configurations(db)
    out = []
    for row in frame.itertuples(index=False):
        out.append(JudgeConfiguration(str(row.config), str(row.model), str(row.prompt_hash), str(row.prompt_id or ""),
                                      None if pd.isna(row.host) else str(row.host),
                                      None if pd.isna(row.response_format) else str(row.response_format),
                                      int(row.few_shot), int(row.graded)))
    return out


def _by_key(db: Database) -> dict[str, JudgeConfiguration]:
    return {c.key: c for c in configurations(db)}


def describe(db: Database, key: str, known: dict[str, JudgeConfiguration] | None = None) -> JudgeConfiguration:
    """The configuration ``key`` (a bare one when it stored no grade)."""
    known = _by_key(db) if known is None else known
    return known.get(key) or JudgeConfiguration(key, "", "")


def choices(configs) -> str:
    """``label, label, …`` for a message that asks to choose."""
    return "; ".join(c.label for c in configs) or "none yet (grade the pool with {command:judge})"


def find_configuration(db: Database, text: str, *, among: list[str] | None = None) -> JudgeConfiguration:
    """The configuration ``text`` names: its key or a prefix of it (4+ characters), its label,
    its model name or ``model/prompt_hash-prefix`` when exactly one configuration matches.
    ``among``: only these keys. Refused in one line listing the configurations otherwise."""
    configs = configurations(db)
    if among is not None:
        wanted = set(among)
        configs = [c for c in configs if c.key in wanted]
    text = str(text).strip()
    if not text:
        raise InputError("{field:judge} is empty; name a judge configuration: " + choices(configs))
    for rule in (lambda c: text in (c.key, c.label),
                 lambda c: len(text) >= 4 and c.key.startswith(text),
                 lambda c: text == c.model,
                 lambda c: "/" in text and f"{c.model}/{c.prompt_hash}".startswith(text)):
        found = [c for c in configs if rule(c)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise InputError(f"{{field:judge {clip(text)}}} matches {len(found)} judge configurations; name one by "
                             f"its key: {choices(found)}")
    raise InputError(f"no judge configuration {clip(text)}; choose one of: {choices(configs)}")


# -- which configuration a sample gates ------------------------------------------------------

def sample_configuration(db: Database, sample: str, info: dict | None = None) -> str | None:
    """The configuration whose grades stratified ``sample`` when it was drawn: recorded with the
    sample (``judge.config``), else the one configuration of the judgments its items were drawn
    on (samples drawn before configurations were recorded). None when they were several (an
    older sample drawn on the latest grade of any configuration): such a sample gates a
    configuration only when asked to."""
    info = store.read_sample(db, sample) if info is None else info
    judge = (info or {}).get("judge") or {}
    if judge.get("config"):
        return str(judge["config"])
    ids = store.read_sample_items(db, sample)["judge_judgment_id"].dropna().astype(int).unique().tolist()
    found = set(judge_configs.config_of_judgments(db, ids).values())
    return found.pop() if len(found) == 1 else None


def _explicit(db: Database, sample: str) -> dict[str, dict]:
    """``{config: stored entry}`` of the verdicts stored for ``sample``."""

    prefix = f"{_META_PREFIX}{sample}\x1f"
    out = {}
    for name, raw in read_meta(db).items():
        if name.startswith(prefix):
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict):
                out[name[len(prefix):]] = entry
    return out


def gated_configurations(db: Database, sample: str, info: dict | None = None) -> list[str]:
    """The configurations gated on ``sample``: its own, then those gated there on request."""
    own = sample_configuration(db, sample, info)
    keys = [own] if own else []
    return keys + [k for k in _explicit(db, sample) if k not in keys]


def default_configuration(db: Database, sample: str, info: dict | None = None, *, part: str = "holdout") -> str:
    """The configuration a report or gate of ``sample`` is about when none is named: the
    sample's own, else the one configuration that graded the sample's items; refused listing
    the configurations when several did (name one with ``--judge``)."""
    own = sample_configuration(db, sample, info)
    if own:
        return own
    graded = store.judge_grades_for_sample(db, sample)
    keys = list(dict.fromkeys(graded["config"].astype(str)))
    if len(keys) == 1:
        return keys[0]
    known = _by_key(db)
    if not keys:
        raise InputError(f"no judge configuration graded the pairs of sample {clip(sample)}; grade its pool with "
                         f"{{command:judge}} first")
    raise InputError(f"{len(keys)} judge configurations graded sample {clip(sample)}; choose the one to gate with "
                     f"{{field:judge CONFIG}}: {choices([describe(db, k, known) for k in keys])}")


@dataclass(frozen=True)
class SampleJudge:
    """A configuration that graded some of a sample's pairs: ``own`` when the sample was drawn on
    it, ``gated`` when it is gated there (own, or gated on request)."""

    config: JudgeConfiguration
    own: bool
    gated: bool


def sample_judges(db: Database, sample: str) -> list[SampleJudge]:
    """The configurations that graded ``sample``'s pairs, its own first (what the Calibration
    page offers to report on and to gate)."""
    info = store.read_sample(db, sample)
    own = sample_configuration(db, sample, info)
    gated = set(gated_configurations(db, sample, info))
    known = _by_key(db)
    keys = list(dict.fromkeys(store.judge_grades_for_sample(db, sample)["config"].astype(str)))
    keys = sorted(keys, key=lambda k: k != own)  # stable: the own one first, the rest as graded
    return [SampleJudge(describe(db, k, known), k == own, k in gated) for k in keys]


# -- the gate of one configuration on one sample ---------------------------------------------

@dataclass(frozen=True)
class ConfigGate:
    """The gate of configuration ``config`` on ``sample``: the agreement of its grades with the
    SMEs' reference labels on the gated part (``part``: the reference labels with
    ``judge_grade`` = this configuration's grade, pairs it did not grade left out), the verdict,
    per-slice figures, and ``missing`` labelled pairs of the part it did not grade."""

    sample: str
    config: JudgeConfiguration
    result: AgreementResult | None
    verdict: GateResult
    part: pd.DataFrame
    slices: list[dict] = field(default_factory=list)
    missing: int = 0
    key: str = ""
    labels_fingerprint: str = ""


def labels_fingerprint(part: pd.DataFrame) -> str:
    """sha256 of the SME side of a gated part: position, query, weight, stratum, reference grade."""
    cols = [c for c in ("position", "query_id", "weight", "stratum", "grade") if c in part.columns]
    h = hashlib.sha256(repr(("sme labels", cols, len(part))).encode())
    if len(part):
        h.update(pd.util.hash_pandas_object(part[cols].reset_index(drop=True), index=False).to_numpy().tobytes())
    return h.hexdigest()


def _inputs(db: Database, sample: str, config: str, options, *,
            tags: bool = True) -> tuple[pd.DataFrame, int, list[list[str]]]:
    """The gated part with this configuration's grades, the number of its labelled pairs the
    configuration did not grade, and each kept pair's slice tags (only a high-risk slice moves
    the verdict, so without high-risk tags a caller that wants the verdict only skips them:
    ``tags=False`` gives none, and reads no document metadata)."""
    part = gated_part(reference_labels(db, sample), options)
    grades = store.judge_grades_for_sample(db, sample)
    grades = grades[grades["config"].astype(str) == config].set_index("position")["grade"]
    mine = part["position"].map(grades)
    missing = int(mine.isna().sum())
    part = part[mine.notna().to_numpy()].copy()
    part["judge_grade"] = mine.dropna().astype("int64").to_numpy()
    part = part.reset_index(drop=True)
    if not tags:
        return part, missing, [[] for _ in range(len(part))]
    found = [slice_tags(t) + extra for t, extra in zip(part["tags"], restricted_slice_tags(db, part["doc_id"]))]
    return part, missing, found


def _key(sample: str, config: str, part: pd.DataFrame, missing: int, tags, thresholds, options) -> str:
    """sha256 of everything the verdict depends on: the high-risk slices' members only when
    there are high-risk tags (other slices are shown, they decide nothing)."""
    risky = set(options.high_risk_tags)
    members = [sorted(set(t) & risky) for t in tags] if risky else []
    h = hashlib.sha256(repr((RULE_VERSION, sample, config, missing, thresholds, options.seed, options.n_boot,
                             options.threshold, options.part, options.weighted, tuple(options.high_risk_tags),
                             options.high_risk_rate, members)).encode())
    cols = ["position", "query_id", "weight", "stratum", "grade", "judge_grade"]
    if len(part):
        h.update(pd.util.hash_pandas_object(part[cols], index=False).to_numpy().tobytes())
    return h.hexdigest()


def _slices(part: pd.DataFrame, tags, thresholds: GateThresholds, options) -> tuple[list[dict], list]:
    """Per-tag figures (every tag) and the high-risk tags' decisions."""
    rows, decisions = [], []
    for tag, idx in core_agreement.slice_members(tags).items():
        sub = part.iloc[idx]
        risky = tag in options.high_risk_tags
        wanted = thresholds.stricter(options.high_risk_rate) if risky else thresholds
        try:
            r = agreement(sub["grade"].to_numpy(), sub["judge_grade"].to_numpy(), threshold=options.threshold,
                          query_ids=sub["query_id"].astype(str).to_numpy(),
                          weights=sub["weight"].to_numpy() if options.weighted else None,
                          strata=sub["stratum"].to_numpy() if options.weighted else None,
                          seed=options.seed, n_boot=options.n_boot)
        except core_agreement.AgreementInputError:
            if risky:
                decisions.append(_no_figures(tag))
            continue
        verdict = decide(r, wanted).verdict
        if risky:
            d = decide_slice(tag, r, options.high_risk_rate)
            decisions.append(d)
            verdict = {"below": FAIL, "clears": PASS, "undecided": INCONCLUSIVE}[d.status]
        rows.append({"tag": tag, "high_risk": risky, "n": r.n, "min_rate": wanted.min_tpr,
                     **{k: r.figures[k] for k in ("tpr", "tnr", "precision", "kappa", "msd")},
                     "ci": {k: list(r.ci[k]) for k in ("tpr", "tnr", "kappa")}, "verdict": verdict})
    return rows, decisions


def _no_figures(tag: str):

    return SliceDecision(tag, "undecided", f"high-risk slice {tag!r} undecided: its labels cannot estimate TPR and TNR yet")


def gate_configuration(db: Database, sample: str, config: str, thresholds: GateThresholds, options, *,
                       keep_boot: bool = False, known: dict | None = None) -> ConfigGate:
    """The gate of ``config`` on ``sample`` (module docstring), computed now."""
    _COMPUTED[0] += 1
    part, missing, tags = _inputs(db, sample, config, options)
    cfg = describe(db, config, known)
    result, verdict = gate_on_labels(part, thresholds, part_name=options.part, threshold=options.threshold,
                                     seed=options.seed, n_boot=options.n_boot, weighted=options.weighted,
                                     keep_boot=keep_boot)
    slices, decisions = _slices(part, tags, thresholds, options) if result is not None else ([], [])
    verdict = with_slices(verdict, decisions)
    if missing:
        reason = f"{missing} {options.part} pairs not graded by {cfg.label}"
        # The pairs it graded are not a random part of the held-out ones (a judge grades in
        # priority order), so their figures decide nothing either way: shown, never a verdict.
        verdict = GateResult(INCONCLUSIVE, (reason,) + verdict.reasons, None, verdict.checks)
    return ConfigGate(sample, cfg, result, verdict, part, slices, missing,
                      _key(sample, config, part, missing, tags, thresholds, options), labels_fingerprint(part))


# -- stored verdicts -------------------------------------------------------------------------

_MEMO: OrderedDict = OrderedDict()
_MEMO_SIZE = 512
_LOCK = threading.Lock()
_COMPUTED = [0]


def computed() -> int:
    """How many gates this process computed (bootstraps run) so far."""
    return _COMPUTED[0]


def forget() -> None:
    """Empty the process's memo (the next read uses the stored verdicts, else computes)."""
    with _LOCK:
        _MEMO.clear()


def _remember(key: str, verdict: str, reasons) -> None:
    with _LOCK:
        _MEMO[key] = (verdict, tuple(reasons))
        _MEMO.move_to_end(key)
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)


def record(db: Database, gate: ConfigGate) -> None:
    """Store ``gate``'s verdict with the project (replacing the entry of its sample and
    configuration). Best effort: a project opened read-only, or busy, keeps nothing (the verdict
    is computed again next time); Ctrl-C still stops the command."""

    _remember(gate.key, gate.verdict.verdict, gate.verdict.reasons)
    if getattr(db, "read_only", False):
        return
    entry = {"key": gate.key, "labels": gate.labels_fingerprint, "verdict": gate.verdict.verdict,
             "reasons": list(gate.verdict.reasons), "n": len(gate.part), "missing": gate.missing,
             "config": gate.config.key}
    try:
        with _LOCK, db.transaction() as tx:
            set_meta(tx, f"{_META_PREFIX}{gate.sample}\x1f{gate.config.key}", json.dumps(entry))
    except StoreInterrupted:
        raise
    except StoreError:
        return


@dataclass(frozen=True)
class SampleVerdict:
    """A configuration's current verdict on one sample; ``recomputed`` when the stored one was
    stale (its labels or grades changed since) or missing."""

    sample: str
    config: str
    verdict: str
    reasons: tuple[str, ...]
    recomputed: bool


def verdict(db: Database, sample: str, config: str, thresholds: GateThresholds, options, *,
            known: dict | None = None, stored: dict | None = None) -> SampleVerdict:
    """The current verdict of ``config`` on ``sample``: the stored or memoised one when its key
    matches today's inputs, else computed (and stored)."""
    part, missing, tags = _inputs(db, sample, config, options, tags=bool(options.high_risk_tags))
    key = _key(sample, config, part, missing, tags, thresholds, options)
    with _LOCK:
        hit = _MEMO.get(key)
    entry = stored if stored is not None else _explicit(db, sample).get(config)
    if hit is None and entry is not None and entry.get("key") == key and entry.get("verdict") in _STATE_OF:
        hit = (str(entry["verdict"]), tuple(entry.get("reasons") or ()))
        _remember(key, *hit)
    if hit is not None:
        if entry is None or entry.get("key") != key:
            _store_entry(db, sample, config, key, part, missing, hit)
        return SampleVerdict(sample, config, hit[0], hit[1], False)
    gate = gate_configuration(db, sample, config, thresholds, options, known=known)
    record(db, gate)
    return SampleVerdict(sample, config, gate.verdict.verdict, gate.verdict.reasons, True)


def _store_entry(db: Database, sample: str, config: str, key: str, part, missing: int, hit) -> None:
    gate = ConfigGate(sample, JudgeConfiguration(config, "", ""), None, GateResult(hit[0], hit[1], None, ()), part,
                      missing=missing, key=key, labels_fingerprint=labels_fingerprint(part))
    record(db, gate)


def options_from_settings(settings):
    """The thresholds and report options the qrels rule, the status and the Calibration page
    gate with: ``[calibration]`` thresholds, relevance grade, resamples and high-risk tags,
    seed 0, the held-out part, weighted."""
    thresholds = GateThresholds.from_settings(settings)
    tags = str(settings.get("calibration", "high_risk_tags") or "")
    options = ReportOptions(threshold=int(settings.get("calibration", "relevant_min_grade")),
                            n_boot=int(settings.get("calibration", "bootstrap_resamples")),
                            high_risk_tags=tuple(t.strip() for t in tags.split(",") if t.strip()),
                            high_risk_rate=float(settings.get("calibration", "high_risk_min_rate")))
    return thresholds, options


@dataclass(frozen=True)
class ConfigurationState:
    """A configuration's state over every sample (``passed`` when it passed on one) and its
    verdict on each sample it is gated on."""

    config: JudgeConfiguration
    state: str
    verdicts: tuple[SampleVerdict, ...]

    def as_dict(self) -> dict:
        return {**self.config.as_dict(), "state": self.state,
                "samples": [{"sample": v.sample, "verdict": v.verdict, "reasons": list(v.reasons)}
                            for v in self.verdicts]}


def states(db: Database, settings=None) -> list[ConfigurationState]:
    """Every judge configuration (graded ones, oldest first, then gated ones that graded
    nothing any more) with its state (module docstring)."""
    if settings is None:
        settings = lazy.config.load_settings()
    thresholds, options = options_from_settings(settings)
    known = _by_key(db)
    found: dict[str, list[SampleVerdict]] = {k: [] for k in known}
    for name in store.read_samples(db)["name"].astype(str):
        info = store.read_sample(db, name)
        stored = _explicit(db, name)
        for config in gated_configurations(db, name, info):
            if config not in known:  # gated once, but its grades are gone (the job was deleted)
                continue
            try:
                v = verdict(db, name, config, thresholds, options, known=known, stored=stored.get(config))
            except InputError:
                continue
            found.setdefault(config, []).append(v)
    out = []
    for key, verdicts in found.items():
        seen = {v.verdict for v in verdicts}
        state = (PASSED if PASS in seen else FAILED if FAIL in seen else UNDECIDED if seen else NOT_GATED)
        out.append(ConfigurationState(describe(db, key, known), state, tuple(verdicts)))
    return out


def passed_configurations(db: Database, settings=None) -> tuple[str, ...]:
    """Keys of the configurations with a current pass on some sample."""
    return tuple(s.config.key for s in states(db, settings) if s.state == PASSED)


def summary(items: list[ConfigurationState]) -> str:
    """``label (state), …`` for a statement line."""
    return ", ".join(f"{s.config.label} ({s.state})" for s in items) or "none"
