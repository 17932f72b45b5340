"""The modules the Python API (:mod:`workbench.api`) calls, imported on their first use.

``import workbench.api`` (and ``import workbench``) must stay cheap, so the API does not import the
services (and the numpy, pandas, duckdb... behind them) when it is loaded: a method reads
``lazy.project_lifecycle.open_project`` and this module imports
``workbench.services.project.lifecycle`` the first time the attribute is read (a module
``__getattr__``, PEP 562), then keeps it as a plain global. The names are the module's path below
``workbench.services`` (``core_`` for ``workbench.core``), dots as underscores, as in
:mod:`workbench.cli.lazy`. The ``TYPE_CHECKING`` imports give type checkers the real modules and
give tests/test_architecture.py the edges it checks; a test there holds them equal to
:data:`MODULES`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from workbench import lazylibs

if TYPE_CHECKING:
    from workbench.core.calibration import gate as core_calibration_gate
    from workbench.services import chunking, ingest, settings
    from workbench.services.calibration import guidelines as calibration_guidelines
    from workbench.services.calibration import request as calibration_request
    from workbench.services.calibration import routing as calibration_routing
    from workbench.services.calibration import workflow as calibration_workflow
    from workbench.services.evaluation import evaluate as evaluation_evaluate
    from workbench.services.judge import learned as judge_learned
    from workbench.services.pooling import request as pooling_request
    from workbench.services.project import lifecycle as project_lifecycle
    from workbench.services.qrels import answerability as qrels_answerability
    from workbench.services.qrels import rule as qrels_rule
    from workbench.services.retrieval import runs as retrieval_runs

# attribute -> the module it names, imported by the first access (PEP 562)
MODULES = {
    "calibration_guidelines": "workbench.services.calibration.guidelines",
    "calibration_request": "workbench.services.calibration.request",
    "calibration_routing": "workbench.services.calibration.routing",
    "calibration_workflow": "workbench.services.calibration.workflow",
    "chunking": "workbench.services.chunking",
    "core_calibration_gate": "workbench.core.calibration.gate",
    "evaluation_evaluate": "workbench.services.evaluation.evaluate",
    "ingest": "workbench.services.ingest",
    "judge_learned": "workbench.services.judge.learned",
    "pooling_request": "workbench.services.pooling.request",
    "project_lifecycle": "workbench.services.project.lifecycle",
    "qrels_answerability": "workbench.services.qrels.answerability",
    "qrels_rule": "workbench.services.qrels.rule",
    "retrieval_runs": "workbench.services.retrieval.runs",
    "settings": "workbench.services.settings",
}


__getattr__ = lazylibs.loader(globals(), MODULES)
