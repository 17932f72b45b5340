"""``workbench compare``: paired significance tests of runs against a baseline
(:func:`workbench.services.evaluation.evaluate.compare_files`).

``--format json`` prints one object::

    {
      "metadata": {"baseline": str, "runs": [str], "measures": [str], "test": str,
                   "seed": int, "n_resamples": int, "confidence": float,
                   "p_adjustment": "benjamini-hochberg", "n_common_queries": int,
                   "dropped_queries": {run: [query_id]}, "nan_dropped": {measure: [query_id]},
                   "missing_from_run": {run: [query_id]},  # scored 0
                   "run_files": {run: path}, "qrels": path, "rel": int},
      "comparisons": [{"measure": str, "baseline": str, "run": str, "n_queries": int,
                       "baseline_mean": float, "run_mean": float, "delta": float,
                       "ci_low": float, "ci_high": float, "p_value": float,
                       "p_adjusted": float, "wins": int, "ties": int, "losses": int}],
      "per_query": [{"measure": str, "baseline": str, "run": str, "query_id": str,   # --per-query only
                     "baseline_value": float, "run_value": float, "delta": float,
                     "baseline_top": [{"id": str, "grade": int | null}], "run_top": [...]}]
    }

With ``--runs`` (stored runs) ``qrels`` is null, ``run_files`` says ``stored run NAME`` and the
qrels policy is stated on stderr; ``per_query`` has the same shape in both modes, sorted by
delta ascending within each (measure, run), ``grade`` null when the item is unjudged
(:mod:`workbench.services.evaluation.per_query_diff`).

``delta = run_mean - baseline_mean``; NaN values are written as ``null``. Runs are named as
``eval`` names them (:func:`workbench.services.evaluation.evaluate.run_names`).
"""

from __future__ import annotations

import argparse
import math
import sys

from workbench.cli import lazy
from workbench.cli.common import (
    add_format_option,
    add_measure_options,
    add_stored_run_options,
    aligned,
    exit_codes_epilog,
    names_option,
    number,
    open_project_from_args,
    positive_int,
    print_json,
    settings_from_args,
    wrapped,
)
from workbench.cli.evaluation import corrected_command
from workbench.errors import ConfigError

DEFAULT_RESAMPLES = 10_000
#: the paired tests of :data:`workbench.core.metrics.significance.TESTS`, listed here so that building
#: the parser does not import numpy (a test checks the two lists agree)
TESTS = ("randomization", "bootstrap", "ttest")


#: compare's resampling options and their defaults (what ``--labels corrected`` has no use for)
RESAMPLING = (("--test", "test", "randomization"), ("--seed", "seed", 0),
              ("--resamples", "resamples", DEFAULT_RESAMPLES))


def _refuse_resampling(args: argparse.Namespace) -> None:
    """``--labels corrected`` with a resampling option set to anything but its default: refused in
    one line (``ConfigError``, exit 2) rather than ignored. The PPI++ interval is closed-form
    (estimate +- t quantile x standard error, :mod:`workbench.core.metrics.ppi`): no paired test,
    no resamples, nothing drawn at random, so no value of these options could change it."""

    for flag, attr, default in RESAMPLING:
        if getattr(args, attr, default) != default:
            raise ConfigError(f"{flag} does not apply to --labels corrected: the PPI++ interval is a normal "
                              f"(t) interval computed in closed form, which takes no resampling (no test, seed "
                              f"or resamples); drop {flag}")


def _compare(args: argparse.Namespace) -> int:
    if args.stored_runs is not None and args.labels == "corrected" and not args.per_query:
        if len(dict.fromkeys(names_option(args.stored_runs, "--runs"))) < 2:
            raise ConfigError("compare needs at least two runs (the baseline first)")
        _refuse_resampling(args)
        return corrected_command(args)  # PPI++ differences from the first run, beside each run's mean
    if args.per_query and args.stored_runs is not None and args.labels == "corrected":
        raise ConfigError("--per-query lists each query's value under one set of labels; corrected estimates "
                          "(PPI++) are not per query: choose --labels merged, human or llm")
    diffs = None
    if args.stored_runs is not None:
        report, diffs = _compare_project(args)
    elif not args.qrels or not args.runs:
        raise ConfigError("give a QRELS file and RUN files, or --runs NAMES to compare the project's stored runs")
    else:
        report = lazy.evaluation_evaluate.compare_files(args.qrels, args.runs, args.measure, rel=args.rel, test=args.test,
                                                        seed=args.seed, n_resamples=args.resamples)
    result = report.result
    if args.per_query and diffs is None:
        diffs = lazy.evaluation_per_query_diff.per_query_diff(args.qrels, args.runs, args.measure, rel=args.rel, k=args.top)
    if args.format == "json":
        meta = result.metadata()
        meta.update(missing_from_run=report.missing_from_run, run_files=report.run_files,
                    qrels=args.qrels, rel=args.rel)
        payload = {"metadata": meta, "comparisons": result.table.to_dict(orient="records")}
        if diffs is not None:
            payload["per_query"] = [d.to_json() for d in diffs]
        print_json(payload)
    else:
        print(_format_table(result, report.missing_from_run))
        if diffs is not None:
            print(_format_per_query(diffs))
    return 0


def _top_words(items) -> str:
    """``id(grade)`` for each item, ``id(?)`` when unjudged; ``-`` for an empty list."""
    return " ".join(f"{i}({'?' if g is None else g})" for i, g in items) or "-"


