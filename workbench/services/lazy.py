"""The core, store, retrieval and llm modules the services import on their first use.

Importing a service module must stay cheap (the CLI and the Python API import them when a command
runs, the app on every page), so a service does not import the metric engine, the retrievers or the
LLM client until an operation needs them: it reads ``lazy.core_metrics_readers.read_qrels`` and this
module imports ``workbench.core.metrics.readers`` the first time the attribute is read (a module
``__getattr__``, PEP 562), then keeps it as a plain global. The names are the module's path below
``workbench``, dots as underscores. Other services modules are not listed here: a services module
listed here and reading this one would close an import circle, so a service that defers another
imports it inside the function that needs it. The ``TYPE_CHECKING`` imports give type checkers the
real modules and give tests/test_architecture.py the edges it checks; a test there holds them
equal to :data:`MODULES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench import lazylibs

if TYPE_CHECKING:
    from workbench import config
    from workbench.core.calibration import label_order as core_calibration_label_order
    from workbench.core.calibration import rank_correlation as core_calibration_rank_correlation
    from workbench.core.judging import offline as core_judging_offline
    from workbench.core.metrics import arrow_buffers as core_metrics_arrow_buffers
    from workbench.core.metrics import comparison as core_metrics_comparison
    from workbench.core.metrics import distribution as core_metrics_distribution
    from workbench.core.metrics import evaluation as core_metrics_evaluation
    from workbench.core.metrics import ppi as core_metrics_ppi
    from workbench.core.metrics import qrels_and_runs as core_metrics_qrels_and_runs
    from workbench.core.metrics import readers as core_metrics_readers
    from workbench.core.rag import context_budget as core_rag_context_budget
    from workbench.llm import client as llm_client
    from workbench.retrieval import bm25 as retrieval_bm25
    from workbench.retrieval import dense as retrieval_dense
    from workbench.retrieval import hybrid as retrieval_hybrid
    from workbench.retrieval import onnx_dense as retrieval_onnx_dense
    from workbench.store import corpus as store_corpus
    from workbench.store import evaluations as store_evaluations
    from workbench.store import judgments as store_judgments
    from workbench.store import runs as store_runs

# attribute -> the module it names, imported by the first access (PEP 562)
MODULES = {
    "config": "workbench.config",
    "core_calibration_label_order": "workbench.core.calibration.label_order",
    "core_calibration_rank_correlation": "workbench.core.calibration.rank_correlation",
    "core_judging_offline": "workbench.core.judging.offline",
    "core_metrics_arrow_buffers": "workbench.core.metrics.arrow_buffers",
    "core_metrics_comparison": "workbench.core.metrics.comparison",
    "core_metrics_distribution": "workbench.core.metrics.distribution",
    "core_metrics_evaluation": "workbench.core.metrics.evaluation",
    "core_metrics_ppi": "workbench.core.metrics.ppi",
    "core_metrics_qrels_and_runs": "workbench.core.metrics.qrels_and_runs",
    "core_metrics_readers": "workbench.core.metrics.readers",
    "core_rag_context_budget": "workbench.core.rag.context_budget",
    "llm_client": "workbench.llm.client",
    "retrieval_bm25": "workbench.retrieval.bm25",
    "retrieval_dense": "workbench.retrieval.dense",
    "retrieval_hybrid": "workbench.retrieval.hybrid",
    "retrieval_onnx_dense": "workbench.retrieval.onnx_dense",
    "store_corpus": "workbench.store.corpus",
    "store_evaluations": "workbench.store.evaluations",
    "store_judgments": "workbench.store.judgments",
    "store_runs": "workbench.store.runs",
}


__getattr__ = lazylibs.loader(globals(), MODULES)
