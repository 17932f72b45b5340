"""Access control in a project: restricted documents, runs recorded per role, and the leakage
check behind ``workbench rbac-check`` and the Query kinds page (formulas in
:mod:`workbench.core.rag.rbac`)."""

from __future__ import annotations

import json

import pandas as pd

from workbench.core.rag import rbac as core
from workbench.errors import ConfigError, InputError, clip
from workbench.services import access
from workbench.store import query_kinds as store
from workbench.store.database import Database


def parse_role_runs(text: str) -> dict[str, str]:
    """``ROLE=RUN[,ROLE=RUN...]`` as ``{role: run}``; a malformed item is a :class:`ConfigError`."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        role, sep, run = item.partition("=")
        if not sep or not role.strip() or not run.strip():
            raise ConfigError(f"{{field:runs}} expects ROLE=RUN items separated by commas, got {clip(item)} "
                              "(e.g. {field:runs employee=bm25-employee,hr=bm25-hr})")
        if role.strip() in out:
            raise ConfigError(f"{{field:runs}} names role {clip(role.strip())} twice; give one run per role")
        out[role.strip()] = run.strip()
    if not out:
        raise ConfigError("{field:runs} needs at least one ROLE=RUN item, e.g. {field:runs employee=bm25-employee}")
    return out


def restricted_documents(db: Database, field: str = core.DEFAULT_FIELD) -> pd.DataFrame:
    """``doc_id, title, roles`` (sorted list) of the documents that are not public."""
    docs = store.document_metadata(db)
    roles = core.document_roles(dict(zip(docs["doc_id"], docs["metadata"])), field)
    titles = dict(zip(docs["doc_id"], docs["title"]))
    return pd.DataFrame([{"doc_id": d, "title": titles.get(d), "roles": sorted(r)} for d, r in sorted(roles.items())],
                        columns=["doc_id", "title", "roles"])


def recorded_role_runs(db: Database) -> dict[str, str]:
    """``{role: run}`` of the runs recorded with a ``role`` parameter (the latest run per role)."""
    runs = store.run_names_with_params(db)
    out = {}
    for name, params in zip(runs["name"], runs["params"]):
        role = (json.loads(params) if isinstance(params, str) and params else {}).get("role")
        if isinstance(role, str) and role:
            out[role] = name
    return out


def rbac_check(db: Database, role_runs: dict[str, str], *, field: str = core.DEFAULT_FIELD,
               k: int | None = None) -> dict[str, core.RoleLeakage]:
    """Every leak of every role's run (top ``k`` when given): ``{role: RoleLeakage}``."""
    if k is not None and k < 1:
        raise ConfigError(f"k must be at least 1, got {k}")
    known = set(store.run_names_with_params(db)["name"])
    unknown = [r for r in role_runs.values() if r not in known]
    if unknown:
        raise InputError(f"no run {clip(unknown[0])} in the project; runs: {', '.join(sorted(known)) or 'none'}")
    docs = store.document_metadata(db)
    restricted = core.document_roles(dict(zip(docs["doc_id"], docs["metadata"])), field)
    return {role: core.role_leakage(role, run, store.run_rows(db, run, k), restricted, k)
            for role, run in role_runs.items()}


def apply_access(db: Database, records: list[dict], field: str = core.DEFAULT_FIELD) -> int:
    """Set the allowed roles of documents (``{"doc_id", "roles": [...]}`` records) in one
    transaction; an unknown document is refused (nothing is changed)."""
    with db.transaction() as tx:
        for rec in records:
            roles = rec.get(field)
            core.allowed_roles({field: roles}, field, doc_id=str(rec.get("doc_id")))
            if not store.set_document_field(tx, str(rec["doc_id"]), field, roles):
                raise InputError(f"no document {clip(str(rec['doc_id']))} to restrict")
    return len(records)


def record_role_run(db: Database, role: str, run: str) -> None:
    """Record that ``run`` retrieved as ``role`` (shown and checked on the Query kinds page)."""
    access.require("build")
    role = role.strip()
    if not role:
        raise ConfigError("give the role the run retrieved for")
    with db.transaction() as tx:
        if not store.set_run_role(tx, run, role):
            raise InputError(f"no run {clip(run)} in the project")
