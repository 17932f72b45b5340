"""Run retrievers over a chunking and store each result as a named run.

Every retriever here writes a chunk-level run (``runs.level = 'chunk'``, ``runs.chunking`` set)
whose ``params`` JSON records what produced it, so a run can be reproduced and compared. Rows
are ``query_id, doc_id, chunk_id, rank, score`` with rank 1-based per query by score
descending, ties by chunk id descending: the order trec_eval and the metric engine read a run
in, so pooling depth, judged@k and coverage see the order the evaluation scores
(:func:`evaluation_order`; scores are stored rounded to 12 decimals so ties are exact).

Chunk text is ``documents.text[start:end]`` (titles are not prepended): the retrievers see
exactly the span an assessor will judge.

Latency. Every run made here stores one latency per query in milliseconds (table
``run_latencies``, :mod:`workbench.store.latencies`) and its p50/p95 in ``params``
(``latency_p50_ms``, ``latency_p95_ms``, and ``latency_ms`` = p95, the figure the
quality-versus-latency charts read), the same record :mod:`workbench.services.evaluation.sweep` writes:

* ``bm25``: each query is searched on its own against the built index and timed with
  ``time.perf_counter`` around the search (tokenising the query, scoring, top-k). Building the
  index is not part of any query's latency (it is done once, before serving).
* ``dense``: each query is encoded on its own (batch of one) and searched against the chunk
  matrix; the time covers the query encoding and the exact dot-product top-k. Chunk encoding
  (cached) is not part of it. Encoding one query at a time is slower in total than one batch, but
  it is what a user's single query costs; a batched throughput would hide the per-query spread.
  Queries are encoded with one torch thread (:func:`workbench.retrieval.dense.one_thread`), as a
  server answering queries one by one would.
* ``hybrid``: the fused parts run one after the other, so a query's latency is the sum of its
  latencies in the fused runs plus an equal share of the fusion time. A query missing from a
  part's latencies (an imported part without a sidecar) gets no latency: nothing is made up.
* ``from-doc``: the mapped run keeps the source run's latencies (the mapping is bookkeeping on
  stored rows, not part of answering a query).

p50/p95 are numpy's linear-interpolation percentiles (:func:`workbench.core.metrics.pareto.percentile_latency`).
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, field, fields
from importlib.util import find_spec

import numpy as np
import pandas as pd

from workbench import lazylibs
from workbench.core.formats.labels import rank_by_score
from workbench.core.formats.names import check_name
from workbench.core.metrics.pareto import percentile_latency
from workbench.errors import InputError, StoreError
from workbench.retrieval import bm25 as bm25_mod
from workbench.retrieval import dense as dense_mod
from workbench.retrieval.doc_mapping import doc_run_to_chunks
from workbench.retrieval.hybrid import fuse
from workbench.services import access, lazy
from workbench.services.progress import ProgressFactory, no_progress
from workbench.services.retrieval.latency import latency_summary
from workbench.store.chunks import chunking_exists, read_chunks
from workbench.store.corpus import read_queries
from workbench.store.database import Database
from workbench.store.embeddings import (
    count_embeddings,
    read_embeddings,
    write_embeddings,
)
from workbench.store.latencies import read_latencies, write_latencies
from workbench.store.runs import (
    read_run_info,
    read_run_rows_many,
    run_exists,
    set_run_scope,
    write_run,
)

DEFAULT_K = 100


@dataclass(frozen=True)
class RunSummary:
    """What a retrieval wrote (also what :meth:`workbench.api.Project.retrieve` returns, as
    ``RunInfo``). ``stats`` holds retriever-specific counts (e.g. ``encoded``; for dense
    retrieval ``backend``: the encoder that was used)."""

    name: str
    retriever: str
    level: str
    chunking: str | None
    queries: int
    rows: int
    seconds: float
    params: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)
    latency_p50_ms: float = float("nan")
    latency_p95_ms: float = float("nan")

    def to_pandas(self) -> pd.DataFrame:
        """One row: every field but ``params`` and ``stats``."""
        return pd.DataFrame([{f.name: getattr(self, f.name) for f in fields(self)
                              if f.name not in ("params", "stats")}])


def latency_params(values, how: str) -> dict:
    """The run-parameter record of per-query latencies ``values`` (ms): p50, p95 and
    ``latency_ms`` (= p95, what the quality-versus-latency charts read), and ``how`` they were
    measured. Empty ``values`` give ``{"latency": how}`` only (no number is made up)."""
    v = np.asarray(values, dtype=float)
    if not v.size:
        return {"latency": how}
    p95 = percentile_latency(v, 95)
    return {"latency_ms": p95, "latency_p50_ms": percentile_latency(v, 50), "latency_p95_ms": p95,
            "latency": how}


def timed_per_query(texts: list[str], search_one, advance=None):
    """Run ``search_one(text) -> (item_index, score)`` for each query on its own, timing each
    call with ``time.perf_counter``. Returns flat ``(query_index, item_index, score)`` and the
    per-query milliseconds (one per text, in order)."""
    q_parts, i_parts, s_parts, times = [], [], [], []
    for i, text in enumerate(texts):
        t0 = time.perf_counter()
        items, scores = search_one(text)
        times.append((time.perf_counter() - t0) * 1000.0)
        items = np.asarray(items, dtype=np.int64)
        q_parts.append(np.full(len(items), i, dtype=np.int64))
        i_parts.append(items)
        s_parts.append(np.asarray(scores, dtype=np.float64))
        if advance is not None:
            advance(1)
    if not texts:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0)
    return (np.concatenate(q_parts), np.concatenate(i_parts), np.concatenate(s_parts),
            np.asarray(times, dtype=np.float64))


def _check_k(k) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise InputError(f"{{field}} must be a positive integer (results per query), got {k!r}", field="k")
    return int(k)


def _check_new_run(db: Database, name: str) -> None:
    check_name(name, "run", "choose another {field}", field="name")
    if run_exists(db, name):
        raise StoreError(f"run {name!r} already exists in {db.path}", field="name",
                         hint="choose another {field} (runs are kept so pools and evaluations that used them "
                              "stay reproducible)")


def _load_chunks(db: Database, chunking: str) -> pd.DataFrame:
    if not chunking_exists(db, chunking):
        raise StoreError(
            f"no chunking {chunking!r} in {db.path}; create it first "
            f"({{command}})", command=f"chunk --name {chunking} --strategy section",
        )
    chunks = read_chunks(db, chunking, with_text=True)
    if chunks.empty:
        raise StoreError(f"chunking {chunking!r} has no chunks; re-chunk a non-empty corpus")
    return chunks


def _load_queries(db: Database) -> pd.DataFrame:
    queries = read_queries(db)
    if queries.empty:
        raise InputError(f"{db.path} holds no queries; import them first ({{command:import queries FILE}})")
    return queries


def ranked_rows(queries: pd.DataFrame, chunks: pd.DataFrame, qi, ci, score) -> pd.DataFrame:
    """Flat hits to run rows in the evaluation's order (:func:`evaluation_order`)."""
    rows = pd.DataFrame({
        "query_id": queries["query_id"].to_numpy(dtype=object)[qi],
        "doc_id": chunks["doc_id"].to_numpy(dtype=object)[ci],
        "chunk_id": chunks["chunk_id"].to_numpy(dtype=object)[ci],
        "score": np.asarray(score, dtype=np.float64),
    })
    rows = evaluation_order(rows, "chunk_id")[["query_id", "doc_id", "chunk_id", "rank", "score"]]
    return rows.astype({"query_id": "str", "doc_id": "str", "chunk_id": "str"})


