"""Named chunking strategies that produce character spans, never copies of text.

A chunking turns ``(doc_id, text)`` into chunk spans ``(doc_id, start, end, seq)`` with
``text[start:end]`` the chunk text. Every strategy guarantees, for a non-empty text:

* ``0 <= start < end <= len(text)`` — no empty chunk is ever emitted;
* chunks are in document order (``start`` and ``end`` non-decreasing, ``seq`` = 0, 1, ...);
* total coverage: every character lies in at least one chunk. Whitespace is never dropped;
  it is attached to a neighbouring chunk so that spans judged under one chunking can be
  mapped onto any other (see :mod:`workbench.core.spans`).

An empty text yields no chunks.

Chunk ids are deterministic: ``chunk_id = f"{chunking_name}:{doc_id}:{seq}"`` with ``seq``
the 0-based position of the chunk in its document. Chunking names may not contain ``:`` so
the id parses unambiguously (:func:`parse_chunk_id` splits at the first and the last ``:``;
doc ids may contain ``:``).

Strategies and their ``params``:

``document``   no parameters; one chunk ``[0, len(text))``.
``fixed``      ``size`` (> 0), ``overlap`` (0 <= overlap < size, default 0), ``unit``
               (``"chars"`` default, or ``"tokens"``). Windows start every
               ``size - overlap`` units; the last window may be short; windowing stops at
               the first window that reaches the end of the text.
``section``    ``max_size`` (> 0 characters), ``overlap`` (default 0, used only to split
               oversize pieces). Pieces begin at markdown headings (``#`` .. ``######`` at
               line start) and after blank lines; consecutive paragraphs of one section are
               merged while the result stays <= ``max_size``; headings are hard boundaries;
               pieces longer than ``max_size`` are split with the ``fixed`` character rule.
``sentences``  ``size`` (sentences per window, > 0), ``overlap`` (0 <= overlap < size,
               default 0). Windows of ``size`` sentences every ``size - overlap`` sentences.

Tokens (``unit="tokens"``) come from the regex ``\\w+|[^\\w\\s]``. Each token owns the
characters from its own start to the start of the next token (the first token also owns any
leading whitespace, the last one everything to the end), so token windows map back to
contiguous character spans that tile the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from workbench.errors import ConfigError

__all__ = [
    "ChunkingError",
    "ChunkingSpec",
    "STRATEGIES",
    "chunk_text",
    "chunk_documents",
    "make_chunk_id",
    "parse_chunk_id",
    "token_offsets",
    "sentence_offsets",
]


class ChunkingError(ConfigError, ValueError):
    """A chunking spec or its input is invalid."""


STRATEGIES = ("document", "fixed", "section", "sentences")

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
# Sentence end: terminal punctuation, optional closing quotes/brackets, then whitespace —
# or a blank line (paragraph break). The boundary is placed after the whitespace so the
# whitespace stays with the sentence it follows.
_SENTENCE_END_RE = re.compile(r"[.!?]+[\"'\)\]»”’]*\s+|\n[ \t]*\n\s*|\n(?=#{1,6}[ \t])")
_HEADING_RE = re.compile(r"^#{1,6}(?=[ \t]|$)", re.MULTILINE)
_BLANK_RE = re.compile(r"\n[ \t]*\n\s*")

_ALLOWED = {
    "document": {},
    "fixed": {"size": None, "overlap": 0, "unit": "chars"},
    "section": {"max_size": None, "overlap": 0},
    "sentences": {"size": None, "overlap": 0},
}


def _positive_int(name: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ChunkingError(f"chunking {name!r}: {key} must be a positive integer, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class ChunkingSpec:
    """A named, validated chunking configuration.

    ``name`` identifies the chunking in chunk ids and the store (letters, digits, ``_``,
    ``-``, ``.``; no ``:``). ``params`` are filled with defaults, so two specs that chunk
    the same way compare equal.
    """

    name: str
    strategy: str
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9_.\-]+", self.name):
            raise ChunkingError(
                f"chunking name {self.name!r} must be non-empty and use only letters, digits, "
                "'_', '-' or '.' (it is the first part of every chunk id)"
            )
        if self.strategy not in _ALLOWED:
            raise ChunkingError(
                f"chunking {self.name!r}: unknown strategy {self.strategy!r}; "
                f"choose one of {', '.join(STRATEGIES)}"
            )
        allowed = _ALLOWED[self.strategy]
        params = dict(self.params or {})
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise ChunkingError(
                f"chunking {self.name!r}: strategy {self.strategy!r} does not take "
                f"{unknown}; allowed parameters: {sorted(allowed) or 'none'}"
            )
        full = {k: params.get(k, v) for k, v in allowed.items()}
        for k, v in full.items():
            if v is None:
                raise ChunkingError(
                    f"chunking {self.name!r}: strategy {self.strategy!r} needs parameter {k!r}"
                )
        size_key = "max_size" if self.strategy == "section" else "size"
        if self.strategy != "document":
            full[size_key] = _positive_int(self.name, size_key, full[size_key])
            ov = full["overlap"]
            if isinstance(ov, bool) or not isinstance(ov, (int, np.integer)) or ov < 0:
                raise ChunkingError(
                    f"chunking {self.name!r}: overlap must be an integer >= 0, got {ov!r}"
                )
            if ov >= full[size_key]:
                raise ChunkingError(
                    f"chunking {self.name!r}: overlap ({ov}) must be smaller than "
                    f"{size_key} ({full[size_key]}) or windows would never advance"
                )
            full["overlap"] = int(ov)
        if self.strategy == "fixed" and full["unit"] not in ("chars", "tokens"):
            raise ChunkingError(
                f"chunking {self.name!r}: unit must be 'chars' or 'tokens', got {full['unit']!r}"
            )
        object.__setattr__(self, "params", full)

    def __hash__(self) -> int:
        return hash((self.name, self.strategy, tuple(sorted(self.params.items()))))


def make_chunk_id(chunking_name: str, doc_id: str, seq: int) -> str:
    """``f"{chunking_name}:{doc_id}:{seq}"`` — see the module docstring."""
    return f"{chunking_name}:{doc_id}:{int(seq)}"


def parse_chunk_id(chunk_id: str) -> tuple[str, str, int]:
    """Inverse of :func:`make_chunk_id`: ``(chunking_name, doc_id, seq)``."""
    name, sep, rest = chunk_id.partition(":")
    doc_id, sep2, seq = rest.rpartition(":")
    if not sep or not sep2 or not name or not doc_id or not seq.isdigit():
        raise ChunkingError(
            f"chunk id {chunk_id!r} is not of the form '<chunking>:<doc_id>:<seq>'"
        )
    return name, doc_id, int(seq)


# --------------------------------------------------------------------------- window maths


def _window_bounds(n_units: np.ndarray, size: int, overlap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fixed windows over ``n_units[d]`` units for many documents at once.

    Window ``w`` of a document covers units ``[w*step, min(w*step + size, n))`` with
    ``step = size - overlap``; the number of windows is ``1 + ceil(max(0, n - size) / step)``
    for ``n > 0`` and 0 for ``n == 0``. Because the window before the last one ends before
    ``n``, the last window starts before ``n`` and is never empty.

    Returns ``(doc_index, unit_start, unit_end)`` for every window, in document order.
    """
    n_units = np.asarray(n_units, dtype=np.int64)
    step = size - overlap
    counts = np.where(n_units > 0, 1 + -(-np.maximum(n_units - size, 0) // step), 0)
    total = int(counts.sum())
    doc = np.repeat(np.arange(len(n_units), dtype=np.int64), counts)
    first = np.cumsum(counts) - counts
    w = np.arange(total, dtype=np.int64) - np.repeat(first, counts)
    start = w * step
    end = np.minimum(start + size, n_units[doc])
    return doc, start, end


def token_offsets(text: str) -> np.ndarray:
    """Start offsets of the regex word tokens of ``text`` (see module docstring)."""
    return np.fromiter((m.start() for m in _TOKEN_RE.finditer(text)), dtype=np.int64)


def sentence_offsets(text: str) -> np.ndarray:
    """Start offsets of the sentences of ``text``; the first is always 0 (if non-empty).

    A sentence ends after ``.``/``!``/``?`` (plus closing quotes/brackets) and the following
    whitespace, after a blank line, or before a markdown heading line. Trailing whitespace belongs to the sentence before.
    """
    if not text:
        return np.empty(0, dtype=np.int64)
    ends = [m.end() for m in _SENTENCE_END_RE.finditer(text)]
    starts = np.array([0, *ends], dtype=np.int64)
    return starts[starts < len(text)]


def _unit_windows(unit_starts: np.ndarray, length: int, size: int, overlap: int):
    """Character spans of windows over units that tile ``[0, length)``.

    Unit ``u`` owns ``[unit_starts[u], unit_starts[u+1])``; the first unit owns from 0 and
    the last one up to ``length``. No unit (e.g. all-whitespace text) -> one whole chunk.
    """
    if length == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if len(unit_starts) == 0:
        return np.array([0], np.int64), np.array([length], np.int64)
    owned = np.append(unit_starts, length)
    owned[0] = 0
    _, ws, we = _window_bounds(np.array([len(unit_starts)]), size, overlap)
    return owned[ws], owned[we]


def _section_spans(text: str, max_size: int, overlap: int) -> tuple[np.ndarray, np.ndarray]:
    n = len(text)
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    hard = {m.start() for m in _HEADING_RE.finditer(text)}
    bounds = sorted(hard | {m.end() for m in _BLANK_RE.finditer(text)} | {0})
    bounds = [b for b in bounds if b < n]
    # A whitespace-only piece (e.g. leading blank lines) is folded into the next piece, so
    # no chunk is pure layout and coverage stays total.
    pieces: list[tuple[int, int, bool]] = []  # (start, end, starts_with_heading)
    for k, b in enumerate(bounds):
        e = bounds[k + 1] if k + 1 < len(bounds) else n
        if pieces and not text[pieces[-1][0]:pieces[-1][1]].strip():
            ps, _, _ = pieces.pop()
            pieces.append((ps, e, b in hard))
        else:
            pieces.append((b, e, b in hard))

    starts: list[int] = []
    ends: list[int] = []

    def emit_fixed(s: int, e: int) -> None:
        _, ws, we = _window_bounds(np.array([e - s]), max_size, overlap)
        starts.extend((s + ws).tolist())
        ends.extend((s + we).tolist())

    cur: list[int] | None = None  # [start, end] of the chunk being grown
    for s, e, heading in pieces:
        if cur is not None and not heading and e - cur[0] <= max_size:
            cur[1] = e  # same section and still fits: merge the paragraph in
            continue
        if cur is not None:
            starts.append(cur[0])
            ends.append(cur[1])
            cur = None
        if e - s > max_size:
            emit_fixed(s, e)
        else:
            cur = [s, e]
    if cur is not None:
        starts.append(cur[0])
        ends.append(cur[1])
    return np.array(starts, np.int64), np.array(ends, np.int64)


def chunk_text(spec: ChunkingSpec, text: str) -> list[tuple[int, int]]:
    """Chunk one text: list of ``(start, end)`` character spans in order."""
    df = chunk_documents(spec, [("_", text)])
    return list(zip(df["start"].tolist(), df["end"].tolist()))


def _as_docs(docs: pd.DataFrame | Iterable[tuple[str, str]]) -> tuple[np.ndarray, list[str]]:
    if isinstance(docs, pd.DataFrame):
        missing = [c for c in ("doc_id", "text") if c not in docs.columns]
        if missing:
            raise ChunkingError(f"documents table lacks columns {missing}; it has {list(docs.columns)}")
        ids = docs["doc_id"]
        texts = docs["text"]
        if texts.isna().any():
            bad = ids[texts.isna()].iloc[0]
            raise ChunkingError(f"document {bad!r} has no text (NULL); drop it or give it ''")
        doc_ids = ids.astype(str).to_numpy(dtype=object)
        text_list = texts.astype(str).tolist()
    else:
        pairs = list(docs)
        for p in pairs:
            if not (isinstance(p, tuple) and len(p) == 2 and isinstance(p[1], str)):
                raise ChunkingError(f"documents must be (doc_id, text) pairs, got {p!r}")
        doc_ids = np.array([str(p[0]) for p in pairs], dtype=object)
        text_list = [p[1] for p in pairs]
    if len(pd.Index(doc_ids).unique()) != len(doc_ids):
        dup = pd.Index(doc_ids)[pd.Index(doc_ids).duplicated()][0]
        raise ChunkingError(f"duplicate doc_id {dup!r}: chunk ids would collide")
    return doc_ids, text_list


def chunk_documents(
    spec: ChunkingSpec, docs: pd.DataFrame | Iterable[tuple[str, str]]
) -> pd.DataFrame:
    """Chunk many documents.

    ``docs`` is a DataFrame with ``doc_id, text`` or an iterable of ``(doc_id, text)``.
    Returns ``chunk_id, doc_id, start, end, seq`` (int64 offsets, end exclusive) in input
    document order then ``seq``. ``fixed`` with ``unit="chars"`` and ``document`` are fully
    vectorised over documents; the other strategies loop over documents (not over chunks).
    """
    if not isinstance(spec, ChunkingSpec):
        raise ChunkingError(f"expected a ChunkingSpec, got {type(spec).__name__}")
    doc_ids, texts = _as_docs(docs)
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    p = spec.params

    if spec.strategy == "document":
        doc = np.flatnonzero(lengths > 0)
        start = np.zeros(len(doc), np.int64)
        end = lengths[doc]
    elif spec.strategy == "fixed" and p["unit"] == "chars":
        doc, start, end = _window_bounds(lengths, p["size"], p["overlap"])
    else:
        doc_parts, start_parts, end_parts = [], [], []
        for d, t in enumerate(texts):
            if spec.strategy == "fixed":
                s, e = _unit_windows(token_offsets(t), len(t), p["size"], p["overlap"])
            elif spec.strategy == "sentences":
                s, e = _unit_windows(sentence_offsets(t), len(t), p["size"], p["overlap"])
            else:
                s, e = _section_spans(t, p["max_size"], p["overlap"])
            doc_parts.append(np.full(len(s), d, np.int64))
            start_parts.append(s)
            end_parts.append(e)
        if doc_parts:
            doc = np.concatenate(doc_parts)
            start = np.concatenate(start_parts)
            end = np.concatenate(end_parts)
        else:
            doc = start = end = np.empty(0, np.int64)

    counts = np.bincount(doc, minlength=len(texts)) if len(doc) else np.zeros(len(texts), np.int64)
    seq = np.arange(len(doc), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    doc_col = pd.Series(doc_ids[doc], dtype="str") if len(doc) else pd.Series([], dtype="str")
    chunk_id = spec.name + ":" + doc_col + ":" + pd.Series(seq).astype("str")
    return pd.DataFrame(
        {
            "chunk_id": chunk_id.to_numpy(),
            "doc_id": doc_col.to_numpy(),
            "start": start.astype(np.int64),
            "end": end.astype(np.int64),
            "seq": seq,
        }
    )
