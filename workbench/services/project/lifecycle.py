"""Project lifecycle: create a project database, load the demo, report the pipeline state."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from workbench import lazylibs
from workbench.config import Settings, load_settings
from workbench.core.formats.lines import decode_utf8, read_json_objects
from workbench.errors import InputError, StoreError
from workbench.resources import DEMO_DIR
from workbench.services import access, lazy
from workbench.services.project_file import nearby_databases, open_project  # noqa: F401  (re-exported)
from workbench.store.database import Database
from workbench.store.meta import read_meta, set_meta, table_counts
from workbench.version import __version__

if TYPE_CHECKING:
    from workbench.services.project.status import PipelineStep, ProjectStatus, project_status  # noqa: F401

# The pipeline state lives in services.project.status; re-exported here for existing callers.
# Lazily (PEP 562): status imports pandas, and every command opens its project through this
# module (CLI start-up cost).
_STATUS_NAMES = ("PipelineStep", "ProjectStatus", "project_status")


def __getattr__(name: str):
    if name in _STATUS_NAMES:
        from workbench.services.project import status

        return getattr(status, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# project_meta "demo": loaded but its pipeline not prepared yet / loaded and prepared.
DEMO_LOADING, DEMO_READY = "loading", "true"


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise InputError("demo file is missing; reinstall from a full checkout", path=str(path))
    return [row for _, row in read_json_objects(decode_utf8(path.read_bytes(), str(path)), str(path))]


def load_demo(db: Database, demo_dir: Path = DEMO_DIR) -> dict[str, int]:
    """Load the demo handbook, its queries and its reference SME labels in one transaction."""
    # Deferred: pandas and the writers are needed by the demo only (CLI start-up cost).

    documents = lazylibs.pandas.DataFrame(_read_jsonl(demo_dir / "documents.jsonl"))
    queries = lazylibs.pandas.DataFrame(_read_jsonl(demo_dir / "queries.jsonl"))
    labels = lazylibs.pandas.DataFrame(_read_jsonl(demo_dir / "labels.jsonl"))
    labels["source"] = "human"
    labels["assessor"] = labels.get("assessor", "demo-sme")
    labels["status"] = "ok"
    with db.transaction() as tx:
        loaded = {
            "documents": lazy.store_corpus.write_documents(tx, documents),
            "queries": lazy.store_corpus.write_queries(tx, queries),
            "judgments": lazy.store_judgments.write_judgments(tx, labels),
        }
        # "loading" until prepare_demo has run: a later `init --demo` then completes it.
        set_meta(tx, "demo", DEMO_LOADING)
    return loaded


def init_project(db_path: str | Path, *, demo: bool = False, settings: Settings | None = None) -> dict[str, int]:
    """Create (or upgrade) the project database; with ``demo``, load and prepare the demo once.

    Returns the rows the call added (empty when there was nothing to do). Loading the demo into
    a project that already has documents is refused, so that ``init`` never mixes the demo into
    a team's corpus. The demo is marked ``demo = "true"`` in ``project_meta`` only after its
    pipeline (:func:`workbench.services.project.demo.prepare_demo`, pooled at ``pool.depth`` of
    ``settings``, default :func:`load_settings`) succeeded; a demo whose preparation failed or
    was interrupted is completed by running ``init --demo`` again (each step is skipped when its
    result exists, so a complete demo project is left as it is).
    """
    access.require("import")
    with open_project(db_path, create=True) as db:
        meta = read_meta(db)
        with db.transaction() as tx:
            if "created_at" not in meta:
                set_meta(tx, "created_at", datetime.now(UTC).isoformat(timespec="seconds"))
            set_meta(tx, "workbench_version", __version__)
        if not demo:
            return {}
        loaded: dict[str, int] = {}
        if meta.get("demo") not in (DEMO_LOADING, DEMO_READY):
            if table_counts(db).get("documents", 0):
                other = Path(db.path).with_name("handbook-demo.duckdb")
                raise StoreError(
                    f"{db.path} already holds a corpus; load the demo into a new database "
                    f"({{command}}, or `DB={other} make run`)", command=f"--db {other} init --demo",
                )
            loaded = load_demo(db)
        from workbench.services.project.demo import prepare_demo

        settings = settings if settings is not None else load_settings()
        loaded.update(prepare_demo(db, depth=int(settings.get("pool", "depth"))))
        from workbench.services.evaluation.query_kinds import prepare_query_kinds_demo

        prepare_query_kinds_demo(db)  # restricted documents, evidence chains, trajectories, answers
        if meta.get("demo") != DEMO_READY:
            with db.transaction() as tx:
                set_meta(tx, "demo", DEMO_READY)
        return loaded