#: Stored scores are rounded to this many decimals, so that scores the ranking treats as tied
#: are exactly equal in the stored run (and in an exported file) for any evaluator.
SCORE_DECIMALS = 12


def evaluation_order(rows: pd.DataFrame, id_col: str, k: int | None = None) -> pd.DataFrame:
    """``rows`` (``query_id, <id_col>, score, ...``) ranked in the order every evaluator reads a
    run, cut to the top ``k`` per query (None: all).

    The order is trec_eval's (and :mod:`workbench.core.metrics.ranking`'s): score descending, ties by
    item id **descending**, the rule the run importer already ranks by
    (:func:`workbench.core.formats.labels.rank_by_score`, called here). Why: evaluation ignores
    the stored rank and re-sorts by score, while pooling depth, judged@k and budgeted coverage
    read the stored rank; one order keeps them all on what nDCG scores, and an exported run
    imports back with the same ranks. Scores are rounded to :data:`SCORE_DECIMALS` first, so
    near-equal float sums are exact ties in the stored run and in any evaluator.
    """

    score = np.round(rows["score"].to_numpy(dtype=np.float64), SCORE_DECIMALS)
    keyed = pd.DataFrame({"query_id": rows["query_id"].astype(str).to_numpy(), "score": score,
                          "item_id": rows[id_col].astype(str).to_numpy()}, index=rows.index)
    out = rows.assign(score=score, rank=rank_by_score(keyed))
    if k is not None:
        out = out.loc[out["rank"] <= k]
    return out.sort_values(["query_id", "rank"], kind="stable").reset_index(drop=True)


