"""Character spans, span-overlap relevance and span-anchored qrels.

A *span* is a half-open character range ``[start, end)`` inside one document. Judgments are
stored against spans rather than chunk ids so that they survive re-chunking: a label made
while looking at chunk ``A`` of one chunking is turned into chunk-level qrels for any other
chunking by overlap (see :func:`chunk_qrels`).

Overlap rule (one rule everywhere, scalar and vectorised)::

    ov(a, b)      = max(0, min(a.end, b.end) - max(a.start, b.start))   if same doc, else 0
    matches(c, g) = ov(c, g) > 0  and  ov(c, g) / min(len(c), len(g)) >= min_overlap

Dividing by the *shorter* span matters: a 1,000-character chunk inside a 3,000-character gold
span overlaps it by 100 % of the chunk, not 33 % of the gold span. Zero-length spans never
match anything (their overlap is always 0), so ``min`` never divides by zero.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from workbench.errors import InputError

__all__ = [
    "Span",
    "SpanError",
    "as_span",
    "overlap",
    "chunk_is_relevant",
    "span_coverage",
    "overlapping_pairs",
    "chunk_qrels",
    "doc_qrels",
    "rollup_doc_qrels",
    "span_coverage_table",
]


class SpanError(InputError, ValueError):
    """A span, a span table or a span-matching parameter is invalid."""


def _is_int(x: Any) -> bool:
    # bool is an int subclass; a True/False offset is always a bug upstream.
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


@dataclass(frozen=True, slots=True)
class Span:
    """Half-open character range ``[start, end)`` of document ``doc_id``.

    ``0 <= start <= end``; ``start == end`` is a legal *empty* span (it matches nothing).
    """

    doc_id: str
    start: int
    end: int

    def __post_init__(self) -> None:
        if not isinstance(self.doc_id, str) or not self.doc_id:
            raise SpanError(f"span doc_id must be a non-empty string, got {self.doc_id!r}")
        if not _is_int(self.start) or not _is_int(self.end):
            raise SpanError(
                f"span offsets of {self.doc_id!r} must be integers, got start={self.start!r}, "
                f"end={self.end!r}; convert character offsets with int()"
            )
        if self.start < 0 or self.end < self.start:
            raise SpanError(
                f"span of {self.doc_id!r} must satisfy 0 <= start <= end (end exclusive), got "
                f"start={self.start}, end={self.end}"
            )
        # Normalise numpy integers so equality and hashing behave like plain ints.
        object.__setattr__(self, "start", int(self.start))
        object.__setattr__(self, "end", int(self.end))

    @property
    def length(self) -> int:
        """``end - start`` (0 for an empty span)."""
        return self.end - self.start


def as_span(value: Span | Mapping[str, Any] | tuple) -> Span:
    """Coerce a :class:`Span`, a mapping with ``doc_id/start/end`` or a 3-tuple to a Span."""
    if isinstance(value, Span):
        return value
    if isinstance(value, Mapping):
        missing = {"doc_id", "start", "end"} - set(value)
        if missing:
            raise SpanError(f"span mapping {dict(value)!r} lacks keys {sorted(missing)}")
        return Span(value["doc_id"], value["start"], value["end"])
    if isinstance(value, tuple) and len(value) == 3:
        return Span(*value)
    raise SpanError(
        f"cannot read a span from {value!r}; pass Span(doc_id, start, end), "
        "a dict with doc_id/start/end, or a (doc_id, start, end) tuple"
    )


def _check_min_overlap(min_overlap: float) -> float:
    if isinstance(min_overlap, bool) or not isinstance(min_overlap, (int, float, np.floating)):
        raise SpanError(f"min_overlap must be a number in [0, 1], got {min_overlap!r}")
    if not (0.0 <= float(min_overlap) <= 1.0):
        raise SpanError(
            f"min_overlap must lie in [0, 1] (share of the shorter span), got {min_overlap}"
        )
    return float(min_overlap)


def overlap(a: Span | Mapping[str, Any], b: Span | Mapping[str, Any]) -> int:
    """Number of characters shared by ``a`` and ``b``; 0 for different documents."""
    a, b = as_span(a), as_span(b)
    if a.doc_id != b.doc_id:
        return 0
    return max(0, min(a.end, b.end) - max(a.start, b.start))


def chunk_is_relevant(
    chunk: Span | Mapping[str, Any],
    gold_spans: Iterable[Span | Mapping[str, Any]],
    min_overlap: float = 0.5,
) -> bool:
    """True if ``chunk`` matches at least one gold span under the module's overlap rule.

    ``ov / min(len(chunk), len(gold)) >= min_overlap`` with ``ov > 0``. ``min_overlap=0``
    means "any positive overlap". Empty chunks and empty gold spans never match.
    """
    min_overlap = _check_min_overlap(min_overlap)
    c = as_span(chunk)
    for g in map(as_span, gold_spans):
        ov = overlap(c, g)
        # ov > 0 implies both lengths are positive, so the division is safe.
        if ov > 0 and ov / min(c.length, g.length) >= min_overlap:
            return True
    return False


def _merge_intervals(intervals: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge half-open intervals into a sorted list of disjoint, non-touching intervals."""
    merged: list[tuple[int, int]] = []
    for s, e in sorted(i for i in intervals if i[1] > i[0]):
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


