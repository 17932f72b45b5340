"""``workbench init``, ``workbench status`` and ``workbench app``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from workbench.cli.common import settings_from_args


def _init(args: argparse.Namespace) -> int:
    from workbench.services.project import init_project

    settings = settings_from_args(args)
    loaded = init_project(settings.db_path, demo=args.demo, settings=settings)
    if loaded:
        summary = ", ".join(f"{n} {table}" for table, n in loaded.items())
        done = "created" if "documents" in loaded else "completed the preparation of"
        print(f"{done} demo project {settings.db_path}: {summary}")
    else:
        print(f"project database ready: {settings.db_path}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from workbench.services.project import open_project, project_status

    settings = settings_from_args(args)
    with open_project(settings.db_path) as db:
        status = project_status(db)
    if args.format == "json":
        print(json.dumps({
            "database": str(status.path),
            "counts": status.counts,
            "pipeline": [{"step": s.key, "count": s.count, "done": s.done} for s in status.steps],
            "next": status.next_step.key if status.next_step else None,
        }, indent=2))
        return 0
    print(f"project: {status.path}")
    width = max(len(k) for k in status.counts) if status.counts else 0
    for table, n in status.counts.items():
        print(f"  {table:<{width}}  {n:>9,}")
    print("pipeline:")
    for step in status.steps:
        print(f"  [{'x' if step.done else ' '}] {step.title:<14} {step.count:>9,}")
    if status.next_step:
        print(f"next: {status.next_step.hint}")
    return 0


def app_command(db_path: Path, host: str, port: int) -> list[str]:
    """The command line that serves the app on ``db_path``."""
    script = Path(__file__).resolve().parents[1] / "ui" / "app.py"
    return [
        sys.executable, "-m", "streamlit", "run", str(script),
        "--server.address", host, "--server.port", str(port), "--server.headless", "true",
        "--browser.gatherUsageStats", "false", "--client.toolbarMode", "minimal",
        "--", "--db", str(db_path),
    ]


def _app(args: argparse.Namespace) -> int:
    from workbench.services.project import open_project

    settings = settings_from_args(args, **{"app.port": args.port})
    # Fail early, in the terminal, when the database is missing or held by another process.
    with open_project(settings.db_path):
        pass
    host, port = settings.get("app", "host"), settings.get("app", "port")
    print(f"serving {settings.db_path} at http://{host}:{port}  (Ctrl+C stops)", flush=True)
    env = dict(os.environ, WORKBENCH_DB=str(settings.db_path))
    if getattr(args, "config", None):
        # The app resolves its settings (pool depth, evaluation rule) with load_settings(),
        # which reads WORKBENCH_CONFIG: hand it the --config file this command was given.
        env["WORKBENCH_CONFIG"] = str(Path(args.config).resolve())
    command = app_command(settings.db_path, host, port)
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