def store_run(db: Database, name: str, retriever: str, rows: pd.DataFrame, params: dict,
              level: str, chunking: str | None, latency: pd.DataFrame | None = None,
              how: str | None = None) -> tuple[int, dict]:
    """The one way a retriever's run is stored (every retriever of
    :mod:`workbench.services.retrieval.registry`, in a single run or a sweep cell): rows, scope
    and per-query latencies (``query_id, latency_ms``) in one transaction, so a run is never
    stored without the latencies it was measured with. With ``how`` (how the latencies were
    measured) ``params`` gain :func:`latency_params` of ``latency``. Returns the rows written
    and the parameters stored."""
    if how is not None:
        values = latency["latency_ms"] if latency is not None else []
        params = {**params, **latency_params(values, how)}
    with db.transaction() as tx:
        n = write_run(tx, name, retriever, rows, params=params)
        set_run_scope(tx, name, level, chunking)
        if latency is not None and len(latency):
            write_latencies(tx, name, latency)
    return n, params


class Workspace:
    """What the runs made together share. This base is a single run's: chunks, queries, the BM25
    index and the chunk vectors are read or computed for the run that asks (chunk vectors from
    the embedding cache, :func:`embed_chunks`). A sweep passes its own subclass
    (:class:`workbench.services.evaluation.sweep.SweepWorkspace`) that reads each chunking once,
    keeps one BM25 index per chunking, encodes the queries once and shares chunk vectors across
    chunkings. ``stage(name)`` brackets a step (the sweep times it); here it does nothing."""

    #: How the queries are encoded (stored in a dense run's ``params["latency_parts"]``).
    query_encoding = "one query at a time"

    def __init__(self, encoder=None) -> None:
        self.encoder = encoder  # a caller's loaded encoder, else loaded on first use

    def stage(self, name: str):

        return nullcontext()

    def chunks(self, db: Database, chunking: str) -> pd.DataFrame:
        return _load_chunks(db, chunking)

    def queries(self, db: Database) -> pd.DataFrame:
        return _load_queries(db)

    def bm25_index(self, chunking: str, chunks: pd.DataFrame, params: bm25_mod.Bm25Params,
                   progress: ProgressFactory):
        with progress("bm25 index", len(chunks), "chunk") as advance:
            return bm25_mod.build_index(chunks["text"].tolist(), params, advance=advance)

    def dense_encoder(self, options: DenseSetup):
        if self.encoder is None:
            self.encoder = load_dense_encoder(options.model, options.backend, options.device, options.precision)
        return self.encoder

    def chunk_vectors(self, db: Database, chunking: str, chunks: pd.DataFrame, options: DenseSetup,
                      progress: ProgressFactory) -> tuple[np.ndarray, int]:
        """Unit vectors aligned with ``chunks`` and how many chunks were encoded for them."""
        return embed_chunks(db, chunking, options.model, encoder=self.encoder, batch_size=options.batch_size,
                            chunks=chunks, progress=progress, backend=options.backend, device=options.device,
                            precision=options.precision)

    def query_vectors(self, texts: list[str], options: DenseSetup,
                      progress: ProgressFactory) -> tuple[np.ndarray, np.ndarray]:
        """Unit query vectors and each query's encoding time (ms), one query at a time (batch of
        one, one torch thread: what a user's single query costs)."""
        encoder = self.dense_encoder(options)
        vectors, times = [], []
        with progress("encode queries", len(texts), "query") as advance, dense_mod.one_thread():
            for text in texts:
                t0 = time.perf_counter()
                vectors.append(dense_mod.encode(encoder, [text], batch_size=1))
                times.append((time.perf_counter() - t0) * 1000.0)
                advance(1)
        matrix = np.concatenate(vectors) if vectors else np.zeros((0, 0), np.float32)
        return matrix, np.asarray(times, dtype=np.float64)


