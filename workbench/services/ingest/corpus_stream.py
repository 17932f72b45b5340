"""``import corpus`` of a JSONL file, streamed: the file is never held in memory.

:func:`stream_jsonl_corpus` is tried first for a corpus that is a JSONL file (named ``--format
jsonl``/``beir``, or guessed so). It reads the file twice without keeping it: once in 1 MiB
blocks for the sha256 of the ledger, once by DuckDB's JSON reader straight into the table
(:func:`workbench.store.corpus_load.load_jsonl_documents`), in the import's one transaction.
Peak memory is then DuckDB's buffers, not the file (``benchmarks/ingest_bench.py --scale``).

It returns ``None`` whenever the general importer (:mod:`workbench.services.ingest.corpus`)
must decide instead: the file is not a plain regular file, a line is not strict JSON, a row is
not unmistakable, an id repeats, a stored document differs, chunkings exist (their chunks of
the new documents are built in Python), and so on. The general importer then gives the same
result, or the same one-line ``file:line`` error, as before, so every rule of
:mod:`workbench.services.ingest` holds unchanged; nothing is stored by a declined attempt.
"""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

from workbench.core.formats import corpus as corpus_formats
from workbench.core.formats.lines import pick_field, read_json_objects
from workbench.errors import InputError
from workbench.services.ingest import ledger
from workbench.services.ingest.checks import short
from workbench.services.ingest.result import ImportResult
from workbench.services.ingest.source import ALIASES, Source, detect_format
from workbench.services.progress import ProgressFactory, no_progress
from workbench.store.chunks import chunking_definitions
from workbench.store.corpus_load import LoadDeclined, has_documents, load_jsonl_documents
from workbench.store.database import Database

BLOCK = 1 << 20
HEAD = 1 << 16


def _digest(path: Path) -> tuple[str, bytes, bool]:
    """sha256 of the file read in blocks, its first bytes, and whether it holds anything but
    whitespace."""
    digest = hashlib.sha256()
    head = b""
    content = False
    with path.open("rb") as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
            if len(head) < HEAD:
                head += block[:HEAD - len(head)]
            if not content and block.strip():
                content = True
    return digest.hexdigest(), head, content


def _first_record(path: Path, label: str, fields: dict) -> tuple[str, str, str | None] | None:
    """The id, text and title fields the general importer would pick from the first record
    (None: let it report the problem)."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                records = read_json_objects(raw.decode("utf-8").lstrip("\ufeff") if number == 1 else
                                            raw.decode("utf-8"), label)
                fid = pick_field(records, fields.get("id_field"), corpus_formats.DOC_ID_FIELDS, "document id", label)
                ftext = pick_field(records, fields.get("text_field"), corpus_formats.DOC_TEXT_FIELDS, "document text",
                                   label)
                ftitle = pick_field(records, fields.get("title_field"), corpus_formats.TITLE_FIELDS, "title", label,
                                    required=False)
            except (InputError, UnicodeDecodeError):
                return None
            return fid, ftext, ftitle
    return None


def _empty_example(path: Path, label: str, fid: str, ftext: str) -> str | None:
    """``file:line doc_id 'x'`` of the first document with an empty text (the general
    importer's wording), found by reading the file line by line."""

    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if b'""' not in raw:
                continue
            record = json.loads(raw.decode("utf-8").lstrip("\ufeff"))
            if record.get(ftext) == "":
                return f"{label}:{number} doc_id {short(str(record[fid]))}"
    return None


def stream_jsonl_corpus(db: Database, path: Path, label: str, *, format: str | None, name: str | None,
                        fields: dict, progress: ProgressFactory = no_progress,
                        read_from: Path | None = None) -> ImportResult | None:
    """Import the JSONL corpus at ``path`` streamed (module docstring), or None to hand it to
    the general importer. ``read_from``: where to read it instead (the file as opened and checked
    once, :func:`workbench.services.ingest.source.pinned`); ``path`` still names it."""
    named, path = path, read_from or path
    fmt = ALIASES.get(("corpus", format), format)
    if fmt not in (None, "jsonl"):
        return None
    try:
        info = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size == 0:
        return None
    try:
        sha256, head, content = _digest(path)
    except OSError:
        return None
    if not content:
        return None
    if fmt is None:
        try:
            if detect_format("corpus", named, head) != "jsonl":
                return None
        except InputError:
            return None
    picked = _first_record(path, label, fields)
    if picked is None:
        return None
    fid, ftext, ftitle = picked
    result = ImportResult(kind="corpus", path=label, format="jsonl", name=name)
    earlier = ledger.earlier_import(db, "corpus", sha256)
    if earlier is not None:
        result.already_imported, result.name = earlier, earlier["name"]
        return result
    result.name = name or named.stem
    source = Source(named, label, None, sha256)
    try:
        with db.transaction() as cur:
            if chunking_definitions(cur):
                raise LoadDeclined("chunkings exist: their chunks of the new documents are built in Python")
            stored_before = has_documents(cur)
            with progress(f"loading {named.name}", None, "documents") as advance:
                load = load_jsonl_documents(cur, path, id_field=fid, text_field=ftext, title_field=ftitle,
                                            check_stored=stored_before)
                advance(load.rows + load.present)
            result.rows, result.present = load.rows, load.present
            if load.empty_texts:
                if load.present:  # which empty texts are new needs the stored ids: the general importer
                    raise LoadDeclined("empty texts among rows partly stored already")
                result.empty_texts = load.empty_texts
                result.empty_example = _empty_example(path, label, fid, ftext)
            ledger.record(cur, source, result)
    except LoadDeclined:
        return None
    return result
