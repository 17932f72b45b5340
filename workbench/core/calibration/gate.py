"""The trust gate: may the LLM judge label the rest of the pool?

Decided on confidence bounds, never on point estimates (with 100 labels a κ of 0.40 has a
95% range of about ±0.2, so a point-estimate gate passes or fails by luck):

- ``pass`` when the lower bound of every gated figure clears its threshold
  (TPR ≥ ``min_tpr``, TNR ≥ ``min_tnr``, Cohen's κ ≥ ``min_kappa`` on the binarised labels)
  *and* the sample is large enough (≥ ``min_pairs`` pairs, ≥ ``min_per_class`` reference-relevant
  and as many reference-non-relevant pairs);
- ``fail`` when the upper bound of any gated figure is below its threshold (a small sample may
  fail: its wide interval makes that a safe conclusion);
- ``inconclusive`` otherwise, with the further labels needed to decide.

**Further labels needed.** For each undecided figure with point estimate ``v``, threshold ``t``
and the interval's half-width ``h`` on the side facing the threshold (``v − lo`` when ``v ≥ t``,
else ``hi − v``), the half-width shrinks as ``1/√m`` with the ``m`` pairs behind the figure
(reference-relevant pairs for TPR, non-relevant for TNR, all pairs for κ). The bound reaches the
threshold when ``h·√(m/m') = |v − t|``, i.e. at ``m' = m·(h / |v − t|)²``. Assuming new labels
keep the current class mix, that is ``n·(m'/m − 1)`` further pairs in all. The estimate is the
largest over the undecided figures and the size minimums; it assumes the rates stay where they
are (they will move), so it is a planning figure, not a promise. When a point estimate sits
exactly on its threshold no number of labels is expected to decide, and the count is ``None``.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from workbench.core.calibration.agreement import AgreementResult, agreement

PASS, FAIL, INCONCLUSIVE = "pass", "fail", "inconclusive"
EXIT_CODES = {PASS: 0, FAIL: 1, INCONCLUSIVE: 2}

LABELS = {"tpr": "TPR", "tnr": "TNR", "kappa": "κ"}


@dataclass(frozen=True)
class GateThresholds:
    min_tpr: float = 0.85
    min_tnr: float = 0.85
    min_kappa: float = 0.60
    min_pairs: int = 100
    min_per_class: int = 30

    def stricter(self, rate: float) -> GateThresholds:
        """The thresholds of a high-risk slice: TPR and TNR at least ``rate``."""
        return GateThresholds(max(self.min_tpr, rate), max(self.min_tnr, rate), self.min_kappa,
                              self.min_pairs, self.min_per_class)

    @classmethod
    def from_settings(cls, settings) -> GateThresholds:
        """From the ``[calibration]`` section of :class:`workbench.config.Settings`."""
        return cls(min_tpr=float(settings.get("calibration", "min_tpr")),
                   min_tnr=float(settings.get("calibration", "min_tnr")),
                   min_kappa=float(settings.get("calibration", "min_kappa")))


@dataclass(frozen=True)
class Check:
    name: str
    value: float
    lo: float
    hi: float
    threshold: float
    status: str  # "clears" | "below" | "undecided"


@dataclass(frozen=True)
class GateResult:
    verdict: str
    reasons: tuple[str, ...]
    more_labels_needed: int | None
    checks: tuple[Check, ...]

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "reasons": list(self.reasons),
                "more_labels_needed": self.more_labels_needed}


#: The two reasons an inconclusive verdict gives no count of further labels (the last reason
#: of such a verdict is one of them).
CANNOT_ESTIMATE_YET = ("the labels so far cannot estimate every figure (a class has no pairs yet); "
                       "label more pairs before the number needed can be estimated")
ON_THE_THRESHOLD = "a figure sits exactly on its threshold: more labels are not expected to decide it"


def _fmt(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.3f}"


def _extra_pairs(n: int, behind: float, value: float, lo: float, hi: float, threshold: float) -> float | None:
    """Further pairs (in all) until the bound facing ``threshold`` is expected on one side."""
    gap = abs(value - threshold)
    if gap == 0 or behind <= 0:
        return None
    half = (value - lo) if value >= threshold else (hi - value)
    needed_behind = behind * (half / gap) ** 2
    return max(0.0, n * (needed_behind / behind - 1.0))


def decide(result: AgreementResult, thresholds: GateThresholds = GateThresholds()) -> GateResult:
    """The verdict for one agreement result (see the module docstring)."""
    n = result.n
    # Counts are counts: the pairs behind each figure and the class minimums are numbers of
    # labelled pairs, never weights (the figures themselves may be re-weighted to the pool).
    rel, non = result.relevant_pairs, result.not_relevant_pairs
    behind = {"tpr": rel, "tnr": non, "kappa": float(n)}
    wanted = {"tpr": thresholds.min_tpr, "tnr": thresholds.min_tnr, "kappa": thresholds.min_kappa}
    checks, reasons, extras = [], [], []
    improvable: list[bool] = []  # per entry of ``extras``
    unknown = False
    for name, threshold in wanted.items():
        value = result.figures[name]
        lo, hi = result.ci[name]
        label = LABELS[name]
        # κ of labels where the reference has one class only is 0 on every resample: its interval
        # would collapse to [0, 0] and "fail" a judge nobody could measure. Undecided instead.
        one_class = name == "kappa" and (rel == 0 or non == 0)
        if one_class or not (math.isfinite(value) and math.isfinite(lo) and math.isfinite(hi)):
            status = "undecided"
            unknown = True
            why = {"tpr": "no reference-relevant pairs" if rel == 0 else None,
                   "tnr": "no reference-non-relevant pairs" if non == 0 else None,
                   "kappa": "the reference labels hold one class only" if one_class else None}.get(name)
            reasons.append(f"{label} cannot be estimated from these labels "
                           f"({why or 'one side uses a single label'})")
        elif lo >= threshold:
            status = "clears"
            reasons.append(f"{label} {_fmt(value)} [{_fmt(lo)}, {_fmt(hi)}]: lower bound clears {threshold:.2f}")
        elif hi < threshold:
            status = "below"
            reasons.append(f"{label} {_fmt(value)} [{_fmt(lo)}, {_fmt(hi)}]: upper bound below {threshold:.2f}")
        else:
            status = "undecided"
            reasons.append(f"{label} {_fmt(value)} [{_fmt(lo)}, {_fmt(hi)}]: the interval straddles {threshold:.2f}")
            extras.append(_extra_pairs(n, behind[name], value, lo, hi, threshold))
            # A better judge can move this figure only when it is not perfect already.
            improvable.append(value < 1.0)
        checks.append(Check(name, value, lo, hi, threshold, status))

    size_short = []
    if n < thresholds.min_pairs:
        size_short.append(thresholds.min_pairs - n)
        reasons.append(f"only {n} labelled pairs; at least {thresholds.min_pairs} are needed to pass")
    for what, count in (("reference-relevant", rel), ("reference-non-relevant", non)):
        if count < thresholds.min_per_class:
            reasons.append(f"only {count:.0f} {what} pairs; at least {thresholds.min_per_class} are needed to pass")
            if count > 0:
                size_short.append(n * (thresholds.min_per_class / count - 1))
            else:
                size_short.append(math.nan)

    statuses = {c.status for c in checks}
    if "below" in statuses:
        verdict, more = FAIL, 0
    elif statuses == {"clears"} and not size_short:
        verdict, more = PASS, 0
    else:
        verdict = INCONCLUSIVE
        candidates = extras + size_short
        if unknown or any(c is None or (isinstance(c, float) and math.isnan(c)) for c in candidates):
            more = None
            # No data behind a figure (no labels, one class) is "not yet", not "never".
            cannot_yet = unknown or any(isinstance(c, float) and math.isnan(c) for c in size_short)
            reasons.append(CANNOT_ESTIMATE_YET if cannot_yet else ON_THE_THRESHOLD)
        else:
            # (the small tolerance keeps float noise such as 1200.0000001 from adding a label)
            more = int(math.ceil(max(candidates) - 1e-9)) if candidates else 0
            if more > 10 * max(n, 1):
                # Whoever sets the count decides the advice: a sample-size minimum or a figure the
                # judge already gets right (1.0) is decided by labels only, never by a better judge.
                top = max(range(len(candidates)), key=lambda i: candidates[i])
                if top < len(extras) and improvable[top]:
                    reasons.append(f"{more} more labels is over ten times the {n} so far: a figure sits close "
                                   f"to its threshold; improving the judge is likelier to decide than labelling")
                else:
                    reasons.append(f"{more} more labels is over ten times the {n} so far: the judge cannot do "
                                   f"better on what decides it, so only more labels will")
    return GateResult(verdict, tuple(reasons), more, tuple(checks))


def gate_on_labels(part, thresholds: GateThresholds = GateThresholds(), *, part_name: str, threshold: int,
                   seed: int, n_boot: int, weighted: bool,
                   keep_boot: bool = False) -> tuple[AgreementResult | None, GateResult]:
    """The gate on a sample's gated labels: the one computation behind ``calibrate gate``,
    the calibration report and the qrels rule's cached verdict.

    ``part``: the reference labels of the gated part (a DataFrame with ``grade``, ``judge_grade``,
    ``query_id``, ``weight`` and ``stratum``; ``part_name`` names it in messages). The agreement
    (bootstrap with ``seed`` and ``n_boot``; weighted and stratified when ``weighted``) is decided
    by :func:`decide`; no label yet gives ``(None, inconclusive)``.
    """
    if len(part) == 0:
        return None, GateResult(INCONCLUSIVE, (f"no SME labels on the {part_name} part yet",), None, ())
    result = agreement(part["grade"].to_numpy(), part["judge_grade"].to_numpy(), threshold=threshold,
                       query_ids=part["query_id"].astype(str).to_numpy(),
                       weights=part["weight"].to_numpy() if weighted else None,
                       strata=part["stratum"].to_numpy() if weighted else None,
                       seed=seed, n_boot=n_boot, keep_boot=keep_boot)
    return result, decide(result, thresholds)


# -- the verdict cache -------------------------------------------------------------------------

def gate_cache_key(*, sample: str, judge: tuple[str | None, str | None], labels_fingerprint: str,
                   seed: int, n_boot: int, threshold: int, part: str, weighted: bool,
                   thresholds: GateThresholds) -> tuple:
    """What a gate verdict depends on, as a hashable key.

    The verdict is a function of the calibration labels (the reference grades, the judge grades,
    weights, strata and query ids of the gated part: ``labels_fingerprint``), the bootstrap
    (``seed``, ``n_boot``), the relevance ``threshold``, the ``part`` gated, whether the figures
    are ``weighted`` and the ``thresholds``; ``sample`` and ``judge`` (model, prompt hash of the
    sample's judge configuration) name what was gated. Any change to one of them is a new key,
    so a stale verdict is never served.
    """
    return (str(sample), (judge[0], judge[1]), str(labels_fingerprint), int(seed), int(n_boot), int(threshold),
            str(part), bool(weighted), thresholds)


class VerdictCache:
    """A bounded memo of gate verdicts keyed by :func:`gate_cache_key` (least recently used
    entries go first). The bootstrap behind a verdict (thousands of resamples) runs once per key
    instead of once per qrels request; ``hits``/``misses`` count lookups."""

    def __init__(self, size: int = 256) -> None:
        self.size = int(size)
        self._entries: OrderedDict = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get_or_compute(self, key: tuple, compute):
        """The cached value of ``key``, else ``compute()`` stored under it."""
        if key in self._entries:
            self._entries.move_to_end(key)
            self.hits += 1
            return self._entries[key]
        self.misses += 1
        value = compute()
        self._entries[key] = value
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        self._entries.clear()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)


#: The process's verdict memo (the app keeps it across page runs; one CLI command uses it once).
VERDICTS = VerdictCache()

#: Bumped whenever :func:`decide` or the figures behind it change, so that verdicts stored with
#: a project by an older version are not served (:func:`stored_key`).
GATE_RULE_VERSION = 1


def stored_key(key: tuple) -> str:
    """A stable text form of a :func:`gate_cache_key` (sha256 of its repr and
    :data:`GATE_RULE_VERSION`), for verdicts stored with the project across processes."""
    import hashlib

    return hashlib.sha256(repr((GATE_RULE_VERSION, key)).encode()).hexdigest()