@dataclass(frozen=True)
class DenseSetup:
    """The dense encoder a run uses (``backend`` resolved: never None)."""

    model: str
    backend: str
    precision: str = "fp32"
    device: str = "cpu"
    batch_size: int = 64

    @property
    def cache_key(self) -> str:
        return dense_cache_key(self.model, self.backend, self.precision)


def _latency_frame(queries: pd.DataFrame, times) -> pd.DataFrame:
    return pd.DataFrame({"query_id": queries["query_id"].astype(str).to_numpy(),
                         "latency_ms": np.asarray(times, dtype=np.float64)})


def _summary_latency(params: dict) -> dict:
    return {"latency_p50_ms": params.get("latency_p50_ms", float("nan")),
            "latency_p95_ms": params.get("latency_p95_ms", float("nan"))}


#: How each retriever's latencies are measured (stored in the run's ``params["latency"]``).
BM25_LATENCY = "per query, ms: one query searched at a time (table run_latencies)"
DENSE_LATENCY = "per query, ms: one query encoded and searched at a time (table run_latencies)"


def run_bm25(db: Database, chunking: str, name: str, *, k: int = DEFAULT_K,
             params: bm25_mod.Bm25Params | None = None,
             progress: ProgressFactory = no_progress, workspace: Workspace | None = None,
             extra_params: dict | None = None) -> RunSummary:
    """BM25 (formula in :mod:`workbench.retrieval.bm25`) over ``chunking``; top ``k`` per query.

    ``workspace``: what runs made together share (:class:`Workspace`; a sweep's keeps one index
    per chunking); ``extra_params``: stored with the run's parameters (a sweep's ``sweep: true``).
    """
    access.require("build")
    k = _check_k(k)
    params = params or bm25_mod.Bm25Params()
    _check_new_run(db, name)
    ws = workspace or Workspace()
    started = time.perf_counter()
    chunks = ws.chunks(db, chunking)
    queries = ws.queries(db)
    with ws.stage("bm25 index"):
        index = ws.bm25_index(chunking, chunks, params, progress)
    with progress("bm25 search", len(queries), "query") as advance, ws.stage("bm25 search"):
        # One query at a time, each timed (module docstring, "Latency").
        qi, ci, score, times = timed_per_query(
            queries["text"].tolist(), lambda text: bm25_mod.search(index, [text], k)[1:], advance)
    with ws.stage("store runs"):
        rows = ranked_rows(queries, chunks, qi, ci, score)
        n, run_params = store_run(db, name, "bm25", rows,
                                  {**params.as_dict(), "k": k, "chunking": chunking, **(extra_params or {})},
                                  "chunk", chunking, _latency_frame(queries, times), how=BM25_LATENCY)
    return RunSummary(name, "bm25", "chunk", chunking, int(rows["query_id"].nunique()), n,
                      time.perf_counter() - started, run_params,
                      {"chunks": len(chunks), "vocabulary": index.vocabulary,
                       "queries_without_hits": int(len(queries) - rows["query_id"].nunique())},
                      **_summary_latency(run_params))


