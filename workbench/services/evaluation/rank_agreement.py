"""Judge vs human system ranking: do the LLM judge's qrels rank the runs as the human qrels do?

Each stored run is scored by one measure twice through :func:`workbench.services.evaluation.evaluate.evaluate_project`
(not stored): against the human qrels (``--labels human``: adjudicated, SME and imported labels
by the ``[qrels]`` policy) and against the judge's qrels (``--labels llm``: every judge
configuration's labels, gated or not, since the judge itself is what is measured). The two
rankings are compared by Kendall's τ-b and τ_AP (:mod:`workbench.core.calibration.rank_correlation`, the
human ranking as reference). Fewer than two runs are refused: τ is undefined.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from workbench.errors import ConfigError
from workbench.services import lazy
from workbench.services.evaluation.evaluate import evaluate_project


def rank_agreement(db, runs: Sequence[str], measure: str, *, level: str | None = None,
                   chunking: str | None = None, rel: int = 1, policy=None, settings=None) -> dict:
    """``{"measure", "n_runs", "tau", "tau_ap", "ranking_human", "ranking_judge"}`` plus
    ``scores_human``/``scores_judge`` (``{run: mean}``), ``reason`` (why τ is NaN, else None)
    and ``policy`` (the qrels policy statement)."""

    runs = list(dict.fromkeys(runs))
    if len(runs) < 2:
        raise ConfigError(f"rank agreement needs at least two runs (got {len(runs)}): Kendall's τ between "
                          f"rankings of fewer than two runs is undefined")
    scores = {}
    statement = None
    for side, labels in (("human", "human"), ("judge", "llm")):
        done = evaluate_project(db, runs, [measure], labels=labels, level=level, chunking=chunking, rel=rel,
                                policy=policy, store=False, settings=settings)
        scores[side] = {name: float(next(iter(res.aggregate.values()))) for name, res in done.results.items()}
        statement = statement or done.qrels.statement()
    names = list(scores["human"])
    tau = lazy.core_calibration_rank_correlation.kendall_tau_b([scores["human"][n] for n in names], [scores["judge"][n] for n in names])
    human, judge = lazy.core_calibration_rank_correlation.ranking(scores["human"]), lazy.core_calibration_rank_correlation.ranking(scores["judge"])
    tap = lazy.core_calibration_rank_correlation.tau_ap(human, judge)
    reason = None
    if math.isnan(tau):
        reason = "every run has the same score under one of the qrels: the ranking has no order to compare"
    return {"measure": measure, "n_runs": len(names), "tau": tau, "tau_ap": tap,
            "ranking_human": human, "ranking_judge": judge,
            "scores_human": scores["human"], "scores_judge": scores["judge"],
            "reason": reason, "policy": statement}
