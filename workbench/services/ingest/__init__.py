"""Importing corpora, queries, qrels and runs into a project: one service for the CLI and the app.

One module per importer (:mod:`.corpus`, :mod:`.queries`, :mod:`.qrels`, :mod:`.runs`); the file
reading and format detection (:mod:`.source`), checks (:mod:`.checks`) and ledger (:mod:`.ledger`)
they share; :func:`import_file` is the entry point.

Kinds and formats (``format=None`` guesses from the name and first bytes and says which it chose):

``corpus``
    ``jsonl`` (alias ``beir``): BEIR ``corpus.jsonl`` (``_id``, ``title``, ``text``) or any JSONL
    whose id/text/title fields are among the usual names (``_id``/``doc_id``/``docid``/``id``;
    ``text``/``doc``/``contents``/``body``; ``title``) or named with ``id_field`` etc.
    ``folder``: a directory of ``.txt``/``.md`` files, read recursively; doc_id = relative path
    without extension, title = first markdown heading or the file name.
    ``smart`` (alias ``cranfield``): SMART ``.I``/``.T``/``.A``/``.B``/``.W`` records.
``queries``
    ``jsonl`` (alias ``beir``): ``query_id``/``_id``/``qid``/``id`` and ``text``/``query``, optional
    ``description`` and ``tags``. ``tsv``: ``query_id<TAB>text``. ``smart``: ``.I``/``.W`` records,
    ids as written. ``cranfield``: ``cran.qry``, ids = position 1..225 (what ``cranqrel`` uses).
``qrels``
    ``trec`` (``qid iter doc_id grade``), ``beir`` (``query-id<TAB>corpus-id<TAB>score``),
    ``jsonl`` rows (``{"query_id", "query", "relevant": {doc_id: grade}, "tags"}``; a row's
    ``query`` text registers the query when the project lacks it), ``spans``
    (``{"query_id", "doc_id", "start", "end", "grade", "assessor"}``) and ``cranfield``
    (``cranqrel``; codes 1->3, 2->2, 3->1, 4->1, 5->0, ``-1`` rows excluded and counted).
    Document-level qrels become whole-document spans ``[0, len(text))``. Judgments are stored
    with ``source='imported'``, ``status='ok'`` and assessor = ``assessor`` or ``name`` or the
    file stem (span rows may name their own assessor). Grades must be integers 0-3.
``run``
    ``trec`` run files (``qid Q0 id rank score tag``). The level is detected: every id a stored
    doc_id -> a document-level run; every id a chunk_id of one chunking -> a chunk-level run of
    that chunking; a mix -> error. Ranks are recomputed from the scores (score descending, ties
    by id descending, as trec_eval orders them); the run is named ``name`` or the file stem.

Rules shared by every import:

* All or nothing: parsing and checks happen first, then one transaction writes the rows and the
  ledger entry; any error rolls everything back.
* Errors are :class:`~workbench.errors.InputError` with ``file:line: what, expected, fix``.
* Ids that the project does not know (doc ids or query ids in qrels and runs, chunk ids in runs)
  are an error that gives their count and first examples, unless ``skip_unknown`` drops those rows
  and reports how many. Queries must be imported before qrels and runs (except for JSONL qrels
  rows that carry the query text). Unknown docs are never registered on the fly: a run that
  names passages without text (DL19's runs do) cannot be judged or chunked there anyway.
* Duplicates within the file are errors. Rows equal to stored rows are counted as "already
  stored" and not written again; rows with a stored id but different content are a conflict:
  the error counts them, shows the first examples and nothing is stored.
* The same bytes imported twice as the same kind is a no-op ("already imported"), by the sha256
  ledger in the ``imports`` table.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.services import access, lazy
from workbench.services.ingest import ledger
from workbench.services.ingest.corpus_stream import stream_jsonl_corpus
from workbench.services.ingest.result import ImportResult
from workbench.services.ingest.source import (
    FORMATS,
    KINDS,
    check_inside,
    detect_format,
    pinned,
    read_source,
    resolve_format,
)
from workbench.services.progress import ProgressFactory, no_progress
from workbench.store.database import Database
from workbench.store.imports import read_imports

if TYPE_CHECKING:  # not imported at run time: pandas is most of the CLI's start-up time
    import pandas as pd

__all__ = ["FORMATS", "KINDS", "ImportResult", "detect_format", "import_file", "preview_documents",
           "recent_imports"]


def _importer(kind: str) -> Callable:
    """The general importer of ``kind``. Imported on first use: they parse into pandas frames,
    and a streamed JSONL corpus (:mod:`.corpus_stream`) needs none of them (CLI start-up cost)."""
    if kind == "corpus":
        from workbench.services.ingest.corpus import import_corpus
        return import_corpus
    if kind == "queries":
        from workbench.services.ingest.queries import import_queries
        return import_queries
    if kind == "qrels":
        from workbench.services.ingest.qrels import import_qrels
        return import_qrels
    if kind == "run":
        from workbench.services.ingest.runs import import_run
        return import_run
    raise KeyError(kind)


def import_file(
    db: Database,
    kind: str,
    path: str | Path,
    *,
    format: str | None = None,
    name: str | None = None,
    assessor: str | None = None,
    skip_unknown: bool = False,
    id_field: str | None = None,
    text_field: str | None = None,
    title_field: str | None = None,
    label: str | None = None,
    progress: ProgressFactory | None = None,
    allowed_folders: Sequence[Path] | None = None,
) -> ImportResult:
    """Import one file (or folder) of ``kind`` into the project; see the module docstring.

    ``label`` names the file in messages and the ledger when ``path`` is a temporary copy (an
    upload in the app). ``progress`` is a :mod:`workbench.services.progress` factory (the CLI's
    tqdm bar); parsing large files advances it by lines. ``allowed_folders`` (the app's
    ``[app] data_dirs``): the path and, for a folder, every file in it must lie inside one of
    them with links resolved, else :class:`~workbench.services.access.PermissionDenied`; each
    file is checked again once opened, on the opened file (:func:`.source.open_checked`), and
    read only from that descriptor, so a link switched meanwhile cannot bring in another file.
    Returns an :class:`ImportResult`; raises :class:`InputError` and leaves the project unchanged
    when anything is wrong.
    """
    access.require("import")
    started = time.perf_counter()
    path = Path(path)
    fields = {"id_field": id_field, "text_field": text_field, "title_field": title_field}
    if kind == "corpus":  # a JSONL corpus streams (corpus_stream); None: the general importer decides
        check_inside(path, label or str(path), allowed_folders)
        with contextlib.ExitStack() as held:
            # Within allowed folders the streamed reads go to the file opened and checked once
            # (source.pinned), not to the path, whose link may be switched between two reads.
            read_from = None if allowed_folders is None else held.enter_context(
                pinned(path, label or str(path), allowed_folders))
            streamed = None if allowed_folders is not None and read_from is None else stream_jsonl_corpus(
                db, path, label or str(path), format=format, name=name, fields=fields,
                progress=progress or no_progress, read_from=read_from)
        if streamed is not None:
            streamed.seconds = time.perf_counter() - started
            return streamed
    source = read_source(path, label or str(path), allowed_folders)
    fmt = resolve_format(kind, format, source)
    result = ImportResult(kind=kind, path=source.label, format=fmt, name=name)
    earlier = ledger.earlier_import(db, kind, source.sha256)
    if earlier is not None:
        result.already_imported = earlier
        result.name = earlier["name"]
        return result
    progress = progress or no_progress
    _importer(kind)(db, source, result, progress=progress, assessor=assessor, skip=skip_unknown, fields=fields)
    result.seconds = time.perf_counter() - started
    return result


def recent_imports(db: Database, limit: int = 20) -> pd.DataFrame:
    """The ledger, newest first (for status pages)."""
    return read_imports(db, limit)


def preview_documents(db: Database, limit: int = 5) -> pd.DataFrame:
    """A few stored documents (``doc_id, title, text``) to eyeball an import."""

    return lazy.store_corpus.sample_documents(db, limit)
