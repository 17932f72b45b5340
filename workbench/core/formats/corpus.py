"""Documents and queries from JSONL, TSV, folders of text files and SMART (Cranfield) files.

Documents come out as ``line, doc_id, title, text, metadata`` and queries as
``line, query_id, text, description, tags``. ``line`` is the 1-based source line (for a folder,
0 and the file name in ``source`` instead). Text is kept exactly as written: no case folding,
no whitespace normalisation inside a field, no mojibake repair, so that character offsets of
spans judged later point at the same characters as in the source file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from workbench import lazylibs
from workbench.core.formats.lines import (
    Tick,
    pick_field,
    read_json_objects,
    split_lines,
    string_value,
)
from workbench.errors import InputError

if TYPE_CHECKING:  # imported by _frame: the streamed corpus import reads the field names here without pandas
    import pandas as pd

DOC_ID_FIELDS = ("_id", "doc_id", "docid", "id")
DOC_TEXT_FIELDS = ("text", "doc", "contents", "body")
TITLE_FIELDS = ("title",)
QUERY_ID_FIELDS = ("query_id", "_id", "qid", "id")
QUERY_TEXT_FIELDS = ("text", "query")

DOCUMENT_FRAME = ["line", "doc_id", "title", "text", "metadata"]
QUERY_FRAME = ["line", "query_id", "text", "description", "tags"]


def _frame(rows: list[tuple], columns: list[str]) -> pd.DataFrame:
    """The parsed ``rows`` as a frame of ``columns`` (:data:`DOCUMENT_FRAME` or :data:`QUERY_FRAME`)."""

    return lazylibs.pandas.DataFrame(rows, columns=columns)


# --- JSONL ---------------------------------------------------------------------------------
def documents_from_jsonl(text: str, path: str, *, id_field: str | None = None,
                         text_field: str | None = None, title_field: str | None = None,
                         tick: Tick | None = None) -> pd.DataFrame:
    """Documents from JSONL: BEIR ``corpus.jsonl`` (``_id``, ``title``, ``text``) or any JSONL.

    Field names are recognised without options: id from ``_id``/``doc_id``/``docid``/``id``,
    text from ``text``/``doc``/``contents``/``body``, title from ``title`` (optional); the
    first name present in the first record is used for the whole file. Other fields are kept
    as the document's ``metadata``. Ids may be JSON integers; text may be empty (Cranfield
    has two empty abstracts) but must be a string.
    """
    records = read_json_objects(text, path, tick=tick)
    fid = pick_field(records, id_field, DOC_ID_FIELDS, "document id", path, option="id_field")
    ftext = pick_field(records, text_field, DOC_TEXT_FIELDS, "document text", path, option="text_field")
    ftitle = pick_field(records, title_field, TITLE_FIELDS, "title", path, required=False)
    used = {fid, ftext, ftitle}
    rows = []
    for line, record in records:
        for need in (fid, ftext):
            if need not in record:
                raise InputError(f"lacks the field {need!r} (the other records have it)", path=path, line=line)
        title = record.get(ftitle) if ftitle else None
        if ftitle and title is not None:
            title = string_value(title, field=ftitle, path=path, line=line)
        extra = {k: v for k, v in record.items() if k not in used}
        rows.append((
            line,
            string_value(record[fid], field=fid, path=path, line=line, allow_empty=False, allow_number=True),
            title,
            string_value(record[ftext], field=ftext, path=path, line=line),
            extra or None,
        ))
    return _frame(rows, DOCUMENT_FRAME)


def queries_from_jsonl(text: str, path: str, *, id_field: str | None = None,
                       text_field: str | None = None, tick: Tick | None = None) -> pd.DataFrame:
    """Queries from JSONL (also BEIR ``queries.jsonl``).

    id from ``query_id``/``_id``/``qid``/``id``, text from ``text``/``query``; optional
    ``description`` (string) and ``tags`` (object). BEIR's ``metadata`` object becomes the tags
    when there are no ``tags``.
    """
    records = read_json_objects(text, path, tick=tick)
    fid = pick_field(records, id_field, QUERY_ID_FIELDS, "query id", path, option="id_field")
    ftext = pick_field(records, text_field, QUERY_TEXT_FIELDS, "query text", path, option="text_field")
    rows = []
    for line, record in records:
        for need in (fid, ftext):
            if need not in record:
                raise InputError(f"lacks the field {need!r} (the other records have it)", path=path, line=line)
        description = record.get("description")
        if description is not None:
            description = string_value(description, field="description", path=path, line=line)
        tags = record.get("tags", record.get("metadata"))
        if tags is not None and not isinstance(tags, dict):
            raise InputError(
                f"field 'tags' must be a JSON object like {{\"topic\": \"x\"}}, got {type(tags).__name__}",
                path=path, line=line,
            )
        rows.append((
            line,
            string_value(record[fid], field=fid, path=path, line=line, allow_empty=False, allow_number=True),
            string_value(record[ftext], field=ftext, path=path, line=line, allow_empty=False),
            description,
            tags or None,
        ))
    return _frame(rows, QUERY_FRAME)


# --- TSV -------------------------------------------------------------------------------------
def queries_from_tsv(text: str, path: str) -> pd.DataFrame:
    """Queries from ``query_id<TAB>text`` lines (TREC topics files, MS MARCO queries).

    Exactly two tab-separated columns per non-blank line; the text may contain spaces but no
    tab. A header line ``query_id<TAB>text`` (or ``qid``/``id``) is skipped.
    """
    rows: list[tuple[int, str, str, None, None]] = []
    for line, raw in enumerate(split_lines(text), start=1):
        if not raw.strip():
            continue
        parts = raw.split("\t")
        if len(parts) != 2:
            raise InputError(
                f"expected 2 tab-separated columns 'query_id<TAB>text', got {len(parts)}"
                + (" (no tab: is the file space-separated?)" if len(parts) == 1 else ""),
                path=path, line=line,
            )
        qid, qtext = parts[0].strip(), parts[1].strip()
        if not rows and qid.lower() in {"query_id", "qid", "id", "query-id"}:
            continue
        if not qid or not qtext:
            raise InputError("empty query id or text; expected 'query_id<TAB>text'", path=path, line=line)
        rows.append((line, qid, qtext, None, None))
    if not rows:
        raise InputError("holds no queries; expected 'query_id<TAB>text' lines", path=path)
    return _frame(rows, QUERY_FRAME)


# --- folders of text files --------------------------------------------------------------------
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
TEXT_SUFFIXES = (".txt", ".md", ".markdown")


def documents_from_files(files: Iterable[tuple[str, str]]) -> pd.DataFrame:
    """Documents from ``(relative_path, text)`` pairs of a folder.

    ``doc_id`` is the relative path with ``/`` separators and without its extension
    (``guides/setup.md`` -> ``guides/setup``); the title is the first markdown heading, else the
    file name without extension. The ``metadata`` records the file name, so duplicates
    (``a.txt`` next to ``a.md``) can be reported by name.
    """
    rows = []
    for rel, text in files:
        stem = rel.rsplit(".", 1)[0] if "." in rel.rsplit("/", 1)[-1] else rel
        heading = _HEADING.search(text)
        title = heading.group(1).strip() if heading else stem.rsplit("/", 1)[-1]
        rows.append((0, stem, title, text, {"file": rel}))
    return _frame(rows, DOCUMENT_FRAME)


# --- SMART (Cranfield, CISI, MED ...) -----------------------------------------------------------
_SMART_FIELD = re.compile(r"^\.([A-Z])(?:\s+(.*))?$")
SMART_FIELDS = {"T": "title", "A": "author", "B": "bib", "W": "text"}


def smart_records(text: str, path: str, *, tick: Tick | None = None) -> list[tuple[int, str, dict[str, str]]]:
    """``(line, id, {field_letter: text})`` for each ``.I`` record of a SMART file.

    A record starts at ``.I <id>``; a line holding only ``.X`` (one capital letter) starts field
    ``X``, whose text runs to the next marker. Field text keeps its inner line breaks and loses
    only the surrounding whitespace. Text before the first ``.I`` is an error.
    """
    records: list[tuple[int, str, dict[str, list[str]]]] = []
    field: str | None = None
    line = 0
    for line, raw in enumerate(split_lines(text), start=1):
        if tick is not None and line % 5_000 == 0:
            tick(5_000)
        marker = _SMART_FIELD.match(raw) if raw.startswith(".") else None
        if marker:
            letter, rest = marker.group(1), (marker.group(2) or "").strip()
            if letter == "I":
                if not rest:
                    raise InputError("'.I' without an id; expected '.I <id>'", path=path, line=line)
                records.append((line, rest, {}))
                field = None
                continue
            if not records:
                raise InputError(f"field '.{letter}' before the first '.I <id>' record", path=path, line=line)
            field = letter
            records[-1][2].setdefault(field, [])
            if rest:
                records[-1][2][field].append(rest)
            continue
        if not records:
            if raw.strip():
                raise InputError("text before the first '.I <id>'; is this a SMART file?", path=path, line=line)
            continue
        if field is None:
            if raw.strip():
                raise InputError(
                    "text after '.I' but before a field marker such as '.T' or '.W'", path=path, line=line
                )
            continue
        records[-1][2][field].append(raw)
    if tick is not None:
        tick(line % 5_000)
    if not records:
        raise InputError("holds no '.I <id>' records; expected a SMART file", path=path)
    return [(line, rid, {k: "\n".join(v).strip() for k, v in fields.items()}) for line, rid, fields in records]


def documents_from_smart(text: str, path: str, *, tick: Tick | None = None) -> pd.DataFrame:
    """Documents from a SMART file such as Cranfield's ``cran.all.1400``.

    ``.I`` is the doc id (as written), ``.T`` the title, ``.W`` the text (may be empty),
    ``.A`` and ``.B`` (and any other field) go to ``metadata`` as ``author``/``bib``/letter.
    """
    rows = []
    for line, rid, fields in smart_records(text, path, tick=tick):
        meta = {SMART_FIELDS.get(k, k): v for k, v in fields.items() if k not in ("T", "W")}
        rows.append((line, rid, fields.get("T") or None, fields.get("W", ""), meta or None))
    return _frame(rows, DOCUMENT_FRAME)


def queries_from_smart(text: str, path: str, *, by_position: bool) -> pd.DataFrame:
    """Queries from a SMART file (``.I`` then ``.W``).

    ``by_position=True`` is Cranfield's rule: ``cranqrel`` numbers queries 1..225 by their
    position in ``cran.qry``, whose own ``.I`` ids run 001..365 with gaps, so the query id is
    the position and the written id is kept in ``tags`` as ``smart_id``.
    """
    rows = []
    for position, (line, rid, fields) in enumerate(smart_records(text, path), start=1):
        qtext = fields.get("W", "")
        if not qtext:
            raise InputError(f"query {rid!r} has no '.W' text", path=path, line=line)
        qid = str(position) if by_position else rid
        rows.append((line, qid, qtext, None, {"smart_id": rid} if by_position else None))
    return _frame(rows, QUERY_FRAME)
