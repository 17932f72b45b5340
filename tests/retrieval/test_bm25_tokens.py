"""workbench.retrieval.bm25.tokenize_ids against bm25s's own Tokenizer (the oracle), token for token.

The product tokenises with its own batched code (faster) and must give exactly what bm25s's
``Tokenizer.tokenize`` gives: the same ids per text, the same vocabulary in the same order, the
same word -> id and word -> stem maps afterwards, for indexing (``update_vocab=True``, empty texts
get the empty token) and for queries (``update_vocab=False``, no empty token), over the demo
corpus, a seeded sample of DL19 passages and random unicode/punctuation/digit/empty texts, for
every stemmer and stop-word option the product takes.
"""

from __future__ import annotations

import functools
import json
import random

import pytest

from tests.support.prerequisites import shared_path
from workbench.resources import DEMO_DIR
from workbench.retrieval.bm25 import (
    DEFAULT_TOKEN_PATTERN,
    Bm25Params,
    build_index,
    make_tokenizer,
    search,
    tokenize_ids,
)

STEMMERS = [None, "english", "porter", "german", "french", "russian", "turkish"]
STOPWORDS = [None, "english", "english_plus", "german", "french", "russian", ["a", "the", "of", "é", "x", "über"]]
# Stemmer and stop words meet in the code only as "stemming or not" and "stop words or not": every
# stemmer with and without stop words, every stop-word option with and without stemming.
OPTIONS = [(stem, stop) for stem in STEMMERS for stop in (None, "english")] + [
    (stem, stop) for stop in STOPWORDS if stop not in (None, "english") for stem in (None, "english")]
PATTERNS = [DEFAULT_TOKEN_PATTERN, r"\w+", r"\w*", r"[a-z]+|\d"]

# ASCII word characters, punctuation, every kind of ASCII whitespace (\x1c-\x1f split str.split()),
# and non-ASCII letters, digits, marks, spaces, joiners and symbols that \w does or does not match.
ALPHABET = (list("abcXYZ019_ ") + list(".,;:!?'\"-/()[]{}<>@#$%^&*+=|\\~`") + list("\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x00\x7f")
            + list("éßİıΣσςжЖ中文٣²½\u0301\u200d\u200b\xa0\u2003\u2028ﬁ🙂Ωǅ"))


def _random_texts(seed: int, n: int = 400) -> list[str]:
    rnd = random.Random(seed)
    words = ["the", "of", "running", "runs", "über", "Straße", "naïve", "İstanbul", "x", "a1", "_", "__init__", "42"]
    texts = ["", " ", "a", "ab", "The", "of the", "!!!", "é", "ǅx", "x\u0301y"]
    for _ in range(n):
        k = rnd.randint(0, 30)
        parts = [rnd.choice(words) if rnd.random() < 0.3 else "".join(rnd.choices(ALPHABET, k=rnd.randint(1, 6)))
                 for _ in range(k)]
        texts.append(rnd.choice(["", " ", "\n", "-", "\x1f"]).join(parts))
    return texts


def _demo_texts() -> list[str]:
    with open(DEMO_DIR / "documents.jsonl", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def _dl19_sample() -> list[str]:
    folder = shared_path("datasets", "trec-dl-2019-passage")
    return list(_read_dl19_sample(str(folder / "dl2019_document.jsonl")))


@functools.lru_cache(maxsize=1)
def _read_dl19_sample(path: str, n: int = 1000) -> tuple[str, ...]:
    with open(path, encoding="utf-8") as f:
        docs = [json.loads(line)["doc"] for line in f]
    return tuple(random.Random(19).sample(docs, n))


def _state(tok):
    return (list(tok.word_to_id.items()), list(tok.word_to_stem.items()), list(tok.stem_to_sid.items()),
            list(tok.get_vocab_dict().items()))


def assert_same_as_bm25s(params: Bm25Params, texts: list[str], queries: list[str], batch: int = 97) -> None:
    oracle, ours = make_tokenizer(params), make_tokenizer(params)
    for start in range(0, len(texts), batch):
        part = texts[start:start + batch]
        want = oracle.tokenize(part, update_vocab=True, return_as="ids", show_progress=False)
        got = tokenize_ids(ours, part, update_vocab=True, allow_empty=True)
        assert got == want, (params, start)
    assert _state(ours) == _state(oracle), params
    for start in range(0, len(queries), batch):
        part = queries[start:start + batch]
        want = oracle.tokenize(part, update_vocab=False, return_as="ids", show_progress=False, allow_empty=False)
        got = tokenize_ids(ours, part, update_vocab=False, allow_empty=False)
        assert got == want, (params, "queries", start)
    assert _state(ours) == _state(oracle), (params, "queries")
    # the same token strings, not only the same ids
    assert oracle.decode(want) == ours.decode(got)


@pytest.mark.parametrize(("stemmer", "stopwords"), OPTIONS, ids=str)
def test_tokens_match_bm25s_on_demo_and_random_texts(stemmer, stopwords):
    texts = _demo_texts() + _random_texts(1, 150)
    queries = _random_texts(2, 60) + [t[:60] for t in _demo_texts()]
    for lower in (True, False):
        assert_same_as_bm25s(Bm25Params(stemmer=stemmer, stopwords=stopwords, lower=lower), texts, queries)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_tokens_match_bm25s_for_other_token_patterns(pattern):
    texts = _demo_texts()[:10] + _random_texts(3, 150)
    for stemmer in (None, "english"):
        assert_same_as_bm25s(Bm25Params(stemmer=stemmer, token_pattern=pattern), texts, _random_texts(4, 60))


@pytest.mark.parametrize("stemmer", [None, "english"])
@pytest.mark.parametrize("stopwords", [None, "english"])
def test_tokens_match_bm25s_on_dl19_passages(stemmer, stopwords):
    sample = _dl19_sample()
    texts, queries = sample[:800], [t[:100] for t in sample[800:]] + sample[:50]
    assert_same_as_bm25s(Bm25Params(stemmer=stemmer, stopwords=stopwords), texts, queries, batch=500)


def test_scores_match_an_index_built_on_bm25s_tokens():
    import bm25s
    import numpy as np

    texts, queries = _demo_texts(), [t[:80] for t in _demo_texts()] + ["laptop refresh policy", "zzz"]
    params = Bm25Params()
    index = build_index(texts, params, batch=7)
    qi, di, scores = search(index, queries, 5)
    oracle = make_tokenizer(params)
    retriever = bm25s.BM25(k1=params.k1, b=params.b, method=params.method)
    retriever.index((oracle.tokenize(texts, update_vocab=True, return_as="ids", show_progress=False),
                     oracle.get_vocab_dict()), show_progress=False)
    rows = []
    for q, ids in enumerate(oracle.tokenize(queries, update_vocab=False, return_as="ids", show_progress=False,
                                            allow_empty=False)):
        if ids:
            docs, s = retriever.retrieve([ids], k=5, show_progress=False, n_threads=0)
            rows += [(q, int(d), float(v)) for d, v in zip(docs[0], s[0]) if v > 0]
    assert [(int(a), int(b)) for a, b in zip(qi, di)] == [(a, b) for a, b, _ in rows]
    assert np.array_equal(scores, np.array([v for _, _, v in rows]))
