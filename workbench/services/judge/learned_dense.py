"""The learned judge's dense cosine feature: ``cos(q, c) = <e(q), e(c)>`` for every pool pair.

``e`` is the project's dense encoder (:mod:`workbench.retrieval.dense`, unit-length vectors), the
one the dense retriever uses: when the pool's provenance holds a dense run (over the pool's
chunking, for a chunk-level pool), that run's model, backend and precision; otherwise the default
model on :func:`~workbench.services.retrieval.runs.default_dense_backend`. The query side is the
query's ``text`` alone (not its description), as the dense retriever encodes it, so the cosine
of a pair a dense run retrieved equals that run's stored score.

Where each value comes from, cheapest first:

1. a pooled dense run made with the same encoder (same embeddings-cache key) scored the pair:
   its stored score is the cosine (nothing is read or encoded);
2. the embeddings cache (table ``embeddings``, the dense retriever's): a chunk-level pool's
   passages under the pool's chunking and chunk id (so the vectors of ``retrieve dense`` are
   reused, and the ones computed here serve a later dense run); a document-level pool's under
   :data:`DOCUMENTS` with id ``doc_id#sha256(text)[:16]``; queries under :data:`QUERIES` with
   ``query_id#sha256(text)[:16]`` (an edited text is another id, never a stale vector);
3. encoded now, in the blocks of pairs the caller walks (:meth:`DenseCosine.block`), and
   written to the cache in the block's own transaction, so a second ``learn`` (or an
   interrupted one run again) encodes nothing it already did.

Memory holds the pool's query vectors, one block of passage vectors and one float per pair.
A pair whose passage or query encodes to the zero vector gets cosine 0.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from workbench.retrieval import dense as dense_mod
from workbench.services.retrieval.runs import default_dense_backend, dense_cache_key, load_dense_encoder
from workbench.store import learned_judge as store
from workbench.store.database import Database
from workbench.store.embeddings import read_embeddings_of, write_embeddings

#: Cache namespaces (the ``chunking`` column of ``embeddings``): not chunking names, which must
#: start with a letter or digit (:mod:`workbench.core.formats.names`).
DOCUMENTS = "(documents)"
QUERIES = "(queries)"


def text_id(item_id: str, text: str) -> str:
    """``item_id#`` + the first 16 hex digits of sha256 of ``text`` (UTF-8)."""
    return f"{item_id}#{hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]}"


@dataclass(frozen=True)
class DenseSource:
    """Which encoder the feature uses: ``model`` (name or path), ``backend``, ``precision``,
    ``key`` (its embeddings-cache key) and the pooled dense ``runs`` whose scores are reused."""

    model: str
    backend: str
    precision: str
    key: str
    runs: tuple[str, ...] = ()


def _precision_of(cache_key: str) -> str:
    """The ONNX precision a dense run's cache key names (``...#onnx-<precision>-r<recipe>``)."""
    if "#onnx-" not in cache_key:
        return "fp32"
    return cache_key.split("#onnx-", 1)[1].rsplit("-r", 1)[0]


def choose_source(db: Database, pool: str, level: str, chunking: str | None, *, model: str | None = None,
                  encoder=None) -> DenseSource:
    """The encoder of the pool's first dense run (module docstring), else ``model`` (default:
    the default dense model) on the default backend; ``encoder``: a caller's loaded encoder
    (its vectors are cached under ``model``'s torch key, as ``retrieve dense`` does)."""

    runs = [(name, p) for name, p in store.pool_dense_runs(db, pool)
            if level == "chunk" and p.get("chunking") == chunking]
    if model is None and encoder is None and runs:
        params = runs[0][1]
        backend = str(params.get("backend") or "torch")
        precision = _precision_of(str(params.get("cache_key") or ""))
        chosen = str(params.get("model") or dense_mod.DEFAULT_MODEL)
    else:
        chosen = model or dense_mod.DEFAULT_MODEL
        backend = default_dense_backend(encoder)
        precision = "fp32"
    key = dense_cache_key(chosen, backend, precision)
    same = tuple(name for name, p in runs if p.get("cache_key", dense_mod.model_key(str(p.get("model", "")))) == key)
    return DenseSource(chosen, backend, precision, key, same)


