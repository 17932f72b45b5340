"""Pure parsers for the corpus, query and judgment formats the import service accepts.

Every parser takes decoded text (or already-read files) and returns a DataFrame with a ``line``
column holding the 1-based source line of each row, so that checks made later (unknown ids,
duplicates, conflicts with stored rows) can still point at ``file:line``. Nothing here touches
the database; :mod:`workbench.services.ingest` does that.

TREC qrels and runs, BEIR qrels and JSONL qrels rows are read by :mod:`workbench.core.metrics.readers`.
"""

# What can be imported and exported (kept here, free of heavy imports, so that building the
# command-line parser stays fast; the services document each format).
IMPORT_KINDS = ("corpus", "queries", "qrels", "run")
IMPORT_FORMATS: dict[str, tuple[str, ...]] = {
    "corpus": ("jsonl", "beir", "folder", "smart", "cranfield"),
    "queries": ("jsonl", "beir", "tsv", "smart", "cranfield"),
    "qrels": ("trec", "beir", "jsonl", "spans", "cranfield"),
    "run": ("trec",),
}
EXPORT_FORMATS = ("trec", "beir", "jsonl", "spans")
EXPORT_LEVELS = ("doc", "chunk")
#: Whose labels a qrels view reads: SMEs' (with adjudicated and imported ones), the LLM judge's, or
#: both under the merge policy. The one tuple export, evaluation, propagation and sweeps check.
LABEL_SOURCES = ("human", "llm", "merged")
