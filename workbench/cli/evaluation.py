"""``workbench eval``: score runs against qrels with the bundled metric engine.

``workbench eval QRELS RUN [RUN ...] -m MEASURE [-m MEASURE ...] [--rel N] [--per-query]
[--distribution] [--format table|tsv|json]`` plus the convention switches ``--condensed``,
``--include-no-relevant``, ``--drop-missing`` and ``--keep-first-duplicate`` (see
:mod:`workbench.evaluation`).

Runs are named by file stem (``bm25.run`` -> ``bm25``); a repeated stem gets ``#2``, ``#3``
(same rule as ``compare``). Measures are echoed exactly as given. RBP also reports
``<measure>.residual``.

``--format json`` prints::

    {RUN_NAME: {"aggregate": {MEASURE: value},
                "per_query": {QUERY_ID: {MEASURE: value}},
                "counts": {"queries_evaluated": n, "excluded_no_relevant": n,
                           "missing_from_run": n, "only_in_run": n}}}

The JSON shape is a contract (users' CI scripts read it), so it always carries ``per_query``;
``--per-query`` only adds per-query rows to the table and tsv formats. NaN is written as ``null``. ``table`` prints one aligned block per run; ``tsv`` prints
``run<TAB>measure<TAB>query_id<TAB>value`` rows with query ``all`` for the mean (like trec_eval).

``--distribution`` adds, per run and measure, the per-query distribution of
:func:`workbench.core.distribution.summarize` (NaN scores left out): ``mean``, ``median``,
``p10`` (10th percentile, linear interpolation), ``zeros`` (share of queries scoring exactly 0,
in [0, 1]) and ``n`` (queries with a defined score). JSON gets one more key per run,
``"distribution": {MEASURE: {"mean", "median", "p10", "zeros", "n"}}`` (the other keys are
unchanged); ``tsv`` gets rows ``run<TAB>MEASURE:STAT<TAB>all<TAB>value`` (e.g.
``ndcg@10:median``; ``n`` as an integer) after each measure's mean; ``table`` gets a
``distribution`` block per run.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from workbench.errors import ConfigError


def _run_names(paths: list[str]) -> list[str]:
    names: list[str] = []
    for path in paths:
        stem = Path(path).stem or path
        name, k = stem, 1
        while name in names:
            k += 1
            name = f"{stem}#{k}"
        names.append(name)
    return names


def _clean(x: float) -> float | None:
    x = float(x)
    return None if math.isnan(x) else x


def _eval(args: argparse.Namespace) -> int:
    from workbench.core.measures import parse_measures
    from workbench.core.readers import read_qrels, read_trec_run
    from workbench.core.evaluation import evaluate

    if not args.measure:
        raise ConfigError("give at least one measure, e.g. -m ndcg@10 -m recall@100")
    parse_measures(args.measure)  # fail on a bad name before reading any file
    qrels = read_qrels(args.qrels)
    results = {}
    for name, path in zip(_run_names(args.runs), args.runs):
        results[name] = evaluate(
            qrels,
            read_trec_run(path, name=name),
            args.measure,
            rel=args.rel,
            condensed=args.condensed,
            include_no_relevant=args.include_no_relevant,
            missing_as_zero=not args.drop_missing,
            duplicates="first" if args.keep_first_duplicate else "error",
        )
    if args.format == "json":
        out = {}
        for name, res in results.items():
            entry: dict = {"aggregate": {m: _clean(v) for m, v in res.aggregate.items()}}
            entry["per_query"] = {
                qid: {m: _clean(v) for m, v in row.items()}
                for qid, row in res.per_query.to_dict(orient="index").items()
            }
            entry["counts"] = res.counts()
            if args.distribution:
                entry["distribution"] = {
                    m: {k: _clean(v) if k != "n" else v for k, v in row.items()}
                    for m, row in _distribution(res).items()
                }
            out[name] = entry
        print(json.dumps(out, indent=2))
    elif args.format == "tsv":
        lines = ["run\tmeasure\tquery_id\tvalue"]
        for name, res in results.items():
            dist = _distribution(res) if args.distribution else {}
            for m in res.per_query.columns:
                if args.per_query:
                    lines += [f"{name}\t{m}\t{q}\t{v:.6f}" for q, v in res.per_query[m].items()]
                lines.append(f"{name}\t{m}\tall\t{res.aggregate[m]:.6f}")
                if args.distribution:
                    for stat, v in dist[m].items():
                        value = str(v) if stat == "n" else f"{v:.6f}"
                        lines.append(f"{name}\t{m}:{stat}\tall\t{value}")
        print("\n".join(lines))
    else:
        print(_table(results, args.per_query, args.distribution))
    return 0


DISTRIBUTION_STATS = ("mean", "median", "p10", "zeros", "n")


def _distribution(res) -> dict[str, dict[str, float | int]]:
    """{measure: {mean, median, p10, zeros, n}} of the per-query scores (NaN left out)."""
    from workbench.core.distribution import summarize_table

    table = summarize_table(res.per_query)
    return {
        str(m): {"mean": float(row["mean"]), "median": float(row["median"]),
                 "p10": float(row["p10"]), "zeros": float(row["share_zero"]),
                 "n": int(row["count"])}  # fmt: skip
        for m, row in table.iterrows()
    }


def _table(results: dict, per_query: bool, distribution: bool = False) -> str:
    blocks = []
    for name, res in results.items():
        c = res.counts()
        head = (
            f"run: {name}   queries: {c['queries_evaluated']}   "
            f"excluded (no relevant): {c['excluded_no_relevant']}   "
            f"missing from run: {c['missing_from_run']}   only in run: {c['only_in_run']}"
        )
        width = max(len(m) for m in res.per_query.columns)
        rows = [f"  {m:<{width}}  {res.aggregate[m]:.4f}" for m in res.per_query.columns]
        if per_query:
            for qid, row in res.per_query.iterrows():
                rows += [f"  {m:<{width}}  {v:.4f}  {qid}" for m, v in row.items()]
        if distribution:
            rows += _distribution_rows(_distribution(res))
        blocks.append("\n".join([head, *rows]))
    return "\n\n".join(blocks)


def _distribution_rows(dist: dict[str, dict[str, float | int]]) -> list[str]:
    width = max([len("distribution"), *(len(m) for m in dist)])
    rows = ["", f"  {'distribution':<{width}}  " + "  ".join(f"{s:>6}" for s in DISTRIBUTION_STATS)]
    for m, stats in dist.items():
        cells = [f"{v:>6}" if s == "n" else f"{v:.4f}" for s, v in stats.items()]
        rows.append(f"  {m:<{width}}  " + "  ".join(cells))
    return rows


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="score runs against qrels (trec_eval-compatible measures)",
        description="Score TREC runs against qrels. Conventions: see workbench.evaluation.",
    )
    p.add_argument("qrels", metavar="QRELS", help="qrels: TREC, BEIR TSV or JSONL")
    p.add_argument("runs", metavar="RUN", nargs="+", help="TREC run file(s)")
    p.add_argument(
        "-m", "--measure", action="append", default=[], metavar="MEASURE",
        help="measure, repeatable: ndcg@10, P@10, R(rel=2)@100, AP, RR@10, RBP(p=0.8), ...",
    )
    p.add_argument("--rel", type=int, default=1, metavar="N", help="relevant <=> grade >= N (default 1)")
    p.add_argument("--per-query", action="store_true", help="also print per-query values")
    p.add_argument(
        "--distribution", action="store_true",
        help="also print each measure's per-query distribution: mean, median, p10, share of zeros, n",
    )
    p.add_argument("--format", choices=["table", "tsv", "json"], default="table")
    p.add_argument("--condensed", action="store_true", help="drop unjudged docs first (trec_eval -J)")
    p.add_argument(
        "--include-no-relevant", action="store_true",
        help="score queries without relevant docs (0) instead of excluding them (trec_eval default)",
    )
    p.add_argument(
        "--drop-missing", action="store_true",
        help="average over queries in both qrels and run (pytrec_eval) instead of scoring missing ones 0",
    )
    p.add_argument(
        "--keep-first-duplicate", action="store_true",
        help="keep the first of a repeated doc in a query instead of failing",
    )
    p.set_defaults(handler=_eval)
    try:
        from workbench.cli.compare import register_compare
    except ImportError:
        return
    register_compare(sub)
