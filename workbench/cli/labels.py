"""Label multipliers: ``workbench synth`` (synthetic queries per chunk) and ``workbench labels
propagate|unpropagate|budget`` (near-duplicate propagation, budgeted judging).

Thin over :mod:`workbench.services.qrels.synthetic_queries`, :mod:`workbench.services.qrels.propagation`
and :mod:`workbench.services.judge.budget`; the services are imported when a command runs,
so building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import json
import sys

from workbench.cli import lazy
from workbench.cli.common import (
    add_format_option,
    cli_text,
    open_project_from_args,
    positive_int,
    print_json,
    settings_from_args,
    wrapped,
)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must lie in (0, 1], got {value}")
    return value


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


# -- synth ------------------------------------------------------------------------------------

def _synth(args: argparse.Namespace) -> int:
    settings = settings_from_args(args, **{"judge.model": args.model, "judge.base_url": args.base_url})
    report = lazy.qrels_synthetic_queries.synthesize(settings, args.chunking, per_chunk=args.per_chunk, limit=args.limit, seed=args.seed,
                                                     max_overlap=args.max_overlap,
                                                     on_note=lambda line: print(f"workbench synth: {cli_text(line)}", file=sys.stderr))
    if args.format == "json":
        if report.failed:
            print(f"workbench synth: {report.failed} chunks failed (no question made): "
                  + "; ".join(report.errors[:3]), file=sys.stderr)
        print(json.dumps({"created": report.created, "overlap_before": report.overlap_before,
                          "overlap_after": report.overlap_after, "flagged": report.flagged}))
    else:
        print(report.summary())
        if args.baseline:
            with open_project_from_args(args) as db:
                b = lazy.qrels_synthetic_queries.bm25_baseline(db, args.chunking, k=10)
            if b["questions"]:
                print(f"BM25 baseline over the {b['questions']:,} synthetic questions of {args.chunking} (each against "
                      f"its chunk): hit@10 {b['before']['hit']:.3f} -> {b['after']['hit']:.3f}, MRR@10 "
                      f"{b['before']['mrr']:.3f} -> {b['after']['mrr']:.3f} (original -> rewritten)")
    return 0


# -- labels -----------------------------------------------------------------------------------

def _propagate(args: argparse.Namespace) -> int:
    with open_project_from_args(args) as db:
        report = lazy.qrels_propagation.propagate_labels(db, args.chunking, source=args.source, threshold=args.threshold,
                                                         shingle=args.shingle, num_perm=args.num_perm, seed=args.seed, k=args.k,
                                                         dry_run=args.dry_run)
    if args.format == "json":
        print_json(report.as_dict())
    else:
        print(report.summary())
    return 0


def _unpropagate(args: argparse.Namespace) -> int:
    with open_project_from_args(args) as db:
        removed = lazy.qrels_propagation.revert_propagation(db, args.chunking)
    print(f"removed {removed:,} propagated labels of chunking {args.chunking} (direct labels untouched)")
    return 0


def _qrels(args: argparse.Namespace) -> int:
    with open_project_from_args(args) as db:
        counts = lazy.qrels_propagation.export_qrels_with_propagated(db, args.chunking, args.out, source=args.source, queries=args.queries,
                                                                     propagated=not args.no_propagated, force=args.force)
    print(f"wrote {counts['rows']:,} chunk qrels ({counts['propagated']:,} propagated) for {counts['queries']:,} "
          f"{'' if args.queries == 'all' else args.queries + ' '}queries to {args.out}")
    return 0


def _budget(args: argparse.Namespace) -> int:
    if args.out:
        lazy.output_file.check_output(args.out, force=args.force)  # before any work: never a database or a link
    settings = settings_from_args(args) if args.unit != "hours" else None
    with open_project_from_args(args) as db:
        plan = lazy.judge_budget.plan_budget(db, args.pool, budget=args.budget, unit=args.unit, strategy=args.strategy, k=args.k,
                                             threshold=args.threshold, seed=args.seed, seconds_per_pair=args.seconds_per_pair,
                                             settings=settings)
    if args.out:
        lazy.output_file.write_lines(args.out, (json.dumps(r, default=str) + "\n" for r in plan.as_dict()["pairs"]), force=args.force)
    if args.format == "json":
        print_json({k: v for k, v in plan.as_dict().items() if k != "pairs" or not args.out})
    else:
        print(plan.summary() + (f"\nwrote the {plan.selected:,} pairs in judging order to {args.out}"
                                if args.out else ""))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "synth", help="write synthetic questions per chunk (labelled grade 3 on their chunk, tagged synthetic)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=wrapped(
            "An LLM (the judge's client, server and cache; the offline-template baseline, not an LLM, when none "
            "is configured) writes questions each chunk answers; a rewrite step removes phrases copied from the "
            "chunk; the share of the question's content-word n-grams copied from the chunk is measured before and "
            "after; questions still above --max-overlap are flagged. Each question becomes a query tagged "
            "'synthetic' with its chunk's span as a grade-3 label."))
    p.add_argument("--chunking", required=True, metavar="N", help="the chunking whose chunks are the sources")
    p.add_argument("--per-chunk", required=True, type=positive_int, metavar="K", help="questions per chunk")
    p.add_argument("--limit", type=positive_int, metavar="CHUNKS", help="use this many chunks (seeded sample)")
    p.add_argument("--model", metavar="M", help="model (default [judge] model); offline-template for the baseline")
    p.add_argument("--base-url", metavar="U", help="OpenAI-compatible endpoint (default [judge] base_url)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the chunk sample and generation")
    p.add_argument("--max-overlap", type=_fraction, default=0.3, metavar="X",
                   help="flag questions copying more than this share of n-grams after rewriting (default 0.3)")
    p.add_argument("--baseline", action="store_true",
                   help="also print BM25 hit@10 and MRR@10 of the chunking's synthetic questions, original and "
                        "rewritten (table format)")
    add_format_option(p)
    p.set_defaults(handler=_synth)

    labels = sub.add_parser("labels", help="propagate labels to near duplicates; plan judging within a budget")
    lsub = labels.add_subparsers(dest="labels_command", metavar="COMMAND", required=True)

    prop = lsub.add_parser(
        "propagate", help="copy labels to near-duplicate chunks (stored apart, reversible)",
        description=wrapped(
            "Find near-duplicate chunks (MinHash LSH, verified by the exact Jaccard of word shingles), copy each "
            "direct label to the unlabelled near duplicates of its chunk for the same query, store them as "
            "propagated labels (never as direct labels) and report judged@k before/after and the agreement of "
            "propagated with direct grades where both exist."))
    prop.add_argument("--chunking", required=True, metavar="N")
    prop.add_argument("--source", choices=("human", "llm", "merged"), default="human",
                      help="which direct labels to propagate (default human: SME and imported)")
    prop.add_argument("--threshold", type=_fraction, default=0.8, help="Jaccard threshold (default 0.8)")
    prop.add_argument("--shingle", type=positive_int, default=5, help="words per shingle, 1 to 2,147,483,647 (default 5)")
    prop.add_argument("--num-perm", type=positive_int, default=128, help="MinHash permutations, 16 to 4,096 (default 128)")
    prop.add_argument("--seed", type=int, default=1, help="MinHash seed, 0 to 4,294,967,295 (default 1)")
    prop.add_argument("--k", type=positive_int, default=10, help="cutoff of judged@k (default 10)")
    prop.add_argument("--dry-run", action="store_true", help="report without storing")
    add_format_option(prop)
    prop.set_defaults(handler=_propagate)

    unprop = lsub.add_parser("unpropagate", help="remove a chunking's propagated labels")
    unprop.add_argument("--chunking", required=True, metavar="N")
    unprop.set_defaults(handler=_unpropagate)

    qr = lsub.add_parser("qrels", help="chunk qrels with propagated labels (opt-in), real or synthetic queries",
                         description=wrapped(
                             "Write TREC qrels of a chunking: the direct labels of --source, plus the propagated "
                             "labels of items without a direct label (unless --no-propagated); --queries keeps "
                             "real queries only, synthetic ones only (workbench synth), or all."))
    qr.add_argument("--chunking", required=True, metavar="N")
    qr.add_argument("--out", required=True, metavar="FILE", help="file to write (never a database, link or device)")
    qr.add_argument("--force", action="store_true", help="replace FILE if it exists (a regular file only)")
    qr.add_argument("--source", choices=("human", "llm", "merged"), default="merged")
    qr.add_argument("--queries", choices=("all", "real", "synthetic"), default="all")
    qr.add_argument("--no-propagated", action="store_true", help="direct labels only")
    qr.set_defaults(handler=_qrels)

    bud = lsub.add_parser(
        "budget", help="choose the pool pairs to judge first within a budget",
        description=wrapped(
            "Order the pool's unlabelled pairs (pool priority, weight in run comparisons, judge disagreement, "
            "combined, or random) and take them while the budget lasts (judge calls, dollars from the judge's "
            "estimate, or SME hours); report the expected effect on each run's P@k interval."))
    bud.add_argument("--pool", required=True, metavar="P")
    bud.add_argument("--budget", required=True, type=_non_negative, metavar="B", help="budget in --unit")
    bud.add_argument("--unit", choices=("calls", "usd", "hours"), default="calls",
                     help="calls/usd pay the LLM judge, hours pay SMEs (default calls)")
    bud.add_argument("--strategy", choices=("combined", "priority", "comparison", "disagreement", "random"),
                     default="combined")
    bud.add_argument("--k", type=positive_int, default=10, help="cutoff of the runs' P@k (default 10)")
    bud.add_argument("--threshold", type=int, default=2, help="relevant = grade >= this (default 2)")
    bud.add_argument("--seed", type=int, default=0, help="seed of the random strategy")
    bud.add_argument("--seconds-per-pair", type=float, default=30.0, help="SME seconds per pair (hours; default 30)")
    bud.add_argument("--out", metavar="FILE.jsonl", help="write the chosen pairs in judging order")
    bud.add_argument("--force", action="store_true", help="replace FILE.jsonl if it exists (a regular file only)")
    add_format_option(bud)
    bud.set_defaults(handler=_budget)
