"""``workbench eval``: score run files against qrels (:mod:`workbench.services.evaluation.evaluate`).

``--format json`` prints, per run::

    {RUN_NAME: {"aggregate": {MEASURE: value},
                "per_query": {QUERY_ID: {MEASURE: value}},
                "counts": {"queries_evaluated": n, "excluded_no_relevant": n,
                           "missing_from_run": n, "only_in_run": n},   # --runs adds
                           # "excluded_unanswerable": n (unanswerable queries left out on purpose)
                "counts_by_measure": {MEASURE: {"rel": n, "queries_evaluated": n,   # only with
                                                "excluded_no_relevant": n,          # several
                                                "missing_from_run": n}},            # thresholds
                "distribution": {MEASURE: {"mean", "median", "p10", "zeros", "n"}}}}  # --distribution

The JSON shape is a contract (users' CI scripts read it): ``per_query`` is always there. When
every measure uses the same relevance threshold (the usual case) the keys are exactly
``aggregate``, ``per_query``, ``counts`` (+ ``distribution``), as before per-measure thresholds
existed. When measures use different thresholds (``-m AP -m "AP(rel=2)"``), ``counts`` counts
the union (a query scored by any measure; excluded = excluded by every measure) and
``counts_by_measure`` gives each measure's own counts; a measure's value for a query it
excludes is ``null``.
``tsv`` prints ``run<TAB>measure<TAB>query_id<TAB>value`` rows with query ``all`` for the mean
(like trec_eval), and ``MEASURE:STAT`` rows for ``--distribution``.
"""

from __future__ import annotations

import argparse
import sys

from workbench.cli import lazy
from workbench.cli.common import (
    add_format_option,
    add_measure_options,
    add_stored_run_options,
    exit_codes_epilog,
    names_option,
    number,
    open_project_from_args,
    print_json,
    settings_from_args,
    wrapped,
)
from workbench.cli.ppi import ppi_table
from workbench.errors import ConfigError

CONVENTIONS = """\
conventions:
  ranking      Documents are ranked by score, highest first; ties (equal scores) are broken
               by document id, descending (as trec_eval). The rank column of the run is ignored.
  relevance    A document is relevant when its grade is at least the threshold (--rel, or a
               measure's own rel=N as in P(rel=2)@10). nDCG and ERR use the grades themselves.
               A grade below 0 means "pooled but not judged".
  queries      A query of the qrels without any relevant document (at the measure's
               threshold) is left out of that measure's mean and counted as excluded; with
               --include-no-relevant it is scored (0 for most measures), as trec_eval does.
               A query of the qrels that the run does not answer scores 0 (trec_eval -c);
               with --drop-missing it is left out instead. Queries only in the run are ignored
               and counted.
  cutoffs      P@k divides by k even when fewer documents were returned; recall@k and AP
               divide by the number of relevant documents; nDCG's ideal ranking uses every
               judged grade of the query. RR without @k looks at the whole ranking.
  duplicates   A document listed twice for one query is an error naming the line, unless
               --keep-first-duplicate.
  run names    Each run is named by its file name without extension; runs with the same
               name get parent folders added until the names differ (x/a/run.txt,
               x/b/run.txt -> a/run, b/run); the same file twice becomes NAME, NAME#2.
  files        QRELS: TREC (query_id iteration doc_id grade), BEIR (tab-separated query-id,
               corpus-id, score) or JSONL. RUN: TREC (query_id Q0 doc_id rank score tag).
               Lines starting with # are comments; a UTF-8 byte-order mark is ignored.
  refused      An empty run, a run with no query in common with the qrels, a run none of whose
               retrieved ids is in the qrels (e.g. chunk ids against document qrels; when only
               some queries retrieve nothing judged, a warning names them), a threshold that
               excludes every query, a non-finite score (nan, inf) and anything that is not a
               regular file end with exit status 3 and one line naming the file and line.

"""


