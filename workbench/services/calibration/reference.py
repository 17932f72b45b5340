"""The SMEs' reference labels of a calibration sample and the options a report or gate reads
them with: what the gate (:mod:`workbench.services.calibration.verdicts`) and the report
(:mod:`workbench.services.calibration.agreement_report`) both stand on.

Reference labels when several SMEs labelled an item: the resolved label when a lead adjudicated
it, else the lower median of their grades (so one SME cannot pull a pair across the threshold
alone).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from workbench.core.calibration.sample import HOLDOUT
from workbench.core.qrels_policy import combine_grades
from workbench.core.rag import rbac
from workbench.store import calibration as store
from workbench.store import query_kinds
from workbench.store.database import Database

HIGH_RISK_RATE = 0.90
# The reserved annotator id of resolved (adjudicated) labels; who resolved one is the assessor
# of its judgments row.
ADJUDICATION = "adjudication"


def reference_labels(db: Database, sample: str, *, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """One reference grade per labelled item: the resolved label when a lead adjudicated it,
    else the lower median of its SMEs' grades. ``table``: the sample's
    :func:`workbench.store.calibration.label_table`, when the caller has read it already."""
    table = store.label_table(db, sample) if table is None else table
    labelled = table[table["action"] == "label"].copy()
    if labelled.empty:
        return labelled.assign(n_sme=pd.Series(dtype="int64"))
    labelled["grade"] = labelled["grade"].astype("int64")
    resolved = labelled[labelled["annotator"] == ADJUDICATION].set_index("position")["grade"]
    labelled = labelled[labelled["annotator"] != ADJUDICATION]
    if labelled.empty:
        return labelled.assign(n_sme=pd.Series(dtype="int64"))
    keep = ["position", "query_id", "doc_id", "chunk_id", "start", "end", "part", "weight", "judge_grade",
            "stratum", "tags"]
    grouped = labelled.groupby("position", sort=True)
    # the qrels rule's combination of several assessors (core.qrels_policy), by the lower median
    ref = grouped["grade"].apply(lambda g: combine_grades(g.to_numpy(), "lower_median")).rename("grade")
    n_sme = grouped["annotator"].nunique().rename("n_sme")
    first = grouped[keep[1:]].first()
    out = first.join(ref).join(n_sme)
    adjudicated = out.index.isin(resolved.index)
    out.loc[adjudicated, "grade"] = resolved.reindex(out.index[adjudicated]).to_numpy()
    out["adjudicated"] = adjudicated
    out = out.reset_index()
    # a sample drawn before any judge graded its pool has no draw-time judge grade
    out["judge_grade"] = out["judge_grade"].astype("int64" if out["judge_grade"].notna().all() else "Int64")
    out["grade"] = out["grade"].astype("int64")
    return out


def slice_tags(value) -> list[str]:
    """A query's tags (stored JSON text) as slice names: a list's items, a dict's ``key=value``."""
    if not isinstance(value, str) or not value:
        return []
    parsed = json.loads(value)
    if isinstance(parsed, list):
        return [str(t) for t in parsed]
    if isinstance(parsed, dict):
        return [f"{k}={v}" for k, v in parsed.items()]
    return [str(parsed)]


#: The calibration slice of pairs whose document is restricted (see :func:`restricted_slice_tags`).
RESTRICTED_TAG = "restricted"


def restricted_slice_tags(db: Database, doc_ids, field: str = rbac.DEFAULT_FIELD) -> list[list[str]]:
    """Per document id, ``["restricted"]`` when the document is restricted, else ``[]``: the
    extra slice tag the calibration report gives such pairs, so that ``[calibration]
    high_risk_tags = "restricted"`` holds restricted content to the stricter thresholds."""
    docs = query_kinds.document_metadata(db)
    restricted = rbac.document_roles(dict(zip(docs["doc_id"], docs["metadata"])), field)
    return [[RESTRICTED_TAG] if str(d) in restricted else [] for d in doc_ids]


@dataclass(frozen=True)
class ReportOptions:
    threshold: int = 2
    seed: int = 0
    n_boot: int = 2000
    part: str = HOLDOUT
    weighted: bool = True
    high_risk_tags: tuple[str, ...] = ()
    high_risk_rate: float = HIGH_RISK_RATE
    disagreements: int = 20
    # Runs' precision is corrected over their top-k pooled items with a judge grade.
    precision_k: int = 10


def gated_part(labels: pd.DataFrame, options: ReportOptions) -> pd.DataFrame:
    """The reference labels (:func:`reference_labels`) of the part ``options`` gates."""
    return labels if options.part == "all" else labels[labels["part"] == options.part]
