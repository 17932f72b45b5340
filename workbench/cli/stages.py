"""``workbench stages``: the same measures at every stage of a pipeline, and the reranker lift.

``workbench stages QRELS --stage NAME=RUNFILE [--stage NAME=RUNFILE ...] -m MEASURE [-m ...]
[--rel N] [--lift POOL_MEASURE,PRE_STAGE,POST_STAGE,MEASURE] [--format table|json]``

Every stage's run is scored with :func:`workbench.core.metrics.evaluation.evaluate` (a query missing from a
stage's run scores 0) and the means are reported per stage, in the order given, over the
queries every stage has (:func:`workbench.core.metrics.stages.stage_report`).

``--lift recall@50,fusion,reranker,recall@5`` reports
``(post - pre) / (pool - pre)`` with pool = recall@50 of ``fusion``, pre = recall@5 of
``fusion`` and post = recall@5 of ``reranker`` (:func:`workbench.core.metrics.stages.reranker_lift`);
the lift's measures are evaluated even when not given with ``-m``. An undefined lift (no gap,
pool below pre, a NaN score) is printed as NaN with the reason and does not fail the command.

``--format json`` prints one object::

    {"stages": [str], "measures": [str], "n_queries": int, "rel": int, "qrels": path,
     "run_files": {stage: path}, "missing_from_run": {stage: [query_id]},  # scored 0
     "dropped_queries": {stage: [query_id]},  # not in every stage, left out
     "table": {stage: {measure: mean}},
     "lift": null | {"value": float, "reason": str | null, "gap": float,
                     "pool": {"stage": str, "measure": str, "value": float},
                     "pre": {...}, "post": {...}}}

NaN is written as ``null``.
"""

from __future__ import annotations

import argparse
import math
import sys

from workbench.cli import lazy
from workbench.cli.common import (
    add_format_option,
    add_measure_options,
    aligned,
    exit_codes_epilog,
    open_project_from_args,
    print_json,
    settings_from_args,
    wrapped,
)
from workbench.errors import ConfigError


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside parentheses (measures such as ``P(rel=2)@5`` keep theirs)."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        current += ch
    parts.append(current.strip())
    return parts