def _eval(args: argparse.Namespace) -> int:
    if args.stored_runs is not None and args.labels == "corrected":
        return corrected_command(args)
    if args.stored_runs is not None:
        results = _eval_project(args)
    elif not args.qrels or not args.runs:
        raise ConfigError("give a QRELS file and RUN files, or --runs NAMES to score the project's stored runs")
    else:
        results = lazy.evaluation_evaluate.evaluate_files(
            args.qrels, args.runs, args.measure, rel=args.rel, condensed=args.condensed,
            include_no_relevant=args.include_no_relevant, missing_as_zero=not args.drop_missing,
            duplicates="first" if args.keep_first_duplicate else "error",
        )
    _warn_unjudged(results)
    dists = {name: lazy.evaluation_evaluate.distributions(res) for name, res in results.items()} if args.distribution else {}
    if args.format == "json":
        print_json({name: _json_entry(res, dists.get(name)) for name, res in results.items()})
    elif args.format == "tsv":
        print("\n".join(_tsv(results, dists, args.per_query)))
    else:
        print("\n\n".join(_table(name, res, dists.get(name), args.per_query) for name, res in results.items()))
    return 0


def corrected_command(args: argparse.Namespace, *, confidence: float = 0.95) -> int:
    """``eval/compare --runs A,B --labels corrected``: PPI++ estimates of the stored runs' means
    and differences from the first (services.evaluation.ppi_project); JSON is ``workbench ppi``'s
    object plus ``labels``, ``sample``, ``seed``, ``queries_drawn``."""

    if getattr(args, "qrels", None) or getattr(args, "runs", None):
        raise ConfigError("--runs scores the project's stored runs; give either --runs or QRELS RUN files, not both")
    if args.format not in ("table", "json"):
        raise ConfigError("--labels corrected prints a table or JSON; pass --format table or --format json")
    unsupported = [flag for flag, attr in (("--condensed", "condensed"), ("--drop-missing", "drop_missing"),
                                           ("--distribution", "distribution"), ("--per-query", "per_query"),
                                           ("--include-no-relevant", "include_no_relevant"))
                   if getattr(args, attr, False)]
    if unsupported:  # every query is scored (0 without a relevant item), missing ones 0, as `workbench ppi`
        raise ConfigError(f"{unsupported[0]} does not apply to --labels corrected (its values are those of "
                          f"`workbench ppi`); drop it")
    db = open_project_from_args(args)
    try:
        done = lazy.evaluation_ppi_project.corrected_project(db, names_option(args.stored_runs, "--runs"), args.measure, level=args.level,
                                                             chunking=args.chunking, rel=args.rel, confidence=confidence,
                                                             judge=getattr(args, "judge", None))
    finally:
        db.close()
    print(done.statement(), file=sys.stderr)
    if args.format == "json":
        print_json(done.to_json())
    else:
        print(f"{done.status.labelled} labelled queries (query sample {done.status.sample!r}), "
              f"{done.report.n_unlabelled} judged only; judge configuration {done.judge.label}")
        print(ppi_table(done.report))
    return 0


def _warn_unjudged(results: dict) -> None:
    """One stderr line per run where some (not all: that is refused) shared queries retrieve no
    id the qrels judge: those queries score 0 whatever the run did."""

    for name, res in results.items():
        lacking = getattr(res, "no_judged_retrieved", ())
        if lacking:
            print(f"warning: run {name}: {len(lacking):,} of the {res.n_common:,} queries it shares with the qrels "
                  f"retrieve no id the qrels judge (e.g. {', '.join(lacking[:3])}); they score 0; check that the "
                  f"run and the qrels use the same ids", file=sys.stderr)


def _eval_project(args: argparse.Namespace) -> dict:
    """``eval --runs A,B``: stored runs against the project's qrels (services.evaluation).
    The qrels policy and notes go to stderr so stdout keeps the file mode's shape."""

    if args.qrels or args.runs:
        raise ConfigError("--runs scores the project's stored runs; give either --runs or QRELS RUN files, not both")
    db = open_project_from_args(args)
    try:
        done = lazy.evaluation_evaluate.evaluate_project(db, names_option(args.stored_runs, "--runs"), args.measure, labels=args.labels,
                                                         level=args.level, chunking=args.chunking, rel=args.rel, condensed=args.condensed,
                                                         include_no_relevant=args.include_no_relevant, missing_as_zero=not args.drop_missing,
                                                         settings=settings_from_args(args))
    finally:
        db.close()
    lines = [done.qrels.statement(), *(f"note: {n}" for n in done.notes),
             f"stored as evaluation {done.evaluation_id} (qrels fingerprint {done.qrels.fingerprint})"]
    print("\n".join(lines), file=sys.stderr)
    return done.results