def span_coverage(
    chunks: Iterable[Span | Mapping[str, Any]],
    gold_spans: Iterable[Span | Mapping[str, Any]],
) -> float:
    """Share of gold characters covered by the union of ``chunks``.

    ``|U(chunks) ∩ U(gold)| / |U(gold)|`` where ``U`` is the character union per document.
    Duplicate or overlapping chunks do not inflate the score; overlapping gold spans are
    merged first so a gold character is counted once. Returns NaN when the gold spans cover
    no character at all (nothing to cover: exclude the query from averages).
    """
    by_doc_gold: dict[str, list[tuple[int, int]]] = {}
    for g in map(as_span, gold_spans):
        by_doc_gold.setdefault(g.doc_id, []).append((g.start, g.end))
    by_doc_chunk: dict[str, list[tuple[int, int]]] = {}
    for c in map(as_span, chunks):
        by_doc_chunk.setdefault(c.doc_id, []).append((c.start, c.end))

    total = 0
    covered = 0
    for doc_id, gold in by_doc_gold.items():
        gold_u = _merge_intervals(gold)
        chunk_u = _merge_intervals(by_doc_chunk.get(doc_id, []))
        total += sum(e - s for s, e in gold_u)
        for gs, ge in gold_u:
            for cs, ce in chunk_u:
                covered += max(0, min(ge, ce) - max(gs, cs))
    if total == 0:
        return math.nan
    return covered / total


# --------------------------------------------------------------------------- vectorised