def _parse_stage(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise ConfigError(f"--stage {text!r}: expected NAME=RUNFILE, e.g. --stage fusion=fusion.run")
    return name.strip(), path.strip()


def _parse_lift(text: str):
    parts = _split_top_level(text)
    if len(parts) != 4 or not all(parts):
        raise ConfigError(
            f"--lift {text!r}: expected POOL_MEASURE,PRE_STAGE,POST_STAGE,MEASURE, "
            "e.g. --lift recall@50,fusion,reranker,recall@5"
        )
    return lazy.evaluation_stages.LiftSpec(*parts)


def _clean(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x


def _num(x: float) -> str:
    return "NaN" if math.isnan(x) else f"{x:.4f}"


def _stages(args: argparse.Namespace) -> int:
    stages = [_parse_stage(s) for s in args.stage]
    lift = _parse_lift(args.lift) if args.lift else None
    if not args.measure and lift is None:
        raise ConfigError("give at least one measure, e.g. -m recall@5 -m ndcg@10")
    if args.qrels:
        result = lazy.evaluation_stages.evaluate_stages(args.qrels, stages, args.measure, rel=args.rel, lift=lift)
    else:
        result = _stored_stages(args, stages, lift)
    if args.format == "json":
        print_json(_json(result, args))
    else:
        print(_table(result, args.rel))
    return 0


def _json(result, args: argparse.Namespace) -> dict:
    report = result.report
    out: dict = {
        "stages": list(report.table.index),
        "measures": result.measures,
        "n_queries": report.n_queries,
        "rel": args.rel,
        "qrels": args.qrels,
        "run_files": result.run_files,
        "missing_from_run": result.missing_from_run,
        "dropped_queries": report.dropped_queries,
        "table": {
            stage: {m: _clean(v) for m, v in row.items()}
            for stage, row in report.table.to_dict(orient="index").items()
        },
        "lift": None,
    }
    if result.lift is not None:
        spec, lift = result.lift_spec, result.lift
        cells = {"pool": (spec.pool, lift.pool), "pre": (spec.pre, lift.pre),
                 "post": (spec.post, lift.post)}  # fmt: skip
        out["lift"] = {
            "value": _clean(lift.value),
            "reason": lift.reason,
            "gap": _clean(lift.gap),
            **{
                role: {"stage": stage, "measure": measure, "value": _clean(value)}
                for role, ((stage, measure), value) in cells.items()
            },
        }
    return out


def _table(result, rel: int) -> str:
    report = result.report
    lines = [f"stages: {len(report.table.index)}   queries: {report.n_queries}   rel: {rel}"]
    for stage, queries in result.missing_from_run.items():
        if queries:
            lines.append(f"note: {stage} returned nothing for {len(queries)} queries, scored 0")
    for stage, dropped in report.dropped_queries.items():
        if dropped:
            shown = ", ".join(dropped[:5]) + (" ..." if len(dropped) > 5 else "")
            lines.append(f"note: {len(dropped)} queries of {stage} not in every stage, left out: "
                         f"{shown}")  # fmt: skip
    header = ["stage", *report.table.columns]
    body = [[str(stage), *(_num(v) for v in row)] for stage, row in report.table.iterrows()]
    lines += ["", *aligned([header, *body])]
    if result.lift is not None:
        spec, lift = result.lift_spec, result.lift
        lines.append("")
        lines.append(
            f"lift: {_num(lift.value)}   (post - pre) / (pool - pre) = "
            f"({_num(lift.post)} - {_num(lift.pre)}) / ({_num(lift.pool)} - {_num(lift.pre)})"
        )
        lines.append(
            f"  pool = {spec.pool_measure} at {spec.pre_stage}, pre = {spec.measure} at "
            f"{spec.pre_stage}, post = {spec.measure} at {spec.post_stage}"
        )
        if lift.reason:
            lines.append(f"  undefined: {lift.reason}")
    return "\n".join(lines)


def _stored_stages(args: argparse.Namespace, stages, lift):
    """Without QRELS: each stage names a stored run, scored against the project's qrels."""

    db = open_project_from_args(args)
    try:
        result, done = lazy.evaluation_stages.evaluate_stored_stages(db, stages, args.measure, rel=args.rel, lift=lift, labels=args.labels,
                                                                     settings=settings_from_args(args))
    finally:
        db.close()
    print("\n".join([done.qrels.statement(), *(f"note: {n}" for n in done.notes),
                     f"stored as evaluation {done.evaluation_id}"]), file=sys.stderr)
    return result


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "stages",
        help="the same measures at every pipeline stage, and the reranker lift",
        description=wrapped("Score each stage's run on the same queries (means per stage, in the order "
                    "given; a query a stage's run does not answer scores 0) and optionally the "
                    "reranker lift (post - pre) / (pool - pre)."),
        epilog=exit_codes_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("qrels", metavar="QRELS", nargs="?",
                   help="judgments: TREC qrels, BEIR TSV or JSONL; without it each stage names a run "
                        "stored in the project, scored against the project's qrels")
    p.add_argument(
        "--stage", action="append", default=[], required=True, metavar="NAME=RUNFILE",
        help="a stage and its TREC run file (or stored run name, without QRELS), repeatable, in pipeline order",
    )
    p.add_argument("--labels", choices=("human", "llm", "merged"), default="merged",
                   help="without QRELS: which labels make the project's qrels (default: merged)")
    add_measure_options(p, required=False)
    p.add_argument(
        "--lift", metavar="POOL_MEASURE,PRE_STAGE,POST_STAGE,MEASURE",
        help="reranker lift: pool = POOL_MEASURE at PRE_STAGE, pre = MEASURE at PRE_STAGE, "
        "post = MEASURE at POST_STAGE, e.g. recall@50,fusion,reranker,recall@5 (default: none)",
    )
    add_format_option(p)
    p.set_defaults(handler=_stages)
