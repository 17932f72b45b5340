"""Budgeted span coverage: how much gold text a ranking puts into a context of ``B`` tokens.

Per-chunk measures favour big chunks (recall@10 over 2,048-token chunks reads ten times the
text of recall@10 over 256-token chunks). Budgeted coverage compares chunkings fairly: every
configuration gets the same number of tokens of context.

Tokens (no tokenizer download): the chunker's token unit, the regex ``\\w+|[^\\w\\s]``
(:func:`workbench.core.documents.chunking.token_offsets`). Token ``u`` of a document *owns* the
characters from its start to the next token's start (the first token from 0), exactly as the
``fixed:SIZE`` token chunking windows them, so a ``fixed:512`` chunk counts 512 tokens. The
tokens of a span ``[s, e)`` are the tokens whose owned start lies in ``[s, e)``. A non-empty
document without any token (only whitespace) is one unit, as the chunker treats it.

Selection for budget ``B`` and one query: walk the ranked chunks by rank; a chunk of ``t``
tokens that still fits (``used + t <= B``) is taken whole; the first chunk that crosses ``B``
is **truncated** to its first ``B - used`` tokens (its span ends where token ``B - used + 1``
of the chunk starts; nothing of it is taken when ``B - used = 0``), and the walk stops there.
Overlapping chunks (``fixed:SIZE:OVERLAP``) each spend their own tokens: repeated text costs
context, as it would in a prompt.

Coverage for a query::

    coverage_B(q) = |U(selected spans) ∩ U(gold spans of q)| / |U(gold spans of q)|

with ``U`` the per-document character union (:func:`workbench.core.documents.spans.span_coverage_table`).
A query with gold characters but no retrieved chunk scores 0; a query without gold characters
is undefined (NaN) and left out of the mean. The mean over queries is the reported value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from workbench.core.documents.chunking import batch_unit_starts
from workbench.core.documents.spans import span_coverage_table
from workbench.errors import InputError

__all__ = [
    "DEFAULT_BUDGETS",
    "budget_selection",
    "budgeted_coverage",
    "chunk_token_counts",
    "mean_coverage",
    "parse_budgets",
    "token_start_table",
]

DEFAULT_BUDGETS = (1000, 2000, 4000, 8000)


def parse_budgets(text: str | Iterable[int] | None) -> tuple[int, ...]:
    """Budgets from ``"1000,2000"`` (or a sequence): positive integers, sorted, unique."""
    if text is None:
        return DEFAULT_BUDGETS
    parts = [p.strip() for p in text.split(",")] if isinstance(text, str) else list(text)
    out = []
    for p in parts:
        try:
            value = int(p)
        except (TypeError, ValueError):
            raise InputError(f"budget {p!r} is not a whole number of tokens; use e.g. {{field:budgets 1000,2000}}") from None
        if value <= 0:
            raise InputError(f"budget {value} must be a positive number of tokens")
        out.append(value)
    if not out:
        raise InputError("no budget given; use e.g. {field:budgets 1000,2000,4000,8000}")
    return tuple(sorted(set(out)))


def token_start_table(docs: Iterable[tuple[str, str]]) -> pd.DataFrame:
    """``doc_id, start`` of every token's owned start (first token of a document from 0).

    The spans of a one-token window chunking (:mod:`workbench.core.documents.chunking`): token starts
    found on all texts at once, each document's first start moved to 0, a non-empty text
    without any token owning one start at 0, an empty text none.
    """

    pairs = list(docs)
    ids = np.array([str(d) for d, _ in pairs], dtype=object)
    texts = [str(t) for _, t in pairs]
    if not texts:
        return pd.DataFrame({"doc_id": pd.Series([], dtype="str"), "start": pd.Series([], dtype="int64")})
    doc, rel = batch_unit_starts(texts, "tokens")
    first = np.ones(len(doc), dtype=bool)
    first[1:] = doc[1:] != doc[:-1]
    rel = np.where(first, 0, rel)
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    has = np.zeros(len(texts), dtype=bool)
    has[doc] = True
    lone = np.flatnonzero(~has & (lengths > 0))
    doc = np.concatenate([doc, lone])
    rel = np.concatenate([rel, np.zeros(len(lone), dtype=np.int64)])
    order = np.lexsort((rel, doc))
    return pd.DataFrame({"doc_id": pd.Series(ids[doc[order]], dtype="str"),
                         "start": rel[order].astype(np.int64)})


class _TokenIndex:
    """Sorted token starts of all documents, one key per (doc, start) for binary search."""

    def __init__(self, token_starts: pd.DataFrame):
        code, uniques = pd.factorize(token_starts["doc_id"].astype(str))  # one pass, not a lookup per token
        self.docs = pd.Index(uniques)
        code = code.astype(np.int64)
        start = token_starts["start"].to_numpy(np.int64)
        self.span = int(start.max()) + 2 if len(start) else 1
        self.keys = np.sort(code * self.span + start)

    def codes(self, doc_ids: pd.Series) -> np.ndarray:
        code = self.docs.get_indexer(doc_ids.astype(str)).astype(np.int64)
        return code

    def first_at_or_after(self, code: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """Index in ``keys`` of the first token of doc ``code`` starting at or after ``pos``."""
        return np.searchsorted(self.keys, code * self.span + np.minimum(pos, self.span - 1), side="left")


def chunk_token_counts(chunks: pd.DataFrame, token_starts: pd.DataFrame) -> np.ndarray:
    """Tokens of each span (``doc_id, start, end``): token owned starts within ``[start, end)``."""
    index = _TokenIndex(token_starts)
    code = index.codes(chunks["doc_id"])
    s = chunks["start"].to_numpy(np.int64)
    e = chunks["end"].to_numpy(np.int64)
    known = code >= 0
    lo = index.first_at_or_after(np.where(known, code, 0), s)
    hi = index.first_at_or_after(np.where(known, code, 0), e)
    return np.where(known, hi - lo, 0).astype(np.int64)


def budget_selection(ranked: pd.DataFrame, token_starts: pd.DataFrame, budget: int) -> pd.DataFrame:
    """The spans put into a context of ``budget`` tokens (module docstring).

    ``ranked``: ``query_id, rank, doc_id, start, end`` (one row per retrieved chunk).
    Returns ``query_id, doc_id, start, end, tokens`` of the selected (possibly truncated) spans.
    """
    if budget <= 0:
        raise InputError(f"budget {budget} must be a positive number of tokens")
    return _RankedTokens(ranked, token_starts).select(budget)


class _RankedTokens:
    """A ranking with each chunk's token count and running total, computed once so that any
    number of budgets can be cut from it (the token index is the costly part)."""

    def __init__(self, ranked: pd.DataFrame, token_starts: pd.DataFrame):
        self.empty = ranked.empty
        if self.empty:
            return
        frame = ranked.sort_values(["query_id", "rank"], kind="stable").reset_index(drop=True)
        index = _TokenIndex(token_starts)
        code = index.codes(frame["doc_id"])
        known = code >= 0
        self.index, self.safe = index, np.where(known, code, 0)
        self.s = frame["start"].to_numpy(np.int64)
        self.e = frame["end"].to_numpy(np.int64)
        self.lo = index.first_at_or_after(self.safe, self.s)
        hi = index.first_at_or_after(self.safe, self.e)
        self.tokens = np.where(known, hi - self.lo, 0).astype(np.int64)
        self.q = frame["query_id"].astype(str).to_numpy()
        self.doc = frame["doc_id"].astype(str).to_numpy()
        new = np.ones(len(self.q), dtype=bool)
        new[1:] = self.q[1:] != self.q[:-1]
        group_start = np.maximum.accumulate(np.where(new, np.arange(len(self.q)), 0))
        cum = np.cumsum(self.tokens)
        self.before = cum - self.tokens - (cum - self.tokens)[group_start]  # tokens of earlier chunks of the query

    def select(self, budget: int) -> pd.DataFrame:
        if self.empty:
            return pd.DataFrame({c: pd.Series([], dtype="str" if c in ("query_id", "doc_id") else "int64")
                                 for c in ["query_id", "doc_id", "start", "end", "tokens"]})
        index, s, e, tokens = self.index, self.s, self.e, self.tokens
        remaining = budget - self.before
        whole = tokens <= remaining
        crossing = ~whole & (remaining > 0)
        # Truncated end: where the chunk's (remaining + 1)-th token starts (always inside the chunk).
        cut_key = (index.keys[np.minimum(self.lo + np.maximum(remaining, 0), len(index.keys) - 1)]
                   if len(index.keys) else s)
        cut_end = cut_key - self.safe * index.span
        end = np.where(whole, e, np.where(crossing, cut_end, s))
        take = whole | crossing
        out = pd.DataFrame({"query_id": self.q[take], "doc_id": self.doc[take], "start": s[take], "end": end[take],
                            "tokens": np.where(whole, tokens, np.maximum(remaining, 0))[take]})
        return out.reset_index(drop=True)


def budgeted_coverage(ranked: pd.DataFrame, gold: pd.DataFrame, token_starts: pd.DataFrame,
                      budgets: Sequence[int] = DEFAULT_BUDGETS) -> pd.DataFrame:
    """Per query and budget: ``query_id, budget, coverage`` (NaN: the query has no gold text).

    ``gold``: ``query_id, doc_id, start, end`` of the relevant spans (filter by grade first).
    Every query of ``gold`` gets a row (0 when nothing retrieved covers it).
    """
    frames = []
    gold = gold[["query_id", "doc_id", "start", "end"]].astype({"query_id": "str", "doc_id": "str"})
    ranked_tokens = _RankedTokens(ranked, token_starts)  # once for every budget
    gold_queries = set(gold["query_id"])
    for budget in sorted({int(b) for b in budgets}):
        if budget <= 0:
            raise InputError(f"budget {budget} must be a positive number of tokens")
        chosen = ranked_tokens.select(int(budget))[["query_id", "doc_id", "start", "end"]]
        table = span_coverage_table(chosen, gold)
        table = table[table["query_id"].isin(gold_queries)]
        frames.append(table.assign(budget=int(budget)))
    if not frames:
        return pd.DataFrame(columns=["query_id", "budget", "coverage"])
    return pd.concat(frames, ignore_index=True)[["query_id", "budget", "coverage"]]


def mean_coverage(per_query: pd.DataFrame) -> dict[int, float]:
    """``{budget: mean coverage}`` over queries with gold text (NaN left out)."""
    out = {}
    for budget, group in per_query.groupby("budget", sort=True):
        values = group["coverage"].to_numpy(dtype=float)
        values = values[~np.isnan(values)]
        out[int(budget)] = float(values.mean()) if values.size else float("nan")
    return out
