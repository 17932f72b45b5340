"""The metric engine: measures as values, the value types it reads (Qrels, Run), the file readers,
ranking into flat arrays, the per-query kernels, ``evaluate``, paired significance tests, N-run
comparison, per-query distributions, stage reports and the Pareto frontier.

Pure except :mod:`~workbench.core.metrics.readers`, which opens the files a caller names (the
only I/O core does; tests/test_architecture.py enforces which modules may).
"""
