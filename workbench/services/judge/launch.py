"""Judge jobs in their own process: launch, stop and state, for the front ends that must not run a
job inside their own process (the Judge page: a script run must stay responsive, and the job must
survive a page reload).

The page builds a :class:`~workbench.services.judge.request.JudgeRequest` (:data:`JobRequest`) and
resolves it once with :func:`resolve`: the judge configuration the job runs with, its ``config_key`` (which
finds the job) and the API key it may send (:func:`job_key`). :func:`start` runs
:mod:`workbench.services.judge.worker` detached, the request and the settings it was resolved with
handed over as JSON on its stdin (no command line to re-parse), its output in a log file;
:func:`collect` gathers the exit status of the processes this process started (a job process that
died would otherwise stay a zombie, "alive" to a pid check, and its job would look running);
:func:`problem` is a failed launch's error (as data, which the job's process writes to the file
:data:`workbench.errors.ERROR_FILE_ENV` names, so the page words it) or else the end of its
output; :func:`latest_job` the state the job stores (:func:`workbench.services.judge.jobs.list_jobs`);
:func:`stop` asks the job to stop through the project
(:func:`workbench.services.judge.jobs.cancel_job`), whichever process runs it.

The launched process is the local operator, so the caller's permission to judge is checked here,
before launching. An API key is handed to the job in its environment, never on its command line
or stdin, and only the key :func:`job_key` allows: the server's ``OPENAI_API_KEY`` goes only to the
configured server or ``[judge] allowed_hosts``; a Server URL a page typed gets the key typed with
it, or none (:func:`workbench.services.judge.spec.key_for`).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workbench.errors import ERROR_FILE_ENV, WorkbenchError, error_from_data
from workbench.services import access, processes
from workbench.services.judge.request import OFFLINE, JudgeRequest
from workbench.services.judge.spec import key_for
from workbench.services.judge.worker import payload
from workbench.services.settings import project_settings

__all__ = ["OFFLINE", "JobRequest", "Launch", "collect", "job_key", "latest_job", "problem", "resolve",
           "server_key_refused", "start", "stop"]

#: The request a launched job runs (one type for every front end).
JobRequest = JudgeRequest


def _settings(db_path: str | Path | None = None):
    """The operator's settings (file, environment; never a request's choices) for ``db_path``."""

    return project_settings(db_path)


def job_key(request: JudgeRequest, *, api_key: str | None = None, typed_key: str | None = None) -> str | None:
    """The API key the job for ``request`` may send, by :func:`workbench.services.judge.spec.key_for`:
    the server's key (``api_key``; None: ``OPENAI_API_KEY``) only when the request's server is the
    configured one or in ``[judge] allowed_hosts`` (the operator's settings, not the request's),
    else ``typed_key`` (typed with the request's URL), else None. The offline judge sends nothing."""

    if request.offline:
        return None
    configured = _settings()
    url = (request.base_url or "").strip() or configured.values["judge"]["base_url"]
    return key_for(url, configured, typed_key, server_key=api_key)


def server_key_refused(request: JudgeRequest, *, api_key: str | None = None) -> bool:
    """Whether the server has a key (``api_key``; None: ``OPENAI_API_KEY``) that the request's
    server may not get (:func:`job_key`): a front end says so and offers to type that server's own."""
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
    return bool(key) and not request.offline and job_key(request, api_key=key) is None


def resolve(db_path: str | Path, request: JudgeRequest, *, api_key: str | None = None,
            typed_key: str | None = None):
    """The judge configuration (:class:`workbench.services.judge.spec.JudgeSpec`) the job for
    ``request`` runs with: :meth:`JudgeRequest.resolve` with the operator's settings for
    ``db_path`` and the page's key rule (``page=True``: its key is :func:`job_key`'s, ``api_key``
    the server's key, None: ``OPENAI_API_KEY``; ``typed_key`` one typed for the request's URL).
    Its ``config_key`` is the job's, so a page finds the job it started; hand it to :func:`start`."""
    return request.resolve(_settings(db_path), api_key=api_key, typed_key=typed_key, page=True)


@dataclass(frozen=True)
class Launch:
    """A job process this process started: its pid, log file, pool, judge configuration and when."""

    pid: int
    log: str
    pool: str
    config_key: str
    started: float = field(default_factory=time.time)

    def as_dict(self) -> dict:
        return asdict(self)


def start(db_path: str | Path, request: JudgeRequest, spec, *, api_key: str | None = None,
          typed_key: str | None = None) -> Launch:
    """Launch the job's process, detached; raises ``PermissionDenied`` when the caller may not judge.
    ``spec``: the job's configuration from :func:`resolve` (its ``config_key`` and ``api_key`` are
    the job's, decided once), or a ``config_key`` alone (the key then is :func:`job_key`'s for
    ``api_key`` and ``typed_key``). The process gets that key in its environment and no other (not
    this process's ``OPENAI_API_KEY`` when the request's server may not have it), and the request
    with the operator's settings on its stdin (:func:`workbench.services.judge.worker.payload`)."""

    access.require("judge")
    request.check()
    if isinstance(spec, str):
        config_key, key = spec, job_key(request, api_key=api_key, typed_key=typed_key)
    else:
        config_key, key = spec.config_key, spec.api_key
    log = processes.new_log("workbench-judge")
    env = dict(os.environ)
    env[ERROR_FILE_ENV] = str(_error_file(log))  # the job writes a failure there as data
    env.pop("OPENAI_API_KEY", None)  # inherited, it would go to whatever server the request names
    if key:
        env["OPENAI_API_KEY"] = key  # the job's process reads it from here
    pid = processes.spawn([sys.executable, "-m", "workbench.services.judge.worker"], log=log, env=env,
                          stdin_data=payload(request, _settings(db_path)).encode("utf-8"))
    return Launch(pid, str(log), request.pool, config_key)


collect = processes.collect


def _error_file(log: str | Path) -> Path:
    return Path(log).with_suffix(".error.json")


def problem(launch: Launch | dict | None) -> WorkbenchError | str | None:
    """Why a launched process ended with an error: the error it reported as data (a
    :class:`~workbench.errors.WorkbenchError` for the page to word), else the last lines of its
    output; None when it did not fail (also for a process another app process started: its exit
    status is not ours to read)."""

    if not launch:
        return None
    launch = Launch(**launch) if isinstance(launch, dict) else launch
    code = processes.returncode(launch.pid)
    if code in (None, 0):
        return None
    try:
        return error_from_data(json.loads(_error_file(launch.log).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, AttributeError):
        pass  # no error as data (a crash, a signal): the output says what happened
    return processes.log_tail(launch.log) or f"the judge stopped with exit code {code}"


def latest_job(db_path: str | Path, pool: str, config_key: str) -> dict | None:
    """The latest stored job of ``pool`` with this judge configuration (None: none yet)."""
    from workbench.services.judge.jobs import list_jobs

    jobs = [j for j in list_jobs(db_path, pool) if j["config_key"] == config_key]
    return jobs[-1] if jobs else None


def stop(db_path: str | Path, job_id: int) -> dict:
    """Ask job ``job_id`` to stop (:func:`workbench.services.judge.jobs.cancel_job`)."""
    from workbench.services.judge.jobs import cancel_job

    return cancel_job(db_path, job_id)
