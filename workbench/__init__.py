"""Relevance Workbench: collect relevance judgments you can trust.

The public Python API:

    from workbench import evaluate
    result = evaluate(qrels, run, ["ndcg@10", "recall@100"])
    result.aggregate      # {"ndcg@10": 0.71, ...}
    result.per_query      # pandas DataFrame indexed by query_id

    from workbench import Project          # the whole loop (workbench.api)
    project = Project.create("demo.duckdb", demo=True)
    project.judge("demo", model="offline-lexical")
    project.evaluate(runs=["bm25"], measures=["ndcg@10"]).to_pandas()
"""

from __future__ import annotations

from workbench.version import __version__

__all__ = ["Project", "evaluate", "__version__"]


def __getattr__(name: str):
    # Imported lazily so that `import workbench` stays cheap for the CLI and the app.
    if name == "evaluate":
        from workbench.core.metrics.evaluation import evaluate

        return evaluate
    if name == "Project":
        from workbench.api import Project

        return Project
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")
