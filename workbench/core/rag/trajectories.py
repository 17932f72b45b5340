"""Multi-hop and agentic retrieval: trajectories scored against evidence chains.

An agent decides whether to search, what to search for and how many times, so one ranked list
per query no longer describes retrieval. A **trajectory** (one JSONL object per query)::

    {"query_id": "q012",
     "hops": [{"search": true, "sub_query": "lost phone report",
               "results": [{"doc_id": "sec-incident-reporting", "start": 739, "end": 1059},
                           {"chunk_id": "sections:it-mobile-devices:3"}, {"doc_id": "x"}]},
              {"search": false}]}

``hops`` are the agent's steps in order (hop 1, 2, ...); ``search`` (default: true when the hop
has results) says whether it chose to call the retriever; ``results`` are ranked, best first,
each a span (``doc_id, start, end``), a chunk id (resolved to its span by the caller) or a
whole document (``doc_id`` only).

The **evidence chain** of a query is its gold spans, each with the hop that should find it
(one JSONL object per span: ``query_id, hop, doc_id, start, end``). A result *finds* a gold span
when they overlap by the project's span rule (:func:`workbench.core.documents.spans.chunk_is_relevant`,
at least half of the shorter span); a whole-document result finds every gold span of its
document.

Measures, with ``k`` the number of results of a hop that are looked at:

* ``hop_recall@k[h]`` = gold spans of hop ``h`` found in the top ``k`` of the trajectory's hop
  ``h`` / gold spans of hop ``h`` (0 when hop ``h`` did not search or does not exist). Averaged
  over the queries whose chain has a hop ``h``.
* ``complete`` = every gold span of the chain was found in the top ``k`` of some hop;
  ``completed_at`` = the first hop after which the spans found so far cover the whole chain
  (None when never). ``completeness`` = share of chain queries that are complete.
* search decision: evidence is needed when the query has a chain; the agent *searched* when any
  hop searched. The decision is correct when searched = needed. ``decision_accuracy`` is the
  share of correct decisions, reported with ``searched_when_needed`` and
  ``skipped_when_not_needed`` (each NaN when no query of that kind), so always-searching
  cannot hide.
* ``steps`` = hops used; ``searches`` = hops that searched.

A query with a chain but no trajectory is scored as an agent that did nothing (0 steps,
incomplete, did not search) and counted as ``missing_from_trajectories``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.core.documents.spans import Span, chunk_is_relevant
from workbench.errors import InputError, clip


@dataclass(frozen=True)
class Result:
    """One retrieved item: a span, or a whole document (``start``/``end`` None)."""

    doc_id: str
    start: int | None = None
    end: int | None = None
    chunk_id: str | None = None

    def finds(self, gold: Span, min_overlap: float = 0.5) -> bool:
        if self.doc_id != gold.doc_id:
            return False
        if self.start is None or self.end is None:  # a whole document (both are None then)
            return gold.end > gold.start
        return chunk_is_relevant(Span(self.doc_id, self.start, self.end), [gold], min_overlap)


@dataclass(frozen=True)
class Hop:
    searched: bool
    sub_query: str | None
    results: tuple[Result, ...]


@dataclass(frozen=True)
class Trajectory:
    query_id: str
    hops: tuple[Hop, ...]


@dataclass(frozen=True)
class ChainSpan:
    hop: int
    span: Span


def _int(value, what: str, path: str, line: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{what} must be a whole number >= 0, got {clip(str(value))}", path=path, line=line)
    return value


def parse_result(item, path: str, line: int) -> Result:
    """A result object; a chunk id without offsets keeps ``doc_id`` empty until resolved."""
    if isinstance(item, str):
        return Result(doc_id=item)
    if not isinstance(item, Mapping):
        raise InputError("each result must be an object with doc_id (and start, end) or chunk_id",
                         path=path, line=line)
    doc_id, chunk_id = item.get("doc_id"), item.get("chunk_id")
    start, end = item.get("start"), item.get("end")
    if doc_id is None and chunk_id is None:
        raise InputError("a result needs doc_id or chunk_id", path=path, line=line)
    if (start is None) != (end is None):
        raise InputError("a result gives both start and end, or neither", path=path, line=line)
    if start is not None:
        start, end = _int(start, "start", path, line), _int(end, "end", path, line)
        if end < start:
            raise InputError(f"a result ends before it starts ({start} > {end})", path=path, line=line)
    return Result(doc_id=str(doc_id) if doc_id is not None else "", start=start, end=end,
                  chunk_id=str(chunk_id) if chunk_id is not None else None)


def parse_trajectories(records: Sequence[tuple[int, dict]], path: str) -> list[Trajectory]:
    """Trajectories from numbered JSON objects (errors name ``path:line``); one per query."""
    out: list[Trajectory] = []
    seen: dict[str, int] = {}
    for line, record in records:
        qid = record.get("query_id")
        if not isinstance(qid, (str, int)) or isinstance(qid, bool) or str(qid) == "":
            raise InputError("each trajectory needs a query_id", path=path, line=line)
        qid = str(qid)
        if qid in seen:
            raise InputError(f"query {clip(qid)} has a second trajectory (first on line {seen[qid]})",
                             path=path, line=line)
        seen[qid] = line
        hops = record.get("hops")
        if not isinstance(hops, list):
            raise InputError("'hops' must be a list of steps", path=path, line=line)
        parsed = []
        for h in hops:
            if not isinstance(h, Mapping):
                raise InputError("each hop must be an object with search, sub_query, results", path=path, line=line)
            results = h.get("results") or []
            if not isinstance(results, list):
                raise InputError("a hop's 'results' must be a list", path=path, line=line)
            searched = h.get("search", bool(results))
            if not isinstance(searched, bool):
                raise InputError(f"'search' must be true or false, got {clip(str(searched))}", path=path, line=line)
            if results and not searched:
                raise InputError("a hop with search false cannot have results", path=path, line=line)
            sub_query = h.get("sub_query")
            parsed.append(Hop(searched, None if sub_query is None else str(sub_query),
                              tuple(parse_result(r, path, line) for r in results)))
        out.append(Trajectory(qid, tuple(parsed)))
    return out


def parse_chains(records: Sequence[tuple[int, dict]], path: str) -> dict[str, list[ChainSpan]]:
    """``{query_id: [ChainSpan]}`` from numbered JSON objects with query_id, hop, doc_id, start, end."""
    out: dict[str, list[ChainSpan]] = {}
    for line, record in records:
        missing = [f for f in ("query_id", "hop", "doc_id", "start", "end") if record.get(f) is None]
        if missing:
            raise InputError(f"an evidence span needs {', '.join(missing)}", path=path, line=line)
        hop = record["hop"]
        if isinstance(hop, bool) or not isinstance(hop, int) or hop < 1:
            raise InputError(f"hop must be a whole number >= 1, got {clip(str(hop))}", path=path, line=line)
        start, end = _int(record["start"], "start", path, line), _int(record["end"], "end", path, line)
        if end <= start:
            raise InputError(f"an evidence span must not be empty ({start}..{end})", path=path, line=line)
        out.setdefault(str(record["query_id"]), []).append(
            ChainSpan(hop, Span(str(record["doc_id"]), start, end)))
    return out


def _found(results: Sequence[Result], gold: Sequence[ChainSpan], k: int, min_overlap: float) -> set[int]:
    """Indices of the gold spans found by the top ``k`` results."""
    top = results[:k]
    return {i for i, g in enumerate(gold) if any(r.finds(g.span, min_overlap) for r in top)}


def score_query(trajectory: Trajectory | None, chain: Sequence[ChainSpan], k: int,
                min_overlap: float = 0.5) -> dict:
    """Per-query values (see the module doc): ``steps, searches, searched, needs_search,
    decision_correct, complete, completed_at, chain_found, hop_recall {h: value}``."""
    hops = trajectory.hops if trajectory is not None else ()
    needs = bool(chain)
    searched = any(h.searched for h in hops)
    hop_recall = {}
    for h in sorted({c.hop for c in chain}):
        gold_h = [c for c in chain if c.hop == h]
        if h <= len(hops) and hops[h - 1].searched:
            hop_recall[h] = len(_found(hops[h - 1].results, gold_h, k, min_overlap)) / len(gold_h)
        else:
            hop_recall[h] = 0.0
    found: set[int] = set()
    completed_at = None
    for i, hop in enumerate(hops, start=1):
        if hop.searched:
            found |= _found(hop.results, chain, k, min_overlap)
        if chain and completed_at is None and len(found) == len(chain):
            completed_at = i
    return {
        "steps": len(hops), "searches": sum(h.searched for h in hops), "searched": searched,
        "needs_search": needs, "decision_correct": searched == needs,
        "complete": (completed_at is not None) if needs else None, "completed_at": completed_at,
        "chain_found": len(found) / len(chain) if chain else math.nan, "hop_recall": hop_recall,
    }


@dataclass(frozen=True)
class TrajectoryReport:
    k: int
    per_query: dict[str, dict]
    aggregate: dict[str, float]
    counts: dict[str, int]


def _mean(values) -> float:
    values = [float(v) for v in values]
    return float(np.mean(values)) if values else math.nan


def evaluate_trajectories(trajectories: Sequence[Trajectory], chains: Mapping[str, Sequence[ChainSpan]],
                          k: int = 5, min_overlap: float = 0.5) -> TrajectoryReport:
    """Score every trajectory (and every chain without one) and average (module doc)."""
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}")
    by_query = {t.query_id: t for t in trajectories}
    qids = sorted(set(by_query) | set(chains))
    per_query = {q: score_query(by_query.get(q), chains.get(q, ()), k, min_overlap) for q in qids}
    with_chain = [v for v in per_query.values() if v["needs_search"]]
    without = [v for v in per_query.values() if not v["needs_search"]]
    hops = sorted({h for v in with_chain for h in v["hop_recall"]})
    aggregate: dict[str, float] = {}
    for h in hops:
        aggregate[f"hop{h}_recall@{k}"] = _mean(v["hop_recall"][h] for v in with_chain if h in v["hop_recall"])
    aggregate["completeness"] = _mean(v["complete"] for v in with_chain)
    aggregate["completed_at_mean"] = _mean(v["completed_at"] for v in with_chain if v["completed_at"] is not None)
    aggregate["chain_found"] = _mean(v["chain_found"] for v in with_chain)
    aggregate["decision_accuracy"] = _mean(v["decision_correct"] for v in per_query.values())
    aggregate["searched_when_needed"] = _mean(v["searched"] for v in with_chain)
    aggregate["skipped_when_not_needed"] = _mean(not v["searched"] for v in without)
    aggregate["steps_mean"] = _mean(v["steps"] for v in per_query.values())
    aggregate["searches_mean"] = _mean(v["searches"] for v in per_query.values())
    counts = {
        "queries": len(per_query),
        "with_chain": len(with_chain),
        "without_chain": len(without),
        "missing_from_trajectories": sum(1 for q in chains if q not in by_query),
        "complete": sum(1 for v in with_chain if v["complete"]),
    }
    return TrajectoryReport(k, per_query, aggregate, counts)


def flat_per_query(report: TrajectoryReport) -> pd.DataFrame:
    """One row per query: the scalar values and ``hop{h}_recall@k`` columns (NaN when the chain
    has no such hop)."""
    rows = []
    hops = sorted({h for v in report.per_query.values() for h in v["hop_recall"]})
    for q, v in report.per_query.items():
        row = {"query_id": q, **{c: v[c] for c in ("steps", "searches", "searched", "needs_search",
                                                    "decision_correct", "complete", "completed_at",
                                                    "chain_found")}}
        for h in hops:
            row[f"hop{h}_recall@{report.k}"] = v["hop_recall"].get(h, math.nan)
        rows.append(row)
    return pd.DataFrame(rows)
