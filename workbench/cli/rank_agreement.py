"""``workbench rank-agreement``: judge vs human system ranking (:mod:`workbench.services.evaluation.rank_agreement`).

``--format json`` prints exactly ``{"measure", "n_runs", "tau", "tau_ap", "ranking_human",
"ranking_judge"}`` (τ null when undefined, with the reason on stderr).
"""

from __future__ import annotations

import argparse
import math
import sys

from workbench.cli import lazy
from workbench.cli.common import (
    add_format_option,
    exit_codes_epilog,
    names_option,
    number,
    open_project_from_args,
    print_json,
    settings_from_args,
    wrapped,
)

JSON_KEYS = ("measure", "n_runs", "tau", "tau_ap", "ranking_human", "ranking_judge")


def _run(args: argparse.Namespace) -> int:

    runs = names_option(args.runs, "--runs")
    db = open_project_from_args(args)
    try:
        out = lazy.evaluation_rank_agreement.rank_agreement(db, runs, args.measure, level=args.level, chunking=args.chunking, rel=args.rel,
                                                            settings=settings_from_args(args))
    finally:
        db.close()
    print(out["policy"], file=sys.stderr)
    if out["reason"]:
        print(f"note: τ is undefined: {out['reason']}", file=sys.stderr)
    if args.format == "json":
        print_json({k: (None if isinstance(out[k], float) and math.isnan(out[k]) else out[k]) for k in JSON_KEYS})
        return 0
    print(f"measure: {out['measure']}   runs: {out['n_runs']}   Kendall's tau-b: {number(out['tau'])}   "
          f"tau_AP: {number(out['tau_ap'])}")
    width = max(len(r) for r in out["ranking_human"])
    print(f"  {'rank':>4}  {'human qrels':<{width}}  {'score':>8}  {'judge qrels':<{width}}  {'score':>8}")
    for i, (h, j) in enumerate(zip(out["ranking_human"], out["ranking_judge"]), start=1):
        print(f"  {i:>4}  {h:<{width}}  {number(out['scores_human'][h]):>8}  {j:<{width}}  "
              f"{number(out['scores_judge'][j]):>8}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "rank-agreement",
        help="do the judge's labels rank the runs as the human labels do? (Kendall's tau, tau_AP)",
        description=wrapped("Rank stored runs by one measure under the human qrels and under the LLM "
                            "judge's qrels and compare the two rankings with Kendall's tau-b and tau_AP "
                            "(swaps near the top weigh more). Needs at least two runs."),
        epilog=exit_codes_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--runs", required=True, metavar="A,B,C", help="comma-separated names of stored runs (two or more)")
    p.add_argument("-m", "--measure", required=True, metavar="MEASURE", help="the measure that ranks the runs, e.g. nDCG@10")
    p.add_argument("--rel", type=int, default=1, metavar="N", help="relevance threshold for binary measures (default 1)")
    p.add_argument("--level", choices=("doc", "chunk"), default=None, help="score documents or chunks (default: the runs' level)")
    p.add_argument("--chunking", metavar="NAME", default=None, help="chunking of chunk-level qrels (default: the runs')")
    add_format_option(p, ("table", "json"))
    p.set_defaults(handler=_run)