def dense_cache_key(model: str, backend: str = "torch", precision: str = "fp32") -> str:
    """The embeddings-cache key: the model key, suffixed ``#onnx-<precision>-r<recipe>`` for the
    ONNX backend so vectors of different backends, precisions or recipes are never mixed (torch
    keeps the bare key, so existing caches stay valid)."""
    key = dense_mod.model_key(model)
    if backend == "torch":
        return key
    if backend == "onnx":
        # The recipe number too: vectors of an older export/quantisation recipe differ (about 1%
        # cosine for int8) and must never be mixed with new ones in one cache.
        return f"{key}#onnx-{precision}-r{lazy.retrieval_onnx_dense.RECIPE}"
    raise InputError(f"{{field}} must be torch or onnx, got {backend!r}", field="backend")


def default_dense_backend(encoder=None) -> str:
    """The dense encoder used when none is named: ``onnx`` (ONNX Runtime, fp32: the same vectors
    as PyTorch within cosine 0.999, faster: docs/performance.md) where the ``onnx`` extra is
    installed, else ``torch``; ``torch`` for a caller's own loaded ``encoder`` (a
    SentenceTransformer)."""

    if encoder is not None:
        return "torch"
    return "onnx" if find_spec("onnxruntime") is not None and find_spec("onnx") is not None else "torch"


def load_dense_encoder(model: str, backend: str = "torch", device: str = "cpu", precision: str = "fp32"):
    """The encoder for ``backend`` (``torch``: sentence-transformers on ``device``; ``onnx``:
    :mod:`workbench.retrieval.onnx_dense`, CPU unless a CUDA provider exists)."""
    if device not in ("cpu", "cuda", "auto"):
        raise InputError(f"{{field}} must be cpu, cuda or auto, got {device!r}", field="device")
    if backend == "onnx":
        return lazy.retrieval_onnx_dense.load_encoder(dense_mod.model_location(model), precision=precision, device=device)
    dense_cache_key(model, backend)
    if device != "cpu":
        if lazylibs.torch.cuda.is_available():
            device = "cuda"
        elif device == "cuda":
            raise InputError("{field} cuda: torch sees no CUDA device here", field="device", hint="use {field} cpu or auto")
        else:
            device = "cpu"
    return dense_mod.load_encoder(model, device=device)


def embed_chunks(db: Database, chunking: str, model: str = dense_mod.DEFAULT_MODEL, *,
                 encoder=None, batch_size: int = 64, chunks: pd.DataFrame | None = None,
                 progress: ProgressFactory = no_progress, flush_every: int = 2048,
                 backend: str = "torch", device: str = "cpu", precision: str = "fp32"):
    """Embeddings of every chunk of ``chunking``, from the cache where possible.

    Only chunks missing from the ``embeddings`` cache for ``(chunking, model_key(model))`` are
    encoded; they are written every ``flush_every`` chunks in their own transaction, so an
    interrupted run keeps what it computed. Returns ``(matrix aligned with chunks, encoded)``.
    """
    access.require("build")
    if chunks is None:
        chunks = _load_chunks(db, chunking)
    key = dense_cache_key(model, backend, precision)
    cached_ids, cached = read_embeddings(db, chunking, key)
    position = {c: i for i, c in enumerate(cached_ids)}
    wanted = chunks["chunk_id"].astype(str).tolist()
    # Position of each wanted chunk in the cache, -1 when it still has to be encoded.
    where = np.array([position.get(c, -1) for c in wanted], dtype=np.int64)
    missing = np.flatnonzero(where < 0)
    parts: list[np.ndarray] = []
    if len(missing):
        encoder = encoder if encoder is not None else load_dense_encoder(model, backend, device, precision)
        texts = chunks["text"].tolist()
        with progress(f"encode {chunking}", len(missing), "chunk") as advance:
            for start in range(0, len(missing), flush_every):
                part = missing[start:start + flush_every]
                vectors = dense_mod.encode(encoder, [texts[i] for i in part], batch_size=batch_size,
                                           advance=advance)
                with db.transaction() as tx:
                    write_embeddings(tx, chunking, key, [wanted[i] for i in part], vectors)
                parts.append(vectors)
    fresh = np.concatenate(parts) if parts else None
    dim = cached.shape[1] if len(cached_ids) else (fresh.shape[1] if fresh is not None else 0)
    matrix = np.zeros((len(wanted), dim), dtype=np.float32)
    have = np.flatnonzero(where >= 0)
    if len(have):
        matrix[have] = cached[where[have]]
    if fresh is not None:
        matrix[missing] = fresh
    return matrix, len(missing)


