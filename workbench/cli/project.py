"""``workbench init``, ``workbench status`` and ``workbench app``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from workbench import lazylibs
from workbench.cli import lazy
from workbench.cli.common import settings_from_args
from workbench.errors import ConfigError


def _init(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    loaded = lazy.project_lifecycle.init_project(settings.db_path, demo=args.demo, settings=settings)
    if loaded:
        summary = ", ".join(f"{n} {table}" for table, n in loaded.items())
        done = "created" if "documents" in loaded else "completed the preparation of"
        print(f"{done} demo project {settings.db_path}: {summary}")
    else:
        print(f"project database ready: {settings.db_path}")
    return 0


def _cli_actions(status, commands: set[str]) -> dict[str, str]:
    """The command that takes each pipeline step forward, for the steps this CLI has a command for.

    A step whose command is not registered (the judge or calibration in a version without them)
    gets no hint, so ``status`` never names a command that does not exist. ``commands``: the
    registered command names, which :func:`workbench.cli.build_parser` puts on ``args.commands``.
    """
    chunkings = status.chunkings["name"].tolist() if len(status.chunkings) else []
    complete = status.chunkings.loc[status.chunkings["complete"], "name"].tolist() if chunkings else []
    chunking = (complete or chunkings or ["sections"])[0]
    runs = status.runs["name"].tolist() if len(status.runs) else []
    pool = next((s.detail.split(":", 1)[0] for s in status.steps if s.key == "pool" and s.done), "POOL")
    calibration = next(s for s in status.steps if s.key == "calibration")
    hints = {
        "corpus": ("import", "import documents and queries: `workbench import corpus FILE`, "
                             "`workbench import queries FILE`"),
        "chunks": ("chunk", "chunk the corpus: `workbench chunk --name sections --strategy section`"
                   if not chunkings else
                   f"chunk again so a chunking covers every document: "
                   f"`workbench chunk --name {chunking}-all --strategy section`"),
        "runs": ("retrieve", f"run a retriever: `workbench retrieve bm25 --chunking {chunking} --name bm25`"
                 if not runs else
                 f"run a retriever again so a run covers every document: "
                 f"`workbench retrieve bm25 --chunking {chunking} --name bm25-all`"),
        "pool": ("pool", f"pool the runs: `workbench pool --name main --runs {','.join(runs[:3]) or 'bm25'} --depth 20`"),
        "judgments": ("judge", f"grade the pool's pairs with the LLM judge: `workbench judge --pool {pool}`"),
        "calibration": ("calibrate", f"draw a calibration sample for SMEs to label: "
                                     f"`workbench calibrate sample --pool {pool}`"
                        if calibration.state == "to do" else
                        "SMEs label the calibration sample on the app's Label page; then "
                        "`workbench calibrate report`"),
        "qrels": ("export", "export the qrels the labels give (pool pairs without a label count as "
                            "unjudged): `workbench export qrels --format trec --out qrels.txt`"),
        "evaluation": ("eval", f"evaluate runs against the project's qrels: "
                               f"`workbench eval --runs {','.join(runs[:3]) or 'RUN'} -m nDCG@10`"),
    }
    return {key: text for key, (command, text) in hints.items() if command in commands}


def _status(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    with lazy.project_lifecycle.open_project(settings.db_path) as db:
        status = lazy.project_lifecycle.project_status(db, min_overlap=settings.get("evaluation", "min_overlap"))
    actions = _cli_actions(status, set(getattr(args, "commands", ())))
    nxt = status.next_step_among(set(actions))
    if args.format == "json":
        print(json.dumps({
            "database": str(status.path),
            "counts": status.counts,
            "pipeline": [{"step": s.key, "title": s.title, "count": s.count, "state": s.state,
                          "done": s.done, "detail": s.detail, "warnings": list(s.warnings)}
                         for s in status.steps],
            "coverage": {
                "chunkings": [{"name": c.name, "chunks": int(c.chunks), "documents": int(c.documents),
                               "total_documents": int(c.total_documents)}
                              for c in status.chunkings.itertuples(index=False)],
                "runs": [{"name": r.name, "level": r.level,
                          "documents": int(r.documents) if r.known else None,
                          "total_documents": int(r.total_documents)}
                         for r in status.runs.itertuples(index=False)],
            },
            "warnings": status.warnings,
            "next": nxt.key if nxt else None,
            "next_hint": actions[nxt.key] if nxt else None,
        }, indent=2))
        return 0
    demo = " (demo project)" if status.meta.get("demo") == lazy.project_lifecycle.DEMO_READY else ""
    print(f"project: {status.path}{demo}")
    width = max(len(k) for k in status.counts) if status.counts else 0
    for table, n in status.counts.items():
        print(f"  {table:<{width}}  {n:>9,}")
    print("pipeline:")
    marks = {"done": "x", "partial": "~", "to do": " "}
    for step in status.steps:
        mark = marks.get(step.state, "-")
        print(f"  [{mark}] {step.title:<14} {step.state:<17} {step.detail}")
    if status.warnings:
        print("warnings:")
        for warning in status.warnings:
            print(f"  ! {warning}")
    if nxt is not None:
        print(f"next: {actions[nxt.key]}")
    else:
        print("next: nothing to do: every step this version offers is done")
    return 0


def app_command(db_path: Path, host: str, port: int, allowed_hosts: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The command line that serves the app on ``db_path``; ``allowed_hosts``: the only Host
    names Streamlit accepts a session from (``server.allowedHosts``, against DNS rebinding).
    It serves ``ui/launcher.py``: the app with the routes that keep a password sign-in in a
    cookie (``ui/session_routes.py``)."""
    script = Path(__file__).resolve().parents[1] / "ui" / "launcher.py"
    hosts = [arg for name in allowed_hosts for arg in ("--server.allowedHosts", name)]
    return [
        sys.executable, "-m", "streamlit", "run", str(script),
        "--server.address", host, "--server.port", str(port), "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--client.toolbarMode", "minimal",
        "--server.enableCORS", "true", "--server.enableXsrfProtection", "true", *hosts,
        # no watching of the app's own source files (a developer's rerun-on-save): each session
        # set up its watches and each run walked sys.modules for it (docs/performance.md)
        "--server.fileWatcherType", "none",
        # no full gc.collect(2) after every script run: it walked every object of the loaded
        # modules on every click (more once torch is loaded); Python's own collector runs
        "--runner.postScriptGC", "false",
        "--", "--db", str(db_path),
    ]


