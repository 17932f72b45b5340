"""Interval coverage by simulation: synthetic judges with known TPR/TNR (and a known joint grade
distribution, so every figure's true value is known); the 95% intervals must contain the true
value 93–97% of the time.

Each repetition draws ``n`` pairs from the joint distribution and computes :func:`agreement`
with its own seed. With 1,000 repetitions the standard error of a coverage near 0.95 is 0.007,
so the 93–97% band is about ±3 standard errors: a method that truly covers 95% passes, one that
covers 90% or 99% fails. Run ``python -m tests.core.calibration.test_agreement_coverage`` to print the table.
"""

from __future__ import annotations

import numpy as np
import pytest

from workbench.core.calibration.agreement import FIGURES, agreement, figures_from_confusion

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


def weighted_coverage(*, repetitions: int = 400, resamples: int = 500, seed: int = 7) -> dict[str, float]:
    """Coverage of the figures a calibration report gives: a 20,000-pair pool (SME grade and a
    noisy judge grade per pair), a 300-pair sample drawn stratified by the judge's grade and
    query (:func:`draw_sample`), figures re-weighted to the pool with the inclusion weights and
    the bootstrap resampling within the judge-grade strata. The true values are the pool's."""
    import pandas as pd

    from workbench.core.calibration.agreement import confusion
    from workbench.core.calibration.sample import SampleSpec, draw_sample

    rng = np.random.default_rng(seed)
    n = 20_000
    truth = rng.choice(4, size=n, p=[0.45, 0.25, 0.18, 0.12])
    judge = np.where(rng.random(n) < 0.7, truth, np.clip(truth + rng.choice([-1, 1, 2], size=n), 0, 3))
    pool = pd.DataFrame({"query_id": (np.arange(n) % 400).astype(str), "judge_grade": judge, "truth": truth})
    target = {k: float(v) for k, v in figures_from_confusion(confusion(truth, judge)).items()}
    hits = dict.fromkeys(FIGURES, 0)
    for i in range(repetitions):
        s = draw_sample(pool, SampleSpec(size=300, holdout_share=1.0), seed=int(rng.integers(2**30))).pairs
        res = agreement(s["truth"].to_numpy(), s["judge_grade"].to_numpy(), weights=s["weight"].to_numpy(),
                        query_ids=s["query_id"].to_numpy(), strata=s["stratum"].to_numpy(), seed=i,
                        n_boot=resamples)
        for k in FIGURES:
            lo, hi = res.ci[k]
            hits[k] += lo <= target[k] <= hi
    return {k: v / repetitions for k, v in hits.items()}


@pytest.mark.slow
def test_reweighted_stratified_sample_intervals_cover_the_pool_values():
    """400 repetitions (standard error 0.011): the band is widened to 92–98% accordingly."""
    got = weighted_coverage()
    checked = 0
    for name, share in got.items():
        assert 0.92 <= share <= 0.98, (name, share)
        checked += 1
    assert checked == 9


def main() -> None:
    rows = [(*s, "pairs", coverage(*s)) for s in SETTINGS]
    rows.append((400, 0.3, 0.85, 0.90, "queries (40)", coverage(400, 0.3, 0.85, 0.90, clusters=40)))
    rows.append((150, 0.4, 0.80, 0.95, "pairs", coverage(150, 0.4, 0.80, 0.95)))
    rows.append(("300 of 20,000", "pool", "-", "-", "queries within judge-grade strata, re-weighted",
                 weighted_coverage()))
    print("| n | prevalence | TPR | TNR | resampling | " + " | ".join(FIGURES) + " |")
    print("|---|---|---|---|---|" + "---|" * len(FIGURES))
    for n, p, tpr, tnr, unit, cov in rows:
        print(f"| {n} | {p} | {tpr} | {tnr} | {unit} | " + " | ".join(f"{cov[k]:.3f}" for k in FIGURES) + " |")


if __name__ == "__main__":
    main()