def _require_columns(df: pd.DataFrame, cols: Iterable[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise SpanError(f"{what} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise SpanError(
            f"{what} lacks columns {missing}; it has {list(df.columns)}"
        )


def _offsets(df: pd.DataFrame, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Validated int64 start/end arrays of a span table."""
    out = []
    for col in ("start", "end"):
        s = df[col]
        if s.isna().any():
            row = int(np.flatnonzero(s.isna().to_numpy())[0])
            raise SpanError(f"{what} has a missing {col} offset at row {row}")
        if not pd.api.types.is_integer_dtype(s.dtype):
            vals = pd.to_numeric(s, errors="coerce")
            if vals.isna().any() or (vals != np.floor(vals)).any():
                raise SpanError(f"{what}.{col} must hold integer character offsets")
            s = vals
        out.append(s.to_numpy(dtype=np.int64))
    start, end = out
    bad = np.flatnonzero((start < 0) | (end < start))
    if bad.size:
        i = int(bad[0])
        raise SpanError(
            f"{what} row {i} violates 0 <= start <= end: start={start[i]}, end={end[i]}"
        )
    return start, end


def overlapping_pairs(
    left_group: np.ndarray,
    left_start: np.ndarray,
    left_end: np.ndarray,
    right_group: np.ndarray,
    right_start: np.ndarray,
    right_end: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All ``(i, j)`` with ``left[i]`` and ``right[j]`` in the same group and overlapping.

    Groups are any hashable labels (doc ids, or (query, doc) keys already encoded). Returns
    ``(i, j, ov)`` with ``ov > 0`` characters of overlap. Sort-and-search interval join:
    the left intervals are sorted by (group, start); for each right interval the candidate
    range is ``start_left in (right.start - maxlen_group, right.end)`` found with
    ``searchsorted``, where ``maxlen_group`` is the longest left interval of that group.
    Cost is O((n + m) log n + candidates) — no Python loop over pairs.
    """
    lga, rga = np.asarray(left_group), np.asarray(right_group)
    if lga.dtype.kind in "iu" and rga.dtype.kind in "iu":  # integer keys: no object detour
        both = np.concatenate([lga.astype(np.int64), rga.astype(np.int64)])
    else:
        both = np.concatenate([lga.astype(object), rga.astype(object)])
    codes, _ = pd.factorize(both)
    lg = codes[: len(left_group)].astype(np.int64)
    rg = codes[len(left_group):].astype(np.int64)
    left_start = np.asarray(left_start, dtype=np.int64)
    left_end = np.asarray(left_end, dtype=np.int64)
    right_start = np.asarray(right_start, dtype=np.int64)
    right_end = np.asarray(right_end, dtype=np.int64)
    empty = np.empty(0, dtype=np.int64)
    if len(lg) == 0 or len(rg) == 0:
        return empty, empty, empty

    n_groups = int(codes.max()) + 1
    span_max = int(max(left_end.max(), right_end.max())) + 2
    if n_groups * span_max >= 2**62:
        raise SpanError("span offsets too large to join; offsets must stay below 2**40")

    # Longest left interval per group bounds how far left a candidate may start.
    maxlen = np.zeros(n_groups, dtype=np.int64)
    np.maximum.at(maxlen, lg, left_end - left_start)

    order = np.lexsort((left_start, lg))
    keys = lg[order] * span_max + left_start[order]
    lo_pos = np.maximum(right_start - maxlen[rg] + 1, 0)
    lo = np.searchsorted(keys, rg * span_max + lo_pos, side="left")
    hi = np.searchsorted(keys, rg * span_max + right_end, side="left")
    counts = np.maximum(hi - lo, 0)
    total = int(counts.sum())
    if total == 0:
        return empty, empty, empty
    j = np.repeat(np.arange(len(rg), dtype=np.int64), counts)
    offsets = np.cumsum(counts) - counts
    pos = np.repeat(lo - offsets, counts) + np.arange(total, dtype=np.int64)
    i = order[pos]
    ov = np.minimum(left_end[i], right_end[j]) - np.maximum(left_start[i], right_start[j])
    keep = ov > 0
    return i[keep], j[keep], ov[keep]


def _grades(spans: pd.DataFrame) -> pd.DataFrame:
    """Drop NULL-grade spans and check the rest are numeric."""
    g = spans["grade"]
    kept = spans.loc[g.notna()]
    if not pd.api.types.is_numeric_dtype(kept["grade"].dtype) or pd.api.types.is_bool_dtype(
        kept["grade"].dtype
    ):
        vals = pd.to_numeric(kept["grade"], errors="coerce")
        if vals.isna().any():
            raise SpanError("judged_spans.grade must be numeric (or NULL for failed judgments)")
        kept = kept.assign(grade=vals)
    return kept


def _tidy_grade(s: pd.Series) -> pd.Series:
    # Grades are integers in practice; keep them integral when they are, to match qrels files.
    vals = s.to_numpy(dtype=np.float64)
    if np.all(np.isfinite(vals)) and np.all(vals == np.round(vals)):
        return pd.Series(vals.astype(np.int64), index=s.index, name=s.name)
    return s.astype(np.float64)


def _max_grade(query_id, item_id, grade, col: str) -> pd.DataFrame:
    """``query_id, <col>, grade`` with the max grade per pair; stable dtypes even if empty."""
    # What ``groupby([query_id, col], sort=True)["grade"].max()`` gives (missing keys dropped,
    # NaN grades skipped), computed on integer codes: a pandas groupby costs milliseconds even
    # for a handful of rows, and every qrels (a pool peek, status, an export) goes through here.
    queries = pd.array(np.asarray(query_id, dtype=object), dtype="str")
    items = pd.array(np.asarray(item_id, dtype=object), dtype="str")
    grades = np.asarray(grade, dtype=np.float64)
    q_code, q_names = pd.factorize(queries, sort=True)
    i_code, i_names = pd.factorize(items, sort=True)
    known = (q_code >= 0) & (i_code >= 0)
    width = max(len(i_names), 1)
    key = q_code[known].astype(np.int64) * width + i_code[known]
    pairs, group = np.unique(key, return_inverse=True)
    best = np.full(len(pairs), np.nan)
    np.fmax.at(best, group, grades[known])
    out = pd.DataFrame(
        {
            "query_id": pd.array(np.asarray(q_names, dtype=object)[pairs // width], dtype="str"),
            col: pd.array(np.asarray(i_names, dtype=object)[pairs % width], dtype="str"),
            "grade": best,
        }
    )
    out["grade"] = _tidy_grade(out["grade"])
    return out


def chunk_qrels(
    chunks: pd.DataFrame,
    judged_spans: pd.DataFrame,
    *,
    min_overlap: float = 0.5,
) -> pd.DataFrame:
    """Chunk-level qrels from span-anchored judgments.

    ``chunks``: ``chunk_id, doc_id, start, end``. ``judged_spans``: ``query_id, doc_id,
    start, end, grade``. For every query and chunk::

        grade(q, c) = max{ g.grade : g judged for q, matches(c, g) }    (rule in module doc)

    A chunk is *judged* for ``q`` iff at least one judged span of ``q`` matches it — grade 0
    included — and only judged pairs are returned: an absent pair means *unjudged*, which
    is not the same as *not relevant* (judged@k needs the difference).

    Spans whose grade is NULL/NaN (failed or pending judgments) are ignored: they neither
    make a chunk judged nor lower its grade. Empty spans and empty chunks match nothing.

    Returns ``query_id, chunk_id, grade`` sorted by query_id, chunk_id.
    """
    min_overlap = _check_min_overlap(min_overlap)
    _require_columns(chunks, ["chunk_id", "doc_id", "start", "end"], "chunks")
    _require_columns(judged_spans, ["query_id", "doc_id", "start", "end", "grade"], "judged_spans")
    if chunks["chunk_id"].duplicated().any():
        dup = chunks.loc[chunks["chunk_id"].duplicated(), "chunk_id"].iloc[0]
        raise SpanError(f"chunks has duplicate chunk_id {dup!r}; chunk ids must be unique")
    c_start, c_end = _offsets(chunks, "chunks")
    spans = _grades(judged_spans)
    s_start, s_end = _offsets(spans, "judged_spans")

    i, j, ov = overlapping_pairs(
        chunks["doc_id"].astype(str).to_numpy(), c_start, c_end,
        spans["doc_id"].astype(str).to_numpy(), s_start, s_end,
    )
    shorter = np.minimum(c_end[i] - c_start[i], s_end[j] - s_start[j])
    keep = ov / shorter >= min_overlap
    i, j = i[keep], j[keep]
    return _max_grade(
        spans["query_id"].astype(str).to_numpy()[j],
        chunks["chunk_id"].astype(str).to_numpy()[i],
        spans["grade"].to_numpy(dtype=np.float64)[j],
        "chunk_id",
    )


def doc_qrels(judged_spans: pd.DataFrame) -> pd.DataFrame:
    """Document-level qrels: ``grade(q, d) = max grade over q's judged spans in d``.

    Spans with NULL grade are ignored (see :func:`chunk_qrels`). Every non-NULL span counts,
    empty ones included: an empty span still records that the document was judged.
    Returns ``query_id, doc_id, grade`` sorted by query_id, doc_id.
    """
    _require_columns(judged_spans, ["query_id", "doc_id", "grade"], "judged_spans")
    spans = _grades(judged_spans)
    return _max_grade(
        spans["query_id"].astype(str).to_numpy(),
        spans["doc_id"].astype(str).to_numpy(),
        spans["grade"].to_numpy(dtype=np.float64),
        "doc_id",
    )


def rollup_doc_qrels(chunk_level: pd.DataFrame, chunks: pd.DataFrame) -> pd.DataFrame:
    """Document-level qrels from chunk-level qrels: max grade over the doc's judged chunks.

    Guarantee (tested): if ``chunks`` covers every character of each judged document and
    ``min_overlap <= 0.5``, then ``rollup_doc_qrels(chunk_qrels(chunks, spans), chunks)``
    equals ``doc_qrels(spans)`` for non-empty spans — every span of length ``n`` is either
    inside one chunk or split over chunks of which one holds ``>= n/2`` of it.
    """
    _require_columns(chunk_level, ["query_id", "chunk_id", "grade"], "chunk-level qrels")
    _require_columns(chunks, ["chunk_id", "doc_id"], "chunks")
    known = pd.Index(chunks["chunk_id"].astype(str))
    if known.is_unique:  # a look-up by position, not a merge (the same rows, in the same order)
        wanted = chunk_level["chunk_id"].astype(str)
        at = known.get_indexer(wanted)
        if (at < 0).any():
            raise SpanError(f"chunk-level qrels name chunk {wanted.iloc[int(np.flatnonzero(at < 0)[0])]!r} "
                            "that is not in chunks")
        return _max_grade(
            chunk_level["query_id"].astype(str).to_numpy(),
            chunks["doc_id"].astype(str).to_numpy()[at],
            chunk_level["grade"].to_numpy(dtype=np.float64),
            "doc_id",
        )
    ids = chunks[["chunk_id", "doc_id"]].astype(str)
    merged = chunk_level.astype({"chunk_id": str}).merge(ids, on="chunk_id", how="left")
    if merged["doc_id"].isna().any():
        unknown = merged.loc[merged["doc_id"].isna(), "chunk_id"].iloc[0]
        raise SpanError(f"chunk-level qrels name chunk {unknown!r} that is not in chunks")
    return _max_grade(
        merged["query_id"].astype(str).to_numpy(),
        merged["doc_id"].astype(str).to_numpy(),
        merged["grade"].to_numpy(dtype=np.float64),
        "doc_id",
    )


def _union_intervals(group: np.ndarray, start: np.ndarray, end: np.ndarray):
    """Vectorised per-group union of half-open intervals -> (group, start, end) disjoint."""
    keep = end > start
    group, start, end = group[keep], start[keep], end[keep]
    if len(group) == 0:
        return group, start, end
    order = np.lexsort((start, group))
    g, s, e = group[order], start[order], end[order]
    # Running max of end within each group: offset groups so one global accumulate works.
    big = int(e.max()) + 1
    run_end = np.maximum.accumulate(g * big + e) - g * big
    new = np.ones(len(g), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (s[1:] > run_end[:-1])
    idx = np.flatnonzero(new)
    last = np.r_[idx[1:], len(g)] - 1
    return g[idx], s[idx], run_end[last]


def span_coverage_table(retrieved: pd.DataFrame, gold: pd.DataFrame) -> pd.DataFrame:
    """Vectorised :func:`span_coverage` per query.

    ``retrieved`` and ``gold``: ``query_id, doc_id, start, end`` (filter gold by grade first).
    Returns ``query_id, coverage`` for every query present in either table: NaN where the
    query has no gold characters, 0.0 where it has gold but nothing retrieved overlaps it.
    """
    _require_columns(retrieved, ["query_id", "doc_id", "start", "end"], "retrieved")
    _require_columns(gold, ["query_id", "doc_id", "start", "end"], "gold")
    r_start, r_end = _offsets(retrieved, "retrieved")
    g_start, g_end = _offsets(gold, "gold")
    n_r = len(retrieved)
    q_c, q_u = pd.factorize(
        pd.concat([retrieved["query_id"].astype("str"), gold["query_id"].astype("str")], ignore_index=True),
        sort=True,
    )
    d_c, d_u = pd.factorize(
        pd.concat([retrieved["doc_id"].astype("str"), gold["doc_id"].astype("str")], ignore_index=True)
    )
    # One integer key per (query, doc); key // n_docs recovers the query code.
    n_d = max(len(d_u), 1)
    key = q_c.astype(np.int64) * n_d + d_c
    rk, gk = key[:n_r], key[n_r:]

    ug, us, ue = _union_intervals(gk, g_start, g_end)
    ur, rs, re_ = _union_intervals(rk, r_start, r_end)
    n_q = len(q_u)
    tot = np.bincount(ug // n_d, weights=ue - us, minlength=n_q).astype(np.float64)
    i, _j, ov = overlapping_pairs(ug, us, ue, ur, rs, re_)
    cov = np.bincount(ug[i] // n_d, weights=ov, minlength=n_q).astype(np.float64)
    queries = pd.Index(q_u, dtype="str", name="query_id")
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(tot > 0, cov / np.where(tot > 0, tot, 1), np.nan)
    return pd.DataFrame({"query_id": queries.astype(str), "coverage": ratio})
