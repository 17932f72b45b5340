"""Importing queries: JSONL/BEIR, TSV, SMART and Cranfield."""

from __future__ import annotations

import pandas as pd

from workbench.core.formats import corpus as corpus_formats
from workbench.services.ingest import ledger
from workbench.services.ingest.checks import (
    conflict,
    differs,
    reject_duplicates,
    reject_unwritable_ids,
    short,
)
from workbench.services.ingest.source import Source, parse_with_bar
from workbench.services.progress import ProgressFactory
from workbench.store.corpus import QUERY_COLUMNS, stored_queries, write_queries


def parse_queries(source: Source, fmt: str, progress: ProgressFactory, fields: dict) -> pd.DataFrame:
    if fmt == "jsonl":
        return parse_with_bar(progress, source, lambda text, tick: corpus_formats.queries_from_jsonl(
            text, source.label, tick=tick, id_field=fields["id_field"], text_field=fields["text_field"]))
    text = source.text()
    if fmt == "tsv":
        return corpus_formats.queries_from_tsv(text, source.label)
    return corpus_formats.queries_from_smart(text, source.label, by_position=(fmt == "cranfield"))


def store_queries(cur, queries: pd.DataFrame, path: str) -> tuple[int, int]:
    """Write the queries the project lacks; (written, already stored). Conflicts raise."""
    stored = stored_queries(cur, queries["query_id"])
    merged = queries.merge(stored, on="query_id", how="left", suffixes=("", "_stored"), indicator=True)
    exists = (merged["_merge"] == "both").to_numpy()
    text_diff = differs(merged["text"], merged["text_stored"]).to_numpy() & exists
    desc_diff = differs(merged["description"], merged["description_stored"]).to_numpy() & exists
    # A query without a description in the file does not contradict a stored description.
    desc_diff &= merged["description"].notna().to_numpy()
    conflict(
        merged[text_diff | desc_diff], "query_id",
        lambda r: f"text {short(r['text_stored'])} stored vs {short(r['text'])} in the file"
        if r["text"] != r["text_stored"] else "description differs",
        "queries", path,
        "Queries are immutable because judgments and runs refer to them; give changed queries new ids",
    )
    return write_queries(cur, merged.loc[~exists, QUERY_COLUMNS]), int(exists.sum())


def import_queries(db, source, result, *, progress, fields, **_):
    queries = parse_queries(source, result.format, progress, fields)
    reject_unwritable_ids(queries, ["query_id"], source.label)
    reject_duplicates(queries, ["query_id"], "query ids", source.label)
    result.name = result.name or source.path.stem
    with db.transaction() as cur:
        result.rows, result.present = store_queries(cur, queries, source.label)
        ledger.record(cur, source, result)
