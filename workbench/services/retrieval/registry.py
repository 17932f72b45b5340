"""The retrievers, one entry each: name -> parameters dataclass -> run function.

Every front end is built from :data:`RETRIEVERS`: the ``workbench retrieve`` sub-commands and
their flags (:mod:`workbench.cli.retrieval`), ``Project.retrieve(kind, ...)``'s keyword arguments
(:mod:`workbench.api`), the Retrieve & Pool page's forms (:mod:`workbench.ui.views.retrieve`) and
the grid of a sweep (:mod:`workbench.services.evaluation.sweep`). All of them run a retriever
through :func:`run_retriever`, and every run is stored by one function,
:func:`workbench.services.retrieval.runs.store_run`.

Adding a retriever: its algorithm in :mod:`workbench.retrieval` and one :class:`Retriever` entry
here (a frozen dataclass of its parameters, each an :func:`option` with default and help, and a
run function ``run(db, request) -> RunSummary``); the CLI, the API, the page (a form generated
from the parameters) and, with ``sweep`` set, the sweep pick it up.

Parameters common to every retriever are not in the dataclasses: the new run's ``name``, the
``chunking`` (required, optional or not taken: :attr:`Retriever.chunking`) and ``k`` (results
per query).

This module imports nothing heavy (the CLI builds its parser from it); run functions import
their services when called.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.core.option_names import DEFAULT_DENSE_MODEL, DOC_MAPPING_RULES
from workbench.errors import ConfigError
from workbench.services import lazy
from workbench.services.progress import no_progress

if TYPE_CHECKING:
    from workbench.services.progress import ProgressFactory
    from workbench.services.retrieval.runs import RunSummary, Workspace
    from workbench.store.database import Database

DEFAULT_K = 100


def option(default: Any, help: str, *, choices: Sequence[str] | None = None, required: bool = False,
           metavar: str | None = None) -> Any:
    """A retriever parameter: its ``default``, its ``help`` (the CLI's and the page's words) and,
    optionally, its ``choices`` or that it is ``required`` (no usable default)."""
    return field(default=default, metadata={"help": help, "choices": tuple(choices) if choices else None,
                                            "required": required, "metavar": metavar})


@dataclass(frozen=True)
class Parameter:
    """One parameter of a retriever as front ends read it."""

    name: str
    type: type  # bool, int, float, str, or tuple (a list of names)
    default: Any
    help: str
    choices: tuple[str, ...] | None
    required: bool
    metavar: str | None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


def _base_type(hint) -> type:
    """``bool``/``int``/``float``/``str``/``tuple`` from an annotation (``X | None`` is ``X``)."""
    origin = typing.get_origin(hint)
    if origin is tuple or hint is tuple:
        return tuple
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if args:  # a union: the first non-None member decides
        return _base_type(args[0])
    return hint if hint in (bool, int, float, str) else str


def parameters(options: type) -> list[Parameter]:
    """The parameters of an options dataclass, in declaration order."""
    hints = typing.get_type_hints(options)
    return [Parameter(f.name, _base_type(hints[f.name]), f.default, f.metadata["help"], f.metadata["choices"],
                      f.metadata["required"], f.metadata["metavar"])
            for f in dataclasses.fields(options)]


# -- parameters per retriever ------------------------------------------------------------------

@dataclass(frozen=True)
class Bm25Options:
    stemmer: str = option("english", "PyStemmer language, or 'none' (default english)")
    stopwords: str = option("english", "stopword list: a language (english, german, ...), 'none', "
                                       "or comma-separated words")
    k1: float = option(1.5, "BM25 k1 (default 1.5)")
    b: float = option(0.75, "BM25 b (default 0.75)")


@dataclass(frozen=True)
class DenseOptions:
    model: str = option(DEFAULT_DENSE_MODEL,
                        f"model name or local path (default {DEFAULT_DENSE_MODEL}, bundled, offline)")
    batch_size: int = option(64, "encoding batch size (default 64)")
    backend: str | None = option(None, "onnx (ONNX Runtime fp32, same vectors as torch, faster; exported once, "
                                       "cached) or torch (sentence-transformers); default onnx where the onnx "
                                       "extra is installed, else torch; the summary says which",
                                 choices=("torch", "onnx"))
    device: str = option("cpu", "cpu (default), cuda, or auto (cuda when available)", choices=("cpu", "cuda", "auto"))
    precision: str = option("fp32", "onnx only: fp32 (default, same vectors as torch), int8-safe (per-token int8: "
                                    "2-2.6x torch, cosine ~0.999) or int8 (fastest, cosine ~0.98)",
                            choices=("fp32", "int8-safe", "int8"))


@dataclass(frozen=True)
class HybridOptions:
    runs: tuple[str, ...] = option((), "runs to fuse, comma-separated", required=True)
    rrf_k: float = option(60, "RRF constant k (default 60)")
    #: ``"1,0.5"`` (in ``runs`` order), ``"bm25=1,dense=0.5"``, or (Python) a sequence or mapping.
    weights: str | None = option(None, "per-run weights: 1,0.5 (in {field:runs} order) or bm25=1,dense=0.5")


@dataclass(frozen=True)
class FromDocOptions:
    source: str | None = option(None, "the document-level run to map", required=True)
    rule: str = option("first", "first: each document becomes its first chunk; all: every chunk inherits the "
                                "document's score, ordered by position (default first)", choices=DOC_MAPPING_RULES)


# -- run functions -----------------------------------------------------------------------------

@dataclass(frozen=True)
class RunRequest:
    """One run to make: the common parameters, the retriever's ``options``, and what a caller
    running several retrievers shares (``workspace``) or stores with every run (``extra_params``)."""

    name: str
    chunking: str | None
    k: int
    options: Any
    progress: ProgressFactory
    workspace: Workspace | None = None
    extra_params: Mapping[str, Any] | None = None


def _bm25(db: Database, r: RunRequest) -> RunSummary:
    from workbench.services.retrieval.runs import run_bm25

    o = r.options
    params = lazy.retrieval_bm25.Bm25Params(k1=o.k1, b=o.b, stemmer=lazy.retrieval_bm25.parse_stemmer(o.stemmer), stopwords=lazy.retrieval_bm25.parse_stopwords(o.stopwords))
    return run_bm25(db, r.chunking, r.name, k=r.k, params=params, progress=r.progress, workspace=r.workspace,
                    extra_params=dict(r.extra_params or {}))


def _dense(db: Database, r: RunRequest) -> RunSummary:
    from workbench.services.retrieval.runs import run_dense

    o = r.options
    return run_dense(db, r.chunking, r.name, k=r.k, model=o.model, batch_size=o.batch_size, progress=r.progress,
                     backend=o.backend, device=o.device, precision=o.precision, workspace=r.workspace,
                     extra_params=dict(r.extra_params or {}))


def _hybrid(db: Database, r: RunRequest) -> RunSummary:
    from workbench.services.retrieval.runs import run_hybrid

    o = r.options
    runs = list(o.runs)
    if o.weights is None or isinstance(o.weights, str):
        weights = lazy.retrieval_hybrid.parse_weights(o.weights, runs)
    elif isinstance(o.weights, Mapping):
        weights = {str(name): float(w) for name, w in o.weights.items()}
    else:
        weights = lazy.retrieval_hybrid.parse_weights(",".join(map(str, o.weights)), runs)
    return run_hybrid(db, r.name, runs, k=r.k, rrf_k=o.rrf_k, weights=weights, chunking=r.chunking,
                      workspace=r.workspace, extra_params=dict(r.extra_params or {}))


def _from_doc(db: Database, r: RunRequest) -> RunSummary:
    from workbench.services.retrieval.runs import map_doc_run

    return map_doc_run(db, r.options.source, r.chunking, r.name, rule=r.options.rule,
                       extra_params=dict(r.extra_params or {}))


# -- the registry ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Retriever:
    """One kind of retriever.

    ``chunking``: ``"required"`` (it ranks the chunks of a chunking) or ``"optional"`` (it
    works on stored runs; a chunking given is checked). ``title``: its name on the page.
    ``page``: whether the Retrieve & Pool page offers it. ``sweep``: ``None`` when a sweep cannot
    run it, else the retrievers whose runs (over the same chunking) it takes as its ``runs``
    (``()``: none); ``sweep_title`` its name on the Experiments page (default ``title``).
    ``extra``: the optional extra it needs (a sweep skips its cells, with the reason, when the
    extra is missing)."""

    name: str
    help: str
    title: str
    options: type
    run: Callable[[Database, RunRequest], RunSummary]
    chunking: str = "required"
    page: bool = True
    sweep: tuple[str, ...] | None = None
    extra: str | None = None
    sweep_title: str | None = None

    @property
    def parameters(self) -> list[Parameter]:
        return parameters(self.options)


RETRIEVERS: dict[str, Retriever] = {r.name: r for r in [
    Retriever("bm25", "BM25 (bm25s, lucene variant)", "BM25", Bm25Options, _bm25, sweep=()),
    Retriever("dense", "dense retrieval (sentence-transformers, cosine)", "Dense", DenseOptions, _dense,
              sweep=(), extra="dense"),
    Retriever("hybrid", "reciprocal rank fusion of stored runs", "Hybrid (RRF)", HybridOptions, _hybrid,
              chunking="optional", sweep=("bm25", "dense"), sweep_title="Hybrid (BM25 + dense)"),
    Retriever("from-doc", "map a document-level run onto the chunks of a chunking", "From a document run",
              FromDocOptions, _from_doc, page=False),
]}

def sweep_retrievers() -> tuple[str, ...]:
    """The retrievers a sweep grid may name (``sweep`` set), in registry order."""
    return tuple(name for name, r in RETRIEVERS.items() if r.sweep is not None)


def retriever(kind: str) -> Retriever:
    """The registry entry ``kind``; an unknown kind raises ConfigError listing the known ones."""
    if kind not in RETRIEVERS:
        raise ConfigError(f"unknown retriever {kind!r}; expected {', '.join(RETRIEVERS)}")
    return RETRIEVERS[kind]


def make_options(kind: str, values: Mapping[str, Any]):
    """``kind``'s options dataclass from keyword ``values`` (absent ones take their defaults;
    ``None`` is absent). Unknown keywords and missing required ones raise ConfigError."""
    spec = retriever(kind)
    known = {p.name: p for p in spec.parameters}
    unknown = [key for key in values if key not in known]
    if unknown:
        raise ConfigError(f"retrieve {kind!r} takes no {', '.join(f'{{field:{k}}}' for k in unknown)}; its "
                          f"options are {', '.join(f'{{field:{k}}}' for k in known) or 'none'}")
    given = {key: value for key, value in values.items() if value is not None}
    for p in known.values():
        if p.required and (p.name not in given or (p.type is tuple and not len(given[p.name]))):
            raise ConfigError(f"retrieve {kind!r} needs {{field:{p.name}}}")
        if p.type is tuple and p.name in given:
            value = given[p.name]
            given[p.name] = (tuple(n.strip() for n in value.split(",") if n.strip()) if isinstance(value, str)
                             else tuple(str(v) for v in value))
    return spec.options(**given)


def run_retriever(db: Database, kind: str, *, name: str, chunking: str | None = None, k: int = DEFAULT_K,
                  options=None, progress: ProgressFactory | None = None, workspace: Workspace | None = None,
                  extra_params: Mapping[str, Any] | None = None) -> RunSummary:
    """Run retriever ``kind`` into a new stored run ``name`` (``options``: its dataclass, or
    None for the defaults). A retriever that requires a chunking refuses to run without one
    (ConfigError naming ``chunking``)."""

    spec = retriever(kind)
    if options is None:
        options = make_options(kind, {})
    elif not isinstance(options, spec.options):
        raise ConfigError(f"retrieve {kind!r} takes {spec.options.__name__}, got {type(options).__name__}")
    if spec.chunking == "required" and not chunking:
        raise ConfigError(f"retrieve {kind!r} needs {{field:chunking}}")
    request = RunRequest(name, chunking, k, options, progress or no_progress, workspace, extra_params)
    return spec.run(db, request)
