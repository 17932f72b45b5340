"""Project lifecycle: create a project database, load the demo, report the pipeline state."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from workbench import __version__
from workbench.config import Settings, load_settings
from workbench.core.formats.lines import decode_utf8, read_json_objects
from workbench.errors import InputError, StoreError
from workbench.resources import DEMO_DIR
from workbench.store.corpus import write_documents, write_queries
from workbench.store.database import Database
from workbench.store.judgments import write_judgments
from workbench.store.meta import read_meta, set_meta, table_counts

# project_meta "demo": loaded but its pipeline not prepared yet / loaded and prepared.
DEMO_LOADING, DEMO_READY = "loading", "true"


def open_project(db_path: str | Path, *, create: bool = False) -> Database:
    """Open an existing project (or create it when ``create``), applying pending migrations."""
    path = Path(db_path)
    if not create and not path.exists():
        raise StoreError(
            f"no project database at {path}; create one with `workbench --db {path} init` "
            f"(add --demo for the demo project)"
        )
    return Database(path)


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise InputError("demo file is missing; reinstall from a full checkout", path=str(path))
    return [row for _, row in read_json_objects(decode_utf8(path.read_bytes(), str(path)), str(path))]


def load_demo(db: Database, demo_dir: Path = DEMO_DIR) -> dict[str, int]:
    """Load the demo handbook, its queries and its reference SME labels in one transaction."""
    documents = pd.DataFrame(_read_jsonl(demo_dir / "documents.jsonl"))
    queries = pd.DataFrame(_read_jsonl(demo_dir / "queries.jsonl"))
    labels = pd.DataFrame(_read_jsonl(demo_dir / "labels.jsonl"))
    labels["source"] = "human"
    labels["assessor"] = labels.get("assessor", "demo-sme")
    labels["status"] = "ok"
    with db.transaction() as tx:
        loaded = {
            "documents": write_documents(tx, documents),
            "queries": write_queries(tx, queries),
            "judgments": write_judgments(tx, labels),
        }
        # "loading" until prepare_demo has run: a later `init --demo` then completes it.
        set_meta(tx, "demo", DEMO_LOADING)
    return loaded


def init_project(db_path: str | Path, *, demo: bool = False, settings: Settings | None = None) -> dict[str, int]:
    """Create (or upgrade) the project database; with ``demo``, load and prepare the demo once.

    Returns the rows the call added (empty when there was nothing to do). Loading the demo into
    a project that already has documents is refused, so that ``init`` never mixes the demo into
    a team's corpus. The demo is marked ``demo = "true"`` in ``project_meta`` only after its
    pipeline (:func:`workbench.services.demo_pipeline.prepare_demo`, pooled at ``pool.depth`` of
    ``settings``, default :func:`load_settings`) succeeded; a demo whose preparation failed or
    was interrupted is completed by running ``init --demo`` again (each step is skipped when its
    result exists, so a complete demo project is left as it is).
    """
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
                raise StoreError(
                    f"{db.path} already holds a corpus; load the demo into a new database "
                    f"(`workbench --db var/demo.duckdb init --demo`)"
                )
            loaded = load_demo(db)
        from workbench.services.demo_pipeline import prepare_demo

        settings = settings if settings is not None else load_settings()
        loaded.update(prepare_demo(db, depth=int(settings.get("pool", "depth"))))
        if meta.get("demo") != DEMO_READY:
            with db.transaction() as tx:
                set_meta(tx, "demo", DEMO_READY)
        return loaded


@dataclass(frozen=True)
class PipelineStep:
    key: str
    title: str
    count: int
    done: bool
    hint: str


@dataclass(frozen=True)
class ProjectStatus:
    path: Path
    counts: dict[str, int]
    steps: list[PipelineStep] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)

    @property
    def next_step(self) -> PipelineStep | None:
        return next((s for s in self.steps if not s.done), None)


def project_status(db: Database) -> ProjectStatus:
    """Counts per table and the pipeline in order, each step marked done or not, with a hint."""
    counts = table_counts(db)
    llm = sum(v for k, v in counts.items() if k.startswith("judgments.llm."))
    human = sum(v for k, v in counts.items() if k.startswith("judgments.human."))
    labels = counts.get("judgments", 0)
    steps = [
        PipelineStep("corpus", "Corpus", counts.get("documents", 0), counts.get("documents", 0) > 0
                     and counts.get("queries", 0) > 0,
                     "import documents and queries: `workbench import corpus FILE`, `workbench import queries FILE`"),
        PipelineStep("chunks", "Chunks", counts.get("chunks", 0), counts.get("chunks", 0) > 0,
                     "chunk the corpus: `workbench chunk --name sections --strategy section`"),
        PipelineStep("runs", "Runs", counts.get("runs", 0), counts.get("runs", 0) > 0,
                     "run a retriever: `workbench retrieve bm25 --chunking sections --name bm25`"),
        PipelineStep("pool", "Pool", counts.get("pool_pairs", 0), counts.get("pool_pairs", 0) > 0,
                     "pool the runs: `workbench pool --name main --runs bm25,dense --depth 20`"),
        PipelineStep("judgments", "LLM judgments", llm, llm > 0,
                     "grade the pool with the LLM judge"),
        # Calibration compares the judge with SMEs, so it needs both kinds of labels.
        PipelineStep("calibration", "Calibration", human, human > 0 and llm > 0,
                     "have SMEs label a calibration set in the app, blind to the judge's grades"),
        PipelineStep("qrels", "Qrels", labels, labels > 0,
                     "export qrels: `workbench export qrels --format trec --out qrels.txt`"),
        PipelineStep("evaluation", "Evaluation", counts.get("evaluations", 0),
                     counts.get("evaluations", 0) > 0,
                     "evaluate runs: `workbench eval qrels.txt run.txt -m nDCG@10`"),
    ]
    return ProjectStatus(path=db.path, counts=counts, steps=steps, meta=read_meta(db))
