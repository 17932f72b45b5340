"""``workbench sweep``: chunkings × retrievers on one set of span labels (:mod:`workbench.services.evaluation.sweep`),
and ``workbench latency import`` for an external run's JSONL sidecar.

``--format json`` prints exactly ``{"cells": [{"chunking", "retriever", "aggregate",
"coverage", "judged@10"}], "winner_by_budget": {BUDGET: {"chunking", "retriever"}}}``; cells
that could not run (dense without sentence-transformers) are left out, with their one-line
reason on stderr. ``--slices BASE,OTHER`` adds a ``"slices"`` key.
"""

from __future__ import annotations

import argparse
import math
import sys

from workbench.cli import lazy
from workbench.cli.common import (
    add_format_option,
    add_progress_option,
    exit_codes_epilog,
    number,
    open_project_from_args,
    print_json,
    progress_from_args,
    wrapped,
)
from workbench.errors import InputError


def _cell_key(text: str) -> tuple[str, str]:

    spec, sep, retriever = text.rpartition("/")
    if not sep or not spec or not retriever:
        raise InputError(f"--slices takes two cells as SPEC/RETRIEVER, e.g. fixed:512/bm25,fixed:512/hybrid; got {text!r}")
    return spec, retriever


def _run(args: argparse.Namespace) -> int:

    chunkings, retrievers = lazy.evaluation_sweep.parse_grid(args.chunkings, args.retrievers)
    budgets = lazy.core_rag_context_budget.parse_budgets(args.budgets)
    if not args.measure:
        raise InputError("give at least one measure, e.g. -m ndcg@10 -m recall@10")

    backend = args.backend or lazy.retrieval_runs.default_dense_backend()
    if backend == "torch" and args.precision != "fp32":
        raise InputError(f"--precision {args.precision} applies to --backend onnx only; add --backend onnx")
    slice_pair = None
    if args.slices:
        parts = [p for p in args.slices.split(",") if p.strip()]
        if len(parts) != 2:
            raise InputError("--slices takes exactly two cells: BASE,OTHER as SPEC/RETRIEVER")
        slice_pair = [_cell_key(p.strip()) for p in parts]
    db = open_project_from_args(args)
    try:
        result = lazy.evaluation_sweep.run_sweep(db, chunkings, retrievers, args.measure, budgets=budgets, labels=args.labels,
                                                 rel=args.rel, pool=args.pool, progress=progress_from_args(args), backend=backend,
                                                 precision=args.precision, device=args.device, notify=lambda line: print(line, file=sys.stderr))
        slices = None
        if slice_pair:
            by_key = {(c.chunking, c.retriever): c for c in result.cells}
            missing = [f"{s}/{r}" for s, r in slice_pair if (s, r) not in by_key or by_key[(s, r)].skipped]
            if missing:
                raise InputError(f"--slices names cell {missing[0]} which is not in the grid (or was skipped)")
            base, other = (by_key[k] for k in slice_pair)
            slices = lazy.evaluation_sweep.slice_lift(base, other, args.measure[0], lazy.tags.query_tags(db))
    finally:
        db.close()
    for cell in result.cells:
        if cell.skipped:
            print(cell.skipped, file=sys.stderr)
    if result.statement:
        print(f"qrels: {result.statement}", file=sys.stderr)
    counted = sorted({c.queries for c in result.cells if not c.skipped})
    if counted:
        print(f"queries: every column (measures, coverage, judged@10) averages over the "
              f"{' / '.join(map(str, counted))} queries the evaluation scores (unanswerable and synthetic "
              f"queries and queries without a relevant label are left out)", file=sys.stderr)
    if args.format == "json":
        out = result.as_json()
        if slices is not None:
            out["slices"] = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
                             for row in slices.to_dict("records")]
        print_json(out)
        return 0
    header = ["chunking", "retriever", *result.measures, *[f"cov@{b}" for b in budgets], "judged@10",
              "p50 ms", "p95 ms", "run"]
    rows = [header]
    for c in result.cells:
        if c.skipped:
            continue
        rows.append([c.chunking, c.retriever, *[number(c.aggregate.get(m)) for m in result.measures],
                     *[number(c.coverage.get(b)) for b in budgets], number(c.judged),
                     number(c.latency_p50, digits=2), number(c.latency_p95, digits=2),
                     c.run + (" (reused)" if c.reused else "")])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for r in rows:
        print("  ".join(v.ljust(w) if i < 2 or i == len(r) - 1 else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))).rstrip())
    print()
    for b, c in result.winners().items():
        print(f"winner at {b} tokens: {c.chunking} × {c.retriever} (coverage {number(c.coverage[b])})")
    low = [c for c in result.cells if not c.skipped and c.judged < lazy.evaluation_sweep.LOW_JUDGED]
    for c in low:
        pairs = c.unjudged
        print(f"\n{c.chunking} × {c.retriever}: judged@10 = {number(c.judged)}; {len(pairs)} unjudged top-10 pairs "
              f"to pool and judge" + ("" if args.pool else " (add them: --pool NAME)"))
        for row in pairs.head(args.list_pairs).itertuples(index=False):
            print(f"  {row.query_id}\t{row.chunk_id}\trank {row.rank}")
        if len(pairs) > args.list_pairs:
            print(f"  ... and {len(pairs) - args.list_pairs} more")
    for name, runs in result.pools.items():
        print(f"added to pool {name}: {', '.join(runs)} (judge it: `workbench judge --pool {name}`)")
    if slices is not None:
        print(f"\nslices by query tag, {args.measure[0]}: {args.slices.split(',')[1]} over {args.slices.split(',')[0]} "
              f"(paired randomization test, seed 0)")
        for row in slices.itertuples(index=False):
            print(f"  {row.tag:<24} n={row.queries:<4} base {number(row.base)}  other {number(row.other)}  "
                  f"lift {number(row.lift, signed=True)}  p={number(row.p_value)}")
    return 0