def run_dense(db: Database, chunking: str, name: str, *, k: int = DEFAULT_K,
              model: str = dense_mod.DEFAULT_MODEL, batch_size: int = 64, encoder=None,
              progress: ProgressFactory = no_progress, backend: str | None = None, device: str = "cpu",
              precision: str = "fp32", workspace: Workspace | None = None,
              extra_params: dict | None = None) -> RunSummary:
    """Dense retrieval (cosine of unit vectors) over ``chunking``; embeddings cached per model.

    ``encoder`` lets a caller pass an already loaded SentenceTransformer (any object with its
    ``encode``); by default the model is loaded offline by :func:`dense.load_encoder`.
    ``backend`` None: :func:`default_dense_backend`; the summary's ``stats`` say which was used.
    A query's latency is its encoding time plus its top-k search time, each query on its own.
    ``workspace`` and ``extra_params`` as for :func:`run_bm25` (a sweep's workspace encodes the
    queries once and shares chunk vectors across chunkings).
    """
    access.require("build")
    backend = backend or default_dense_backend(encoder)
    if backend == "torch" and precision != "fp32":
        raise InputError(f"{{field}} {precision} applies to {{field:backend onnx}} only", field="precision",
                         hint="add {field:backend onnx}")
    k = _check_k(k)
    _check_new_run(db, name)
    setup = DenseSetup(model, backend, precision, device, batch_size)
    key = setup.cache_key  # also refuses an unknown backend before any work
    ws = workspace or Workspace(encoder)
    started = time.perf_counter()
    chunks = ws.chunks(db, chunking)
    queries = ws.queries(db)
    matrix, encoded = ws.chunk_vectors(db, chunking, chunks, setup, progress)
    q_vectors, encode_ms = ws.query_vectors(queries["text"].tolist(), setup, progress)
    with progress("dense search", len(q_vectors), "query") as advance, ws.stage("dense top-k"):
        # One query at a time, each timed (module docstring, "Latency").
        qi, ci, score, search_ms = timed_per_query(
            list(range(len(q_vectors))), lambda i: dense_mod.top_k(q_vectors[i:i + 1], matrix, k)[1:], advance)
    with ws.stage("store runs"):
        rows = ranked_rows(queries, chunks, qi, ci, score)
        run_params = {"retriever": "dense", "model": dense_mod.model_key(model), "normalised": True,
                      "score": "cosine", "k": k, "chunking": chunking, "backend": backend, "cache_key": key,
                      **(extra_params or {}), "latency_parts": f"query encoding ({ws.query_encoding}) + top-k"}
        n, run_params = store_run(db, name, "dense", rows, run_params, "chunk", chunking,
                                  _latency_frame(queries, encode_ms + search_ms), how=DENSE_LATENCY)
    return RunSummary(name, "dense", "chunk", chunking, int(rows["query_id"].nunique()), n,
                      time.perf_counter() - started, run_params,
                      {"backend": backend if backend == "torch" else f"{backend} {precision}",
                       "chunks": len(chunks), "encoded": encoded, "cached": len(chunks) - encoded,
                       "dimension": int(matrix.shape[1]),
                       "cache_rows": count_embeddings(db, chunking, key)},
                      **_summary_latency(run_params))


