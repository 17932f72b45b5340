"""Pure functions and value types: metrics, statistics, agreement, spans, pooling, sampling.

Nothing here does I/O beyond the file readers, and nothing imports duckdb, openai or streamlit
(tests/test_architecture.py enforces it)."""
