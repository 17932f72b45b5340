"""``workbench harness``: run an external retriever (command or local URL) and store its run."""

from __future__ import annotations

import argparse

from workbench.cli import lazy
from workbench.cli.common import (
    add_format_option,
    add_progress_option,
    open_project_from_args,
    print_json,
    progress_from_args,
)


def _harness(args: argparse.Namespace) -> int:
    with open_project_from_args(args) as db:
        summary = lazy.retrieval_harness.run_harness(db, args.name, queries=args.queries, command=args.command, url=args.url,
                                                     timeout=args.timeout, chunking=args.chunking, progress=progress_from_args(args))
    if args.format == "json":
        print_json({"name": summary.name, "level": summary.level, "chunking": summary.chunking,
                    "queries": summary.queries, "answered": summary.answered, "failed": summary.failed,
                    "rows": summary.rows, "latency_ms": {"p50": summary.latency_ms_p50,
                                                         "p95": summary.latency_ms_p95}})
    else:
        print(f"run {summary.name}: {summary.rows} rows, {summary.answered}/{summary.queries} queries answered, "
              f"level {summary.level}" + (f", chunking {summary.chunking}" if summary.chunking else "")
              + f"; latency p50 {summary.latency_ms_p50:.1f} ms, p95 {summary.latency_ms_p95:.1f} ms")
        for failure in summary.failed:
            print(f"  failed {failure['query_id']}: {failure['error']}")
    return 6 if summary.failed else 0  # stored, but some queries failed (1-5 are the error codes)


def register(sub: argparse._SubParsersAction) -> None:
    q = sub.add_parser(
        "harness", help="run an external retriever (command or 127.0.0.1 URL) over the queries; store its run",
        description="Each query goes to --command (argv template, {query} and {query_id} replaced inside "
                    "arguments, never a shell; stdout = JSON lines) or --url (POST {query_id, query}, answer = "
                    "JSON list). Results: {chunk_id, score}, {doc_id, start, end, score} (needs --chunking) or "
                    "{doc_id, score}. Failed queries are stored as failures with their error, and the exit "
                    "code is 6 when any query failed (the run is stored).")
    how = q.add_mutually_exclusive_group(required=True)
    how.add_argument("--command", help="program and arguments, e.g. 'python my_search.py --q {query}'")
    how.add_argument("--url", help="http://127.0.0.1:PORT/PATH answering POST {query_id, query}")
    q.add_argument("--queries", default="all",
                   help="'all' (default), 'tag:VALUE' (queries with that tag) or a file of query ids, one a line")
    q.add_argument("--name", required=True, help="name of the stored run")
    q.add_argument("--timeout", type=float, default=30.0, help="seconds per query (default 30)")
    q.add_argument("--chunking", help="chunking that span answers (doc_id, start, end) are mapped onto")
    add_progress_option(q)
    add_format_option(q)
    q.set_defaults(handler=_harness)
