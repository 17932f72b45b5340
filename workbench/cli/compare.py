"""``workbench compare`` (paired significance tests between runs) and ``workbench citations``.

``workbench compare QRELS RUN RUN [RUN ...] -m MEASURE [-m ...]`` scores every run per query
with :func:`workbench.core.evaluation.evaluate`, then compares each run with the first (the
baseline) via :func:`workbench.core.comparison.compare_runs`. Runs are named by file stem
(``bm25.run`` -> ``bm25``); a repeated stem gets a ``#2``, ``#3`` suffix.

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
                       "p_adjusted": float, "wins": int, "ties": int, "losses": int}]
    }

``delta = run_mean - baseline_mean``; NaN values are written as ``null``.

``workbench citations ANSWERS.jsonl [--pattern NAME|REGEX] [--resolve id|position]`` reads
one JSON object per line with ``answer`` (str), ``context_ids`` (list) and optionally
``query_id`` and ``relevant_ids``, and prints the batch aggregate of
:func:`workbench.core.citations.evaluate_batch` (JSON: ``{"aggregate": {...},
"answers": [{per-answer report}]}``).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError, InputError

DEFAULT_RESAMPLES = 10_000


# --- compare ---------------------------------------------------------------------------
def _run_names(paths: list[str]) -> list[str]:
    """Short distinct run names: the file stem, or as many parent folders as needed to tell
    the runs apart (``a/run.txt``, ``b/run.txt`` -> ``a``, ``b``); ``#2``... if paths repeat."""
    parts = [Path(p).with_suffix("").parts or (p,) for p in paths]
    depth = 1
    while True:
        names = ["/".join(pp[-depth:]) for pp in parts]
        if len(set(names)) == len(names) or all(depth >= len(pp) for pp in parts):
            break
        depth += 1
    if depth > 1 and len({pp[-1] for pp in parts}) == 1:
        # Same file name in different folders (runs/BM25/top100.txt): the folders are the names.
        folders = ["/".join(pp[-depth:-1]) for pp in parts]
        if all(folders) and len(set(folders)) == len(folders):
            names = folders
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return unique


def _compare(args: argparse.Namespace) -> int:
    from workbench.core.comparison import compare_runs
    from workbench.core.evaluation import evaluate

    if len(args.runs) < 2:
        raise ConfigError("compare needs at least two run files (the baseline first)")
    if args.resamples < 1:
        raise ConfigError(f"--resamples must be at least 1, got {args.resamples}")
    for path in [args.qrels, *args.runs]:
        if not Path(path).is_file():
            raise InputError("no such file", path=path)
    measures = list(dict.fromkeys(args.measure))
    names = _run_names(args.runs)
    # evaluate() scores a query missing from a run as 0 (trec_eval -c), so all tables
    # normally share the qrels' queries; those zeros are reported, not hidden.
    results = {
        name: evaluate(args.qrels, path, measures, rel=args.rel)
        for name, path in zip(names, args.runs)
    }
    missing = {name: list(res.missing_from_run) for name, res in results.items()}
    tables = {name: res.per_query for name, res in results.items()}
    # Columns are labelled as given; only the requested ones (not e.g. RBP residuals).
    result = compare_runs(
        tables, measures, test=args.test, seed=args.seed, n_resamples=args.resamples
    )
    if args.format == "json":
        meta = result.metadata()
        meta.update(
            missing_from_run=missing,
            run_files=dict(zip(names, args.runs)),
            qrels=args.qrels,
            rel=args.rel,
        )
        rows = result.table.to_dict(orient="records")
        print(json.dumps(_jsonable({"metadata": meta, "comparisons": rows}), indent=2))
    else:
        print(_format_table(result, missing))
    return 0


def _jsonable(value: Any) -> Any:
    """Plain JSON types: numpy scalars to Python, NaN to None (JSON has no NaN)."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _num(x: float, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def _pval(p: float) -> str:
    if math.isnan(p):
        return "-"
    return f"{p:.4f}" if p >= 1e-3 else f"{p:.1e}"


def _format_table(result, missing: dict[str, list[str]]) -> str:
    level = round(result.confidence * 100)
    lines = [
        f"baseline: {result.baseline}   queries: {result.n_common_queries}   "
        f"test: {result.test}   resamples: {result.n_resamples}   seed: {result.seed}",
    ]
    for run, dropped in result.dropped_queries.items():
        if dropped:
            shown = ", ".join(dropped[:5]) + (" ..." if len(dropped) > 5 else "")
            lines.append(f"note: {len(dropped)} queries of {run} not in every run, left out: "
                         f"{shown}")  # fmt: skip
    for run, queries in missing.items():
        if queries:
            lines.append(f"note: {run} returned nothing for {len(queries)} queries, scored 0")
    for measure, dropped in result.nan_dropped.items():
        if dropped:
            lines.append(f"note: {measure}: {len(dropped)} queries with an undefined score "
                         "left out")  # fmt: skip
    header = ["measure", "run", "base mean", "run mean", "delta", f"{level}% CI", "p", "p (BH)",
              "W/T/L"]  # fmt: skip
    body = [
        [
            row.measure,
            row.run,
            _num(row.baseline_mean),
            _num(row.run_mean),
            _num(row.delta, signed=True),
            f"[{_num(row.ci_low, True)}, {_num(row.ci_high, True)}]",
            _pval(row.p_value),
            _pval(row.p_adjusted),
            f"{row.wins}/{row.ties}/{row.losses}",
        ]
        for row in result.table.itertuples(index=False)
    ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines.append("")
    for r in [header, *body]:
        # Text columns left-aligned, numbers right-aligned so decimals line up.
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))]
        lines.append("  ".join(cells).rstrip())
    lines.append("")
    lines.append(
        f"delta = run - baseline; CI: paired percentile bootstrap; p (BH): Benjamini-Hochberg "
        f"over {len(body)} comparison(s); W/T/L: per-query wins/ties/losses"
    )
    return "\n".join(lines)


# --- citations -------------------------------------------------------------------------
def _read_jsonl(path: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, one per non-blank line (errors name file and line)."""
    from workbench.core.formats.lines import decode_utf8, read_json_objects

    file = Path(path)
    if not file.is_file():
        raise InputError("no such file", path=path)
    return [record for _, record in read_json_objects(decode_utf8(file.read_bytes(), path), path)]


