"""``workbench import corpus|queries|qrels|run FILE``, ``workbench import judgments FILE --judge NAME``, ``workbench export qrels|run`` and
``workbench delete run|pool|chunking NAME``.

Thin over :mod:`workbench.services.ingest`, :mod:`workbench.services.qrels.export` and
:mod:`workbench.services.project.deletion`; formats, checks and decisions are documented there.
"""

from __future__ import annotations

import argparse

from workbench.cli import lazy
from workbench.cli.common import cli_text, progress_bar, settings_from_args
from workbench.errors import InputError

_KIND_HELP = {
    "corpus": "documents: BEIR/JSONL, a folder of .txt/.md files, or SMART (Cranfield)",
    "queries": "queries: JSONL (BEIR), TSV query_id<TAB>text, SMART, cranfield (cran.qry by position)",
    "qrels": "judgments: TREC, BEIR TSV, JSONL rows, span JSONL, cranfield (cranqrel)",
    "run": "a TREC run at document or chunk level (detected from the ids)",
}


def _import(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    with lazy.project_lifecycle.open_project(settings.db_path) as db:
        result = lazy.ingest.import_file(
            db, args.kind, args.file, format=args.format, name=args.name, assessor=args.assessor,
            skip_unknown=args.skip_unknown, id_field=args.id_field, text_field=args.text_field,
            title_field=args.title_field, progress=progress_bar,
        )
    print(result.summary())
    return 0


def _import_judgments(args: argparse.Namespace) -> int:
    with lazy.project_lifecycle.open_project(settings_from_args(args).db_path) as db:
        result = lazy.judge_imported.import_judgments(db, args.file, judge=args.judge, pool=args.pool, format=args.format)

    print(cli_text(result.summary()))
    return 0


def _export(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    min_overlap = args.min_overlap if args.min_overlap is not None else settings.get("evaluation", "min_overlap")
    with lazy.project_lifecycle.open_project(settings.db_path) as db:
        result = lazy.qrels_export.export_qrels(db, args.out, format=args.format, level=args.level, chunking=args.chunking,
                                                source=args.source, min_overlap=min_overlap, iteration=args.iteration,
                                                force=args.force, policy=lazy.qrels_rule.default_policy(settings),
                                                keep_unanswerable=args.keep_unanswerable)
    print(result.summary() + ("; pass --keep-unanswerable to write them" if result.unanswerable else ""))
    return 0


def _export_run(args: argparse.Namespace) -> int:
    with lazy.project_lifecycle.open_project(settings_from_args(args).db_path) as db:
        result = lazy.qrels_export.export_run(db, args.name, args.out, force=args.force)
    print(result.summary())
    return 0


def _delete(args: argparse.Namespace) -> int:
    with lazy.project_lifecycle.open_project(settings_from_args(args).db_path) as db:
        plan = lazy.project_deletion.plan_deletion(db, args.kind, args.name)
        if (why := plan.refusal()) is not None:
            raise InputError(why)
        if not args.yes:
            print("\n".join(plan.lines()))
            print(f"nothing was deleted; run again with --yes to delete {args.kind} {args.name!r} and what is "
                  f"listed above")
            return 1
        lazy.project_deletion.delete(db, args.kind, args.name, expected=plan)
    print("\n".join(plan.lines()).replace("removes:", "removed:", 1).replace("and keeps", "and kept", 1))
    return 0


def _export_judgments(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    with lazy.project_lifecycle.open_project(settings.db_path) as db:
        result = lazy.judge_export.export_judgments(db, args.out, pool=args.pool, source=args.source, force=args.force)
    print(result.summary())
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="import a corpus, queries, qrels or a run (all or nothing)")
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind, help_text in _KIND_HELP.items():
        k = kinds.add_parser(kind, help=help_text, description=help_text)
        k.add_argument("file", metavar="FILE", help="file to import (for a corpus also a folder)")
        choices = sorted(set(lazy.core_formats.IMPORT_FORMATS[kind]) | ({"cranqrel"} if kind == "qrels" else set()))
        k.add_argument("--format", choices=choices,
                       help="input format (default: guessed from the name and first line)")
        k.add_argument("--name", help="name recorded in the ledger; for a run the run name, for qrels the "
                                      "assessor (default: the file stem)")
        if kind == "qrels":
            k.add_argument("--assessor", help="assessor recorded on every judgment (default: --name or the file stem)")
        else:
            k.set_defaults(assessor=None)
        if kind in ("qrels", "run"):
            k.add_argument("--skip-unknown", action="store_true",
                           help="drop rows whose doc, chunk or query id the project lacks (and report how many) "
                                "instead of failing")
        else:
            k.set_defaults(skip_unknown=False)
        if kind in ("corpus", "queries"):
            k.add_argument("--id-field", help="JSONL field holding the id (default: recognised by name)")
            k.add_argument("--text-field", help="JSONL field holding the text (default: recognised by name)")
        else:
            k.set_defaults(id_field=None, text_field=None)
        if kind == "corpus":
            k.add_argument("--title-field", help="JSONL field holding the title (default: 'title' if present)")
        else:
            k.set_defaults(title_field=None)
        k.set_defaults(handler=_import)
    help_text = ("an external judge's grades (TREC qrels, or `export judgments` JSON lines) on a pool's pairs, "
                 "stored as a judge configuration to gate and learn from")
    k = kinds.add_parser("judgments", help=help_text, description=help_text)
    k.add_argument("file", metavar="FILE", help="TREC qrels or JSON lines written by `workbench export judgments`")
    k.add_argument("--judge", required=True, metavar="NAME",
                   help="the external judge's name (the configuration's model; gate it with --judge NAME)")
    k.add_argument("--pool", metavar="P", help="the pool whose pairs the grades are for (default: the only pool)")
    k.add_argument("--format", choices=("trec", "jsonl"), help="input format (default: guessed from the first line)")
    k.set_defaults(handler=_import_judgments)

    p = sub.add_parser("export", help="export qrels built from the judgments, judgments, or a stored run")
    what = p.add_subparsers(dest="what", metavar="WHAT", required=True)
    q = what.add_parser("qrels", help="qrels as TREC, BEIR, JSONL rows or span JSONL")
    q.add_argument("--format", choices=lazy.core_formats.EXPORT_FORMATS, default="trec")
    q.add_argument("--level", choices=lazy.core_formats.EXPORT_LEVELS, default="doc",
                   help="grade documents, or the chunks of --chunking by span overlap")
    q.add_argument("--chunking", metavar="NAME", help="chunking for --level chunk")
    q.add_argument("--source", choices=lazy.core_formats.LABEL_SOURCES, default="merged",
                   help="merged: the [qrels] policy (adjudicated > SME > imported > LLM labels of a judge that "
                        "passed the gate); human: without LLM labels; llm: the judge's labels alone")
    q.add_argument("--min-overlap", type=float, default=None,
                   help="span rule for chunk level: overlap / shorter span (default [evaluation] min_overlap)")
    q.add_argument("--keep-unanswerable", action="store_true",
                   help="also write the queries marked unanswerable; by default they are left out (and named "
                        "in the summary), as `workbench eval --runs` leaves them out of ranking measures, so "
                        "eval of the exported files gives the project's numbers")
    q.add_argument("--iteration", default="Q0", help="second column of TREC qrels (default Q0; trec_eval ignores it)")
    q.add_argument("--out", required=True, metavar="FILE", help="file to write (never a database, link or device)")
    q.add_argument("--force", action="store_true", help="replace FILE if it exists (a regular file only)")
    q.set_defaults(handler=_export)
    r = what.add_parser("run", help="a stored run as a TREC run file (query_id Q0 id rank score name)",
                        description="Write a stored run as a TREC run file; `workbench import run` reads it back.")
    r.add_argument("name", metavar="NAME", help="run name (see `workbench status`)")
    r.add_argument("--out", required=True, metavar="FILE", help="file to write (never a database, link or device)")
    r.add_argument("--force", action="store_true", help="replace FILE if it exists (a regular file only)")
    r.set_defaults(handler=_export_run)
    j = what.add_parser("judgments", help="every judgment as JSON lines (grade, status, model, prompt version, "
                                          "tokens, latency, cost)")
    j.add_argument("--out", required=True, metavar="FILE", help="JSONL file to write")
    j.add_argument("--pool", metavar="P", help="only the judgments of this pool")
    j.add_argument("--source", choices=("llm", "human", "imported", "all"), default="all",
                   help="which labels (default all)")
    j.add_argument("--force", action="store_true", help="replace FILE if it exists (a regular file only)")
    j.set_defaults(handler=_export_judgments)

    d = sub.add_parser("delete", help="delete a run, pool or chunking and what depends on it (labels stay)",
                       description="Delete a run, a pool or a chunking. What depends on it (pools built from a run; "
                                   "runs and pools over a chunking) is listed and deleted with it. Labels are "
                                   "never deleted. Without --yes the list is printed, nothing is deleted and "
                                   "the exit code is 1.")
    d.add_argument("kind", choices=("run", "pool", "chunking"), help="what to delete")
    d.add_argument("name", metavar="NAME", help="its name")
    d.add_argument("--yes", action="store_true", help="delete it and everything listed (default: only list)")
    d.set_defaults(handler=_delete)
