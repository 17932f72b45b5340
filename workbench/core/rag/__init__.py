"""Measures beyond one ranked list, for RAG systems: citations in generated answers, gold text inside
a token budget, multi-hop trajectories, abstention on unanswerable queries, and leakage of
restricted documents (RBAC).
"""
