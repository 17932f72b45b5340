"""BM25 over chunk texts with bm25s.

Scoring (bm25s ``method="lucene"``, the default here), for query ``q`` and chunk ``c``::

    score(q, c) = Σ_{t in q}  idf(t) · tf(t, c) / (tf(t, c) + k1 · (1 - b + b · |c| / avgdl))
    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

``N`` is the number of chunks in the index, ``df(t)`` the chunks containing term ``t``,
``|c|`` the chunk length in tokens *after* stopword removal and stemming, ``avgdl`` the mean
of ``|c|``. A query term repeated in the query counts once per occurrence.

Tokenisation: lower-case, the regex ``token_pattern`` (default: runs of 2+ word characters),
stopwords removed (a bm25s language name such as ``"english"``, ``None`` for none, or an
explicit list), then stemmed with PyStemmer in ``stemmer`` language (``None``: no stemming).

Edge cases: chunks that share no term with the query score 0 and are *not* returned (a run
lists retrieved items, and a zero score means no evidence); a query with no indexed term gets
no rows; ``k`` larger than the index returns every matching chunk.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import chain

import numpy as np

from workbench import lazylibs
from workbench.errors import ConfigError

DEFAULT_TOKEN_PATTERN = r"(?u)\b\w\w+\b"


@dataclass(frozen=True)
class Bm25Params:
    """Everything that determines a BM25 ranking; stored as the run's params."""

    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"
    stemmer: str | None = "english"
    stopwords: str | list[str] | None = "english"
    lower: bool = True
    token_pattern: str = DEFAULT_TOKEN_PATTERN

    def as_dict(self) -> dict:
        return {"retriever": "bm25", **asdict(self)}


_OFF = {"", "none", "off", "false"}


def parse_stemmer(text: str | None) -> str | None:
    """A stemmer option as typed (``--stemmer``, the app's field): a language, or ``none``/``off``
    (or empty) for no stemming."""
    text = "" if text is None else str(text).strip()
    return None if text.lower() in _OFF else text


def parse_stopwords(text: str | None) -> str | list[str] | None:
    """A stopwords option as typed: a bm25s language (``english``), ``none``/``off`` (or empty)
    for none, or comma-separated words (``a,the,of``) as an explicit list."""
    text = "" if text is None else str(text).strip()
    if text.lower() in _OFF:
        return None
    if "," in text:
        return [w.strip() for w in text.split(",") if w.strip()]
    return text


def _stemmer(language: str | None):
    if language is None:
        return None

    try:
        return lazylibs.Stemmer.Stemmer(language)
    except KeyError:
        known = ", ".join(sorted(lazylibs.Stemmer.algorithms()))
        raise ConfigError(f"unknown stemmer language {language!r}; PyStemmer knows: {known}") from None


def make_tokenizer(params: Bm25Params):
    try:
        return lazylibs.bm25s_tokenization.Tokenizer(lower=params.lower, splitter=params.token_pattern,
                                                     stopwords=params.stopwords, stemmer=_stemmer(params.stemmer))
    except ValueError as exc:
        raise ConfigError(f"BM25 tokeniser: {exc}") from None


# The default pattern's tokens are the maximal runs of 2+ word characters. In an ASCII text the word
# characters are [A-Za-z0-9_], so mapping every other byte to a space and splitting on spaces gives
# the same runs (one-character runs are dropped: they are never in the vocabulary, see below).
_DEFAULT_PATTERN = re.compile(DEFAULT_TOKEN_PATTERN)
_ASCII_WORDS = bytes(c if chr(c).isalnum() or chr(c) == "_" else 32 for c in range(128)) + bytes(range(128, 256))
_DEFAULT_FINDALL = re.compile(r"\w\w+").findall  # the same matches without the \b checks


def _splits_default(splitter) -> bool:
    owner = getattr(splitter, "__self__", None)
    return (isinstance(owner, re.Pattern) and owner.pattern == _DEFAULT_PATTERN.pattern
            and owner.flags == _DEFAULT_PATTERN.flags and splitter == owner.findall)


