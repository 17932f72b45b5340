"""``workbench ppi``: judge-corrected metric intervals (PPI++) from files
(:mod:`workbench.services.evaluation.ppi`).

``--format json`` prints one object::

    {"n_labelled": int, "n_unlabelled": int,
     "measures": {MEASURE: {
        "runs": {RUN: {"estimate": float, "ci": [lo, hi], "human_only_ci": [lo, hi],
                       "judge_only": float, "lambda": float}},
        "differences": {RUN: {"vs": FIRST_RUN, "estimate": float, "ci": [lo, hi],
                              "human_only_ci": [lo, hi]}}}}}

``differences`` holds every run but the first, minus the first. Runs are named as ``eval``
names them (:func:`workbench.services.evaluation.evaluate.run_names`).

``--plan --half-width H`` prints instead, per run and per difference, how many labelled
queries reach that half-width with PPI++ and with human labels alone::

    {"n_pilot": int, "n_total": int, "half_width": float, "confidence": float,
     "measures": {MEASURE: {"runs": {RUN: {"n_ppi", "n_human", "lambda", "sd_ppi", "sd_human"}},
                            "differences": {RUN: {"vs": FIRST_RUN, ...the same}}}}}
"""

from __future__ import annotations

import argparse
import sys

from workbench.cli import lazy
from workbench.cli.common import (
    add_format_option,
    add_measure_options,
    aligned,
    exit_codes_epilog,
    number,
    print_json,
    wrapped,
)
from workbench.errors import ConfigError


def _confidence(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be strictly between 0 and 1 (e.g. 0.95), got {value}")
    return value


def _half_width(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive (e.g. 0.05), got {value}")
    return value


def _ppi(args: argparse.Namespace) -> int:
    if args.plan and args.half_width is None:
        raise ConfigError("--plan needs --half-width H, the interval half-width to reach (e.g. 0.05)")
    if args.half_width is not None and not args.plan:
        raise ConfigError("--half-width is a --plan option; add --plan to plan the number of labelled queries")
    values = lazy.evaluation_ppi.load_values(args.human_qrels, args.judge_qrels, args.runs, args.measure, rel=args.rel,
                                             min_labelled=5 if args.plan else 2)
    if values.judge_no_relevant:
        shown = ", ".join(values.judge_no_relevant[:5]) + (" ..." if len(values.judge_no_relevant) > 5 else "")
        print(f"note: {len(values.judge_no_relevant)} queries have no relevant item in the judge labels "
              f"(judge-side value 0): {shown}", file=sys.stderr)
    if args.plan:
        report = lazy.evaluation_ppi.plan(values, args.half_width, confidence=args.confidence)
        if args.format == "json":
            print_json(report.to_json())
        else:
            print(_plan_table(report))
        return 0
    report = lazy.evaluation_ppi.estimate(values, confidence=args.confidence)
    if args.format == "json":
        print_json(report.to_json())
    else:
        print(ppi_table(report))
    return 0


def _ci(interval) -> str:
    return f"[{number(interval.low)}, {number(interval.high)}]"


def _ci_signed(interval) -> str:
    return f"[{number(interval.low, True)}, {number(interval.high, True)}]"


def ppi_table(report) -> str:
    """The table of a PPI report (also ``eval/compare --labels corrected``)."""
    level = round(report.confidence * 100)
    lines = [f"labelled queries: {report.n_labelled}   unlabelled: {report.n_unlabelled}   "
             f"confidence: {report.confidence:g}"]
    header = ["measure", "run", "PPI++", f"{level}% CI", f"human-only {level}% CI", "judge only", "lambda", "width"]
    body = []
    for m, by_run in report.runs.items():
        for r, e in by_run.items():
            body.append([m, r, number(e.ppi.estimate), _ci(e.ppi), _ci(e.human_only), number(e.judge_only),
                         f"{e.lam:.2f}", number(e.width_ratio, digits=2)])
    lines += ["", *aligned([header, *body], text_columns=2)]
    if any(report.differences[m] for m in report.differences):
        header = ["measure", f"run - {report.first_run}", "PPI++", f"{level}% CI", f"human-only {level}% CI",
                  "human only", "lambda", "width"]
        body = []
        for m, by_run in report.differences.items():
            for r, e in by_run.items():
                body.append([m, r, number(e.ppi.estimate, True), _ci_signed(e.ppi), _ci_signed(e.human_only),
                             number(e.human_only.estimate, True), f"{e.lam:.2f}", number(e.width_ratio, digits=2)])
        lines += ["", *aligned([header, *body], text_columns=2)]
    lines += ["", "PPI++: the judge's mean over all queries corrected by the human labels (t interval, "
                  "finite-population correction); width: PPI++ CI width / human-only CI width"]
    return "\n".join(lines)


def _plan_table(report) -> str:
    lines = [f"pilot: {report.n_pilot} labelled queries of {report.n_total}   target half-width: "
             f"{report.half_width:g}   confidence: {report.confidence:g}"]
    header = ["measure", "target", "labelled (PPI++)", "labelled (human only)", "lambda"]
    body = []
    for m, by_run in report.runs.items():
        for r, p in by_run.items():
            body.append([m, r, str(p.n_ppi), str(p.n_human), f"{p.lam:.2f}"])
        for r, p in report.differences[m].items():
            body.append([m, f"{r} - {report.first_run}", str(p.n_ppi), str(p.n_human), f"{p.lam:.2f}"])
    lines += ["", *aligned([header, *body], text_columns=2), "",
              "labelled: the smallest random sample of queries whose expected interval half-width is at most "
              "the target, from the pilot's variances (rough with a small pilot)"]
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "ppi",
        help="judge-corrected metric intervals (PPI++) from human labels on a sample of queries",
        description=wrapped(
            "Estimate each run's mean of a measure over every query of JUDGE_QRELS as human labels "
            "would score it: the judge's per-query values on all queries, corrected by the human "
            "labels of the queries in HUMAN_QRELS (a random sample of them), by prediction-powered "
            "inference (PPI++, a tuned lambda in [0, 1]). Prints each run's estimate with its interval, "
            "the human-only interval beside it, the judge-only mean, and the paired difference of every "
            "run from the first. A query whose labels hold no relevant item scores 0. With --plan: how "
            "many labelled queries reach a target half-width, from a pilot of at least 5."),
        epilog=exit_codes_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("human_qrels", metavar="HUMAN_QRELS",
                   help="human labels; the queries in it are the labelled sample (at least 2)")
    p.add_argument("judge_qrels", metavar="JUDGE_QRELS", help="the judge's labels for every query")
    p.add_argument("runs", metavar="RUN", nargs="+", help="TREC run files; differences are against the first")
    add_measure_options(p)
    p.add_argument("--confidence", type=_confidence, default=0.95, metavar="C",
                   help="interval confidence level (default: 0.95)")
    p.add_argument("--seed", type=int, default=None, metavar="N",
                   help="accepted for scripts that pass one; nothing is drawn at random (the labelled "
                        "sample is the queries of HUMAN_QRELS), so the output does not depend on it")
    p.add_argument("--plan", action="store_true",
                   help="plan instead: labelled queries needed for --half-width, PPI++ and human-only "
                        "(HUMAN_QRELS is the pilot, at least 5 queries)")
    p.add_argument("--half-width", type=_half_width, default=None, metavar="H",
                   help="with --plan: the interval half-width to reach, e.g. 0.05")
    add_format_option(p)
    p.set_defaults(handler=_ppi)
