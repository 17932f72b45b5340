"""Measuring retrievers: run files and project runs (evaluate), what the Qrels and Evaluate pages show
(views), pipeline stages, sweeps of chunkings x retrievers, and the RAG measures over a project
(abstention, query kinds, trajectories, RBAC leakage).
"""
