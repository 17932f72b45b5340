"""Measuring retrievers: run files and project runs (evaluate), what the Qrels and Evaluate pages show
(views), whether the judge's qrels rank systems as the human qrels do (rank_agreement),
pipeline stages, sweeps of chunkings x retrievers, and the RAG measures over a project
(abstention, query kinds, trajectories, RBAC leakage).
"""