def same_scope(info: pd.DataFrame, what: str) -> tuple[str, str | None]:
    """The common (level, chunking) of runs, or an error naming the odd ones out."""
    scopes = {(r.level, None if pd.isna(r.chunking) else r.chunking) for r in info.itertuples()}
    if len(scopes) != 1:
        listing = "; ".join(f"{r.name}: level={r.level}, chunking={r.chunking}" for r in info.itertuples())
        if len({level for level, _ in scopes}) > 1:
            fix = ("map the document-level runs onto the chunking first "
                   "({command:retrieve from-doc --source RUN --chunking N --name NEW})")
        else:
            fix = "pick runs over one chunking (or re-run a retriever on the other chunking)"
        raise InputError(f"{what} needs runs that rank the same items (one level and chunking), got {listing}; {fix}")
    return scopes.pop()


def read_runs_checked(db: Database, runs: list[str]) -> pd.DataFrame:
    """Run info for ``runs`` in the given order; unknown names raise with the known ones listed."""
    if not runs:
        raise InputError("no runs given", field="runs", hint="{set_field}")
    if len(set(runs)) != len(runs):
        raise InputError(f"{{field}} lists a run twice: {', '.join(runs)}", field="runs")
    info = read_run_info(db, runs)
    unknown = [r for r in runs if r not in set(info["name"])]
    if unknown:
        known = ", ".join(read_run_info(db)["name"]) or "none yet"
        # Bad input (exit 3), as an unknown run is for eval, export and delete.
        raise InputError(f"unknown run{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} in "
                         f"{db.path}; known runs: {known}")
    return info.set_index("name").loc[runs].reset_index()


def run_hybrid(db: Database, name: str, runs: list[str], *, k: int = DEFAULT_K, rrf_k: float = 60,
               weights: dict[str, float] | None = None, chunking: str | None = None,
               workspace: Workspace | None = None, extra_params: dict | None = None) -> RunSummary:
    """RRF of stored ``runs`` (formula in :mod:`workbench.retrieval.hybrid`); top ``k`` per query.

    ``chunking``, when given, must be the chunking every run ranks (a check, not a choice).
    ``workspace`` and ``extra_params`` as for :func:`run_bm25`.
    """
    access.require("build")
    k = _check_k(k)
    _check_new_run(db, name)
    ws = workspace or Workspace()
    started = time.perf_counter()
    info = read_runs_checked(db, runs)
    if chunking is not None:
        odd = [r.name for r in info.itertuples() if r.chunking != chunking]
        if odd:
            raise InputError(f"runs {odd} are not over chunking {chunking!r}", field="chunking",
                             hint="drop {field} or pick other runs")
    level, chunking = same_scope(info, "hybrid fusion")
    with ws.stage("fuse"):
        fused, rows, fuse_ms = _fuse(db, runs, k, rrf_k, weights, level)
        latency, how = _fused_latency(db, runs, set(rows["query_id"].astype(str)), fuse_ms)
    run_params = {"retriever": "hybrid", "fusion": "rrf", "rrf_k": rrf_k, "runs": list(runs),
                  "weights": weights, "k": k, "chunking": chunking, **(extra_params or {})}
    out = fused[["query_id", "doc_id", "chunk_id", "rank", "score"]]
    with ws.stage("store runs"):
        n, run_params = store_run(db, name, "hybrid", out, run_params, level, chunking, latency, how=how)
    return RunSummary(name, "hybrid", level, chunking, int(out["query_id"].nunique()), n,
                      time.perf_counter() - started, run_params, **_summary_latency(run_params))


def _fuse(db: Database, runs: list[str], k: int, rrf_k: float, weights, level: str):
    """The fused rows of stored ``runs`` (top ``k``, the evaluation's order), the runs' rows and
    the fusion's milliseconds."""
    rows = read_run_rows_many(db, runs)
    id_col = "chunk_id" if level == "chunk" else "doc_id"
    parts = {r: rows.loc[rows["run_id"] == r] for r in runs}
    fuse_started = time.perf_counter()
    # Fused scores tie often (one rank in one run each): rank and cut in the evaluation's order.
    fused = evaluation_order(fuse(parts, k=rrf_k, weights=weights, top=None, id_col=id_col), id_col, k)
    fuse_ms = (time.perf_counter() - fuse_started) * 1000.0
    if id_col == "chunk_id":
        doc_of = rows.drop_duplicates("chunk_id").set_index("chunk_id")["doc_id"]
        fused["doc_id"] = fused["chunk_id"].map(doc_of).astype("str")
    else:
        fused["chunk_id"] = None
    return fused, rows, fuse_ms


