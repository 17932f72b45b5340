"""Runs: retrievers run over a chunking and stored as named runs (runs), external retrievers called
as a command or a local HTTP endpoint (harness), and their per-query latency: imported sidecars
and the p50/p95 summary (latency).
"""
