"""Interval coverage by simulation: synthetic judges with known TPR/TNR (and a known joint grade
distribution, so every figure's true value is known); the 95% intervals must contain the true
value 93–97% of the time.

Each repetition draws ``n`` pairs from the joint distribution and computes :func:`agreement`
with its own seed. With 1,000 repetitions the standard error of a coverage near 0.95 is 0.007,
so the 93–97% band is about ±3 standard errors: a method that truly covers 95% passes, one that
covers 90% or 99% fails. Run ``python -m tests.core.test_agreement_coverage`` to print the table.
"""

from __future__ import annotations

import numpy as np
import pytest

from workbench.core.agreement import FIGURES, agreement, figures_from_confusion

REPETITIONS = 1000
RESAMPLES = 500
# (pairs, prevalence of reference-relevant, TPR, TNR): sizes a calibration sample's held-out part has.
SETTINGS = [(200, 0.5, 0.85, 0.85), (400, 0.3, 0.85, 0.90)]


def joint(prevalence: float, tpr: float, tnr: float) -> np.ndarray:
    """A 4×4 joint distribution (rows reference, columns candidate): the reference is relevant
    (grade 2 or 3, equally likely) with ``prevalence``; the candidate lands on the same side with
    probability TPR (relevant) or TNR (not relevant), on the same grade within the side 60% of
    the time, and uniformly on the other side's grades otherwise."""
    P = np.zeros((4, 4))
    for r in range(4):
        relevant = r >= 2
        p_row = (prevalence if relevant else 1 - prevalence) / 2
        hit = tpr if relevant else tnr
        for c in range(4):
            same_side = (c >= 2) == relevant
            P[r, c] = p_row * (hit * (0.6 if c == r else 0.4) if same_side else (1 - hit) * 0.5)
    return P


def coverage(n: int, prevalence: float, tpr: float, tnr: float, *, repetitions: int = REPETITIONS,
             resamples: int = RESAMPLES, seed: int = 20261130, clusters: int | None = None) -> dict[str, float]:
    P = joint(prevalence, tpr, tnr)
    truth = {k: float(v) for k, v in figures_from_confusion(P).items()}
    assert truth["tpr"] == pytest.approx(tpr) and truth["tnr"] == pytest.approx(tnr)
    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(FIGURES, 0)
    for _ in range(repetitions):
        cells = rng.choice(16, size=n, p=P.ravel())
        query_ids = None if clusters is None else (np.arange(n) % clusters).astype(str)
        res = agreement(cells // 4, cells % 4, query_ids=query_ids, seed=int(rng.integers(2**31)),
                        n_boot=resamples)
        for k in FIGURES:
            lo, hi = res.ci[k]
            hits[k] += lo <= truth[k] <= hi
    return {k: v / repetitions for k, v in hits.items()}


@pytest.mark.slow
@pytest.mark.parametrize("n, prevalence, tpr, tnr", SETTINGS)
def test_95_percent_intervals_cover_93_to_97_percent(n, prevalence, tpr, tnr):
    got = coverage(n, prevalence, tpr, tnr)
    checked = 0
    for name, share in got.items():
        assert 0.93 <= share <= 0.97, (name, share)
        checked += 1
    assert checked == len(FIGURES) == 9


def main() -> None:
    rows = [(*s, "pairs", coverage(*s)) for s in SETTINGS]
    rows.append((400, 0.3, 0.85, 0.90, "queries (40)", coverage(400, 0.3, 0.85, 0.90, clusters=40)))
    rows.append((150, 0.4, 0.80, 0.95, "pairs", coverage(150, 0.4, 0.80, 0.95)))
    print("| n | prevalence | TPR | TNR | resampling | " + " | ".join(FIGURES) + " |")
    print("|---|---|---|---|---|" + "---|" * len(FIGURES))
    for n, p, tpr, tnr, unit, cov in rows:
        print(f"| {n} | {p} | {tpr} | {tnr} | {unit} | " + " | ".join(f"{cov[k]:.3f}" for k in FIGURES) + " |")


if __name__ == "__main__":
    main()
