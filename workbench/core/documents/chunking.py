"""Named chunking strategies that produce character spans, never copies of text.

A chunking turns ``(doc_id, text)`` into chunk spans ``(doc_id, start, end, seq)`` with
``text[start:end]`` the chunk text. Every strategy guarantees, for a non-empty text:

* ``0 <= start < end <= len(text)`` — no empty chunk is ever emitted;
* chunks are in document order (``start`` and ``end`` non-decreasing, ``seq`` = 0, 1, ...);
* total coverage: every character lies in at least one chunk. Whitespace is never dropped;
  it is attached to a neighbouring chunk so that spans judged under one chunking can be
  mapped onto any other (see :mod:`workbench.core.documents.spans`).

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
               Blank lines stay with the paragraph before them; a whitespace-only piece
               (leading blank lines) is folded into the next piece. Every chunk is
               <= ``max_size`` characters.
``sentences``  ``size`` (sentences per window, > 0), ``overlap`` (0 <= overlap < size,
               default 0). Windows of ``size`` sentences every ``size - overlap`` sentences.
               Sentences end after ``.!?`` (plus closing quotes/brackets) and whitespace,
               at blank lines and before markdown heading lines (:func:`sentence_offsets`).

Tokens (``unit="tokens"``) come from the regex ``\\w+|[^\\w\\s]`` (:func:`token_offsets`).
Each unit (token or sentence) owns the characters from its own start to the start of the
next one (the first also owns any leading whitespace, the last everything to the end), so
unit windows map back to contiguous character spans that tile the text. A non-empty text
without any token (only whitespace) becomes one chunk.

``token_offsets`` and ``sentence_offsets`` are the per-text reference implementations;
:func:`chunk_documents` computes the same boundaries for many texts at once with numpy.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from workbench.core.option_names import CHUNKING_STRATEGIES
from workbench.errors import ConfigError, clip

__all__ = [
    "STRATEGIES",
    "ChunkingError",
    "ChunkingSpec",
    "chunk_documents",
    "chunk_text",
    "make_chunk_id",
    "parse_chunk_id",
    "sentence_offsets",
    "token_offsets",
]


class ChunkingError(ConfigError, ValueError):
    """A chunking spec or its input is invalid."""


STRATEGIES = CHUNKING_STRATEGIES

_TOKEN_RE = re.compile(r"\w+|[^\w\s]")
# Sentence end: terminal punctuation, optional closing quotes/brackets, then whitespace —
# or a blank line (paragraph break). The boundary is placed after the whitespace so the
# whitespace stays with the sentence it follows.
_CLOSERS = "\"')]»”’"
_SENTENCE_END_RE = re.compile(r"[.!?]+[\"'\)\]»”’]*\s+|\n[ \t]*\n\s*|\n(?=#{1,6}[ \t])")
_HEADING_RE = re.compile(r"^#{1,6}(?=[ \t]|$)", re.MULTILINE)
_BLANK_RE = re.compile(r"\n[ \t]*\n\s*")

# Each strategy's parameters and their defaults (None: required).
_ALLOWED: dict[str, dict[str, Any]] = {
    "document": {},
    "fixed": {"size": None, "overlap": 0, "unit": "chars"},
    "section": {"max_size": None, "overlap": 0},
    "sentences": {"size": None, "overlap": 0},
}


#: Largest window size or overlap: far beyond any document, and small enough for int64 offsets.
MAX_SIZE = 2**31 - 1


def _positive_int(name: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ChunkingError(f"chunking {name!r}: {key} must be a positive integer, got {value!r}")
    if value > MAX_SIZE:
        raise ChunkingError(f"chunking {name!r}: {key} must be at most {MAX_SIZE:,}, got {clip(str(value), 40, quote=False)}")
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
    whitespace, after a blank line, or before a markdown heading line. Trailing whitespace
    belongs to the sentence before.
    """
    if not text:
        return np.empty(0, dtype=np.int64)
    ends = [m.end() for m in _SENTENCE_END_RE.finditer(text)]
    starts = np.array([0, *ends], dtype=np.int64)
    return starts[starts < len(text)]


_WORD_CHAR_RE = re.compile(r"\w")
_SPACE_CHAR_RE = re.compile(r"\s")
_BATCH_CHARS = 8_000_000  # bounds the memory of one joined corpus batch


