"""Query kinds that one ranked list does not describe: ``workbench abstention``,
``workbench rbac-check``, ``workbench multihop`` and ``workbench answerability``.

Output formats follow ``workbench eval``: ``table`` for people, ``tsv`` rows
``name<TAB>measure<TAB>query_id<TAB>value`` (query ``all`` for the aggregate), and ``json``
``{NAME: {"aggregate": {...}, "per_query": {QUERY_ID: {...}}, "counts": {...}}}``. The one
exception is ``rbac-check --format json``, whose shape is a CI contract::

    {"leaks": N, "roles": {ROLE: {"leaks": N, "rate": x,
                                  "examples": [{"query_id", "doc_id", "chunk_id", "rank"}]}}}

(every leak is listed). ``rbac-check`` exits 0 when nothing leaks, 1 when anything leaks and 2 on
bad input (an unknown run, a malformed ``--runs``, a malformed roles field).
"""

from __future__ import annotations

import argparse
import math
import re
import sys

from workbench.cli import lazy
from workbench.cli.common import (
    add_format_option,
    exit_codes_epilog,
    names_option,
    number,
    open_project_from_args,
    positive_int,
    print_json,
    settings_from_args,
    wrapped,
)
from workbench.errors import ConfigError, WorkbenchError


def _file_bytes(path: str) -> bytes:
    return lazy.core_metrics_readers.check_regular_file(path).read_bytes()