def tokenize_ids(tokenizer, texts: Sequence[str], *, update_vocab: bool, allow_empty: bool) -> list[list[int]]:
    """``tokenizer.tokenize(texts, update_vocab=..., allow_empty=..., return_as="ids")`` for a bm25s
    ``Tokenizer``: the same ids and the same vocabulary updates, faster.

    bm25s splits each text with the regex, then looks up, stop-word-checks and stems every word
    in Python, one at a time. Here the default pattern splits ASCII texts with ``bytes.translate``
    and ``split`` (other texts with an equivalent regex without ``\\b``); the batch's words not in
    the vocabulary yet are taken once, in order of first occurrence, stop words dropped, stemmed in
    one PyStemmer ``stemWords`` call and given ids in that order (the order bm25s gives them: a
    word's fate, id or dropped, is decided at its first occurrence there too); each text's ids are
    then one dictionary look-up per word (a word not in the vocabulary is dropped, as in bm25s).
    tests/retrieval/test_bm25_tokens.py checks it against bm25s token for token.
    """
    if allow_empty and not update_vocab:  # not used here; bm25s's vocabulary timing is subtle there
        return tokenizer.tokenize(list(texts), update_vocab=False, return_as="ids", show_progress=False,
                                  allow_empty=True)
    word_to_id, word_to_stem, stem_to_sid = tokenizer.word_to_id, tokenizer.word_to_stem, tokenizer.stem_to_sid
    stem_one = tokenizer.stemmer
    if allow_empty and update_vocab and "" not in word_to_id:
        idx = max(word_to_id.values(), default=-1) + 1
        word_to_id[""] = idx
        if stem_one is not None:
            word_to_stem.setdefault("", "")
            stem_to_sid.setdefault("", idx)
    if tokenizer.lower:
        texts = [text.lower() for text in texts]
    split = tokenizer.splitter
    default = _splits_default(split)
    if default:
        table, findall = _ASCII_WORDS, _DEFAULT_FINDALL
        docs = [text.encode("ascii").translate(table).decode("ascii").split() if text.isascii() else findall(text)
                for text in texts]
    else:
        docs = [list(split(text)) for text in texts]
    stop = set(tokenizer.stopwords) if tokenizer.stopwords is not None else set()
    new = [w for w in dict.fromkeys(chain.from_iterable(docs)) if w not in word_to_id and w not in stop]
    if default:  # the ASCII split's one-character runs, which the regex does not match
        new = [w for w in new if len(w) > 1]
    if new:
        if stem_one is None:
            if update_vocab:
                for word in new:
                    word_to_id[word] = len(word_to_id)
        else:
            unstemmed = [w for w in new if w not in word_to_stem]
            if unstemmed:
                owner = getattr(stem_one, "__self__", None)
                if hasattr(owner, "stemWords") and stem_one == getattr(owner, "stemWord", None):
                    stems = owner.stemWords(unstemmed)
                else:
                    stems = [stem_one(w) for w in unstemmed]
                word_to_stem.update(zip(unstemmed, stems))
            for word in new:
                stem = word_to_stem[word]
                sid = stem_to_sid.get(stem)
                if sid is None:
                    if not update_vocab:
                        continue
                    sid = stem_to_sid[stem] = len(stem_to_sid)
                word_to_id[word] = sid
    get = word_to_id.get
    empty = [word_to_id[""]] if allow_empty and "" in word_to_id else []
    out = []
    for words in docs:
        ids = [i for i in map(get, words) if i is not None]
        out.append(ids if ids else list(empty))
    return out


@dataclass
class Bm25Index:
    """A bm25s index over ``n`` texts plus the tokenizer whose vocabulary it uses."""

    params: Bm25Params
    tokenizer: object
    retriever: object
    size: int
    vocabulary: int = field(default=0)


def build_index(texts: Sequence[str], params: Bm25Params = Bm25Params(), *, batch: int = 2000,
                advance=None) -> Bm25Index:
    """Tokenise ``texts`` in batches (``advance(n)`` after each) and index them."""

    if params.k1 < 0 or not 0 <= params.b <= 1:
        raise ConfigError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={params.k1}, b={params.b}")
    tokenizer = make_tokenizer(params)
    ids: list[list[int]] = []
    for start in range(0, len(texts), batch):
        part = list(texts[start:start + batch])
        ids.extend(tokenize_ids(tokenizer, part, update_vocab=True, allow_empty=True))
        if advance is not None:
            advance(len(part))
    retriever = lazylibs.bm25s.BM25(k1=params.k1, b=params.b, method=params.method)
    vocab = tokenizer.get_vocab_dict()
    if len(texts):
        retriever.index((ids, vocab), show_progress=False)
    return Bm25Index(params=params, tokenizer=tokenizer, retriever=retriever, size=len(texts),
                     vocabulary=len(vocab))


def search(index: Bm25Index, queries: Sequence[str], k: int, *, batch: int = 256,
           advance=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-``k`` per query as flat arrays ``(query_index, text_index, score)``.

    Rows are grouped by query and ordered by score descending within a query; zero scores
    are dropped (see module docstring).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    empty = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64))
    if index.size == 0 or not len(queries):
        return empty
    kk = min(int(k), index.size)
    q_parts, d_parts, s_parts = [], [], []
    for start in range(0, len(queries), batch):
        part = list(queries[start:start + batch])
        tokens = tokenize_ids(index.tokenizer, part, update_vocab=False, allow_empty=False)
        known = [i for i, t in enumerate(tokens) if t]
        if known:
            docs, scores = index.retriever.retrieve([tokens[i] for i in known], k=kk,
                                                    show_progress=False, n_threads=0)
            docs = np.asarray(docs, dtype=np.int64)
            scores = np.asarray(scores, dtype=np.float64)
            qi = np.repeat(np.asarray(known, dtype=np.int64) + start, kk).reshape(len(known), kk)
            keep = scores > 0
            q_parts.append(qi[keep])
            d_parts.append(docs[keep])
            s_parts.append(scores[keep])
        if advance is not None:
            advance(len(part))
    if not q_parts:
        return empty
    return np.concatenate(q_parts), np.concatenate(d_parts), np.concatenate(s_parts)