def _format_per_query(diffs) -> str:
    """One section per (measure, run): queries by delta, both runs' top results side by side."""
    lines = []
    sections: dict[tuple[str, str], list] = {}
    for d in diffs:
        sections.setdefault((d.measure, d.run), []).append(d)
    for (measure, run), rows in sections.items():
        base = rows[0].baseline
        lines += ["", f"per query: {measure}, {run} - {base} (sorted by delta; (?) = unjudged)"]
        header = ["query", "base", "run", "delta", f"{base} top", f"{run} top"]
        body = [[d.query_id, number(d.baseline_value), number(d.run_value), number(d.delta, signed=True),
                 _top_words(d.baseline_top), _top_words(d.run_top)] for d in rows]
        lines += aligned([header, *body], text_columns=1)
    return "\n".join(lines)


def _compare_project(args: argparse.Namespace):
    """``compare --runs A,B``: stored runs against the project's qrels (policy on stderr); with
    ``--per-query`` also each query's difference, scored against the same qrels (else None)."""

    if args.qrels or args.runs:
        raise ConfigError("--runs compares the project's stored runs; give either --runs or QRELS RUN files, not both")
    db = open_project_from_args(args)
    try:
        report, done = lazy.evaluation_evaluate.compare_project(db, names_option(args.stored_runs, "--runs"), args.measure,
                                                                labels=args.labels, level=args.level, chunking=args.chunking, rel=args.rel,
                                                                test=args.test, seed=args.seed, n_resamples=args.resamples,
                                                                settings=settings_from_args(args))
        diffs = None
        if args.per_query:
            diffs = lazy.evaluation_per_query_diff.stored_per_query_diff(db, done.results, done.qrels.table, done.qrels.level, args.measure,
                                                                         k=args.top)
    finally:
        db.close()
    print("\n".join([done.qrels.statement(), *(f"note: {n}" for n in done.notes),
                     f"stored as evaluation {done.evaluation_id}"]), file=sys.stderr)
    return report, diffs


def _pval(p: float) -> str:
    if math.isnan(p):
        return "-"
    return f"{p:.4f}" if p >= 1e-3 else f"{p:.1e}"


def _format_table(result, missing: dict[str, list[str]]) -> str:
    level = round(result.confidence * 100)
    lines = [(
        f"baseline: {result.baseline}   queries: {result.n_common_queries}   "
        f"test: {result.test}   resamples: {result.n_resamples}   seed: {result.seed}"
    )]
    for run, dropped in result.dropped_queries.items():
        if dropped:
            shown = ", ".join(dropped[:5]) + (" ..." if len(dropped) > 5 else "")
            lines.append(f"note: {len(dropped)} queries of {run} not in every run, left out: {shown}")
    for run, queries in missing.items():
        if queries:
            lines.append(f"note: {run} returned nothing for {len(queries)} queries, scored 0")
    for measure, dropped in result.nan_dropped.items():
        if dropped:
            lines.append(f"note: {measure}: {len(dropped)} queries with an undefined score left out")
    header = ["measure", "run", "base mean", "run mean", "delta", f"{level}% CI", "p", "p (BH)", "W/T/L"]
    body = [
        [row.measure, row.run, number(row.baseline_mean), number(row.run_mean),
         number(row.delta, signed=True),
         f"[{number(row.ci_low, True)}, {number(row.ci_high, True)}]",
         _pval(row.p_value), _pval(row.p_adjusted), f"{row.wins}/{row.ties}/{row.losses}"]
        for row in result.table.itertuples(index=False)
    ]
    lines += ["", *aligned([header, *body], text_columns=2), ""]
    lines.append(
        f"delta = run - baseline; CI: paired percentile bootstrap; p (BH): Benjamini-Hochberg "
        f"over {len(body)} comparison(s); W/T/L: per-query wins/ties/losses"
    )
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="paired significance tests of runs against a baseline",
        description=wrapped("Compare runs per query against the first run (the baseline): mean delta, "
                    "bootstrap confidence interval, paired test p-value (Benjamini-Hochberg "
                    "adjusted across all comparisons) and per-query wins/ties/losses. Queries "
                    "are scored as by eval (a query the run does not answer scores 0)."),
        epilog=exit_codes_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("qrels", metavar="QRELS", nargs="?", help="judgments: TREC qrels, BEIR TSV or JSONL")
    p.add_argument("runs", metavar="RUN", nargs="*", help="two or more TREC run files; the first is the baseline")
    add_stored_run_options(p, "comma-separated names of stored runs; the first is the baseline")
    add_measure_options(p)
    p.add_argument("--test", choices=TESTS, default="randomization",
                   help="paired test: randomization (sign flips), bootstrap, or ttest "
                        "(default: randomization)")
    p.add_argument("--seed", type=int, default=0,
                   help="random seed of the resampling, reported in the output (default: 0)")
    p.add_argument("--resamples", type=positive_int, default=DEFAULT_RESAMPLES, metavar="N",
                   help=f"resamples for the test and the bootstrap interval (default: {DEFAULT_RESAMPLES})")
    p.add_argument("--per-query", action="store_true",
                   help="also list every query sorted by the difference from the baseline, with both runs' "
                        "top results side by side and unjudged ones marked (?) (run files or --runs)")
    p.add_argument("--top", type=positive_int, default=5, metavar="K",
                   help="with --per-query: top results shown per run (default: 5)")
    add_format_option(p)
    p.set_defaults(handler=_compare)
