"""Retrievers that produce runs: BM25 (bm25s), dense (sentence-transformers), hybrid (RRF)."""