def _import_latency(args: argparse.Namespace) -> int:
    db = open_project_from_args(args)
    try:
        n = lazy.retrieval_latency.import_latencies(db, args.run, args.file)
        summary = lazy.retrieval_latency.latency_summary(db, [args.run])
    finally:
        db.close()
    row = summary.iloc[0]
    print(f"stored {n} latencies for run {args.run}: p50 {row['p50_ms']:.2f} ms, p95 {row['p95_ms']:.2f} ms")
    return 0


def _retrievers_help() -> str:
    """The retrievers a sweep runs, from the registry: ``bm25, dense, hybrid (over the bm25 and dense runs)``."""

    return ", ".join(name + (f" (over the {' and '.join(lazy.retrieval_registry.RETRIEVERS[name].sweep)} runs)" if lazy.retrieval_registry.RETRIEVERS[name].sweep else "")
                     for name in lazy.retrieval_registry.sweep_retrievers())


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="chunkings × retrievers on the same span labels: quality, coverage at a token budget, judged@10, latency",
        description=wrapped(
            "Chunk the corpus every way listed (reusing a chunking with the same definition), run each retriever, "
            "score every cell against chunk qrels derived from the same span labels, and report the share of gold "
            "characters each configuration puts into a context of B tokens (fair across chunk sizes). Runs are "
            "stored as sweep.<chunking>.<retriever>; a re-run reuses finished cells, chunkings and embeddings. "
            "SPEC: fixed:SIZE or fixed:SIZE:OVERLAP (tokens), section, sentences, document."),
        epilog=exit_codes_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--chunkings", required=True, metavar="SPEC[,SPEC...]", help="e.g. fixed:256,fixed:512:64,section")
    p.add_argument("--retrievers", required=True, metavar="R[,R...]", help=_retrievers_help())
    p.add_argument("-m", "--measure", action="append", default=[], metavar="MEASURE",
                   help="a measure, repeatable, e.g. ndcg@10, recall@10")
    p.add_argument("--rel", type=int, default=1, metavar="N", help="relevance threshold on grades (default 1)")
    p.add_argument("--budgets", default=None, metavar="B[,B...]",
                   help="context budgets in tokens (default 1000,2000,4000,8000)")
    p.add_argument("--labels", choices=("human", "llm", "merged"), default="merged",
                   help="which labels make the qrels and gold spans (default merged)")
    p.add_argument("--pool", default=None, metavar="NAME",
                   help="add the runs of cells with judged@10 below 0.8 to pool NAME.<chunking> to judge their new pairs")
    p.add_argument("--slices", default=None, metavar="BASE,OTHER",
                   help="per query tag: lift of cell OTHER over BASE (SPEC/RETRIEVER) on the first measure, paired test")
    p.add_argument("--backend", choices=("torch", "onnx"), default=None,
                   help="dense encoder: onnx (ONNX Runtime, the onnx extra; see --precision) or torch (sentence-transformers); "
                        "each has its own embedding cache (default onnx where the onnx extra is installed, else torch)")
    p.add_argument("--precision", choices=("fp32", "int8-safe", "int8"), default="fp32",
                   help="onnx only: fp32 (default, same vectors as torch), int8-safe (per-token int8, cosine "
                        ">= 0.999 with torch) or int8 (fastest, cosine ~0.98); each has its own embedding cache")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="cpu",
                   help="dense encoder device: cpu (default), cuda, or auto (cuda when available)")
    p.add_argument("--list-pairs", type=int, default=10, metavar="N", help="unjudged pairs listed per low cell (default 10)")
    add_format_option(p)
    add_progress_option(p)
    p.set_defaults(handler=_run)

    lat = sub.add_parser(
        "latency",
        help="import per-query latencies of an external run from a JSONL sidecar",
        description=wrapped("Store per-query latencies for a stored run from a JSONL file with one "
                            '{"query_id": ..., "latency_ms": ...} object per line; reports then show p50/p95.'),
        epilog=exit_codes_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lat.add_argument("action", choices=("import",))
    lat.add_argument("--run", required=True, help="the stored run the latencies belong to")
    lat.add_argument("file", help="JSONL file of {query_id, latency_ms}")
    lat.set_defaults(handler=_import_latency)
