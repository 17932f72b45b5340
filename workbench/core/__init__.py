"""Pure functions and value types: metrics, statistics, agreement, spans, pooling, sampling.

No module here touches files, the network or other processes except one named reader,
:mod:`workbench.core.metrics.readers` (qrels and run files, so that :func:`workbench.evaluate`
takes paths); nothing imports duckdb, openai or streamlit. tests/test_architecture.py enforces
both: ``CORE_FILE_READERS`` names the exception, and any other core module that calls ``open``,
a path's file methods, a file reader or writer, or ``os``/``shutil``/``subprocess``/``socket``
fails it."""