def _fused_latency(db: Database, runs: list[str], ranked: set[str], fuse_ms: float):
    """Per-query latency of a fusion of ``runs`` run one after the other: the sum of the query's
    latencies in every part plus ``fuse_ms`` shared equally over the queries. The queries are
    those ``ranked`` by any part plus those every part timed (a query no part found anything for
    still cost time). Queries some part has no latency for are left out (the reason is returned
    with the frame)."""
    stored = read_latencies(db, runs)
    timed = stored.groupby("query_id")["run"].nunique() if len(stored) else pd.Series(dtype="int64")
    query_ids = sorted(ranked | set(timed.index[timed == len(runs)].astype(str)))
    share = fuse_ms / max(len(query_ids), 1)
    wide = pd.DataFrame({r: stored.loc[stored["run"] == r].set_index("query_id")["latency_ms"] for r in runs})
    wide = wide.reindex(index=query_ids, columns=list(runs))
    complete = wide.notna().all(axis=1)
    frame = pd.DataFrame({"query_id": wide.index[complete].astype(str),
                          "latency_ms": wide.loc[complete].sum(axis=1).to_numpy(dtype=float) + share})
    how = "per query, ms: sum over the fused runs (run one after the other) plus a share of the fusion time"
    lacking = [r for r in runs if wide[r].isna().any()]
    if lacking:
        how += f"; queries without a latency in {', '.join(lacking)} have none"
    return frame.reset_index(drop=True), how


def map_doc_run(db: Database, source: str, chunking: str, name: str, *, rule: str = "first",
                extra_params: dict | None = None) -> RunSummary:
    """A chunk-level copy of document run ``source`` (rule in :mod:`workbench.retrieval.doc_mapping`)."""
    access.require("build")
    _check_new_run(db, name)
    started = time.perf_counter()
    info = read_runs_checked(db, [source])
    if info.loc[0, "level"] != "doc":
        raise InputError(f"run {source!r} already ranks chunks (level {info.loc[0, 'level']!r}); nothing to map")
    chunks = _load_chunks(db, chunking)
    rows = read_run_rows_many(db, [source])
    mapped, dropped = doc_run_to_chunks(rows, chunks, rule)
    latency = read_latencies(db, [source])[["query_id", "latency_ms"]]
    run_params = {"retriever": "doc-to-chunks", "source_run": source, "rule": rule, "chunking": chunking,
                  **(extra_params or {})}
    how = (f"per query, ms: the source run {source}'s latencies" if len(latency)
           else f"not recorded: the source run {source} has none")
    n, run_params = store_run(db, name, "doc-to-chunks", mapped, run_params, "chunk", chunking, latency, how=how)
    return RunSummary(name, "doc-to-chunks", "chunk", chunking, int(mapped["query_id"].nunique()), n,
                      time.perf_counter() - started, run_params, {"dropped_rows": dropped},
                      **_summary_latency(run_params))


def list_runs(db: Database) -> pd.DataFrame:
    """Every run with retriever, level, chunking, params, row and query counts, plus its stored
    per-query latency: ``timed_queries`` (how many queries have one), ``latency_p50_ms`` and
    ``latency_p95_ms`` (NaN for a run without latencies, e.g. an imported run with no sidecar)."""

    summary = latency_summary(db, None).rename(columns={
        "run": "name", "queries": "timed_queries", "p50_ms": "latency_p50_ms", "p95_ms": "latency_p95_ms"})
    out = read_run_info(db).merge(summary, on="name", how="left")
    out["timed_queries"] = out["timed_queries"].fillna(0).astype("int64")
    return out
