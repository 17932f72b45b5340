"""``workbench jobs``: the background jobs the app's pages started (:mod:`workbench.services.jobs`).

``workbench jobs list [--kind K] [--limit N] [--format table|json]``  newest first: id, kind,
state (a job whose process is gone reads ``interrupted``), progress, what it does.
``workbench jobs stop ID``  asks the job to stop (SIGTERM to its process; it ends ``stopped``).
``workbench jobs resume ID``  runs a stopped, failed or interrupted job again in a new process
(resumable kinds continue where they stopped, the others start again).
"""

from __future__ import annotations

import argparse

from workbench.cli import lazy
from workbench.cli.common import add_format_option, aligned, print_json, settings_from_args
from workbench.errors import render_text


def _progress(job: dict) -> str:
    done, total = int(job["done"] or 0), job["total"]
    amount = f"{done:,} of {int(total):,} {job['unit'] or ''}".rstrip() if total else (f"{done:,}" if done else "")
    return " ".join(p for p in (job["phase"] or "", amount) if p) or "-"


def _list(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    rows = lazy.jobs.jobs(settings.db_path, (args.kind,) if args.kind else None, limit=args.limit)
    if args.format == "json":
        print_json([{k: (v.isoformat() if hasattr(v, "isoformat") else
                         render_text(str(v)) if k == "error" and v is not None else v) for k, v in r.items()}
                    for r in rows])
        return 0
    if not rows:
        print("no background jobs yet (pages start them: dense retrieval, large chunkings, pools, grids, imports)")
        return 0
    table = [["job", "kind", "state", "progress", "what"]]
    table += [[str(r["job_id"]), r["kind"], r["state"], _progress(r), r["title"]] for r in rows]
    for line in aligned(table, text_columns=5):
        print(line)
    return 0


def _stop(args: argparse.Namespace) -> int:
    job = lazy.jobs.stop(settings_from_args(args).db_path, args.id)
    print(f"job {job['job_id']} ({job['title']}): {job['state']}")
    return 0


def _resume(args: argparse.Namespace) -> int:
    db_path = settings_from_args(args).db_path
    launch = lazy.jobs.resume(db_path, args.id)
    job = lazy.jobs.job(db_path, args.id)
    how = "resumed" if job["resumable"] else "restarted from the beginning"
    print(f"job {launch.job_id} ({job['title']}): {how} in process {launch.pid}; its output: {launch.log}")
    return 0


#: The kinds of :data:`workbench.services.jobs.KINDS`, named here: registering a command imports
#: nothing heavy (the service imports the store, and so duckdb).
KIND_NAMES = ("chunk", "dense", "hybrid", "import", "pool", "sweep")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("jobs", help="the background jobs the app's pages started (list, stop, resume)",
                       description="Long work started from a page (dense retrieval, large chunkings, pools, "
                                   "grids and imports) runs in a process of its own; follow and steer it here.")
    jobs_sub = p.add_subparsers(dest="jobs_command", metavar="SUBCOMMAND", required=True)
    listed = jobs_sub.add_parser("list", help="the latest jobs, newest first")
    listed.add_argument("--kind", choices=KIND_NAMES, help="only jobs of this kind")
    listed.add_argument("--limit", type=int, default=20, metavar="N", help="at most N jobs (default 20)")
    add_format_option(listed)
    listed.set_defaults(handler=_list)
    stop = jobs_sub.add_parser("stop", help="ask a job to stop (it ends 'stopped')")
    stop.add_argument("id", type=int, metavar="ID", help="the job's id (jobs list)")
    stop.set_defaults(handler=_stop)
    resume = jobs_sub.add_parser("resume", help="run a stopped, failed or interrupted job again")
    resume.add_argument("id", type=int, metavar="ID", help="the job's id (jobs list)")
    resume.set_defaults(handler=_resume)