def _char_class(ch: str, sentence: bool) -> str:
    """Class code of one character (see :func:`_char_classes`)."""
    if sentence:
        if ch == "\n":
            return "n"
        if ch in " \t":
            return "b"
        if _SPACE_CHAR_RE.match(ch):
            return " "
        if ch in ".!?":
            return "t"
        if ch in _CLOSERS:
            return "q"
        return "h" if ch == "#" else "x"
    if _WORD_CHAR_RE.match(ch):
        return "w"
    return " " if _SPACE_CHAR_RE.match(ch) else "p"


_ASCII_TABLES = {
    flag: bytes(ord(_char_class(chr(i), flag)) for i in range(128)) + b"x" * 128
    for flag in (False, True)
}


def _char_classes(corpus: str, sentence: bool = False) -> np.ndarray:
    """Per-character class codes of ``corpus`` as a uint8 array (one byte per character).

    Token classes: ``w`` word (regex ``\\w``), `` `` whitespace (``\\s``), ``p`` other.
    Sentence classes refine them: ``n`` newline, ``b`` space or tab, `` `` other
    whitespace, ``t`` terminal ``.!?``, ``q`` closing quote/bracket, ``h`` ``#``, ``x`` other.
    Each distinct character is classified once with the regex classes the per-text
    functions use, then the corpus is mapped with ``str.translate`` (C speed).
    """
    if corpus.isascii():
        # Common case: a 256-byte table and bytes.translate, no per-character Python work.
        table = _ASCII_TABLES[sentence]
        return np.frombuffer(corpus.encode("ascii").translate(table), dtype=np.uint8)
    mapping = {ord(ch): _char_class(ch, sentence) for ch in set(corpus)}
    return np.frombuffer(corpus.translate(mapping).encode("ascii"), dtype=np.uint8)


