"""Query tags: the slices queries are grouped by (the retrieval harness's query choice, evaluation
slices, a sweep's slice lift, the Experiments page).

A query's ``tags`` (imported with the queries, stored as JSON text) is a list, a single string or
a mapping; :func:`query_tags` reads every query's as ``query_id, tag`` pairs, a mapping's entries
as ``key=value``. Text that is not JSON carries no tag. It reads the store only, so every
services subpackage may use it.
"""

from __future__ import annotations

import json

import pandas as pd

from workbench.store.corpus import query_texts
from workbench.store.database import Database


def query_tags(db: Database) -> pd.DataFrame:
    """``query_id, tag`` pairs from the queries' tags (a list, a string, or a mapping as key=value)."""
    pairs = []
    for qid, raw in query_texts(db)[["query_id", "tags"]].itertuples(index=False):
        try:
            value = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            value = None
        if isinstance(value, dict):
            value = [f"{k}={v}" for k, v in value.items()]
        elif isinstance(value, str):
            value = [value]
        for tag in value or []:
            pairs.append((str(qid), str(tag)))
    return pd.DataFrame(pairs, columns=["query_id", "tag"])