@dataclass
class DenseCosine:
    """The cosine of every pool pair, filled block by block (module docstring)."""

    db: Database
    source: DenseSource
    level: str
    chunking: str | None
    spans: pd.DataFrame
    query_vectors: dict[str, np.ndarray]
    values: np.ndarray
    encoder: object = None
    batch_size: int = 64
    counts: dict[str, int] = field(default_factory=lambda: {"reused_scores": 0, "cached_passages": 0,
                                                             "encoded_passages": 0, "encoded_queries": 0})

    def _encoder(self):
        if self.encoder is None:
            self.encoder = load_dense_encoder(self.source.model, self.source.backend, "cpu", self.source.precision)
        return self.encoder

    def _namespace(self) -> str:
        return str(self.chunking) if self.level == "chunk" else DOCUMENTS

    def block(self, offset: int, texts: list[str]) -> None:
        """Fill the cosine of pairs ``offset .. offset + len(texts)`` (pair order; ``texts``
        their passages) that no dense run scored."""
        sl = slice(offset, offset + len(texts))
        todo = np.flatnonzero(np.isnan(self.values[sl]))
        if not len(todo):
            return
        part = self.spans.iloc[offset + todo]
        if self.level == "chunk":
            ids = part["chunk_id"].astype(str).tolist()
        else:
            ids = [text_id(str(d), texts[i]) for d, i in zip(part["doc_id"], todo)]
        first: dict[str, int] = {}
        for i, item in zip(todo, ids):
            first.setdefault(item, int(i))
        found, vectors = read_embeddings_of(self.db, self._namespace(), self.source.key, list(first))
        where = {item: j for j, item in enumerate(found)}
        missing = [item for item in first if item not in where]
        self.counts["cached_passages"] += len(found)
        if missing:
            fresh = dense_mod.encode(self._encoder(), [texts[first[m]] for m in missing], batch_size=self.batch_size)
            with self.db.transaction() as tx:
                write_embeddings(tx, self._namespace(), self.source.key, missing, fresh)
            self.counts["encoded_passages"] += len(missing)
            vectors = fresh if not len(found) else np.concatenate([vectors, fresh])
            where.update({item: len(found) + j for j, item in enumerate(missing)})
        passages = vectors[[where[item] for item in ids]]
        queries = np.stack([self.query_vectors[str(q)] for q in part["query_id"]])
        self.values[offset + todo] = np.einsum("ij,ij->i", passages.astype(np.float64), queries.astype(np.float64))


def prepare(db: Database, pool: str, level: str, chunking: str | None, spans: pd.DataFrame,
            run_scores: dict[str, np.ndarray], *, model: str | None = None, encoder=None,
            batch_size: int = 64) -> DenseCosine:
    """The pool's :class:`DenseCosine` with the reused run scores in place and every pool
    query's vector at hand (from the cache, else encoded and cached). ``run_scores``: each
    pooled run's score per pair in pair order (NaN where it did not score the pair)."""
    source = choose_source(db, pool, level, chunking, model=model, encoder=encoder)
    values = np.full(len(spans), np.nan)
    for run in source.runs:
        scores = run_scores.get(run)
        if scores is not None:
            values = np.where(np.isnan(values), scores, values)
    out = DenseCosine(db, source, level, chunking, spans, {}, values, encoder, batch_size)
    out.counts["reused_scores"] = int((~np.isnan(values)).sum())
    if not np.isnan(values).any():
        return out
    queries = store.pool_query_texts(db, pool)
    ids = [text_id(str(q), str(t or "")) for q, t in zip(queries["query_id"], queries["text"])]
    found, vectors = read_embeddings_of(db, QUERIES, source.key, ids)
    have = dict(zip(found, vectors))
    missing = [i for i, item in enumerate(ids) if item not in have]
    if missing:
        fresh = dense_mod.encode(out._encoder(), [str(queries["text"].iloc[i] or "") for i in missing],
                                 batch_size=batch_size)
        with db.transaction() as tx:
            write_embeddings(tx, QUERIES, source.key, [ids[i] for i in missing], fresh)
        have.update({ids[i]: fresh[j] for j, i in enumerate(missing)})
        out.counts["encoded_queries"] = len(missing)
    out.query_vectors = {str(q): have[item] for q, item in zip(queries["query_id"], ids)}
    return out