def _citations(args: argparse.Namespace) -> int:
    from workbench.core.citations import evaluate_batch

    batch = evaluate_batch(_read_jsonl(args.answers), args.pattern, resolve=args.resolve)
    if args.format == "json":
        answers = batch.per_answer.to_dict(orient="records")
        print(json.dumps(_jsonable({"aggregate": batch.aggregate, "answers": answers}), indent=2))
        return 0
    agg = batch.aggregate
    print(f"answers: {agg['n_answers']}   pattern: {agg['pattern']} (resolve by {agg['resolve']})")
    print(f"  without citations    {agg['n_no_citations']:>8}")
    print(f"  with invalid refs    {agg['n_with_invalid']:>8}")
    invalid = agg["invalid_citations"]
    print(f"  citations            {agg['total_citations']:>8}  ({invalid} invalid)")
    print(f"  faithfulness (mean)  {_num(agg['mean_faithfulness']):>8}  (answers with citations)")
    print(f"  faithfulness (micro) {_num(agg['micro_faithfulness']):>8}")
    print(f"  coverage (mean)      {_num(agg['mean_coverage']):>8}")
    if not math.isnan(agg["mean_relevant_coverage"]):
        print(f"  relevant coverage    {_num(agg['mean_relevant_coverage']):>8}")
    if agg["n_answers"] and agg["total_citations"] == 0:
        print("note: no citation matched; check --pattern against a sample answer")
    return 0


def register_compare(sub: argparse._SubParsersAction) -> None:
    """Add ``compare`` and ``citations`` to the ``workbench`` sub-commands."""
    from workbench.core.citations import PRESETS
    from workbench.core.significance import TESTS

    p = sub.add_parser(
        "compare",
        help="paired significance tests of runs against a baseline",
        description="Compare runs per query against the first run (the baseline): mean delta, "
        "bootstrap CI, paired test p-value (Benjamini-Hochberg adjusted across all "
        "comparisons) and per-query wins/ties/losses.",
    )
    p.add_argument("qrels", metavar="QRELS", help="TREC qrels file")
    p.add_argument("runs", metavar="RUN", nargs="+",
                   help="TREC run files; the first is the baseline")  # fmt: skip
    p.add_argument("-m", "--measure", action="append", required=True, metavar="MEASURE",
                   help="measure to compare, e.g. ndcg@10 (repeatable)")  # fmt: skip
    p.add_argument("--rel", type=int, default=1, metavar="N",
                   help="minimum grade counted as relevant by binary measures "
                   "(default 1)")  # fmt: skip
    p.add_argument("--test", choices=TESTS, default="randomization",
                   help="paired test (default randomization)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0,
                   help="random seed, reported in the output (default 0)")  # fmt: skip
    p.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES, metavar="N",
                   help="resamples for the test and the bootstrap CI "
                   f"(default {DEFAULT_RESAMPLES})")  # fmt: skip
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.set_defaults(handler=_compare)

    c = sub.add_parser(
        "citations",
        help="check the citations of generated answers against their context",
        description="Per answer: citations that point into the context (faithfulness) and "
        "the share of context cited (coverage). Input: JSONL with answer, context_ids and "
        "optionally query_id, relevant_ids.",
    )
    c.add_argument("answers", metavar="ANSWERS.jsonl")
    c.add_argument("--pattern", default="doc_id", metavar="NAME|REGEX",
                   help=f"preset ({', '.join(PRESETS)}) or a regex with one capturing group "
                   "(default doc_id)")  # fmt: skip
    c.add_argument("--resolve", choices=("id", "position"), default=None,
                   help="match tokens to context ids, or as 1-based positions (default: "
                   "position for numeric, id otherwise)")  # fmt: skip
    c.add_argument("--format", choices=("table", "json"), default="table")
    c.set_defaults(handler=_citations)

