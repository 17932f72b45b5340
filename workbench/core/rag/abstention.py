"""Unanswerable queries and abstention metrics.

A query is *unanswerable* when no passage of the corpus answers it. Recall@k, MRR and nDCG are
undefined for such a query (there is nothing to recall), so those measures leave it out and
count it; it is scored instead by whether the system *abstains* (declines to answer).

Marking a query unanswerable (:func:`tags_say_unanswerable`): a list tag ``unanswerable``, a
dict tag whose value is ``unanswerable`` (the demo's ``{"type": "unanswerable"}``) or a dict
tag ``{"unanswerable": true}``. An SME decision ("no passage in the corpus answers this", or
"it is answerable") overrides the tags (see :mod:`workbench.services.evaluation.abstention`).

When does a system abstain?

* A **run with scores** abstains on a query at threshold ``t`` when its top score is below
  ``t`` (``top < t``, strictly); a query the run returns nothing for abstains at every
  threshold (its top score is NaN).
* A **generated answer** abstains when its ``abstained`` flag is true, or, without a flag, when
  its answer text is empty or matches an abstention phrase (:data:`ABSTENTION_PATTERN`, e.g.
  "I don't know", "cannot find", "no information").

Rates (``U`` = unanswerable queries, ``A`` = answerable ones)::

    abstention rate        = |abstained ∩ U| / |U|      (higher is better; NaN when U is empty)
    false-abstention rate  = |abstained ∩ A| / |A|      (lower is better; NaN when A is empty)
    answer rate            = 1 - false-abstention rate
    balanced accuracy      = (abstention rate + answer rate) / 2

Both rates are always reported together, never one alone: a system that never abstains has a
false-abstention rate of 0 and an abstention rate of 0, so its balanced accuracy is 0.5 (chance);
one that always abstains has both rates 1 and again 0.5. Only a system that separates the two
kinds of query rises above 0.5.

The threshold curve lists, for every distinct top score ``s`` (ascending) and one threshold
above the highest, the rates when abstaining below ``s``: the ROC curve of "top score is low"
as a detector of unanswerable queries (false-abstention rate on x, abstention rate on y). Its
area (:func:`curve_auc`, trapezoidal) is the probability that a random unanswerable query gets a
lower top score than a random answerable one (ties count one half).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

UNANSWERABLE = "unanswerable"

#: Answer texts read as abstentions when an answer has no ``abstained`` flag (case-insensitive,
#: searched anywhere in the text); an empty answer abstains too.
ABSTENTION_PATTERN = (
    r"\b(i\s+(do\s+not|don't|cannot|can't)\s+know|i\s+(could|can)\s*(not|n't)\s+find|"
    r"(can|could)\s*(not|n't)\s+(find|answer|be\s+answered)|no\s+(relevant\s+)?information|"
    r"not\s+(covered|mentioned|stated|specified)\s+in|unable\s+to\s+(answer|find)|"
    r"(the\s+)?(documents?|context|handbook|sources?)\s+(does|do)\s*(not|n't)\s+(say|mention|cover|contain))"
)


def tags_say_unanswerable(tags) -> bool:
    """True when a query's tags mark it unanswerable (list tag, dict value or dict flag)."""
    if tags is None:
        return False
    if isinstance(tags, str):
        return tags.strip().lower() == UNANSWERABLE
    if isinstance(tags, Mapping):
        for key, value in tags.items():
            if str(key).lower() == UNANSWERABLE and value is True:
                return True
            if isinstance(value, str) and value.strip().lower() == UNANSWERABLE:
                return True
        return False
    if isinstance(tags, (list, tuple, set)):
        return any(isinstance(t, str) and t.strip().lower() == UNANSWERABLE for t in tags)
    return False


def answer_abstains(text: str | None, pattern: str = ABSTENTION_PATTERN) -> bool:
    """An answer text without a flag abstains when it is empty or matches ``pattern``."""
    if text is None or not str(text).strip():
        return True
    return re.search(pattern, str(text), flags=re.IGNORECASE) is not None


