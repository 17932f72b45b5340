"""Importing a TREC run; its level (documents or the chunks of one chunking) is detected."""

from __future__ import annotations

import pandas as pd

from workbench.core.formats import labels as label_formats
from workbench.core.formats.names import check_name
from workbench.core.metrics.readers import read_trec_run
from workbench.errors import InputError
from workbench.services.ingest import ledger
from workbench.services.ingest.checks import (
    drop_unknown,
    reject_duplicates,
    reject_unwritable_ids,
)
from workbench.services.ingest.source import named_as_label
from workbench.store.chunks import read_chunkings, stored_chunks
from workbench.store.corpus import document_lengths, stored_queries
from workbench.store.runs import set_run_scope, stored_run, stored_run_scores, write_run


def import_run(db, source, result, *, skip, **_):
    path = source.label
    given = result.name
    name = given or source.path.stem
    # One rule for run names (import, retrieve, pool): `a,b` would be accepted, then unusable.
    check_name(name, "run", "choose another {field}" if given else
               f"the file name {source.path.name!r} does not give one; {{set_field:name NAME}}", field="name")
    source.text()  # UTF-8 check with byte offset
    with named_as_label(source):
        frame = label_formats.run_frame(read_trec_run(source.path, careful=True))
    if frame.empty:
        raise InputError("holds no run rows", path=path)
    reject_unwritable_ids(frame, ["query_id", "item_id"], path)
    reject_duplicates(frame, ["query_id", "item_id"], "results (same query and id)", path)
    result.name = name
    known_chunkings = set(read_chunkings(db)["name"].astype(str))

    with db.transaction() as cur:
        docs = document_lengths(cur, frame["item_id"])["doc_id"]
        chunks = stored_chunks(cur, frame["item_id"])
        is_doc = frame["item_id"].isin(docs)
        is_chunk = frame["item_id"].isin(chunks["chunk_id"]) & ~is_doc
        if is_doc.any() and is_chunk.any():
            d, c = frame[is_doc].iloc[0], frame[is_chunk].iloc[0]
            raise InputError(
                f"mixes document ids ({int(is_doc.sum()):,} rows, e.g. {d['item_id']!r} line {d['line']}) and "
                f"chunk ids ({int(is_chunk.sum()):,} rows, e.g. {c['item_id']!r} line {c['line']}); a run ranks "
                f"either whole documents or the chunks of one chunking",
                path=path, line=int(c["line"]),
            )
        if is_chunk.any():
            used = chunks[chunks["chunk_id"].isin(frame.loc[is_chunk, "item_id"])]
            chunkings = sorted(used["chunking"].unique())
            if len(chunkings) > 1:
                raise InputError(f"ranks chunks of several chunkings ({', '.join(chunkings)}); a chunk-level "
                                 f"run ranks the chunks of one chunking", path=path)
            result.level, result.chunking = "chunk", chunkings[0]
            frame = drop_unknown(frame, ~is_chunk, "item_id", "chunk ids",
                                  f"they are not chunks of {chunkings[0]!r}", path, skip, result)
        else:
            result.level = "doc"
            chunking = _chunking_of_unknown(frame.loc[~is_doc, "item_id"], known_chunkings)
            if chunking is not None:
                # ids of the form <chunking>:<doc_id>:<seq> of a chunking the project has: unknown
                # chunks of it, not documents a corpus import would bring
                frame = drop_unknown(frame, ~is_doc, "item_id", f"chunk ids of chunking {chunking!r}",
                                      f"chunking {chunking!r} has no such chunks (its ids are "
                                      f"'{chunking}:<doc_id>:<seq>'); check the ids against the chunking's "
                                      f"chunks", path, skip, result)
            else:
                frame = drop_unknown(frame, ~is_doc, "item_id", "doc ids",
                                      "import a corpus that holds them (workbench import corpus FILE)", path, skip,
                                      result)
        known_q = stored_queries(cur, frame["query_id"])["query_id"]
        frame = drop_unknown(frame, ~frame["query_id"].isin(known_q), "query_id", "query ids",
                              "import the queries first (workbench import queries FILE)", path, skip, result)
        if frame.empty:
            raise InputError("no run rows left after dropping rows with unknown ids; nothing was imported",
                             path=path)

        existing = stored_run(cur, name)
        if existing is not None:
            stored = stored_run_scores(cur, name)
            both = frame.merge(stored, on=["query_id", "item_id"], how="outer", suffixes=("", "_stored"),
                               indicator=True)
            differ = both[(both["_merge"] != "both") | (both["score"] != both["score_stored"])]
            if differ.empty:
                result.present = len(frame)
                ledger.record(cur, source, result)
                return
            raise InputError(_name_taken(name, existing, stored, frame, result, differ), path=path,
                             line=_first_line(differ))

        frame["rank"] = label_formats.rank_by_score(frame)
        if result.level == "chunk":
            owner = chunks.drop_duplicates("chunk_id").set_index("chunk_id")["doc_id"]
            rows = pd.DataFrame({"query_id": frame["query_id"], "doc_id": frame["item_id"].map(owner),
                                 "chunk_id": frame["item_id"]})
        else:
            rows = pd.DataFrame({"query_id": frame["query_id"], "doc_id": frame["item_id"],
                                 "chunk_id": pd.Series([None] * len(frame), index=frame.index, dtype=object)})
        rows["rank"] = frame["rank"].astype("int64")
        rows["score"] = frame["score"].astype("float64")
        rows = rows.sort_values(["query_id", "rank"], kind="stable")
        result.rows = write_run(cur, name, "imported", rows,
                                params={"file": source.label, "format": result.format, "sha256": source.sha256})
        set_run_scope(cur, name, result.level, result.chunking)
        ledger.record(cur, source, result)


