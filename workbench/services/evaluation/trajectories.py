"""Multi-hop and agentic retrieval in a project: evidence chains and agent trajectories, read
from JSONL files or stored, scored by :func:`workbench.core.rag.trajectories.evaluate_trajectories`.

Results given as chunk ids are resolved to their spans through the project's chunks; a chunk id
the project does not know is refused with the file and line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from workbench.core.formats.lines import decode_utf8, read_json_objects
from workbench.core.rag import trajectories as core
from workbench.errors import InputError, clip
from workbench.services import access, lazy
from workbench.store import query_kinds as store
from workbench.store.database import Database


def read_jsonl(path: str | Path) -> list[tuple[int, dict]]:
    file = lazy.core_metrics_readers.check_regular_file(path)
    records = read_json_objects(decode_utf8(file.read_bytes(), str(path)), str(path))
    if not records:
        raise InputError("the file has no JSON object", path=str(path))
    return records


def read_trajectory_file(path: str | Path, db: Database | None = None) -> list[core.Trajectory]:
    """Trajectories of a JSONL file, chunk ids resolved through ``db`` when it is given."""
    trajectories = core.parse_trajectories(read_jsonl(path), str(path))
    return resolve_chunks(trajectories, db, str(path))


def resolve_chunks(trajectories: list[core.Trajectory], db: Database | None, where: str) -> list[core.Trajectory]:
    wanted = sorted({r.chunk_id for t in trajectories for h in t.hops for r in h.results
                     if r.chunk_id is not None and r.start is None})
    if not wanted:
        return trajectories
    if db is None:
        raise InputError(f"results name chunk ids (e.g. {clip(wanted[0])}) without offsets; give "
                         "doc_id, start and end, or a project that holds the chunking", path=where)
    spans = store.chunk_spans(db, wanted).set_index("chunk_id")
    missing = [c for c in wanted if c not in spans.index]
    if missing:
        raise InputError(f"chunk {clip(missing[0])} is not in the project ({len(missing)} unknown chunk ids); "
                         "chunk the corpus with that chunking first or give offsets", path=where)

    def fix(r: core.Result) -> core.Result:
        if r.chunk_id is None or r.start is not None:
            return r
        s = spans.loc[r.chunk_id]
        return core.Result(str(s["doc_id"]), int(s["start"]), int(s["end"]), r.chunk_id)

    return [core.Trajectory(t.query_id, tuple(core.Hop(h.searched, h.sub_query, tuple(fix(r) for r in h.results))
                                               for h in t.hops)) for t in trajectories]


def read_chain_file(path: str | Path) -> dict[str, list[core.ChainSpan]]:
    return core.parse_chains(read_jsonl(path), str(path))


def stored_chains(db: Database) -> dict[str, list[core.ChainSpan]]:
    frame = store.read_chains(db)
    records = [(i + 1, row) for i, row in enumerate(frame.to_dict(orient="records"))]
    return core.parse_chains(records, "evidence chains")


def stored_trajectories(db: Database, name: str) -> list[core.Trajectory]:
    hops, results = store.read_trajectory(db, name)
    if hops.empty:
        names = store.trajectory_names(db)
        raise InputError(f"no trajectories named {clip(name)} in the project; stored: {', '.join(names) or 'none'}")
    out = []
    for qid, group in hops.groupby("query_id", sort=True):
        res = results[results["query_id"] == qid]
        steps = []
        for row in group.sort_values("hop").itertuples(index=False):
            r = res[res["hop"] == row.hop].sort_values("rank")
            steps.append(core.Hop(bool(row.searched), None if pd.isna(row.sub_query) else str(row.sub_query), tuple(
                core.Result(str(x.doc_id), None if pd.isna(x.start) else int(x.start),
                            None if pd.isna(x.end) else int(x.end), None if pd.isna(x.chunk_id) else str(x.chunk_id))
                for x in r.itertuples(index=False))))
        out.append(core.Trajectory(str(qid), tuple(steps)))
    return out


def trajectory_names(db: Database) -> list[str]:
    return store.trajectory_names(db)


def store_chains(db: Database, chains: dict[str, list[core.ChainSpan]]) -> int:
    frame = pd.DataFrame([{"query_id": q, "hop": c.hop, "doc_id": c.span.doc_id, "start": c.span.start,
                           "end": c.span.end} for q, spans in chains.items() for c in spans],
                         columns=["query_id", "hop", "doc_id", "start", "end"])
    with db.transaction() as tx:
        return store.write_chains(tx, frame)


def store_trajectories(db: Database, name: str, trajectories: list[core.Trajectory]) -> int:
    hops, results = [], []
    for t in trajectories:
        for i, h in enumerate(t.hops, start=1):
            hops.append({"query_id": t.query_id, "hop": i, "searched": h.searched, "sub_query": h.sub_query})
            for rank, r in enumerate(h.results, start=1):
                results.append({"query_id": t.query_id, "hop": i, "rank": rank, "doc_id": r.doc_id,
                                "chunk_id": r.chunk_id, "start": r.start, "end": r.end})
    hops_frame = pd.DataFrame(hops, columns=["query_id", "hop", "searched", "sub_query"])
    results_frame = pd.DataFrame(results, columns=["query_id", "hop", "rank", "doc_id", "chunk_id", "start", "end"])
    for col in ("start", "end"):
        results_frame[col] = results_frame[col].astype("Int64")
    with db.transaction() as tx:
        return store.write_trajectories(tx, name, hops_frame, results_frame)


def evaluate(trajectories: list[core.Trajectory], chains: dict[str, list[core.ChainSpan]], k: int = 5,
             min_overlap: float = 0.5) -> core.TrajectoryReport:
    if not chains:
        raise InputError("no evidence chain to score against; give a chains file or store chains in the project")
    return core.evaluate_trajectories(trajectories, chains, k=k, min_overlap=min_overlap)


def report_json(report: core.TrajectoryReport) -> dict:
    """The ``eval``-like JSON entry: aggregate, per_query (hop recalls keyed by hop), counts."""
    per_query = {}
    for q, v in report.per_query.items():
        per_query[q] = {**{k: v[k] for k in v if k != "hop_recall"},
                        "hop_recall": {str(h): x for h, x in v["hop_recall"].items()}}
    return {"k": report.k, "aggregate": report.aggregate, "per_query": per_query, "counts": report.counts}


def _records_from_bytes(data: bytes, source: str) -> list[tuple[int, dict]]:

    records = read_json_objects(decode_utf8(data, source), source)
    if not records:
        raise InputError("the file has no JSON object", path=source)
    return records


def import_chains(db: Database, data: bytes, source: str, *, replace: bool = False) -> int:
    """Store the evidence chains of an uploaded JSONL file. A query that already has a chain is
    refused (nothing stored) unless ``replace``, which replaces the chains of the file's queries."""
    access.require("import")
    chains = core.parse_chains(_records_from_bytes(data, source), source)
    if not replace:
        existing = sorted(set(chains) & set(store.read_chains(db)["query_id"].astype(str)))
        if existing:
            raise InputError(f"{len(existing)} of its queries already have an evidence chain (e.g. "
                             f"{clip(existing[0])}); nothing was stored; choose to replace them", path=source)
    return store_chains(db, chains)


def import_trajectories(db: Database, name: str, data: bytes, source: str) -> int:
    """Store an uploaded trajectories JSONL file as set ``name`` (chunk ids resolved here)."""
    access.require("import")
    if not name.strip():
        raise InputError("give the trajectories a name")
    if name.strip() in store.trajectory_names(db):
        raise InputError(f"trajectories named {clip(name.strip())} already exist; choose another name")
    parsed = resolve_chunks(core.parse_trajectories(_records_from_bytes(data, source), source), db, source)
    return store_trajectories(db, name.strip(), parsed)