def _json_entry(res, dist: dict | None) -> dict:
    columns = list(res.scores)
    entry: dict = {
        "aggregate": dict(res.aggregate),
        "per_query": {qid: {m: float(res.scores[m][i]) for m in columns}
                      for i, qid in enumerate(res.query_ids.tolist())},
        "counts": res.counts(),
    }
    if not res.single_threshold:
        entry["counts_by_measure"] = res.counts_by_measure()
    if dist is not None:
        entry["distribution"] = dist
    return entry


def _tsv(results: dict, dists: dict, per_query: bool) -> list[str]:
    lines = ["run\tmeasure\tquery_id\tvalue"]
    for name, res in results.items():
        qids = res.query_ids.tolist()
        for m, values in res.scores.items():
            if per_query:
                lines += [f"{name}\t{m}\t{q}\t{v:.6f}" for q, v in zip(qids, values.tolist())]
            lines.append(f"{name}\t{m}\tall\t{res.aggregate[m]:.6f}")
            for stat, v in (dists.get(name) or {}).get(m, {}).items():
                lines.append(f"{name}\t{m}:{stat}\tall\t{v if stat == 'n' else f'{v:.6f}'}")
    return lines


def _table(name: str, res, dist: dict | None, per_query: bool) -> str:
    c = res.counts()
    lines = [(
        f"run: {name}   queries: {c['queries_evaluated']}   "
        f"excluded (no relevant): {c['excluded_no_relevant']}   "
        f"missing from run: {c['missing_from_run']}   only in run: {c['only_in_run']}"
        + (f"   unanswerable (left out): {c['excluded_unanswerable']}" if "excluded_unanswerable" in c else "")
    )]
    if not res.single_threshold:
        for m, mc in res.counts_by_measure().items():
            lines.append(f"  note: {m} (rel {mc['rel']}): {mc['queries_evaluated']} queries, "
                         f"{mc['excluded_no_relevant']} excluded (no relevant)")
    width = max(len(m) for m in res.scores)
    lines += [f"  {m:<{width}}  {number(res.aggregate[m])}" for m in res.scores]
    if per_query:
        qids = res.query_ids.tolist()
        for i, qid in enumerate(qids):
            lines += [f"  {m:<{width}}  {number(float(v[i]))}  {qid}" for m, v in res.scores.items()]
    if dist:
        stats = ("mean", "median", "p10", "zeros", "n")
        w = max([len("distribution"), *(len(m) for m in dist)])
        lines += ["", f"  {'distribution':<{w}}  " + "  ".join(f"{s:>6}" for s in stats)]
        for m, row in dist.items():
            cells = [f"{row[s]:>6}" if s == "n" else number(row[s]) for s in stats]
            lines.append(f"  {m:<{w}}  " + "  ".join(cells))
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="score run files against qrels (trec_eval-compatible measures)",
        description=wrapped("Score one or more TREC run files against qrels: the mean of each measure "
                    "per run, and optionally per-query values and distributions."),
        epilog=CONVENTIONS + exit_codes_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("qrels", metavar="QRELS", nargs="?", help="judgments: TREC qrels, BEIR TSV or JSONL")
    p.add_argument("runs", metavar="RUN", nargs="*", help="one or more TREC run files")
    add_stored_run_options(p, "comma-separated names of runs stored in the project (see `workbench status`)")
    add_measure_options(p)
    p.add_argument("--per-query", action="store_true",
                   help="also print each query's values (table and tsv; json always has them)")
    p.add_argument("--distribution", action="store_true",
                   help="also print each measure's per-query distribution: mean, median, 10th "
                        "percentile, share of zeros, number of queries")
    add_format_option(p, ("table", "tsv", "json"))
    p.add_argument("--condensed", action="store_true",
                   help="drop unjudged documents from each ranking before scoring (trec_eval -J)")
    p.add_argument("--include-no-relevant", action="store_true",
                   help="score queries without a relevant document (0 for most measures) instead "
                        "of leaving them out (trec_eval's default)")
    p.add_argument("--drop-missing", action="store_true",
                   help="leave out queries the run does not answer (pytrec_eval) instead of "
                        "scoring them 0")
    p.add_argument("--keep-first-duplicate", action="store_true",
                   help="keep the first of a document listed twice for a query instead of failing")
    p.set_defaults(handler=_eval)
