"""The process a launched judge job runs in (:func:`workbench.services.judge.launch.start`):
``python -m workbench.services.judge.worker`` reads one JSON object on stdin,
``{"request": JudgeRequest as data, "settings": the launcher's resolved settings}``, resolves the
request with those settings (the launcher's, not re-read from files: the job is the one the page
resolved, and its ``config_key`` the one the page looks the job up by) and the key in its
environment (``OPENAI_API_KEY``, the one :func:`workbench.services.judge.launch.job_key`
allowed), and runs it.

Output: the job's summary on stdout; a failure as one line on stderr and as data in the file
named by :data:`workbench.errors.ERROR_FILE_ENV` (:func:`workbench.errors.error_data`), for the
launcher to word. Exit codes as ``workbench judge``'s: 0 finished, 6 stopped before the end,
a :class:`~workbench.errors.WorkbenchError`'s own code, 130 interrupted.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict

from workbench.config import Settings
from workbench.errors import ERROR_FILE_ENV, InputError, WorkbenchError, error_data
from workbench.services.judge.request import JudgeRequest

STOPPED_EXIT = 6


def payload(request, settings) -> str:
    """What :func:`main` reads: the request and the settings as JSON."""

    return json.dumps({"request": asdict(request), "settings": {s: dict(e) for s, e in settings.values.items()}})


def run(text: str) -> int:
    """Run the job :func:`payload` describes; returns the exit code."""

    try:
        data = json.loads(text)
        request, values = data["request"], data["settings"]
    except (ValueError, KeyError, TypeError):
        raise InputError("the judge job's input is not a request and settings as JSON") from None
    request = JudgeRequest.from_json(json.dumps(request))
    settings = Settings(values=values, sources={})
    spec = request.resolve(settings)  # the key: this process's OPENAI_API_KEY, set by the launcher
    report = request.run(settings.db_path, spec)
    print(report.summary(), flush=True)
    return 0 if report.state == "finished" else STOPPED_EXIT


def _keep(exc: WorkbenchError) -> None:
    path = os.environ.get(ERROR_FILE_ENV)
    if not path:
        return
    try:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(error_data(exc), out)
    except OSError:
        pass  # the error is still printed


def main() -> int:
    try:
        return run(sys.stdin.read())
    except WorkbenchError as exc:
        _keep(exc)
        print(f"judge job: error: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    except KeyboardInterrupt:
        print("judge job: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
