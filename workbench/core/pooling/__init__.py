"""Pooling's pure parts: reciprocal rank fusion and the run normaliser pooling shares, and the pool
diagnostics computed from what the store aggregates.
"""
