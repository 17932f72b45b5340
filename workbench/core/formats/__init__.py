"""Pure parsers for the corpus, query and judgment formats the import service accepts.

Every parser takes decoded text (or already-read files) and returns a DataFrame with a ``line``
column holding the 1-based source line of each row, so that checks made later (unknown ids,
duplicates, conflicts with stored rows) can still point at ``file:line``. Nothing here touches
the database; :mod:`workbench.services.ingest` does that.

TREC qrels and runs, BEIR qrels and JSONL qrels rows are read by :mod:`workbench.core.readers`.
"""