def _sentence_boundaries(cls: np.ndarray) -> np.ndarray:
    """Positions where ``_SENTENCE_END_RE.finditer`` matches end, computed with numpy.

    Every alternative of the regex ends at the end of a maximal whitespace run ``W`` (``\\s+``
    and ``\\s*`` are greedy; the heading lookahead sits right after the run's last newline),
    so the match ends are exactly the ends of the runs ``W`` for which
    (1) the text before ``W`` ends with ``[.!?]`` followed only by closing quotes/brackets,
    (2) ``W`` contains a blank line ``\\n[ \\t]*\\n``, or
    (3) ``W`` ends with ``\\n`` and is followed by ``#{1,6}[ \\t]``.
    The per-text regex stays the reference (:func:`sentence_offsets`); a property test checks
    both agree.
    """
    n = len(cls)
    if n == 0:
        return np.empty(0, np.int64)
    # Only masks are dense; everything else works on the (much shorter) run/position lists.
    run_start, run_end = _runs((cls == ord("n")) | (cls == ord("b")) | (cls == ord(" ")))
    q_start, _ = _runs(cls == ord("q"))
    b_start, b_end = _runs(cls == ord("b"))
    h_start, h_end = _runs(cls == ord("h"))

    # (1) the char before the run, after skipping a run of closers, must be a terminal.
    p = run_start - 1
    c = cls[np.maximum(p, 0)]
    k = np.searchsorted(q_start, p, side="right") - 1
    p2 = np.where(c == ord("q"), q_start[np.maximum(k, 0)] if len(q_start) else 0, p) - (c == ord("q"))
    cond1 = (p >= 0) & (p2 >= 0) & (cls[np.maximum(p2, 0)] == ord("t"))

    # (2) a newline whose next non-[ \t] character is another newline.
    nl = np.flatnonzero(cls == ord("n"))
    nxt = nl + 1
    ok = nxt < n
    nl, nxt = nl[ok], nxt[ok]
    on_b = cls[nxt] == ord("b")
    k = np.searchsorted(b_start, nxt, side="right") - 1
    nxt = np.where(on_b, b_end[np.maximum(k, 0)] if len(b_start) else nxt, nxt)
    blank_nl = nl[(nxt < n) & (cls[np.minimum(nxt, n - 1)] == ord("n"))]
    cond2 = np.zeros(len(run_start), bool)
    cond2[np.searchsorted(run_start, blank_nl, side="right") - 1] = True

    # (3) the run ends with a newline and 1-6 '#' plus a space/tab follow.
    e = run_end
    cand = (e < n) & (cls[e - 1] == ord("n")) & (cls[np.minimum(e, n - 1)] == ord("h"))
    k = np.searchsorted(h_start, e, side="left")
    k = np.minimum(k, max(len(h_start) - 1, 0))
    hashes = (h_end[k] - e) if len(h_start) else np.zeros(len(e), np.int64)
    after = h_end[k] if len(h_start) else e
    cond3 = (
        cand & (hashes >= 1) & (hashes <= 6) & (after < n)
        & (cls[np.minimum(after, n - 1)] == ord("b"))
    )
    return run_end[cond1 | cond2 | cond3]


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Starts and (exclusive) ends of the runs of True in a boolean array."""
    d = np.diff(mask.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    return np.flatnonzero(d == 1), np.flatnonzero(d == -1)


def batch_unit_starts(texts: list[str], unit: str) -> tuple[np.ndarray, np.ndarray]:
    """Unit (token or sentence) starts of many texts, found on one joined string.

    Returns ``(doc_index, position_in_doc)``, sorted by document then position. Texts are
    joined with a separator no unit can straddle: a newline for tokens (whitespace starts
    no token) and NUL for sentences (none of the sentence-end patterns can match across it),
    so the result equals running :func:`token_offsets` / :func:`sentence_offsets` per text.
    """
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    starts = np.cumsum(lengths + 1) - (lengths + 1)  # offset of each text in the corpus
    if unit == "tokens":
        corpus = "\n".join(texts)
        cls = _char_classes(corpus)
        word = cls == ord("w")
        prev_word = np.zeros(len(cls), dtype=bool)
        prev_word[1:] = word[:-1]
        pos = np.flatnonzero((cls == ord("p")) | (word & ~prev_word))
    else:
        corpus = "\x00".join(texts)
        # Boundaries follow whitespace, doc starts follow the NUL separator: never equal.
        bounds = _sentence_boundaries(_char_classes(corpus, sentence=True))
        pos = np.sort(np.concatenate([bounds, starts[lengths > 0]]))
    doc = np.searchsorted(starts, pos, side="right") - 1
    rel = pos - starts[doc]
    keep = rel < lengths[doc]  # a match ending at a text's end starts nothing
    return doc[keep], rel[keep]


def _unit_windows_many(
    texts: list[str], unit: str, size: int, overlap: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised ``fixed``-over-units windows for many texts: ``(doc, start, end)``.

    Unit ``u`` owns ``[start_u, start_{u+1})`` (first unit from 0, last to the text end);
    a window of units maps to the union of what they own. A non-empty text without any unit
    (all whitespace, for tokens) becomes one whole chunk so coverage stays total.
    """
    lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    doc_parts, start_parts, end_parts = [], [], []
    lo = 0
    while lo < len(texts):
        # Batches keep the joined corpus small; ~_BATCH_CHARS characters each.
        hi = lo + max(1, int(np.searchsorted(np.cumsum(lengths[lo:] + 1), _BATCH_CHARS, side="right")))
        u_doc, u_pos = batch_unit_starts(texts[lo:hi], unit)
        n_batch = hi - lo
        lens = lengths[lo:hi]
        counts = np.bincount(u_doc, minlength=n_batch)
        first = np.cumsum(counts) - counts
        own_start = u_pos.copy()
        own_start[first[counts > 0]] = 0
        own_end = np.empty_like(u_pos)
        own_end[:-1] = u_pos[1:]
        last = first + counts - 1
        own_end[last[counts > 0]] = lens[counts > 0]
        w_doc, ws, we = _window_bounds(counts, size, overlap)
        s = own_start[first[w_doc] + ws]
        e = own_end[first[w_doc] + we - 1]
        bare = np.flatnonzero((counts == 0) & (lens > 0))
        d = np.concatenate([w_doc, bare])
        s = np.concatenate([s, np.zeros(len(bare), np.int64)])
        e = np.concatenate([e, lens[bare]])
        order = np.lexsort((s, d))
        doc_parts.append(d[order] + lo)
        start_parts.append(s[order])
        end_parts.append(e[order])
        lo = hi
    if not doc_parts:
        empty = np.empty(0, np.int64)
        return empty, empty, empty
    return np.concatenate(doc_parts), np.concatenate(start_parts), np.concatenate(end_parts)


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
    document order then ``seq``. ``document``, ``fixed`` and ``sentences`` are vectorised over
    documents (tokens and sentences are found on one joined string per ~8 M characters);
    ``section`` loops over documents (never over chunks).
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
    elif spec.strategy in ("fixed", "sentences"):
        unit = "tokens" if spec.strategy == "fixed" else "sentences"
        doc, start, end = _unit_windows_many(texts, unit, p["size"], p["overlap"])
    else:
        doc_parts, start_parts, end_parts = [], [], []
        for d, t in enumerate(texts):
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
