"""Evaluate the stages of a retrieval pipeline on the same queries, and the reranker lift.

Glue behind ``workbench stages``: scores each stage's TREC run with
:func:`workbench.core.metrics.evaluation.evaluate` (same qrels, same conventions: a query missing from a
stage's run scores 0), summarises them with :func:`workbench.core.metrics.stages.stage_report` (stages
in the order given, means over the queries every stage has) and, when asked, computes
:func:`workbench.core.metrics.stages.reranker_lift` from three of the report's cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workbench.core.metrics.measures import parse_measures
from workbench.core.metrics.stages import Lift, StageReport, stage_lift, stage_report
from workbench.errors import ConfigError
from workbench.services import lazy
from workbench.services.evaluation.evaluate import evaluate_files, evaluate_project


@dataclass(frozen=True)
class LiftSpec:
    """Which cells of the stage report make the lift.

    ``pool`` = ``pool_measure`` at ``pre_stage`` (the candidate pool the reranker sees, at a
    large cutoff), ``pre`` = ``measure`` at ``pre_stage``, ``post`` = ``measure`` at
    ``post_stage``; e.g. ``LiftSpec("recall@50", "fusion", "reranker", "recall@5")``.
    """

    pool_measure: str
    pre_stage: str
    post_stage: str
    measure: str

    @property
    def pool(self) -> tuple[str, str]:
        return (self.pre_stage, self.pool_measure)

    @property
    def pre(self) -> tuple[str, str]:
        return (self.pre_stage, self.measure)

    @property
    def post(self) -> tuple[str, str]:
        return (self.post_stage, self.measure)


@dataclass(frozen=True)
class StagesResult:
    """The stage report, the runs' files, queries each stage's run lacked (scored 0) and the
    lift (``None`` unless a :class:`LiftSpec` was given)."""

    report: StageReport
    measures: list[str]
    run_files: dict[str, str]
    missing_from_run: dict[str, list[str]] = field(default_factory=dict)
    lift_spec: LiftSpec | None = None
    lift: Lift | None = None


def evaluate_stored_stages(
    db,
    stages: Sequence[tuple[str, str]],
    measures: Sequence[str],
    *,
    rel: int = 1,
    lift: LiftSpec | None = None,
    labels: str = "merged",
    level: str | None = None,
    chunking: str | None = None,
    settings=None,
):
    """:func:`evaluate_stages` for ``(stage name, stored run name)`` pairs, scored against the
    project's qrels by :func:`workbench.services.evaluation.evaluate.evaluate_project` (stored).
    Returns ``(StagesResult, ProjectEvaluation)``."""

    wanted = _check_stages(stages, measures, lift)
    parse_measures(wanted)
    runs = [run for _, run in stages]
    if len(set(runs)) != len(runs):
        raise ConfigError("a stored run is given for two stages; give each stage its own run")
    done = evaluate_project(db, runs, wanted, rel=rel, labels=labels, level=level, chunking=chunking,
                            settings=settings)
    by_stage = {name: done.results[run] for name, run in stages}
    report = stage_report({name: res.per_query for name, res in by_stage.items()}, wanted)
    value = stage_lift(report, pool=lift.pool, pre=lift.pre, post=lift.post) if lift is not None else None
    return StagesResult(report=report, measures=wanted, run_files={name: f"stored run {run}" for name, run in stages},
                        missing_from_run={name: list(res.missing_from_run) for name, res in by_stage.items()},
                        lift_spec=lift, lift=value), done


def _check_stages(stages, measures, lift) -> list[str]:
    """The measures to evaluate (the lift's included), after checking the stage names."""
    if not stages:
        raise ConfigError("give at least one stage, e.g. {field:stage fusion=fusion.run}")
    names = [name for name, _ in stages]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(f"stage name(s) given more than once: {', '.join(repeated)}")
    if lift is not None:
        for role, stage in (("pre-rerank", lift.pre_stage), ("post-rerank", lift.post_stage)):
            if stage not in names:
                raise ConfigError(
                    f"{{field:lift}}: unknown {role} stage {stage!r}; stages are {', '.join(names)}"
                )
    wanted = list(dict.fromkeys(list(measures) + ([lift.pool_measure, lift.measure] if lift else [])))
    if not wanted:
        raise ConfigError("give at least one measure, e.g. -m recall@5 -m ndcg@10")
    return wanted


def evaluate_stages(
    qrels: str | Path,
    stages: Sequence[tuple[str, str | Path]],
    measures: Sequence[str],
    *,
    rel: int = 1,
    lift: LiftSpec | None = None,
) -> StagesResult:
    """Score every ``(stage name, run file)`` against ``qrels`` and report them side by side.

    The lift's measures are evaluated too when not among ``measures``. Raises
    :class:`ConfigError` for no stage, a repeated stage name or a lift naming an unknown stage,
    and :class:`~workbench.errors.InputError` for a missing, non-regular or malformed file.
    """

    wanted = _check_stages(stages, measures, lift)
    names = [name for name, _ in stages]
    parse_measures(wanted)  # fail on a bad name before reading any file
    for path in [qrels, *(p for _, p in stages)]:
        lazy.core_metrics_readers.check_regular_file(path)  # every file before reading any: one clear line, never a hang
    results = evaluate_files(qrels, [str(p) for _, p in stages], wanted, rel=rel, names=names)
    report = stage_report({name: res.per_query for name, res in results.items()}, wanted)
    value = None
    if lift is not None:
        value = stage_lift(report, pool=lift.pool, pre=lift.pre, post=lift.post)
    return StagesResult(
        report=report,
        measures=wanted,
        run_files={name: str(path) for name, path in stages},
        missing_from_run={name: list(res.missing_from_run) for name, res in results.items()},
        lift_spec=lift,
        lift=value,
    )
