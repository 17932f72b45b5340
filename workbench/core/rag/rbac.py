"""Access control: which retrieved chunks a role was not allowed to see (RBAC leakage).

A document's allowed roles are a list in one of its metadata fields (``roles`` by default):
``{"roles": ["hr", "manager"]}``. A document without the field (or with ``null``) is public;
a single string is one role; an empty list means no role may see it. A run is recorded *as* a
role (the role the retriever ran as, e.g. with that role's filter applied); every row of the
run whose document does not allow that role is a **leak**.

Rates (``rows`` = the run's retrieved rows, cut at rank ``k`` when given)::

    leakage rate of a role   = leaked rows / rows of the role's run       (0 expected)
    leakage rate of a query  = leaked rows of the query / rows of the query

Both are NaN when there is nothing retrieved. The check passes only with zero leaks.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from workbench.errors import InputError, clip

DEFAULT_FIELD = "roles"
LEAK_COLUMNS = ["query_id", "doc_id", "chunk_id", "rank"]


def allowed_roles(metadata, field_name: str = DEFAULT_FIELD, *, doc_id: str = "?") -> frozenset[str] | None:
    """The roles allowed to see a document (None: public), from its metadata (dict or JSON)."""
    if metadata is None or (isinstance(metadata, float) and math.isnan(metadata)):
        return None
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata) if metadata.strip() else {}
        except json.JSONDecodeError:
            raise InputError(f"document {clip(doc_id)}: its metadata is not JSON") from None
    if not isinstance(metadata, Mapping):
        return None
    value = metadata.get(field_name)
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset([value])
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return frozenset(value)
    raise InputError(
        f"document {clip(doc_id)}: metadata field {field_name!r} must be a list of role names "
        f"(or one name), got {clip(json.dumps(value), quote=False)}"
    )


def document_roles(metadata: Mapping[str, object], field_name: str = DEFAULT_FIELD) -> dict[str, frozenset[str]]:
    """``{doc_id: allowed roles}`` of the restricted documents among ``{doc_id: metadata}``."""
    out = {}
    for doc_id, meta in metadata.items():
        roles = allowed_roles(meta, field_name, doc_id=str(doc_id))
        if roles is not None:
            out[str(doc_id)] = roles
    return out


def leaked_rows(rows: pd.DataFrame, restricted: Mapping[str, frozenset[str]], role: str) -> pd.Series:
    """Per row of ``rows`` (with ``doc_id``): True when the document does not allow ``role``."""
    # one set of the documents the role may not see, then one vectorised membership test
    forbidden = [d for d, roles in restricted.items() if role not in roles]
    return rows["doc_id"].astype(str).isin(forbidden)


@dataclass(frozen=True)
class RoleLeakage:
    """One role's run: its rows, its leaks (every one, by query and rank) and per-query rates."""

    role: str
    run: str
    retrieved: int
    leaks: pd.DataFrame  # LEAK_COLUMNS
    per_query: pd.DataFrame = field(repr=False)  # query_id, retrieved, leaks, rate

    @property
    def n_leaks(self) -> int:
        return int(len(self.leaks))

    @property
    def rate(self) -> float:
        return self.n_leaks / self.retrieved if self.retrieved else math.nan


def role_leakage(role: str, run: str, rows: pd.DataFrame, restricted: Mapping[str, frozenset[str]],
                 k: int | None = None) -> RoleLeakage:
    """Leaks of one role's run (``rows``: query_id, doc_id, chunk_id, rank), top ``k`` if given."""
    rows = rows.reindex(columns=LEAK_COLUMNS)
    if k is not None:
        rows = rows[rows["rank"] <= k]
    leak = leaked_rows(rows, restricted, role) if len(rows) else pd.Series([], dtype=bool)
    leaks = rows[leak.to_numpy()].sort_values(["query_id", "rank"], kind="stable").reset_index(drop=True)
    per_query = (pd.DataFrame({"query_id": rows["query_id"].to_numpy(), "leak": leak.to_numpy()})
                 .groupby("query_id", sort=True)["leak"].agg(retrieved="size", leaks="sum").reset_index())
    per_query["leaks"] = per_query["leaks"].astype("int64")
    per_query["rate"] = per_query["leaks"] / per_query["retrieved"]
    return RoleLeakage(role, run, int(len(rows)), leaks, per_query)


def leakage_json(report: Mapping[str, RoleLeakage]) -> dict:
    """``{"leaks": N, "roles": {ROLE: {"leaks": N, "rate": x, "examples": [{query_id, doc_id,
    chunk_id, rank}]}}}``: every leak is listed under its role."""
    roles = {}
    for role, r in report.items():
        examples = [
            {"query_id": str(x.query_id), "doc_id": str(x.doc_id),
             "chunk_id": None if pd.isna(x.chunk_id) else str(x.chunk_id), "rank": int(x.rank)}
            for x in r.leaks.itertuples(index=False)
        ]
        roles[role] = {"leaks": r.n_leaks, "rate": r.rate, "examples": examples}
    return {"leaks": sum(r.n_leaks for r in report.values()), "roles": roles}
