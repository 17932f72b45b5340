"""Project lifecycle: create a project database, load the demo, report the pipeline state."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from workbench import __version__
from workbench.errors import InputError, StoreError
from workbench.store.corpus import write_documents, write_queries
from workbench.store.database import Database
from workbench.store.judgments import write_judgments
from workbench.store.meta import read_meta, set_meta, table_counts

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_DIR = REPO_ROOT / "data" / "demo"


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
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise InputError(f"not valid JSON ({exc.msg})", path=str(path), line=number) from None
    return rows


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
        set_meta(tx, "demo", "true")
    return loaded


def init_project(db_path: str | Path, *, demo: bool = False) -> dict[str, int]:
    """Create (or upgrade) the project database; with ``demo``, load the demo once.

    Loading the demo into a project that already has documents is refused, so that ``init``
    never mixes the demo into a team's corpus; an existing demo project is left as it is.
    """
    with open_project(db_path, create=True) as db:
        meta = read_meta(db)
        with db.transaction() as tx:
            if "created_at" not in meta:
                set_meta(tx, "created_at", datetime.now(UTC).isoformat(timespec="seconds"))
            set_meta(tx, "workbench_version", __version__)
        if not demo:
            return {}
        if meta.get("demo") == "true":
            return {}
        if table_counts(db).get("documents", 0):
            raise StoreError(
                f"{db.path} already holds a corpus; load the demo into a new database "
                f"(`workbench --db var/demo.duckdb init --demo`)"
            )
        loaded = load_demo(db)
        from workbench.services.demo_pipeline import prepare_demo

        loaded.update(prepare_demo(db))
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