@dataclass(frozen=True)
class AbstentionRates:
    """Counts and rates of one system at one operating point (see the module formulas)."""

    n_unanswerable: int
    n_answerable: int
    abstained_unanswerable: int
    abstained_answerable: int

    @property
    def abstention_rate(self) -> float:
        return self.abstained_unanswerable / self.n_unanswerable if self.n_unanswerable else math.nan

    @property
    def false_abstention_rate(self) -> float:
        return self.abstained_answerable / self.n_answerable if self.n_answerable else math.nan

    @property
    def balanced_accuracy(self) -> float:
        return (self.abstention_rate + 1.0 - self.false_abstention_rate) / 2.0

    def as_dict(self) -> dict[str, float | int]:
        return {
            "abstention_rate": self.abstention_rate,
            "false_abstention_rate": self.false_abstention_rate,
            "balanced_accuracy": self.balanced_accuracy,
            "n_unanswerable": self.n_unanswerable,
            "n_answerable": self.n_answerable,
            "abstained_unanswerable": self.abstained_unanswerable,
            "abstained_answerable": self.abstained_answerable,
        }


def rates(unanswerable: Sequence[bool], abstained: Sequence[bool]) -> AbstentionRates:
    """Rates of per-query abstention decisions against per-query unanswerable marks."""
    u = np.asarray(unanswerable, dtype=bool)
    a = np.asarray(abstained, dtype=bool)
    if u.shape != a.shape:
        raise ValueError(f"{u.size} unanswerable marks for {a.size} abstention decisions")
    return AbstentionRates(int(u.sum()), int((~u).sum()), int((a & u).sum()), int((a & ~u).sum()))


def abstains_at(top_scores: Sequence[float], threshold: float) -> np.ndarray:
    """Per query: abstains when the top score is below ``threshold`` or missing (NaN)."""
    top = np.asarray(top_scores, dtype=np.float64)
    return np.isnan(top) | (top < threshold)


def threshold_curve(top_scores: Sequence[float], unanswerable: Sequence[bool]) -> pd.DataFrame:
    """``threshold, abstention_rate, false_abstention_rate, balanced_accuracy, abstained`` for
    every distinct finite top score (ascending) and one threshold just above the highest (where
    every query abstains). At the lowest threshold only queries without results abstain."""
    top = np.asarray(top_scores, dtype=np.float64)
    u = np.asarray(unanswerable, dtype=bool)
    if top.shape != u.shape:
        raise ValueError(f"{u.size} unanswerable marks for {top.size} top scores")
    missing = np.isnan(top)
    finite = np.unique(top[~missing])
    above = np.nextafter(finite[-1], np.inf) if finite.size else 0.0
    thresholds = np.append(finite, above)
    # abstained at t = no results + top < t: one sorted search per kind of query, no loop
    tops_u = np.sort(top[u & ~missing])
    tops_a = np.sort(top[~u & ~missing])
    abst_u = int((u & missing).sum()) + np.searchsorted(tops_u, thresholds, side="left")
    abst_a = int((~u & missing).sum()) + np.searchsorted(tops_a, thresholds, side="left")
    n_u, n_a = int(u.sum()), int((~u).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        rate_u = abst_u / n_u if n_u else np.full(len(thresholds), np.nan)
        rate_a = abst_a / n_a if n_a else np.full(len(thresholds), np.nan)
    return pd.DataFrame({"threshold": thresholds.astype(np.float64), "abstention_rate": rate_u,
                         "false_abstention_rate": rate_a, "balanced_accuracy": (rate_u + 1.0 - rate_a) / 2.0,
                         "abstained": (abst_u + abst_a).astype(np.int64)})


def curve_auc(curve: pd.DataFrame) -> float:
    """Trapezoidal area under (false-abstention rate, abstention rate), from (0, 0) to (1, 1);
    NaN when either kind of query is missing."""
    x = curve["false_abstention_rate"].to_numpy(dtype=np.float64)
    y = curve["abstention_rate"].to_numpy(dtype=np.float64)
    if not len(x) or np.isnan(x).any() or np.isnan(y).any():
        return math.nan
    # thresholds ascend, so both rates ascend; close the curve at the corners
    x = np.concatenate(([0.0], x, [1.0]))
    y = np.concatenate(([0.0], y, [1.0]))
    return float(np.sum((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2.0))


def best_threshold(curve: pd.DataFrame) -> float:
    """The threshold with the highest balanced accuracy (the lowest such threshold on ties);
    NaN when the curve is empty or undefined."""
    acc = curve["balanced_accuracy"].to_numpy(dtype=np.float64)
    if not len(acc) or np.isnan(acc).all():
        return math.nan
    return float(curve["threshold"].iloc[int(np.nanargmax(acc))])
