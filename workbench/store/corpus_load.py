"""Loading a JSONL corpus straight from its file into ``documents``, streamed by DuckDB.

The general importer (:mod:`workbench.services.ingest.corpus`) parses the file in Python and
holds it whole several times over. :func:`load_jsonl_documents` lets DuckDB's JSON reader stream
the file into the table inside the caller's transaction, so memory is bounded by DuckDB's
buffers, not by the file, and the CPU cost stays near a bare ``read_json`` load.

It is a fast path that only ever *accepts* what the general importer would store the same way:
every row must be unmistakable (a JSON object with a string or integer id of printable ASCII
without spaces, a string text, a string or null title, no repeated key, no trailing comma) and
the file must parse as strict JSON lines. Anything else, a malformed line, an id twice, a stored
document with other content, raises :class:`LoadDeclined` (the transaction must then be rolled
back) and the caller runs the general importer, which reports the exact ``file:line``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import duckdb

from workbench.store.database import Cursor, one_row

#: field names the JSON paths below can hold without quoting trouble
_PLAIN_FIELD = re.compile(r"[A-Za-z0-9_\-]+")


class LoadDeclined(Exception):
    """The file is not one the fast path may load; roll back and use the general importer."""


@dataclass(frozen=True)
class JsonlLoad:
    """What :func:`load_jsonl_documents` did: ``rows`` written, ``present`` equal to stored
    documents (not written again), ``empty_texts`` new documents with an empty text."""

    rows: int
    present: int
    empty_texts: int


def plain_field(name: str | None) -> bool:
    return name is None or _PLAIN_FIELD.fullmatch(name) is not None


def _typed_rows(id_field: str, text_field: str, title_field: str | None) -> str:
    """A SELECT over ``read_json_objects(?)`` giving ``doc_id, title, text, metadata`` and
    failing (``error()``) at the first row the fast path may not decide."""
    paths = [f'$."{id_field}"', f'$."{text_field}"'] + ([f'$."{title_field}"'] if title_field else [])
    path_list = "[" + ", ".join(f"'{p}'" for p in paths) + "]"
    used = [id_field, text_field] + ([title_field] if title_field else [])
    patch = "{" + ", ".join(f'"{name}": null' for name in used) + "}"
    title_type = "t[3]" if title_field else "NULL"
    title_value = "v[3]" if title_field else "NULL"
    # how many of the used keys the record has: id and text always (else refused), the title when present
    used_present = f"2 + CASE WHEN {title_type} IS NULL THEN 0 ELSE 1 END"
    return f"""
        WITH raw AS (
            SELECT json AS j, json_extract_string(json, {path_list}) AS v, json_type(json, {path_list}) AS t,
                   json_keys(json) AS k
            FROM read_json_objects(?, format = 'newline_delimited')
        )
        SELECT
            CASE WHEN (t[1] = 'VARCHAR' OR (t[1] IN ('BIGINT', 'UBIGINT') AND regexp_full_match(v[1], '0|-?[1-9][0-9]*')))
                      AND v[1] <> '' AND NOT regexp_matches(v[1], '[^!-~]')
                      AND t[2] = 'VARCHAR'
                      AND ({title_type} IS NULL OR {title_type} IN ('VARCHAR', 'NULL'))
                      -- no repeated key: a record holding only the used keys has none (each is
                      -- present once), so only records with other fields pay for list_distinct
                      AND (len(k) = {used_present} OR len(k) = len(list_distinct(k)))
                      -- no trailing comma (DuckDB's reader allows one, Python's refuses it): without
                      -- other fields the record ends in a string, null or number before its last
                      -- brace; with them, no comma may come before a closing brace or bracket.
                      -- (The end-anchored pattern is matched from the end by RE2: cheap on long
                      -- records, unlike right(j, n), which counts characters.)
                      AND CASE WHEN len(k) > {used_present} THEN NOT regexp_matches(j, ',\\s*[}}\\]]')
                               ELSE regexp_matches(j, '["l0-9][ \\t\\r]*}}$') END
                 THEN v[1] ELSE error('row the fast path does not decide') END AS doc_id,
            {title_value} AS title,
            v[2] AS text,
            CASE WHEN len(k) > {used_present} THEN json_merge_patch(j, '{patch}') END AS metadata
        FROM raw
    """


def _counts(cur: Cursor) -> tuple[int, int]:
    """Documents stored, and how many of them have an empty text. Two statements: a WHERE lets
    DuckDB skip every row group whose text statistics exclude '', where
    count(*) FILTER (WHERE text = '') reads every text (figures in docs/performance.md)."""
    total = one_row(cur.execute("SELECT count(*) FROM documents").fetchone())[0]
    empty = one_row(cur.execute("SELECT count(*) FROM documents WHERE text = ''").fetchone())[0]
    return int(total), int(empty)


def load_jsonl_documents(cur: Cursor, path: Path, *, id_field: str, text_field: str,
                         title_field: str | None, check_stored: bool) -> JsonlLoad:
    """Append the documents of the JSONL file ``path`` to ``documents`` on the caller's
    transaction (module docstring). ``check_stored``: the project holds documents already, so
    rows with a stored id are compared first (equal: counted as present; different: declined).

    Raises :class:`LoadDeclined` for anything the general importer must decide.
    """
    if not (plain_field(id_field) and plain_field(text_field) and plain_field(title_field)):
        raise LoadDeclined("field names the JSON paths cannot hold plainly")
    named = [id_field, text_field] + ([title_field] if title_field else [])
    if len(set(named)) < len(named):  # the key counts below assume three different fields
        raise LoadDeclined("one field named for two roles")
    rows = _typed_rows(id_field, text_field, title_field)
    try:
        present = 0
        if check_stored:
            overlap, distinct, differs = one_row(cur.execute(f"""
                SELECT count(*), count(DISTINCT f.doc_id),
                       count(*) FILTER (WHERE f.text IS DISTINCT FROM d.text OR f.title IS DISTINCT FROM d.title)
                FROM ({rows}) f JOIN documents d ON d.doc_id = f.doc_id""", [str(path)]).fetchone())
            if differs or overlap != distinct:
                raise LoadDeclined("rows conflict with stored documents or repeat a stored id")
            present = int(overlap)
        new_only = "WHERE f.doc_id NOT IN (SELECT doc_id FROM documents)" if present else ""
        before = _counts(cur)
        cur.execute(f"INSERT INTO documents (doc_id, title, text, metadata) "
                    f"SELECT f.doc_id, f.title, f.text, f.metadata FROM ({rows}) f {new_only}", [str(path)])
        after = _counts(cur)
    except duckdb.Error as exc:  # malformed JSON, a row refused above, an id twice (primary key)
        raise LoadDeclined(str(exc).splitlines()[0][:200]) from None
    written = int(after[0] - before[0])
    if written + present == 0:
        raise LoadDeclined("no documents")  # the general importer says why ("holds no JSON objects")
    return JsonlLoad(rows=written, present=present, empty_texts=int(after[1] - before[1]))


def has_documents(cur: Cursor) -> bool:
    return bool(one_row(cur.execute("SELECT EXISTS (SELECT 1 FROM documents)").fetchone())[0])
