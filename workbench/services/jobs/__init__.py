"""Background jobs: long work a page starts runs in its own process and is followed through the
project, so it survives navigation, a page reload and the app's own restarts.

Service API (pages build a typed request and call these; the CLI could too)
--------------------------------------------------------------------------

``in_background(kind, size) -> bool``
    Whether a page runs the work as a job: dense retrieval always, the rest from ``[jobs]
    background_from`` (documents to chunk, run rows to pool or fuse, documents x cells of a sweep,
    kilobytes of a file or folder to import).
``start(db_path, request) -> Launch``
    Check the caller's permission for the request (``request.action``), store a ``queued`` row
    in ``background_jobs`` with the request as JSON (:mod:`workbench.services.jobs.requests`),
    and launch ``python -m workbench.services.jobs --db DB --job ID`` detached (its own session,
    its output in a log file). The process (:mod:`workbench.services.jobs.process`) reads the
    request from the row and runs the same service as the CLI command.
``job(db_path, job_id)``, ``jobs(db_path, kinds=None, limit=20)``
    The rows as dicts: ``state`` (``queued``, ``running``, ``stopping``, ``stopped``,
    ``failed``, ``finished``; a queued/running/stopping job whose process is gone reads as
    ``interrupted``), ``phase``, ``done`` of ``total`` ``unit``, ``message`` (the last line the
    work reported), ``error`` (a :class:`~workbench.errors.WorkbenchError` rebuilt from data, for
    the page to word), ``result`` (the summary as data), ``resumable``, ``alive``, times.
``stop(db_path, job_id)``
    Mark the job ``stopping`` and, when it is ``running``, send its process SIGTERM (whichever
    app process started it); the process turns it into Ctrl-C, so the unit of work in progress
    is rolled back (or, inside its COMMIT, finished), and the row ends ``stopped``. A ``queued``
    job (its process still starting, with no SIGTERM handler yet) gets no signal: its process
    reads ``stopping`` when it marks the row and ends it ``stopped`` without running. A job
    whose process is gone is marked ``stopped`` at once.
``resume(db_path, job_id) -> Launch``
    Launch the same request again for the same row (``attempt`` + 1). ``resumable`` kinds
    continue where they stopped (dense: the embeddings written are read from the cache; sweeps:
    the chunkings and runs written are reused); the others start again from the beginning,
    which is safe because each of their writes is one transaction ("Restart" on a page).

Storage and locking: the job's process opens the project once (migrations), then hands the
service a :class:`~workbench.store.brief.BriefDatabase`: every read and every write transaction
opens the file for that unit only, retrying with backoff while another process (the app) holds
it. Progress is written at most every :data:`PROGRESS_SECONDS` in its own short transaction and
skipped when the file stays busy (progress is advisory, the work's writes are not).

The judge keeps its own jobs (:mod:`workbench.services.judge.launch`, table ``judge_jobs``); a
judge request could become a kind here (a request dataclass with ``kind``, ``action``,
``resumable``, ``title`` and ``run``).
"""

from workbench.services.jobs.launch import (  # noqa: F401 - the service API in one module
    ACTIVE,
    PROGRESS_SECONDS,
    Launch,
    collect,
    documents,
    in_background,
    job,
    jobs,
    kilobytes,
    problem,
    resume,
    start,
    stop,
)
from workbench.services.jobs.requests import (  # noqa: F401
    KINDS,
    ChunkRequest,
    DenseRequest,
    HybridRequest,
    ImportRequest,
    PoolRequest,
    SweepRequest,
    request_data,
    request_from_data,
    upload_folder,
)