def _finite(text: str) -> float:

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _tsv_value(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if v is None:
        return "nan"
    if isinstance(v, int):
        return str(v)
    return f"{float(v):.6f}"


# --- abstention ---------------------------------------------------------------------------------
def _abstention(args: argparse.Namespace) -> int:
    reports, ranking = [], {}
    with open_project_from_args(args) as db:
        for run in names_option(args.runs, "--runs") if args.runs else []:
            reports.append(lazy.evaluation_abstention.run_abstention(db, run, args.threshold))
            if args.ranking_measures:
                ranking[run] = lazy.evaluation_abstention.answerable_ranking(
                    db, run, names_option(args.ranking_measures, "--ranking-measures"))
        if args.store and len(args.answers or []) != 1:
            raise ConfigError("--store NAME stores one answers file; give exactly one --answers FILE")
        for path in args.answers or []:
            name = lazy.evaluation_evaluate.run_names([path])[0]
            frame = lazy.evaluation_abstention.read_answers_file(path, args.pattern)
            if args.store:
                lazy.evaluation_abstention.store_answers(db, args.store, frame)
                print(f"stored {len(frame)} answers of {path} as {args.store}", file=sys.stderr)
                name = args.store
            reports.append(lazy.evaluation_abstention.answers_abstention(db, name, frame))
        for name in names_option(args.stored_answers, "--stored-answers") if args.stored_answers else []:
            reports.append(lazy.evaluation_abstention.stored_answers_abstention(db, name))
    if not reports:
        raise ConfigError("give --runs RUN[,RUN...], --answers FILE or --stored-answers NAME")
    if args.format == "json":
        out = {r.name: lazy.evaluation_abstention.report_json(r) for r in reports}
        for run, rk in ranking.items():
            out[run]["ranking_answerable"] = {"aggregate": dict(rk.result.aggregate), "counts": rk.counts(),
                                              "excluded_unanswerable": rk.excluded_unanswerable}
        print_json(out)
    elif args.format == "tsv":
        lines = ["run\tmeasure\tquery_id\tvalue"]
        for r in reports:
            for m, v in r.aggregate().items():
                lines.append(f"{r.name}\t{m}\tall\t{_tsv_value(v)}")
            if r.name in ranking and r.kind == "run":
                for m, v in ranking[r.name].result.aggregate.items():
                    lines.append(f"{r.name}\t{m}\tall\t{_tsv_value(v)}")
            if args.per_query:
                for row in r.per_query.itertuples(index=False):
                    lines.append(f"{r.name}\tabstained\t{row.query_id}\t{_tsv_value(bool(row.abstained))}")
        print("\n".join(lines))
    else:
        blocks = []
        for r in reports:
            block = _abstention_table(r, args.per_query)
            rk = ranking.get(r.name) if r.kind == "run" else None
            if rk is not None:
                c = rk.counts()
                block += (f"\n  ranking over answerable queries: {c['queries_evaluated']} scored, "
                          f"{c['excluded_unanswerable']} unanswerable left out, "
                          f"{c['excluded_no_relevant']} without a relevant item")
                block += "".join(f"\n    {m:<12} {number(v)}" for m, v in rk.result.aggregate.items())
            blocks.append(block)
        print("\n\n".join(blocks))
    return 0


def _abstention_table(r, per_query: bool) -> str:
    c = r.counts
    lines = [f"{r.kind}: {r.name}   queries: {c['queries']}   unanswerable: {c['unanswerable']}   "
             f"answerable: {c['answerable']}   without {'results' if r.kind == 'run' else 'an answer'}: {c['missing_from_run']}   only in {r.kind}: {c['only_in_run']}"
             + (f"   synthetic queries left out: {c['synthetic_left_out']}" if c.get("synthetic_left_out") else "")]
    if r.kind == "run":
        how = "given" if r.threshold_source == "given" else "best balanced accuracy on these queries (optimistic)"
        lines.append(f"  abstains when the top score < {r.threshold:.4f} ({how})")
    rates = r.rates
    rows = [
        ("abstention rate (unanswerable)", rates.abstention_rate,
         f"({rates.abstained_unanswerable} of {rates.n_unanswerable})"),
        ("false-abstention rate (answerable)", rates.false_abstention_rate,
         f"({rates.abstained_answerable} of {rates.n_answerable})"),
        ("balanced accuracy", rates.balanced_accuracy, "(0.5 = never or always abstaining)"),
    ]
    if r.auc is not None:
        rows.append(("area under the threshold curve", r.auc, ""))
    lines += [f"  {label:<36}{number(value)}  {note}".rstrip() for label, value, note in rows]
    if per_query:
        for row in r.per_query.itertuples(index=False):
            kind = "unanswerable" if row.unanswerable else "answerable"
            verdict = "abstained" if row.abstained else "answered"
            top = f"  top {number(row.top_score)}" if r.kind == "run" else ""
            lines.append(f"  {row.query_id:<12} {kind:<13} {verdict:<10}{top}{'' if row.correct else '  (wrong)'}")
    return "\n".join(lines)


# --- rbac-check -----------------------------------------------------------------------------------
def _rbac(args: argparse.Namespace) -> int:
    try:
        role_runs = lazy.evaluation_rbac.parse_role_runs(args.runs)
        with open_project_from_args(args) as db:
            report = lazy.evaluation_rbac.rbac_check(db, role_runs, field=args.field, k=args.k)
    except WorkbenchError as exc:
        # bad input is exit 2 here (1 means "leaks"), whatever its usual code
        print(f"workbench rbac-check: error: {exc}", file=sys.stderr)
        return 2
    total = sum(r.n_leaks for r in report.values())
    if args.format == "json":
        print_json(lazy.core_rag_rbac.leakage_json(report))
        return 1 if total else 0
    lines = [f"access check: {total} leak{'s' if total != 1 else ''} "
             f"over {len(report)} role{'s' if len(report) != 1 else ''} (field {args.field!r}"
             f"{f', top {args.k}' if args.k else ''})"]
    for role, r in report.items():
        lines.append(f"  role {role} (run {r.run}): {r.n_leaks} of {r.retrieved} retrieved rows leak, "
                     f"rate {number(r.rate)}")
        leaking = r.per_query[r.per_query["leaks"] > 0]
        by_query = dict(tuple(r.leaks.groupby("query_id", sort=False)))
        for q in leaking.itertuples(index=False):
            lines.append(f"    query {q.query_id}: {q.leaks} of {q.retrieved} rows leak, rate {number(q.rate)}")
            for x in by_query[q.query_id].itertuples(index=False):
                chunk = x.chunk_id if isinstance(x.chunk_id, str) else "-"
                lines.append(f"      rank {x.rank:>4}  {x.doc_id}  {chunk}")
    lines.append("FAIL: restricted content reached a role that may not see it" if total else "OK: no leak")
    print("\n".join(lines))
    return 1 if total else 0


# --- multihop -------------------------------------------------------------------------------------
def _multihop(args: argparse.Namespace) -> int:
    reports = {}
    db = None
    try:
        # the project gives the chains, stored trajectories, and the spans of chunk ids
        if (args.chains is None or args.stored or args.store or args.store_chains
                or settings_from_args(args).db_path.exists()):
            db = open_project_from_args(args)
        if args.store and len(args.trajectories or []) != 1:
            raise ConfigError("--store NAME stores one trajectories file; give exactly one")
        if args.store_chains and not args.chains:
            raise ConfigError("--store-chains stores the file given with --chains; give --chains FILE")
        chains = lazy.evaluation_trajectories.read_chain_file(args.chains) if args.chains else lazy.evaluation_trajectories.stored_chains(db)
        for path in args.trajectories or []:
            name = lazy.evaluation_evaluate.run_names([path])[0]
            reports[name] = lazy.evaluation_trajectories.evaluate(lazy.evaluation_trajectories.read_trajectory_file(path, db), chains, k=args.k)
        for name in names_option(args.stored, "--stored") if args.stored else []:
            reports[name] = lazy.evaluation_trajectories.evaluate(lazy.evaluation_trajectories.stored_trajectories(db, name), chains, k=args.k)
        if args.store_chains:
            n = lazy.evaluation_trajectories.import_chains(db, _file_bytes(args.chains), args.chains, replace=args.replace_chains)
            print(f"stored {n} evidence spans from {args.chains}", file=sys.stderr)
        if args.store:
            lazy.evaluation_trajectories.import_trajectories(db, args.store, _file_bytes(args.trajectories[0]), args.trajectories[0])
            print(f"stored the trajectories of {args.trajectories[0]} as {args.store}", file=sys.stderr)
    finally:
        if db is not None:
            db.close()
    if not reports:
        raise ConfigError("give a trajectories file or --stored NAME")
    if args.format == "json":
        print_json({name: lazy.evaluation_trajectories.report_json(r) for name, r in reports.items()})
    elif args.format == "tsv":
        lines = ["trajectories\tmeasure\tquery_id\tvalue"]
        for name, r in reports.items():
            for m, v in r.aggregate.items():
                lines.append(f"{name}\t{m}\tall\t{_tsv_value(v)}")
            if args.per_query:
                for q, v in r.per_query.items():
                    for m in ("steps", "searches", "decision_correct", "complete", "completed_at", "chain_found"):
                        lines.append(f"{name}\t{m}\t{q}\t{_tsv_value(v[m])}")
                    for h, x in v["hop_recall"].items():
                        lines.append(f"{name}\thop{h}_recall@{r.k}\t{q}\t{_tsv_value(x)}")
        print("\n".join(lines))
    else:
        print("\n\n".join(_multihop_table(name, r, args.per_query) for name, r in reports.items()))
    return 0


def _multihop_table(name: str, r, per_query: bool) -> str:
    c = r.counts
    lines = [f"trajectories: {name}   k: {r.k}   queries: {c['queries']}   with a chain: {c['with_chain']}   "
             f"without: {c['without_chain']}   chains without a trajectory: {c['missing_from_trajectories']}"]
    width = max(len(m) for m in r.aggregate)
    lines += [f"  {m:<{width}}  {number(v)}" for m, v in r.aggregate.items()]
    if per_query:
        for q, v in r.per_query.items():
            hops = " ".join(f"h{h}={x:.2f}" for h, x in v["hop_recall"].items())
            done = f"complete at hop {v['completed_at']}" if v["completed_at"] else (
                "incomplete" if v["needs_search"] else "no chain")
            lines.append(f"  {q:<12} steps {v['steps']}  searches {v['searches']}  {done:<20} "
                         f"decision {'ok' if v['decision_correct'] else 'wrong'}  {hops}")
    return "\n".join(lines)


# --- answerability ------------------------------------------------------------------------------
def _answerability(args: argparse.Namespace) -> int:
    with open_project_from_args(args) as db:
        if args.query_id:
            lazy.qrels_answerability.mark_answerability(db, args.query_id, answerable=args.verdict == "answerable",
                                                        annotator=args.annotator or "", comment=args.comment)
        frame = lazy.qrels_answerability.query_answerability(db)
    if args.format == "json":
        print_json({r.query_id: {"unanswerable": bool(r.unanswerable), "decided_by": r.decided_by}
                    for r in frame.itertuples(index=False)})
        return 0
    marked = frame[frame["unanswerable"]]
    print(f"queries: {len(frame)}   unanswerable: {len(marked)} (excluded from recall@k, MRR and nDCG)")
    for r in marked.itertuples(index=False):
        print(f"  {r.query_id:<12} by {r.decided_by}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser(
        "abstention",
        help="how runs and generated answers abstain on unanswerable queries",
        description=wrapped(
            "Unanswerable queries (tag 'unanswerable' or type 'unanswerable', or an SME decision) are "
            "scored by abstention: a run abstains on a query when its top score is below the "
            "threshold (or it returned nothing); an answer abstains by its 'abstained' flag or when "
            "its text is empty or says it cannot answer. Reports the abstention rate on unanswerable "
            "queries and the false-abstention rate on answerable ones together, with balanced "
            "accuracy (a system that never abstains scores 0.5), and for runs the curve over "
            "thresholds in json."),
        epilog=exit_codes_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    a.add_argument("--runs", metavar="RUN[,RUN...]", help="stored runs to score by their top scores")
    a.add_argument("--threshold", type=_finite, default=None, metavar="X",
                   help="abstain when the top score < X (default: the best balanced accuracy on these "
                        "queries, which is optimistic)")
    a.add_argument("--answers", action="append", metavar="FILE.jsonl",
                   help="generated answers: query_id and 'abstained' (true/false) or 'answer' text; repeatable")
    a.add_argument("--stored-answers", metavar="NAME[,NAME...]", help="answer sets stored in the project")
    a.add_argument("--store", metavar="NAME", help="also store the --answers file in the project under a new name")
    a.add_argument("--pattern", default=None, metavar="REGEX",
                   help="abstention phrases for answers without a flag (default: a built-in list)")
    a.add_argument("--ranking-measures", metavar="M[,M...]",
                   help="also these ranking measures of each run (e.g. recall@10,mrr,ndcg@10) against the "
                        "project's labels, over the answerable queries only (the unanswerable ones counted)")
    a.add_argument("--per-query", action="store_true", help="also each query (table and tsv; json always has them)")
    add_format_option(a, ("table", "tsv", "json"))
    a.set_defaults(handler=_abstention_with_pattern)

    r = sub.add_parser(
        "rbac-check",
        help="check runs recorded per role for restricted content they may not see",
        description=wrapped(
            "For each ROLE=RUN, every retrieved row whose document does not allow the role is a leak. "
            "A document's allowed roles are a list in its metadata field (--field, 'roles' by "
            "default); a document without it is public. Exit 0 when nothing leaks, 1 when anything "
            "leaks, 2 on bad input."),
        epilog="exit status:\n  0    no leak\n  1    at least one leak\n  2    bad input (unknown run, "
               "malformed --runs or roles field)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--runs", required=True, metavar="ROLE=RUN[,ROLE=RUN...]", help="the run each role ran as")
    r.add_argument("--field", default="roles", metavar="NAME", help="document metadata field with the allowed roles")
    r.add_argument("--k", type=positive_int, default=None, metavar="N", help="look only at the top N of each query")
    add_format_option(r, ("table", "json"))
    r.set_defaults(handler=_rbac)

    m = sub.add_parser(
        "multihop",
        help="score agent trajectories against multi-hop evidence chains",
        description=wrapped(
            "Per-hop recall@k (the gold spans of hop h found in the top k of the trajectory's hop h), "
            "evidence-chain completeness (every gold span found somewhere, and the hop where the "
            "chain completed), search-decision accuracy (searched when evidence was needed, skipped "
            "when not) and steps used. Trajectories: JSONL with query_id and hops [{search, "
            "sub_query, results: [{doc_id, start, end} or {chunk_id}]}]. Chains: JSONL with query_id, "
            "hop, doc_id, start, end (default: the chains stored in the project)."),
        epilog=exit_codes_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    m.add_argument("trajectories", metavar="TRAJECTORIES.jsonl", nargs="*", help="trajectory files")
    m.add_argument("--stored", metavar="NAME[,NAME...]", help="trajectory sets stored in the project")
    m.add_argument("--chains", metavar="CHAINS.jsonl", default=None, help="evidence chains (default: the project's)")
    m.add_argument("-k", "--k", type=positive_int, default=5, metavar="K", help="results looked at per hop (default: 5)")
    m.add_argument("--store", metavar="NAME", help="also store the trajectories file in the project under a new name")
    m.add_argument("--store-chains", action="store_true", help="also store the --chains file in the project")
    m.add_argument("--replace-chains", action="store_true",
                   help="with --store-chains: replace the chains of queries that already have one")
    m.add_argument("--per-query", action="store_true", help="also each query (table and tsv; json always has them)")
    add_format_option(m, ("table", "tsv", "json"))
    m.set_defaults(handler=_multihop)

    u = sub.add_parser(
        "answerability",
        help="list unanswerable queries, or record an SME decision on one",
        description=wrapped("Without arguments: the queries marked unanswerable and by what (a tag or an "
                            "SME decision). With QUERY_ID unanswerable|answerable --annotator NAME: "
                            "record an SME decision, which wins over the tags."),
        epilog=exit_codes_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    u.add_argument("query_id", nargs="?", metavar="QUERY_ID")
    u.add_argument("verdict", nargs="?", choices=("unanswerable", "answerable"))
    u.add_argument("--annotator", metavar="NAME", help="who decided (required with a decision)")
    u.add_argument("--comment", metavar="TEXT")
    add_format_option(u, ("table", "json"))
    u.set_defaults(handler=_answerability_checked)


def _abstention_with_pattern(args: argparse.Namespace) -> int:
    if args.pattern is None:
        args.pattern = lazy.core_rag_abstention.ABSTENTION_PATTERN
    else:
        try:
            re.compile(args.pattern)
        except re.error as exc:
            raise ConfigError(f"--pattern is not a regular expression: {exc}") from None
    return _abstention(args)


def _answerability_checked(args: argparse.Namespace) -> int:

    if args.query_id and not args.verdict:
        raise ConfigError("give the decision after the query id: unanswerable or answerable")
    return _answerability(args)
