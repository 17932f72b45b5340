"""Importing documents (``corpus``): BEIR/JSONL, a folder of text files, SMART records."""

from __future__ import annotations

import pandas as pd

from workbench.core.formats import corpus as corpus_formats
from workbench.core.formats.lines import decode_utf8
from workbench.errors import InputError
from workbench.services.chunking import chunk_into_existing
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
from workbench.store.corpus import DOCUMENT_COLUMNS, stored_documents, write_documents


def parse_documents(source: Source, fmt: str, progress: ProgressFactory, fields: dict) -> pd.DataFrame:
    if fmt == "folder":
        files = [(rel, decode_utf8(data, str(source.path / rel))) for rel, data in source.files]
        if not files:
            raise InputError(f"holds no {'/'.join(corpus_formats.TEXT_SUFFIXES)} files", path=source.label)
        return corpus_formats.documents_from_files(files)
    if fmt == "jsonl":
        return parse_with_bar(progress, source, lambda text, tick: corpus_formats.documents_from_jsonl(
            text, source.label, tick=tick, **fields))
    return parse_with_bar(progress, source, lambda text, tick: corpus_formats.documents_from_smart(
        text, source.label, tick=tick))


def import_corpus(db, source, result, *, progress, fields, **_):
    docs = parse_documents(source, result.format, progress, fields)
    reject_unwritable_ids(docs, ["doc_id"], source.label)
    reject_duplicates(docs, ["doc_id"], "doc ids", source.label)
    result.name = result.name or source.path.stem
    with db.transaction() as cur:
        stored = stored_documents(cur, docs["doc_id"])
        merged = docs.merge(stored, on="doc_id", how="left", suffixes=("", "_stored"), indicator=True)
        exists = (merged["_merge"] == "both").to_numpy()
        text_diff = differs(merged["text"], merged["text_stored"]).to_numpy() & exists
        title_diff = differs(merged["title"], merged["title_stored"]).to_numpy() & exists
        clash = merged[text_diff | title_diff].copy()
        clash["what"] = ["text differs" if t else "title differs" for t in text_diff[text_diff | title_diff]]
        conflict(
            clash, "doc_id",
            lambda r: (f"text {short(r['text_stored'])} stored vs {short(r['text'])} in the file"
                       if r["what"] == "text differs"
                       else f"title {short(r['title_stored'])} stored vs {short(r['title'])} in the file"),
            "documents", source.label,
            "Documents are immutable because judgments point at their character offsets; "
            "give changed documents new ids or start a new project",
        )
        new = merged.loc[~exists, DOCUMENT_COLUMNS]
        empty = merged.loc[~exists & (merged["text"] == "").to_numpy()]
        if len(empty):
            first = empty.iloc[0]
            line = f":{int(first['line'])}" if "line" in empty.columns and pd.notna(first["line"]) else ""
            result.empty_texts, result.empty_example = len(empty), f"{source.label}{line} doc_id {short(first['doc_id'])}"
        result.present = int(exists.sum())
        result.rows = write_documents(cur, new)
        # A chunking covers every document: new documents join each existing chunking now.
        result.chunked = chunk_into_existing(cur, new)
        ledger.record(cur, source, result)
