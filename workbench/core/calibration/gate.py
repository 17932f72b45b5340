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
    checks: list[Check] = []
    reasons: list[str] = []
    extras: list[float | None] = []
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

    size_short: list[float] = []
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
        known = [c for c in candidates if c is not None]
        if unknown or any(c is None or (isinstance(c, float) and math.isnan(c)) for c in candidates):
            more = None
            # No data behind a figure (no labels, one class) is "not yet", not "never".
            cannot_yet = unknown or any(isinstance(c, float) and math.isnan(c) for c in size_short)
            reasons.append(CANNOT_ESTIMATE_YET if cannot_yet else ON_THE_THRESHOLD)
        else:
            # (the small tolerance keeps float noise such as 1200.0000001 from adding a label)
            # (every candidate is known here: ``known`` is ``candidates`` without the Nones)
            more = int(math.ceil(max(known) - 1e-9)) if known else 0
            if more > 10 * max(n, 1):
                # Whoever sets the count decides the advice: a sample-size minimum or a figure the
                # judge already gets right (1.0) is decided by labels only, never by a better judge.
                top = max(range(len(known)), key=lambda i: known[i])
                if top < len(extras) and improvable[top]:
                    reasons.append(f"{more} more labels is over ten times the {n} so far: a figure sits close "
                                   f"to its threshold; improving the judge is likelier to decide than labelling")
                else:
                    reasons.append(f"{more} more labels is over ten times the {n} so far: the judge cannot do "
                                   f"better on what decides it, so only more labels will")
    return GateResult(verdict, tuple(reasons), more, tuple(checks))


#: A high-risk slice decides only with at least this many reference-relevant and as many
#: reference-non-relevant pairs: a percentile interval from three pairs that all agree is
#: [1, 1], which says nothing.
HIGH_RISK_MIN_PER_CLASS = 10


@dataclass(frozen=True)
class SliceDecision:
    """A high-risk slice's own decision (:func:`decide_slice`): ``status`` ``clears``,
    ``below`` or ``undecided`` and the reason naming the slice."""

    tag: str
    status: str
    reason: str


def decide_slice(tag: str, result: AgreementResult, rate: float, *,
                 min_per_class: int = HIGH_RISK_MIN_PER_CLASS) -> SliceDecision:
    """A high-risk slice against the stricter rate the specification asks there (TPR and TNR
    ≥ ``rate``, 0.90 by default; κ and the sample-size minimums are the whole gate's):

    - ``below`` when the upper bound of TPR or of TNR is under ``rate`` (decided even on a small
      slice: a wide interval wholly below the rate is a safe conclusion);
    - ``clears`` when the lower bounds of both reach ``rate`` and the slice holds at least
      ``min_per_class`` reference-relevant and as many reference-non-relevant pairs;
    - ``undecided`` otherwise (a figure that cannot be estimated is undecided too).
    """
    parts, below, undecided = [], [], False
    for name in ("tpr", "tnr"):
        value, (lo, hi) = result.figures[name], result.ci[name]
        text = f"{LABELS[name]} {_fmt(value)} [{_fmt(lo)}, {_fmt(hi)}]"
        if not (math.isfinite(value) and math.isfinite(lo) and math.isfinite(hi)):
            undecided = True
            parts.append(f"{LABELS[name]} cannot be estimated")
        elif hi < rate:
            below.append(text)
        elif lo < rate:
            undecided = True
            parts.append(f"{text} straddles {rate:.2f}")
        else:
            parts.append(f"{text} clears {rate:.2f}")
    if below:
        return SliceDecision(tag, "below", f"high-risk slice {tag!r}: {'; '.join(below)}: upper bound below {rate:.2f}")
    small = min(result.relevant_pairs, result.not_relevant_pairs) < min_per_class
    if undecided or small:
        extra = (f"; fewer than {min_per_class} pairs of a class (reference-relevant {result.relevant_pairs:.0f}, "
                 f"non-relevant {result.not_relevant_pairs:.0f})" if small else "")
        return SliceDecision(tag, "undecided", f"high-risk slice {tag!r} undecided: {'; '.join(parts)}{extra}")
    return SliceDecision(tag, "clears", f"high-risk slice {tag!r}: {'; '.join(parts)}")


def with_slices(verdict: GateResult, slices: list[SliceDecision]) -> GateResult:
    """The whole gate's verdict with its high-risk slices: a slice ``below`` its rate fails
    the gate whatever the overall figures; an ``undecided`` one keeps a pass at inconclusive;
    every slice's reason is added."""
    if not slices:
        return verdict
    statuses = {s.status for s in slices}
    reasons = verdict.reasons + tuple(s.reason for s in slices)
    if "below" in statuses:
        return GateResult(FAIL, reasons, 0, verdict.checks)
    if "undecided" in statuses and verdict.verdict == PASS:
        return GateResult(INCONCLUSIVE, reasons, None, verdict.checks)
    return GateResult(verdict.verdict, reasons, verdict.more_labels_needed, verdict.checks)


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