def _chunking_of_unknown(ids: pd.Series, chunkings: set[str]) -> str | None:
    """The chunking every one of ``ids`` names by its prefix (``<chunking>:<doc_id>:<seq>``, a
    chunking the project has), else None: those ids are unknown chunks, not unknown documents."""
    if ids.empty or not chunkings:
        return None
    parts = ids.astype(str).str.extract(r"^([^:]+):(.+):(\d+)$")
    names = set(parts[0].dropna())
    if parts[0].isna().any() or len(names) != 1 or not names <= chunkings:
        return None
    return next(iter(names))


def _scope(level, chunking) -> str:
    return f"chunk level (chunking {chunking!r})" if level == "chunk" else "document level"


def _rows(n: int) -> str:
    return f"{n:,} row" + ("" if n == 1 else "s")


def _first_line(differ: pd.DataFrame) -> int | None:
    lines = differ["line"].dropna()
    return int(lines.iloc[0]) if len(lines) else None


def _name_taken(name: str, existing: dict, stored: pd.DataFrame, frame: pd.DataFrame, result, differ) -> str:
    """Why a run file whose name is taken by a stored run with other rows is refused: the name
    belongs to a different run (another level/chunking, or other results), and how to go on."""
    fix = (f"nothing was imported; {{set_field:name NEW_NAME}} to import the file as a new run, or delete the stored "
           f"run first ({{command:delete run {name}}})")
    head = f"the name {name!r} is taken by a different run: run {name!r} already exists"
    if (existing["level"], existing["chunking"]) != (result.level, result.chunking):
        return (f"{head} at {_scope(existing['level'], existing['chunking'])} with {_rows(len(stored))}, and this "
                f"file is a run at {_scope(result.level, result.chunking)} with {_rows(len(frame))}; {fix}")
    r = differ.iloc[0]
    if r["_merge"] == "left_only":
        first = f"query {r['query_id']!r} id {r['item_id']!r} is in the file but not in the stored run"
    elif r["_merge"] == "right_only":
        first = f"query {r['query_id']!r} id {r['item_id']!r} is in the stored run but not in the file"
    else:
        first = (f"query {r['query_id']!r} id {r['item_id']!r}: score {r['score_stored']} stored vs "
                 f"{r['score']} in the file")
    return (f"{head} ({_scope(existing['level'], existing['chunking'])}, {len(stored):,} rows) and {len(differ):,} "
            f"of its (query, id) results differ from this file (first: {first}); {fix}")
