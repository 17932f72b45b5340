"""The demo's query-kind data and what the Query kinds page summarises.

:func:`prepare_query_kinds_demo` runs after the demo pipeline (it needs the ``bm25`` run). It is
idempotent (each part is skipped when its result exists) and adds:

* ``access.jsonl``: allowed roles on four documents (metadata field ``roles``);
* (with :func:`add_demo_role_runs`, one click on the Query kinds page) two runs recorded as
  roles, from the ``bm25`` run with each role's filter applied:
  ``bm25-security`` (filtered correctly: no leak) and ``bm25-employee``, filtered with a stale
  access list that predates the restriction of ``eng-production-access``, so it leaks that
  document: the access-control report has something to show;
* ``chains.jsonl``: evidence chains (hop-numbered gold spans) of the 7 multi-hop queries;
* ``trajectories.jsonl``: a sample agent's trajectories on them (stored as ``demo-agent``);
* ``answers.jsonl``: generated answers for 14 queries, the 4 unanswerable ones among them
  (stored as ``demo-answers``).
"""

from __future__ import annotations

from pathlib import Path

from workbench.core.formats.lines import decode_utf8, read_json_objects
from workbench.errors import InputError
from workbench.resources import DEMO_DIR
from workbench.services import access
from workbench.services.evaluation import abstention, rbac, trajectories
from workbench.services.qrels import answerability
from workbench.store import query_kinds as store
from workbench.store.database import Database
from workbench.store.runs import read_run_rows, run_exists, set_run_scope, stored_run, write_run

DEMO_TRAJECTORIES = "demo-agent"
DEMO_ANSWERS = "demo-answers"
SOURCE_RUN = "bm25"
# role -> (run name, restricted documents its filter does not know about)
DEMO_ROLE_RUNS = {
    "security": ("bm25-security", frozenset()),
    "employee": ("bm25-employee", frozenset({"eng-production-access"})),
}


def _records(path: Path) -> list[tuple[int, dict]]:
    if not path.is_file():
        raise InputError("demo file is missing; reinstall from a full checkout", path=str(path))
    return read_json_objects(decode_utf8(path.read_bytes(), str(path)), str(path))


def _role_run(db: Database, role: str, name: str, stale: frozenset[str]) -> int:
    """``bm25`` rows the role may see (by the role's filter, blind to ``stale``), re-ranked."""
    restricted = rbac.restricted_documents(db)
    hidden = {d for d, roles in zip(restricted["doc_id"], restricted["roles"]) if role not in roles} - stale
    rows = read_run_rows(db, SOURCE_RUN)
    rows = rows[~rows["doc_id"].isin(hidden)].copy()
    rows["rank"] = rows.groupby("query_id").cumcount() + 1
    with db.transaction() as tx:
        scope = stored_run(tx, SOURCE_RUN)
        n = write_run(tx, name, "bm25+acl", rows, stage="rbac-filter",
                      params={"role": role, "source": SOURCE_RUN,
                              "filter": "stale access list" if stale else "current access list"})
        if scope:
            set_run_scope(tx, name, scope["level"] or "chunk", scope["chunking"])
    return n


def prepare_query_kinds_demo(db: Database, demo_dir: Path = DEMO_DIR) -> dict[str, int]:
    """Add the demo's access metadata, role runs, chains, trajectories and answers (each part
    skipped when done before); returns the rows added per part."""
    done: dict[str, int] = {}
    if rbac.restricted_documents(db).empty:
        done["restricted_documents"] = rbac.apply_access(db, [r for _, r in _records(demo_dir / "access.jsonl")])
    if store.read_chains(db).empty:
        done["evidence_chains"] = trajectories.store_chains(db, trajectories.read_chain_file(demo_dir / "chains.jsonl"))
    if DEMO_TRAJECTORIES not in store.trajectory_names(db):
        done["trajectory_hops"] = trajectories.store_trajectories(
            db, DEMO_TRAJECTORIES, trajectories.read_trajectory_file(demo_dir / "trajectories.jsonl"))
    if DEMO_ANSWERS not in store.answer_set_names(db):
        done["answers"] = abstention.store_answers(
            db, DEMO_ANSWERS, abstention.read_answers_file(demo_dir / "answers.jsonl"))
    return done


def add_demo_role_runs(db: Database) -> dict[str, int]:
    """The demo's two runs recorded as roles (module doc), from its ``bm25`` run; each skipped
    when it exists. Kept out of ``init --demo`` so the demo starts with one run; the Query kinds
    page adds them with one click. Returns ``{run: rows}`` of the runs it made."""
    access.require("build")
    if not run_exists(db, SOURCE_RUN):
        raise InputError(f"the project has no {SOURCE_RUN!r} run to filter; run BM25 first")
    if rbac.restricted_documents(db).empty:
        rbac.apply_access(db, [r for _, r in _records(DEMO_DIR / "access.jsonl")])
    return {name: _role_run(db, role, name, stale)
            for role, (name, stale) in DEMO_ROLE_RUNS.items() if not run_exists(db, name)}


def summary(db: Database) -> dict[str, object]:
    """What the Query kinds page starts from: queries marked unanswerable, runs, answer sets,
    restricted documents, role runs, chains and trajectory sets."""
    marks = answerability.query_answerability(db)
    chains = store.read_chains(db)
    return {
        "queries": int(len(marks)),
        "unanswerable": int(marks["unanswerable"].sum()),
        "runs": store.run_names_with_params(db)["name"].tolist(),
        "answer_sets": store.answer_set_names(db),
        "restricted": rbac.restricted_documents(db),
        "role_runs": rbac.recorded_role_runs(db),
        "chain_queries": int(chains["query_id"].nunique()) if not chains.empty else 0,
        "trajectory_sets": store.trajectory_names(db),
    }

