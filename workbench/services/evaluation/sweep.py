"""Sweeps: a grid of chunkings × retrievers, each measured on the same queries and span labels.

Every cell of the grid

1. chunks the corpus (reusing an existing chunking with the same strategy and parameters,
   else creating ``sweep-<spec>``),
2. runs its retriever into a stored run named ``sweep.<chunking>.<retriever>`` (a run that
   already exists is reused: a re-run of the sweep resumes; dense embeddings come from the
   embedding cache),
3. is scored against chunk qrels derived from the same span labels by the one qrels rule
   (:func:`workbench.services.evaluation.evaluate.evaluate_project`, which stores the evaluation),
4. gets its budgeted span coverage (:mod:`workbench.core.rag.context_budget`) for every budget,
   judged@k, and the p50/p95 of its per-query latency.

Latency: our retrievers are timed per query, one query at a time (``time.perf_counter``
around BM25 scoring, or around query encoding plus the dense top-k); index building and
document encoding are not part of it. A query's text is the same in every chunking, so it is
encoded (one query at a time, timed) once per sweep; a dense cell's latency for query ``q`` is
``encode_ms(q) + top_k_ms(q, chunking)``, the work a dense system does for that query. A hybrid query runs both retrievers one after the other,
so its latency is the sum of the two plus its share of the fusion time. Latencies are stored
per query (table ``run_latencies``) and p50/p95 in the run's parameters (``latency_ms`` =
p95, read by the Evaluate page).

Work done once per sweep (see :class:`DenseWork`): the encoder is loaded once; each distinct
chunk text is encoded once across the whole grid (vectors are keyed by a hash of the text, so
a document shorter than every chunk size, which is one identical chunk in each chunking, is
encoded once; so are duplicate texts within a chunking); vectors come first from the
chunking's own embedding cache, then from the other chunkings of the grid, then from the
encoder. The BM25 index is built once per chunking and serves its bm25 and hybrid cells, and a
hybrid cell fuses the stored bm25 and dense runs of its chunking. Wall and CPU seconds per
stage are collected in :attr:`SweepResult.stages` and reported as one line through ``notify``.

Gold spans for coverage and judged spans for judged@k: the labels of the chosen ``labels``
source (``human``: SME, adjudicated and imported labels; ``llm``: LLM labels; ``merged``:
both); a span is gold when a label grades it ``>= rel``. Coverage uses spans, so it does not
resolve disagreements between labels the way the qrels rule does (any admitted label with
grade ``>= rel`` makes its characters gold).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from workbench.core.documents.chunking import ChunkingError, ChunkingSpec
from workbench.core.documents.spans import overlapping_pairs
from workbench.core.formats.names import check_name
from workbench.core.metrics.pareto import percentile_latency
from workbench.core.metrics.significance import paired_test
from workbench.core.rag.context_budget import (
    DEFAULT_BUDGETS,
    budgeted_coverage,
    mean_coverage,
    token_start_table,
)
from workbench.errors import ConfigError, InputError
from workbench.retrieval import bm25 as bm25_mod
from workbench.retrieval import dense as dense_mod
from workbench.services.chunking import DEFAULT_SIZE, create_chunking, list_chunkings
from workbench.services.evaluation.evaluate import LABELS, check_measures, evaluate_project
from workbench.services.pooling.pools import add_runs, build_pool
from workbench.services.progress import ProgressFactory, no_progress
from workbench.services.qrels.rule import admitted_spans
from workbench.services.retrieval.registry import RETRIEVERS as REGISTRY
from workbench.services.retrieval.registry import make_options, run_retriever, sweep_retrievers
from workbench.services.retrieval.runs import Workspace, default_dense_backend, dense_cache_key, load_dense_encoder
from workbench.store.chunks import read_chunks
from workbench.store.corpus import read_documents, read_queries
from workbench.store.database import Database
from workbench.store.embeddings import read_embeddings, write_embeddings
from workbench.store.latencies import read_latencies
from workbench.store.pools import read_pool
from workbench.store.qrels_labels import labelled_spans
from workbench.store.runs import read_run_rows, run_exists

RETRIEVERS = REGISTRY  # name -> registry entry; a sweep runs those with ``sweep`` set
JUDGED_K = 10
LOW_JUDGED = 0.8  # below this share of judged top-k items a cell lists the pairs to judge


# ------------------------------------------------------------------------------ grid parsing

@dataclass(frozen=True)
class ChunkingChoice:
    """One chunking of the grid: the spec as typed, its strategy and full parameters."""

    spec: str
    strategy: str
    params: dict

    @property
    def default_name(self) -> str:
        p = self.params
        if self.strategy == "fixed":
            return f"sweep-fixed{p['size']}" + (f"-o{p['overlap']}" if p["overlap"] else "")
        return f"sweep-{self.strategy}"


def parse_chunking(text: str) -> ChunkingChoice:
    """``fixed:SIZE`` / ``fixed:SIZE:OVERLAP`` (tokens), ``section``, ``sentences`` or ``document``."""

    raw = text.strip()
    parts = raw.split(":")
    how = ("use fixed:SIZE or fixed:SIZE:OVERLAP (tokens), section, sentences or document, "
           "e.g. {field:chunkings fixed:256,fixed:512:64,section}")
    if parts[0] == "fixed" and len(parts) in (2, 3) and all(re.fullmatch(r"\d+", p) for p in parts[1:]):
        params = {"size": int(parts[1]), "overlap": int(parts[2]) if len(parts) == 3 else 0, "unit": "tokens"}
        strategy = "fixed"
    elif raw == "section":
        strategy, params = "section", {"max_size": DEFAULT_SIZE["section"], "overlap": 0}
    elif raw == "sentences":
        strategy, params = "sentences", {"size": DEFAULT_SIZE["sentences"], "overlap": 0}
    elif raw == "document":
        strategy, params = "document", {}
    else:
        raise InputError(f"chunking spec {raw!r} is not understood; {how}")

    try:
        spec = ChunkingSpec("sweep", strategy, params)  # validates (overlap < size, size > 0)
    except ChunkingError as exc:
        # Name the spec the user wrote, not the placeholder name above; bad input (exit 3).
        reason = str(exc).replace("chunking 'sweep': ", "")
        raise InputError(f"chunking spec {raw!r}: {reason}; {how}") from None
    return ChunkingChoice(raw, strategy, dict(spec.params))


def parse_grid(chunkings: str, retrievers: str) -> tuple[list[ChunkingChoice], list[str]]:
    specs = [s for s in (chunkings or "").split(",") if s.strip()]
    if not specs:
        raise InputError("{field:chunkings} needs at least one spec, e.g. {field:chunkings fixed:256,fixed:512}")
    choices = [parse_chunking(s) for s in specs]
    if len({c.spec for c in choices}) != len(choices):
        raise InputError(f"{{field:chunkings}} lists a spec twice: {chunkings}")
    names = [r.strip() for r in (retrievers or "").split(",") if r.strip()]
    known = sweep_retrievers()
    if not names:
        raise InputError(f"{{field:retrievers}} needs at least one of {', '.join(known)}")
    bad = [r for r in names if r not in known]
    if bad:
        raise InputError(f"unknown retriever {bad[0]!r}; choose from {', '.join(known)}")
    if len(set(names)) != len(names):
        raise InputError(f"{{field:retrievers}} lists a retriever twice: {retrievers}")
    return choices, names


# ------------------------------------------------------------------------------ chunkings

def ensure_chunking(db: Database, choice: ChunkingChoice, progress: ProgressFactory = no_progress) -> tuple[str, bool]:
    """The name of a chunking with ``choice``'s definition: an existing one, else a new one.
    Returns ``(name, created)``."""

    table = list_chunkings(db)
    for name, strategy, params in table[["name", "strategy", "params"]].itertuples(index=False):
        stored = json.loads(params) if isinstance(params, str) else dict(params or {})
        if strategy == choice.strategy and stored == choice.params:
            return str(name), False
    name = choice.default_name
    taken = set(table["name"].astype(str))
    n = 2
    while name in taken:  # a different definition holds the name: never overwrite it
        name = f"{choice.default_name}-{n}"
        n += 1
    p = choice.params
    size = p.get("max_size", p.get("size"))
    create_chunking(db, name, choice.strategy, size=size, overlap=p.get("overlap"),
                    unit=p.get("unit"), progress=progress)
    return name, True


# ------------------------------------------------------------------------------ runs

def run_name(chunking: str, retriever: str) -> str:
    return f"sweep.{chunking}.{retriever}"


class StageClock:
    """Wall and CPU seconds per named stage (``with clock("encode chunks"): ...``), summed over
    the grid. CPU is the process's (all threads), so a multi-threaded encoder can show more
    CPU than wall seconds."""

    def __init__(self) -> None:
        self.totals: dict[str, dict] = {}

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            entry = self.totals.setdefault(stage, {"wall_s": 0.0, "cpu_s": 0.0, "calls": 0})
            entry["wall_s"] += time.perf_counter() - wall
            entry["cpu_s"] += time.process_time() - cpu
            entry["calls"] += 1

    def line(self) -> str:
        parts = [f"{name} {v['wall_s']:.1f}/{v['cpu_s']:.1f}" for name, v in self.totals.items()]
        return "time by stage, wall/cpu s: " + ", ".join(parts)


def text_digest(text: str) -> bytes:
    """The key under which a chunk text's vector is shared across chunkings (BLAKE2b, 16 bytes:
    a collision between distinct texts is out of reach at any corpus size)."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class DenseWork:
    """Everything dense that a sweep computes once: the encoder, the query vectors (encoded one
    query at a time, timed) and the vectors of distinct chunk texts.

    ``share``: digests of the texts that chunkings still to be embedded in this sweep will ask
    for; a vector computed (or read from a cache) for one chunking is kept in memory only while
    a later chunking needs its text, so memory holds the shared texts, not the whole grid.
    ``counts``: ``cached`` (from the chunking's own embedding cache), ``shared`` (from another
    chunking of the grid), ``encoded`` (texts sent to the encoder) and ``chunks`` (vectors needed).
    """

    def __init__(self, model: str, backend: str, precision: str, device: str, clock: StageClock,
                 encoder=None, batch_size: int = 64, flush_every: int = 2048):

        self.model, self.backend, self.precision, self.device = model, backend, precision, device
        self.key = dense_cache_key(model, backend, precision)
        self.clock = clock
        self.encoder = encoder
        self.batch_size = batch_size
        self.flush_every = flush_every
        self.pending: dict[str, set[bytes]] = {}  # chunking name -> digests of its texts, not yet embedded
        self.shared: dict[bytes, np.ndarray] = {}
        self.query_vectors: np.ndarray | None = None
        self.query_ms: np.ndarray | None = None
        self.counts = {"chunks": 0, "cached": 0, "shared": 0, "encoded": 0}

    def load(self):

        if self.encoder is None:
            with self.clock("load encoder"):
                self.encoder = load_dense_encoder(self.model, self.backend, self.device, self.precision)
        return self.encoder

    def plan(self, name: str, texts: Sequence[str]) -> None:
        """Announce that chunking ``name`` (with these chunk texts) will be embedded later."""
        with self.clock("hash chunk texts"):
            self.pending[name] = {text_digest(t) for t in texts}

    def queries(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Unit query vectors and the per-query encoding time (ms), computed once per sweep."""

        if self.query_vectors is None:
            encoder = self.load()
            vectors, times = [], []
            # One query at a time, timed, with one torch thread (as services.retrieval does).
            with self.clock("encode queries"), dense_mod.one_thread():
                for text in texts:
                    t0 = time.perf_counter()
                    vectors.append(dense_mod.encode(encoder, [text]))
                    times.append((time.perf_counter() - t0) * 1000)
            self.query_vectors = np.concatenate(vectors) if vectors else np.zeros((0, 0), np.float32)
            self.query_ms = np.asarray(times, dtype=float)
        return self.query_vectors, self.query_ms

    def matrix(self, db: Database, name: str, chunks: pd.DataFrame, progress: ProgressFactory) -> np.ndarray:
        """Unit vectors aligned with ``chunks`` (chunk_id, text), every new vector written to the
        embedding cache of ``name`` (every ``flush_every`` texts, so an interrupted sweep keeps them)."""

        self.pending.pop(name, None)
        later = set().union(*self.pending.values()) if self.pending else set()
        ids = chunks["chunk_id"].astype(str).tolist()
        texts = chunks["text"].tolist()
        with self.clock("read embedding cache"):
            cached_ids, cached = read_embeddings(db, name, self.key)
        position = {c: i for i, c in enumerate(cached_ids)}
        where = np.array([position.get(c, -1) for c in ids], dtype=np.int64)
        matrix: np.ndarray | None = None
        if len(cached_ids):
            matrix = np.zeros((len(ids), cached.shape[1]), dtype=np.float32)
            have = np.flatnonzero(where >= 0)
            matrix[have] = cached[where[have]]
        missing = np.flatnonzero(where < 0)
        self.counts["chunks"] += len(ids)
        self.counts["cached"] += len(ids) - len(missing)
        with self.clock("hash chunk texts"):
            digests = [text_digest(texts[i]) for i in range(len(texts))] if (len(missing) or later) else []
        # Group the missing chunks by text: one vector per distinct text.
        groups: dict[bytes, list[int]] = {}
        for i in missing:
            groups.setdefault(digests[i], []).append(int(i))
        from_grid = [d for d in groups if d in self.shared]
        to_encode = [d for d in groups if d not in self.shared]

        def put(keys: list[bytes], vectors: np.ndarray) -> None:
            nonlocal matrix
            if matrix is None:
                matrix = np.zeros((len(ids), vectors.shape[1]), dtype=np.float32)
            rows = [i for d in keys for i in groups[d]]
            block = np.repeat(vectors, [len(groups[d]) for d in keys], axis=0)
            matrix[rows] = block
            with self.clock("write embedding cache"), db.transaction() as tx:
                write_embeddings(tx, name, self.key, [ids[i] for i in rows], block)

        if from_grid:
            put(from_grid, np.stack([self.shared[d] for d in from_grid]))
            self.counts["shared"] += sum(len(groups[d]) for d in from_grid)
        if to_encode:
            encoder = self.load()
            with progress(f"encode {name}", len(to_encode), "text") as advance:
                for start in range(0, len(to_encode), self.flush_every):
                    keys = to_encode[start:start + self.flush_every]
                    with self.clock("encode chunks"):
                        vectors = dense_mod.encode(encoder, [texts[groups[d][0]] for d in keys],
                                                   batch_size=self.batch_size, advance=advance)
                    put(keys, vectors)
                    self.counts["encoded"] += len(keys)
        if matrix is None:  # an empty chunking
            matrix = np.zeros((0, 0), dtype=np.float32)
        # Keep only what a later chunking will ask for.
        self.shared = {d: v for d, v in self.shared.items() if d in later}
        if later:
            for i, d in enumerate(digests):
                if d in later and d not in self.shared:
                    self.shared[d] = matrix[i].copy()
        return matrix


class SweepWorkspace(Workspace):
    """What the runs of one sweep share (:class:`workbench.services.retrieval.runs.Workspace`):
    the chunks of the chunking being run (read once), the queries, one BM25 index per chunking
    (serving its bm25 cell and the bm25 part of its hybrid cell), the dense work of
    :class:`DenseWork` (queries encoded once per sweep, chunk vectors shared across chunkings);
    every step is timed by the sweep's :class:`StageClock`."""

    query_encoding = "once per sweep, one query at a time"

    def __init__(self, clock: StageClock, queries: pd.DataFrame, dense: DenseWork | None = None) -> None:
        super().__init__(dense.encoder if dense is not None else None)
        self.clock = clock
        self.dense = dense
        self._queries = queries
        self._chunks: tuple[str, pd.DataFrame] | None = None
        self._indexes: dict[tuple[str, str], object] = {}

    def stage(self, name: str):
        return self.clock(name)

    def use_chunking(self, name: str, chunks: pd.DataFrame) -> None:
        """The chunking whose cells run next (its chunks as read, with text); the previous
        chunking's BM25 index is dropped (one index in memory at a time)."""
        self._chunks = (name, chunks)
        self._indexes = {key: index for key, index in self._indexes.items() if key[0] == name}

    def chunks(self, db: Database, chunking: str) -> pd.DataFrame:
        if self._chunks is not None and self._chunks[0] == chunking:
            return self._chunks[1]
        with self.clock("read chunks"):
            return super().chunks(db, chunking)

    def queries(self, db: Database) -> pd.DataFrame:
        return self._queries

    def bm25_index(self, chunking, chunks, params, progress):
        key = (chunking, json.dumps(params.as_dict(), sort_keys=True, default=str))
        if key not in self._indexes:
            with progress(f"bm25 index {chunking}", len(chunks), "chunk") as advance:
                self._indexes[key] = bm25_mod.build_index(chunks["text"].tolist(), params, advance=advance)
        return self._indexes[key]

    def _work(self, options) -> DenseWork:
        if self.dense is None or (self.dense.model, self.dense.backend, self.dense.precision) != (
                options.model, options.backend, options.precision):
            raise ConfigError(f"this sweep encodes with {self.dense.model if self.dense else 'no model'}; "
                              f"a dense run with {options.model} ({options.backend}) cannot share its vectors")
        return self.dense

    def chunk_vectors(self, db, chunking, chunks, options, progress):
        work = self._work(options)
        work.load()  # ConfigError when the backend's package is missing, before any encoding
        encoded = work.counts["encoded"]
        matrix = work.matrix(db, chunking, chunks, progress)
        return matrix, work.counts["encoded"] - encoded

    def query_vectors(self, texts, options, progress):
        return self._work(options).queries(texts)


# ------------------------------------------------------------------------------ measures per cell

def _label_spans(db: Database, labels: str) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """The span labels the one qrels rule admits for ``labels`` (:func:`services.qrels.admitted_spans`:
    tier order, LLM labels only from a judge that passed the gate unless opted in, the synthetic
    filter), so gold spans, judged@k and the cells' qrels count the same labels; and its notes."""

    admitted = admitted_spans(db, source=labels)
    return admitted.spans.astype({"query_id": "str", "doc_id": "str"}).reset_index(drop=True), admitted.notes


def _ranked_spans(db: Database, run: str, chunks: pd.DataFrame) -> pd.DataFrame:

    rows = read_run_rows(db, run)
    where = chunks.set_index("chunk_id")[["start", "end"]]
    rows = rows.join(where, on="chunk_id", how="inner")
    return rows[["query_id", "rank", "doc_id", "chunk_id", "start", "end"]].astype(
        {"query_id": "str", "doc_id": "str", "chunk_id": "str"})


def judged_pairs(ranked: pd.DataFrame, judged: pd.DataFrame, k: int = JUDGED_K) -> tuple[float, pd.DataFrame]:
    """judged@k and the unjudged top-k pairs.

    An item of the top ``k`` is judged when its span overlaps a labelled span (any grade, 0
    included) of the same query and document. ``judged@k(q) = judged items / k`` (trec_eval's
    divisor, even when fewer than ``k`` were returned), averaged over the queries the run answered.
    Returns ``(judged@k, unjudged rows query_id, chunk_id, doc_id, rank)``.
    """

    top = ranked[ranked["rank"] <= k].reset_index(drop=True)
    if top.empty:
        return float("nan"), top[["query_id", "chunk_id", "doc_id", "rank"]]
    keys = pd.factorize(pd.concat([top["query_id"] + "\x00" + top["doc_id"],
                                   judged["query_id"] + "\x00" + judged["doc_id"]], ignore_index=True))[0]
    i, _, _ = overlapping_pairs(keys[:len(top)].astype(np.int64), top["start"].to_numpy(np.int64),
                                top["end"].to_numpy(np.int64), keys[len(top):].astype(np.int64),
                                judged["start"].to_numpy(np.int64), judged["end"].to_numpy(np.int64))
    flag = np.zeros(len(top), dtype=bool)
    flag[i] = True
    per_query = pd.Series(flag).groupby(top["query_id"]).sum() / k
    unjudged = top.loc[~flag, ["query_id", "chunk_id", "doc_id", "rank"]].reset_index(drop=True)
    return float(per_query.mean()), unjudged


@dataclass
class Cell:
    """One configuration's results (``skipped`` holds the one-line reason when it did not run)."""

    chunking: str  # the spec as typed
    retriever: str
    chunking_name: str | None = None
    run: str | None = None
    aggregate: dict = field(default_factory=dict)
    coverage: dict = field(default_factory=dict)  # budget -> mean coverage
    judged: float = float("nan")
    unjudged: pd.DataFrame | None = None
    latency_p50: float = float("nan")
    latency_p95: float = float("nan")
    reused: bool = False
    seconds: float = 0.0
    skipped: str | None = None
    per_query: pd.DataFrame | None = None  # query_id + one column per measure
    #: How many queries every column of the cell averages over: the ones its evaluation scored
    #: (coverage and judged@k use the same set, so no column has queries the others lack).
    queries: int = 0

    def as_json(self, judged_k: int = JUDGED_K) -> dict:
        return {"chunking": self.chunking, "retriever": self.retriever, "queries": self.queries,
                "aggregate": {m: _num(v) for m, v in self.aggregate.items()},
                "coverage": {str(b): _num(v) for b, v in self.coverage.items()},
                f"judged@{judged_k}": _num(self.judged)}


def _num(v):
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else float(v)


@dataclass
class SweepResult:
    cells: list[Cell]
    budgets: tuple[int, ...]
    measures: list[str]
    labels: str
    evaluation_ids: list[int]
    statement: str = ""
    pools: dict = field(default_factory=dict)  # pool name -> pairs added
    stages: dict = field(default_factory=dict)  # stage -> {wall_s, cpu_s, calls} (StageClock)
    dense: dict = field(default_factory=dict)  # where chunk vectors came from (DenseWork.counts)

    def winners(self) -> dict[int, Cell]:
        """Per budget the cell with the highest mean coverage (first in grid order on ties)."""
        out = {}
        for b in self.budgets:
            best = None
            for c in self.cells:
                v = c.coverage.get(b)
                if c.skipped or v is None or np.isnan(v):
                    continue
                if best is None or v > best.coverage[b]:
                    best = c
            if best is not None:
                out[b] = best
        return out

    def as_json(self) -> dict:
        return {"cells": [c.as_json() for c in self.cells if not c.skipped],
                "winner_by_budget": {str(b): {"chunking": c.chunking, "retriever": c.retriever}
                                     for b, c in self.winners().items()}}


Notify = Callable[[str], None]


def _silent(_: str) -> None:
    return None


def run_sweep(db: Database, chunkings: str | Sequence[ChunkingChoice], retrievers: str | Sequence[str],
              measures: Sequence[str], *, budgets: Sequence[int] = DEFAULT_BUDGETS, labels: str = "merged",
              rel: int = 1, k: int = 100, model: str | None = None, pool: str | None = None,
              judged_k: int = JUDGED_K, progress: ProgressFactory = no_progress,
              notify: Notify = _silent, backend: str | None = None, precision: str = "fp32",
              device: str = "cpu", encoder=None) -> SweepResult:
    """Run (or resume) the grid and measure every cell (module docstring).

    ``pool``: every cell whose judged@k is below 0.8 adds its run to pool ``<pool>.<chunking>``
    (created at depth ``judged_k`` when missing), so its unjudged top-k pairs can be judged.
    ``notify`` receives one line per cell (which cell runs, the ETA of the grid), then one line
    of time by stage and, when dense cells ran, one line of where the chunk vectors came from.
    ``backend``/``precision``/``device``: the dense encoder (:func:`services.retrieval.load_dense_encoder`;
    each backend and precision has its own embedding cache key; ``backend`` None:
    :func:`services.retrieval.runs.default_dense_backend`). ``encoder``: an already loaded
    encoder for ``model`` (any object with the SentenceTransformer ``encode``).
    """

    backend = backend or default_dense_backend(encoder)

    if isinstance(chunkings, str) or isinstance(retrievers, str):
        chunkings, retrievers = parse_grid(chunkings if isinstance(chunkings, str) else
                                           ",".join(c.spec for c in chunkings),
                                           retrievers if isinstance(retrievers, str) else ",".join(retrievers))
    measures = list(dict.fromkeys(measures))
    check_measures(measures)
    if labels not in LABELS:
        raise ConfigError(f"unknown labels {labels!r}; expected one of {', '.join(LABELS)}")
    budgets = tuple(sorted({int(b) for b in budgets}))
    model = model or dense_mod.DEFAULT_MODEL
    clock = StageClock()
    queries = read_queries(db)
    if queries.empty:
        raise InputError(f"{db.path} holds no queries; import them first ({{command:import queries FILE}})")
    spans, label_notes = _label_spans(db, labels)
    if spans.empty:
        why = f" ({'; '.join(label_notes)})" if label_notes else ""
        raise InputError(f"the project has no {labels} labels to measure with{why}; label pairs on the Label page "
                         "or import qrels ({command:import qrels FILE})")
    gold = spans[spans["grade"] >= rel]
    with clock("read documents"):
        texts = read_documents(db).set_index("doc_id")["text"]
        texts.index = texts.index.astype(str)
    starts = _TokenStarts(texts)

    cells = [Cell(c.spec, r) for c in chunkings for r in retrievers]
    result = SweepResult(cells, budgets, measures, labels, [])
    unavailable: dict[str, str] = {}  # retriever -> why it cannot run (its optional extra is missing)
    done_times: list[float] = []
    names: dict[str, tuple[str, bool]] = {}
    for chunking_choice in chunkings:
        with clock("chunk"):
            names[chunking_choice.spec] = ensure_chunking(db, chunking_choice, progress)
    work = None
    if "dense" in {r for cell_retriever in retrievers for r in _needs(cell_retriever)}:
        work = DenseWork(model, backend, precision, device, clock, encoder=encoder)
        # Announce the texts of every chunking whose dense run is still to be made, so vectors
        # of texts two chunkings share are kept for the later one.
        for name, _ in names.values():
            if not run_exists(db, run_name(name, "dense")):
                with clock("read chunks"):
                    work.plan(name, read_chunks(db, name, with_text=True)["text"].tolist())
    workspace = SweepWorkspace(clock, queries[["query_id", "text"]].reset_index(drop=True), work)
    # The encoder of the sweep, for every retriever whose parameters name it.
    settings = {"model": model, "backend": backend, "precision": precision, "device": device}
    for chunking_choice in chunkings:
        name, created = names[chunking_choice.spec]
        mine_runs = [run_name(name, r) for r in retrievers]
        # Chunk text is read only when a run has to be made (a resumed sweep needs spans only).
        with_text = not all(run_exists(db, r) for r in mine_runs)
        with clock("read chunks"):
            chunks = read_chunks(db, name, with_text=with_text)
        workspace.use_chunking(name, chunks)
        mine = [c for c in cells if c.chunking == chunking_choice.spec]
        for cell in mine:
            cell.chunking_name = name
            index = cells.index(cell) + 1
            remaining = len(cells) - index + 1
            eta = f", ETA {np.mean(done_times) * remaining:.0f} s" if done_times else ""
            cell.run = run_name(name, cell.retriever)
            started = time.perf_counter()
            if run_exists(db, cell.run):
                cell.reused = True
                notify(f"cell {index}/{len(cells)}: {cell.chunking} × {cell.retriever} (reusing run {cell.run}{eta})")
                continue
            notify(f"cell {index}/{len(cells)}: {cell.chunking} × {cell.retriever} ({'new chunking ' + name if created else 'chunking ' + name}{eta})")
            blocked = [r for r in _needs(cell.retriever) if r in unavailable]
            try:
                if blocked:
                    raise ConfigError(unavailable[blocked[0]])
                _make_run(db, cell.retriever, name, k, settings, progress, workspace)
            except ConfigError as exc:
                extras = [r for r in _needs(cell.retriever) if RETRIEVERS[r].extra]
                if not extras:
                    raise
                for r in extras:  # a missing extra: every later cell needing it is skipped too
                    unavailable.setdefault(r, str(exc))
                cell.skipped = f"{cell.retriever} skipped: {exc}"
                cell.run = None
                notify(f"  {cell.skipped}")
                continue
            cell.seconds = time.perf_counter() - started
            done_times.append(cell.seconds)
        ran = [c for c in mine if not c.skipped]
        if not ran:
            continue
        with clock("evaluate"):
            evaluation = evaluate_project(db, [c.run for c in ran], measures, labels=labels, level="chunk",
                                          chunking=name, rel=rel)
        if evaluation.evaluation_id is not None:
            result.evaluation_ids.append(int(evaluation.evaluation_id))
        result.statement = evaluation.qrels.statement()
        for cell in ran:
            res = evaluation.results[cell.run]
            cell.aggregate = {m: float(res.aggregate.get(m, float("nan"))) for m in measures}
            table = res.per_query
            cell.per_query = table.reset_index() if "query_id" not in table.columns else table
            with clock("coverage and judged@k"):
                # One query set for every column: the queries the evaluation scored (it leaves out
                # unanswerable and synthetic queries and those without a relevant label).
                scored = set(cell.per_query["query_id"].astype(str))
                cell.queries = len(scored)
                ranked = _ranked_spans(db, cell.run, chunks)
                ranked = ranked[ranked["query_id"].astype(str).isin(scored)]
                cell_gold = gold[gold["query_id"].astype(str).isin(scored)]
                cov = budgeted_coverage(ranked[["query_id", "rank", "doc_id", "start", "end"]], cell_gold,
                                        starts.of(ranked["doc_id"]), budgets)
                cell.coverage = mean_coverage(cov)
                cell.judged, cell.unjudged = judged_pairs(ranked, spans, judged_k)
        _latencies_into(db, ran)
    if pool:
        result.pools = pool_unjudged(db, pool, [c for c in cells if not c.skipped], judged_k)
    result.stages = clock.totals
    notify(clock.line())
    if work is not None and work.counts["chunks"]:
        result.dense = {**work.counts, "backend": work.backend, "precision": work.precision,
                        "cache_key": work.key}
        c = work.counts
        used = "torch" if work.backend == "torch" else f"{work.backend} {work.precision}"
        notify(f"chunk vectors ({used} encoder, cache {work.key}): {c['chunks']} needed, {c['cached']} from the cache, "
               f"{c['shared']} shared across chunkings, {c['encoded']} distinct texts encoded")
    return result


def _needs(retriever: str) -> list[str]:
    """``retriever`` and, first, the retrievers whose runs it takes as parts in a sweep (recursively)."""
    out: list[str] = []
    for part in RETRIEVERS[retriever].sweep or ():
        out += [r for r in _needs(part) if r not in out]
    return [*out, retriever] if retriever not in out else out


def _make_run(db: Database, retriever: str, chunking: str, k: int, settings: dict, progress: ProgressFactory,
              workspace: SweepWorkspace) -> None:
    """Run ``retriever`` over ``chunking`` into :func:`run_name`, through the registry (the runs
    it takes as parts, over the same chunking, are made first when missing). ``settings``: sweep
    options (the dense encoder) given to every retriever whose parameters name them."""

    spec = RETRIEVERS[retriever]
    parts = [run_name(chunking, part) for part in spec.sweep or ()]
    for part, part_run in zip(spec.sweep or (), parts):
        if not run_exists(db, part_run):
            _make_run(db, part, chunking, k, settings, progress, workspace)
    names = {p.name for p in spec.parameters}
    values = {key: value for key, value in settings.items() if key in names}
    if parts:
        values["runs"] = tuple(parts)
    run_retriever(db, retriever, name=run_name(chunking, retriever), chunking=chunking, k=k,
                  options=make_options(retriever, values), progress=progress, workspace=workspace,
                  extra_params={"sweep": True})


class _TokenStarts:
    """Token starts of the documents retrieved so far (only they can fill a context budget),
    computed once per document across the grid."""

    def __init__(self, texts: pd.Series):
        self.texts = texts
        self.table = pd.DataFrame({"doc_id": pd.Series([], dtype="str"), "start": pd.Series([], dtype="int64")})
        self.done: set[str] = set()

    def of(self, doc_ids: pd.Series) -> pd.DataFrame:
        wanted = set(doc_ids.astype(str))
        new = sorted(d for d in wanted - self.done if d in self.texts.index)
        if new:
            part = token_start_table(list(zip(new, self.texts.loc[new].astype(str))))
            self.table = pd.concat([self.table, part], ignore_index=True)
            self.done.update(new)
        return self.table[self.table["doc_id"].isin(wanted)]


def _latencies_into(db: Database, cells: list[Cell]) -> None:

    lat = read_latencies(db, [c.run for c in cells])
    for cell in cells:
        values = lat.loc[lat["run"] == cell.run, "latency_ms"].to_numpy(dtype=float)
        cell.latency_p50 = percentile_latency(values, 50)
        cell.latency_p95 = percentile_latency(values, 95)


def pool_unjudged(db: Database, pool: str, cells: list[Cell], depth: int) -> dict:
    """Add the runs of low-judged cells to ``<pool>.<chunking>`` (one pool per chunking, as a
    pool ranks the chunks of one chunking). Returns ``{pool: runs added}``."""

    check_name(pool, "pool", "choose another {field}", field="pool")
    added: dict[str, list[str]] = {}
    for cell in cells:
        if not (cell.judged < LOW_JUDGED):
            continue
        name = f"{pool}.{cell.chunking_name}"
        record = read_pool(db, name)
        if record is None:
            build_pool(db, name, [cell.run], depth)
        elif cell.run not in (record.get("runs") or []):
            add_runs(db, name, [cell.run])
        else:
            continue
        added.setdefault(name, []).append(cell.run)
    return added


# ------------------------------------------------------------------------------ slices

def missing_inputs(db: Database) -> str | None:
    """What a sweep still lacks, in page words (``None`` when it can run): queries, then labels."""

    if read_queries(db).empty:
        return "No queries yet: add queries on the Data page, then come back to run experiments."
    if labelled_spans(db).empty:
        return "No labels yet: label pairs on the Label page (or judge a pool on the Judge page) first."
    return None


def slice_lift(base: Cell, other: Cell, measure: str, tags: pd.DataFrame, *, test: str = "randomization",
               seed: int = 0, n_resamples: int = 10_000) -> pd.DataFrame:
    """Per tag (and ``(all)``): ``tag, queries, base, other, lift, p_value`` of ``other`` over
    ``base`` on ``measure``, paired over the queries of the slice that both scored (a query
    missing from one cell's evaluation is left out of that slice). ``p_value`` from
    :func:`workbench.core.metrics.significance.paired_test` (two-sided; seed stored in the result)."""

    a = base.per_query.set_index(base.per_query["query_id"].astype(str))[measure]
    b = other.per_query.set_index(other.per_query["query_id"].astype(str))[measure]
    joined = pd.concat({"base": a, "other": b}, axis=1).dropna()
    rows = []
    groups = [("(all)", joined.index.tolist())]
    for tag, group in tags.groupby("tag", sort=True):
        groups.append((str(tag), [q for q in group["query_id"] if q in joined.index]))
    for tag, ids in groups:
        if not ids:
            continue
        part = joined.loc[ids]
        p = float("nan")
        if len(part) >= 2:
            p = paired_test(test, part["base"].to_numpy(), part["other"].to_numpy(), n_resamples=n_resamples,
                            seed=seed).p_value
        rows.append({"tag": tag, "queries": len(part), "base": float(part["base"].mean()),
                     "other": float(part["other"].mean()), "lift": float((part["other"] - part["base"]).mean()),
                     "p_value": p, "test": test, "seed": seed})
    return pd.DataFrame(rows)
