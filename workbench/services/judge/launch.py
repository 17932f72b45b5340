"""Judge jobs in their own process: launch, stop and state, for the front ends that must not run a
job inside their own process (the Judge page: a script run must stay responsive, and the job must
survive a page reload).

:func:`start` runs ``python -m workbench --db DB judge ...`` (the CLI, so the job is exactly what
``workbench judge`` does with the same :class:`JobRequest`), detached, its output in a log file;
:func:`resolve` is the judge configuration that job runs with (its ``config_key`` finds the job);
:func:`collect` gathers the exit status of the processes this process started (a job process that
died would otherwise stay a zombie, "alive" to a pid check, and its job would look running);
:func:`problem` is a failed launch's error (as data, which the job's process writes to the file
:data:`workbench.errors.ERROR_FILE_ENV` names, so the page words it) or else the end of its
output; :func:`latest_job` the state the job
stores (:func:`workbench.services.judge.jobs.list_jobs`); :func:`stop` asks the job to stop
through the project (:func:`workbench.services.judge.jobs.cancel_job`), whichever process runs it.

The launched process is the local operator, so the caller's permission to judge is checked here,
before launching. An API key is handed to the job in its environment, never on its command line,
and only the key :func:`job_key` allows: the server's ``OPENAI_API_KEY`` goes only to the
configured server or ``[judge] allowed_hosts``; a Server URL a page typed gets the key typed with
it, or none (:func:`workbench.services.judge.spec.key_for`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workbench.errors import ERROR_FILE_ENV, WorkbenchError, error_from_data
from workbench.services import access

OFFLINE = "offline-lexical"


@dataclass(frozen=True)
class JobRequest:
    """What a judge job is asked to do: the options of ``workbench judge`` (None: the configured
    default). ``offline``: the offline baseline (no server, no prompt). ``few_shot``: that many
    examples from the tuning part of ``few_shot_sample`` (None: the newest sample with SME labels
    there), picked with ``few_shot_seed`` (:mod:`workbench.services.judge.few_shot`); None or 0: none."""

    pool: str
    offline: bool = False
    model: str | None = None
    base_url: str | None = None
    prompt: str | None = None
    concurrency: int | None = None
    samples: int | None = None
    limit: int | None = None
    budget: float | None = None
    retry_failed: bool = False
    few_shot: int | None = None
    few_shot_sample: str | None = None
    few_shot_seed: int = 0

    def options(self) -> list[str]:
        """The ``workbench judge`` options for this request."""
        out = ["--pool", self.pool]
        if self.offline:
            out += ["--model", OFFLINE]
        else:
            for flag, value in (("--model", self.model), ("--base-url", self.base_url), ("--prompt", self.prompt),
                                ("--concurrency", self.concurrency), ("--samples", self.samples)):
                if value is not None and value != "":
                    out += [flag, str(value).strip()]
            if self.few_shot:  # the CLI applies the same rules (few_shot.apply_few_shot) in the job
                out += ["--few-shot", str(int(self.few_shot)), "--few-shot-seed", str(int(self.few_shot_seed))]
                if self.few_shot_sample:
                    out += ["--few-shot-sample", self.few_shot_sample]
        if self.limit:
            out += ["--limit", str(int(self.limit))]
        if self.budget:
            out += ["--budget", f"{float(self.budget):g}"]
        if self.retry_failed:
            out.append("--retry-failed")
        return out


def job_key(request: JobRequest, *, api_key: str | None = None, typed_key: str | None = None) -> str | None:
    """The API key the job for ``request`` may send, by :func:`workbench.services.judge.spec.key_for`:
    the server's key (``api_key``; None: ``OPENAI_API_KEY``) only when the request's server is the
    configured one or in ``[judge] allowed_hosts`` (the operator's settings, not the request's),
    else ``typed_key`` (typed with the request's URL), else None. The offline judge sends nothing."""
    from workbench.config import load_settings
    from workbench.services.judge.spec import key_for

    if request.offline:
        return None
    configured = load_settings()
    url = (request.base_url or "").strip() or configured.values["judge"]["base_url"]
    return key_for(url, configured, typed_key, server_key=api_key)


def server_key_refused(request: JobRequest, *, api_key: str | None = None) -> bool:
    """Whether the server has a key (``api_key``; None: ``OPENAI_API_KEY``) that the request's
    server may not get (:func:`job_key`): a front end says so and offers to type that server's own."""
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
    return bool(key) and not request.offline and job_key(request, api_key=key) is None


def resolve(db_path: str | Path, request: JobRequest, *, api_key: str | None = None,
            typed_key: str | None = None):
    """The judge configuration (:class:`workbench.services.judge.spec.JudgeSpec`) the job for
    ``request`` runs with, resolved as ``workbench judge`` resolves the same options: the
    request's choices as ``[judge]`` overrides of the configured settings, then its few-shot
    examples (:func:`workbench.services.judge.few_shot.apply_few_shot`, which refuses as the CLI
    does). Its ``config_key`` is the job's, so a page finds the job it started. Its key is
    :func:`job_key`'s (``api_key``: the server's key, None: ``OPENAI_API_KEY``; ``typed_key``:
    one typed for the request's URL)."""
    from workbench.config import load_settings
    from workbench.services.judge.few_shot import apply_few_shot
    from workbench.services.judge.spec import resolve_spec

    key = job_key(request, api_key=api_key, typed_key=typed_key) or ""  # "": none, not the environment's
    if request.offline:
        overrides = {"model": OFFLINE}
    else:
        overrides = {key: (value.strip() if isinstance(value, str) else value) for key, value in (
            ("model", request.model), ("base_url", request.base_url), ("prompt", request.prompt),
            ("concurrency", request.concurrency), ("samples", request.samples)) if value is not None and value != ""}
    spec = resolve_spec(load_settings(overrides={"judge": overrides}), api_key=key)
    if request.few_shot and not request.offline:
        spec = apply_few_shot(db_path, spec, int(request.few_shot), sample=request.few_shot_sample or None,
                              seed=int(request.few_shot_seed))
    return spec


def command(db_path: str | Path, request: JobRequest) -> list[str]:
    """``python -m workbench --db DB judge ...`` for ``request``."""
    return [sys.executable, "-m", "workbench", "--db", str(db_path), "judge", *request.options()]


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


_LAUNCHED: dict[int, subprocess.Popen] = {}  # keeps each Popen so its exit status is collected


def start(db_path: str | Path, request: JobRequest, config_key: str, *, api_key: str | None = None,
          typed_key: str | None = None) -> Launch:
    """Launch the job's process, detached; raises ``PermissionDenied`` when the caller may not judge.
    The process gets :func:`job_key`'s key in its environment and no other (not this process's
    ``OPENAI_API_KEY`` when the request's server may not have it)."""
    access.require("judge")
    log = Path(tempfile.gettempdir()) / f"workbench-judge-{os.getpid()}-{time.time_ns()}.log"
    key = job_key(request, api_key=api_key, typed_key=typed_key)
    env = dict(os.environ)
    env[ERROR_FILE_ENV] = str(_error_file(log))  # the CLI writes a failure there as data
    env.pop("OPENAI_API_KEY", None)  # inherited, it would go to whatever --base-url the job has
    if key:
        env["OPENAI_API_KEY"] = key  # the job's process reads it from here
    with open(log, "wb") as out:
        process = subprocess.Popen(command(db_path, request), stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    _LAUNCHED[process.pid] = process
    return Launch(process.pid, str(log), request.pool, config_key)


def collect() -> None:
    """Collect the exit status of the job processes this process started."""
    for process in list(_LAUNCHED.values()):
        process.poll()


def _error_file(log: str | Path) -> Path:
    return Path(log).with_suffix(".error.json")


def problem(launch: Launch | dict | None) -> WorkbenchError | str | None:
    """Why a launched process ended with an error: the error it reported as data (a
    :class:`~workbench.errors.WorkbenchError` for the page to word), else the last lines of its
    output; None when it did not fail (also for a process another app process started: its exit
    status is not ours to read)."""
    import json

    if not launch:
        return None
    launch = Launch(**launch) if isinstance(launch, dict) else launch
    process = _LAUNCHED.get(launch.pid)
    if process is None or process.poll() in (None, 0):
        return None
    try:
        return error_from_data(json.loads(_error_file(launch.log).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, AttributeError):
        pass  # no error as data (a crash, a signal): the output says what happened
    try:
        lines = Path(launch.log).read_text(errors="replace").strip().splitlines()
    except OSError:
        return None
    tail = [ln for ln in lines if ln.strip() and "\r" not in ln][-3:]
    return " ".join(tail) or f"the judge stopped with exit code {process.returncode}"


def latest_job(db_path: str | Path, pool: str, config_key: str) -> dict | None:
    """The latest stored job of ``pool`` with this judge configuration (None: none yet)."""
    from workbench.services.judge.jobs import list_jobs

    jobs = [j for j in list_jobs(db_path, pool) if j["config_key"] == config_key]
    return jobs[-1] if jobs else None


def stop(db_path: str | Path, job_id: int) -> dict:
    """Ask job ``job_id`` to stop (:func:`workbench.services.judge.jobs.cancel_job`)."""
    from workbench.services.judge.jobs import cancel_job

    return cancel_job(db_path, job_id)
