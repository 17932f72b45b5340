"""The modules the CLI commands call, imported on their first use.

``workbench --help`` and building the parser must stay cheap, so a command module does not import
the services (and the numpy, pandas, duckdb... behind them) when it is loaded: it reads
``lazy.project_lifecycle.open_project`` and this module imports ``workbench.services.project.lifecycle``
the first time the attribute is read (a module ``__getattr__``, PEP 562), then keeps it as a plain
global. The names are the module's path below ``workbench.services`` (``core_`` for
``workbench.core``), dots as underscores. The ``TYPE_CHECKING`` imports give type checkers the
real modules and give tests/test_architecture.py the edges it checks; a test there holds them
equal to :data:`MODULES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench import lazylibs

if TYPE_CHECKING:
    from workbench.core import formats as core_formats
    from workbench.core import option_names as core_option_names
    from workbench.core.calibration import gate as core_calibration_gate
    from workbench.core.formats import lines as core_formats_lines
    from workbench.core.metrics import measures as core_metrics_measures
    from workbench.core.metrics import readers as core_metrics_readers
    from workbench.core.rag import abstention as core_rag_abstention
    from workbench.core.rag import citations as core_rag_citations
    from workbench.core.rag import context_budget as core_rag_context_budget
    from workbench.core.rag import rbac as core_rag_rbac
    from workbench.services import access, chunking, ingest, jobs, output_file, progress, settings, tags
    from workbench.services.calibration import guidelines as calibration_guidelines
    from workbench.services.calibration import request as calibration_request
    from workbench.services.calibration import routing as calibration_routing
    from workbench.services.calibration import workflow as calibration_workflow
    from workbench.services.evaluation import abstention as evaluation_abstention
    from workbench.services.evaluation import evaluate as evaluation_evaluate
    from workbench.services.evaluation import per_query_diff as evaluation_per_query_diff
    from workbench.services.evaluation import ppi as evaluation_ppi
    from workbench.services.evaluation import ppi_project as evaluation_ppi_project
    from workbench.services.evaluation import rank_agreement as evaluation_rank_agreement
    from workbench.services.evaluation import rbac as evaluation_rbac
    from workbench.services.evaluation import stages as evaluation_stages
    from workbench.services.evaluation import sweep as evaluation_sweep
    from workbench.services.evaluation import trajectories as evaluation_trajectories
    from workbench.services.judge import batch_files as judge_batch_files
    from workbench.services.judge import budget as judge_budget
    from workbench.services.judge import export as judge_export
    from workbench.services.judge import imported as judge_imported
    from workbench.services.judge import jobs as judge_jobs
    from workbench.services.judge import learned as judge_learned
    from workbench.services.judge import request as judge_request
    from workbench.services.pooling import pools as pooling_pools
    from workbench.services.pooling import request as pooling_request
    from workbench.services.project import deletion as project_deletion
    from workbench.services.project import lifecycle as project_lifecycle
    from workbench.services.qrels import answerability as qrels_answerability
    from workbench.services.qrels import export as qrels_export
    from workbench.services.qrels import propagation as qrels_propagation
    from workbench.services.qrels import rule as qrels_rule
    from workbench.services.qrels import synthetic_queries as qrels_synthetic_queries
    from workbench.services.retrieval import harness as retrieval_harness
    from workbench.services.retrieval import latency as retrieval_latency
    from workbench.services.retrieval import registry as retrieval_registry
    from workbench.services.retrieval import runs as retrieval_runs

# attribute -> the module it names, imported by the first access (PEP 562)
MODULES = {
    "access": "workbench.services.access",
    "calibration_guidelines": "workbench.services.calibration.guidelines",
    "calibration_request": "workbench.services.calibration.request",
    "calibration_routing": "workbench.services.calibration.routing",
    "calibration_workflow": "workbench.services.calibration.workflow",
    "chunking": "workbench.services.chunking",
    "core_calibration_gate": "workbench.core.calibration.gate",
    "core_formats": "workbench.core.formats",
    "core_formats_lines": "workbench.core.formats.lines",
    "core_metrics_measures": "workbench.core.metrics.measures",
    "core_metrics_readers": "workbench.core.metrics.readers",
    "core_option_names": "workbench.core.option_names",
    "core_rag_abstention": "workbench.core.rag.abstention",
    "core_rag_citations": "workbench.core.rag.citations",
    "core_rag_context_budget": "workbench.core.rag.context_budget",
    "core_rag_rbac": "workbench.core.rag.rbac",
    "evaluation_abstention": "workbench.services.evaluation.abstention",
    "evaluation_evaluate": "workbench.services.evaluation.evaluate",
    "evaluation_per_query_diff": "workbench.services.evaluation.per_query_diff",
    "evaluation_ppi": "workbench.services.evaluation.ppi",
    "evaluation_ppi_project": "workbench.services.evaluation.ppi_project",
    "evaluation_rank_agreement": "workbench.services.evaluation.rank_agreement",
    "evaluation_rbac": "workbench.services.evaluation.rbac",
    "evaluation_stages": "workbench.services.evaluation.stages",
    "evaluation_sweep": "workbench.services.evaluation.sweep",
    "evaluation_trajectories": "workbench.services.evaluation.trajectories",
    "ingest": "workbench.services.ingest",
    "jobs": "workbench.services.jobs",
    "judge_batch_files": "workbench.services.judge.batch_files",
    "judge_budget": "workbench.services.judge.budget",
    "judge_export": "workbench.services.judge.export",
    "judge_imported": "workbench.services.judge.imported",
    "judge_jobs": "workbench.services.judge.jobs",
    "judge_learned": "workbench.services.judge.learned",
    "judge_request": "workbench.services.judge.request",
    "output_file": "workbench.services.output_file",
    "pooling_pools": "workbench.services.pooling.pools",
    "pooling_request": "workbench.services.pooling.request",
    "progress": "workbench.services.progress",
    "project_deletion": "workbench.services.project.deletion",
    "project_lifecycle": "workbench.services.project.lifecycle",
    "qrels_answerability": "workbench.services.qrels.answerability",
    "qrels_export": "workbench.services.qrels.export",
    "qrels_propagation": "workbench.services.qrels.propagation",
    "qrels_rule": "workbench.services.qrels.rule",
    "qrels_synthetic_queries": "workbench.services.qrels.synthetic_queries",
    "retrieval_harness": "workbench.services.retrieval.harness",
    "retrieval_latency": "workbench.services.retrieval.latency",
    "retrieval_registry": "workbench.services.retrieval.registry",
    "retrieval_runs": "workbench.services.retrieval.runs",
    "settings": "workbench.services.settings",
    "tags": "workbench.services.tags",
}


__getattr__ = lazylibs.loader(globals(), MODULES)