def _check_port(host: str, port) -> None:
    """Refuse a port outside 1–65535 or one another program holds, before saying "serving"."""


    try:
        number = int(port)
    except (TypeError, ValueError):
        number = -1
    if not 1 <= number <= 65535:
        raise ConfigError(f"port {port!r} is not a port number; pass --port between 1 and 65535 "
                          f"(or set [app] port)")
    family = lazylibs.socket.AF_INET6 if ":" in host else lazylibs.socket.AF_INET
    with lazylibs.socket.socket(family, lazylibs.socket.SOCK_STREAM) as probe:
        # Streamlit binds with SO_REUSEADDR too, so a port in TIME_WAIT is not reported as taken.
        probe.setsockopt(lazylibs.socket.SOL_SOCKET, lazylibs.socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, number))
        except OSError as exc:
            raise ConfigError(f"cannot serve at {host}:{number}: {exc.strerror or exc}; another program "
                              f"may be using the port; pass another --port") from None


def _app(args: argparse.Namespace) -> int:
    settings = settings_from_args(args, **{"app.port": args.port})
    # Fail early, in the terminal, when the database is missing or held by another process.
    with lazy.project_lifecycle.open_project(settings.db_path):
        pass
    host, port = settings.get("app", "host"), settings.get("app", "port")

    lazy.access.check_serving(host, settings.get("app", "auth"),
                              allow_public_without_auth=settings.get("app", "allow_public_without_auth"))

    if not settings.get("app", "session_hours") > 0:
        raise ConfigError(f"[app] session_hours = {settings.get('app', 'session_hours')!r}: a sign-in must last "
                          f"some time; set it to the hours a sign-in lasts, e.g. 12")
    _check_port(host, port)
    print(f"serving {settings.db_path} at http://{host}:{port}  (Ctrl+C stops)", flush=True)
    env = dict(os.environ, WORKBENCH_DB=str(settings.db_path))
    if getattr(args, "config", None):
        # The app resolves its settings (pool depth, evaluation rule) with load_settings(),
        # which reads WORKBENCH_CONFIG: hand it the --config file this command was given.
        env["WORKBENCH_CONFIG"] = str(Path(args.config).resolve())

    command = app_command(settings.db_path, host, port, lazy.access.allowed_hosts(settings.get("app", "allowed_hosts"), host))
    # Replace this process with the server, so that stopping `workbench app` (Ctrl+C, SIGTERM
    # from a supervisor or a test) stops Streamlit itself and leaves no orphan holding the port.
    os.execve(command[0], command, env)
    return 0  # pragma: no cover - execve does not return


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="create the project database (with --demo: the demo project)")
    p.add_argument("--demo", action="store_true", help="load the embedded demo handbook, queries and labels")
    p.set_defaults(handler=_init)

    p = sub.add_parser("status", help="counts per table and the pipeline state")
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(handler=_status)

    p = sub.add_parser("app", help="serve the web app on this project (127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8501, or [app] port)")
    p.set_defaults(handler=_app)
