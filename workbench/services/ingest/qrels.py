"""Importing qrels as span-anchored judgments (``source='imported'``): TREC, BEIR, JSONL rows,
spans and Cranfield. Document-level qrels become whole-document spans ``[0, len(text))``."""

from __future__ import annotations

import pandas as pd

from workbench.core.formats import labels as label_formats
from workbench.core.metrics.readers import read_beir_qrels, read_jsonl_qrels, read_trec_qrels
from workbench.errors import InputError
from workbench.services.ingest import ledger
from workbench.services.ingest.checks import (
    conflict,
    drop_unknown,
    reject_duplicates,
    reject_unwritable_ids,
)
from workbench.services.ingest.queries import store_queries
from workbench.services.ingest.source import Source, named_as_label
from workbench.store.corpus import document_lengths, stored_queries
from workbench.store.judgments import stored_span_grades, write_judgments


def parse_qrels(source: Source, fmt: str) -> tuple[pd.DataFrame, pd.DataFrame | None, int]:
    """(judgments, queries carried by the rows or None, excluded rows)."""
    text = source.text()  # checks UTF-8 with a byte offset before the readers see the file
    if fmt == "trec":
        return label_formats.qrels_frame(read_trec_qrels(source.path, careful=True)), None, 0
    if fmt == "beir":
        return label_formats.qrels_frame(read_beir_qrels(source.path)), None, 0
    if fmt == "jsonl":
        frame = label_formats.qrels_frame(read_jsonl_qrels(source.path))
        return frame, label_formats.qrels_row_queries(text, source.label), 0
    if fmt == "spans":
        return label_formats.span_judgments(text, source.label), None, 0
    frame, excluded = label_formats.cranfield_qrels(text, source.label)
    return frame, None, excluded


def import_qrels(db, source, result, *, assessor, skip, **_):
    path = source.label
    with named_as_label(source):
        frame, row_queries, result.excluded = parse_qrels(source, result.format)
    if frame.empty:
        raise InputError("holds no judgments", path=path)
    label_formats.check_grades(frame, path)
    default_assessor = assessor or result.name or source.path.stem
    result.name = default_assessor
    if "assessor" in frame:
        frame["assessor"] = frame["assessor"].astype(object).where(frame["assessor"].notna(), default_assessor)
        key = ["query_id", "doc_id", "start", "end", "assessor"]
    else:
        frame["assessor"] = default_assessor
        key = ["query_id", "doc_id"]
    reject_unwritable_ids(frame, ["query_id", "doc_id"], path)
    reject_duplicates(frame, key, "judgments (same query and document" + (" span" if "start" in frame else "")
                       + ")", path)

    with db.transaction() as cur:
        if row_queries is not None and not row_queries.empty:
            row_queries = row_queries.drop_duplicates(["query_id", "text"])
            reject_duplicates(row_queries, ["query_id"], "query ids with different query texts", path)
            result.queries_added, _ = store_queries(cur, row_queries, path)
        known = stored_queries(cur, frame["query_id"])["query_id"]
        frame = drop_unknown(frame, ~frame["query_id"].isin(known), "query_id", "query ids",
                              "import the queries first (workbench import queries FILE)", path, skip, result)
        lengths = document_lengths(cur, frame["doc_id"])
        frame = drop_unknown(frame, ~frame["doc_id"].isin(lengths["doc_id"]), "doc_id", "doc ids",
                              "import a corpus that holds them (workbench import corpus FILE)", path, skip, result)
        if frame.empty:
            raise InputError("no judgments left after dropping rows with unknown ids; nothing was imported",
                             path=path)
        frame = frame.merge(lengths, on="doc_id", how="left")
        if "start" in frame:
            outside = frame[frame["end"] > frame["length"]]
            if len(outside):
                r = outside.iloc[0]
                raise InputError(
                    f"{len(outside):,} spans end after the end of their document (first: doc {r['doc_id']!r} "
                    f"span [{r['start']}, {r['end']}) but the text has {r['length']} characters); offsets are "
                    f"character positions in the stored text, end exclusive",
                    path=path, line=int(r["line"]),
                )
        else:
            frame["start"] = 0
            frame["end"] = frame["length"]
        frame = frame.astype({"start": "int64", "end": "int64", "grade": "int64"})
        stored = stored_span_grades(cur, frame, "imported")
        merged = frame.merge(stored, on=["query_id", "doc_id", "start", "end", "assessor"], how="left",
                             suffixes=("", "_stored"))
        exists = merged["grade_stored"].notna()
        clash = merged[exists & (merged["grade_stored"] != merged["grade"])].copy()
        clash["item"] = clash["query_id"] + "/" + clash["doc_id"]
        conflict(clash, "item",
                  lambda r: f"grade {int(r['grade_stored'])} stored vs {int(r['grade'])} in the file",
                  f"judgments of assessor {default_assessor!r}", path,
                  "Import the new version under another assessor name ({field:assessor}) to keep both")
        new = merged.loc[~exists, ["query_id", "doc_id", "start", "end", "grade", "assessor"]].copy()
        new["source"] = "imported"
        new["status"] = "ok"
        result.present = int(exists.sum())
        result.rows = write_judgments(cur, new)
        ledger.record(cur, source, result)
