"""The streamed JSONL corpus import stores exactly what the general importer stores, and hands
every file it cannot decide to the general importer (which then reports the exact file:line).

Each case is imported twice into fresh projects: once by ``import_file`` (the streamed path when
it accepts the file) and once by the general importer called directly, the oracle. The stored
documents (metadata compared as JSON values), the counts and the error lines must be equal.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.support.templates import empty_project
from workbench.errors import InputError
from workbench.services.ingest import import_file
from workbench.services.ingest.corpus import import_corpus
from workbench.services.ingest.corpus_stream import stream_jsonl_corpus
from workbench.services.ingest.result import ImportResult
from workbench.services.ingest.source import read_source, resolve_format
from workbench.services.progress import no_progress
from workbench.services.project.lifecycle import open_project
from workbench.store.corpus import read_documents
from workbench.store.meta import table_counts

FIELDS = {"id_field": None, "text_field": None, "title_field": None}

# Files the streamed path accepts, as (name, bytes).
ACCEPTED = {
    "beir": b'{"_id": "d1", "title": "Alpha", "text": "cats"}\n{"_id": "d2", "title": "Beta", "text": "dogs"}\n',
    "integer ids": b'{"_id": 7, "text": "x"}\n{"_id": -12, "text": "y"}\n{"_id": 0, "text": "z"}\n',
    "other field names": b'{"docid": "a", "doc": "x"}\n{"docid": "b", "doc": "y"}\n',
    "bom crlf blank lines": b'\xef\xbb\xbf{"_id": "a", "text": "x"}\r\n\r\n   \n{"_id": "b", "text": "y"}\r\n',
    "no final newline": b'{"_id": "a", "text": "x"}',
    "extras to metadata": (b'{"_id": "a", "text": "x", "lang": "en", "meta": {"b": [1, 2.5, "c"], "n": null}}\n'
                           b'{"_id": "b", "text": "y"}\n'),
    "title null and missing": b'{"_id": "a", "title": null, "text": "x"}\n{"_id": "b", "text": "y"}\n',
    "title only later is metadata": b'{"_id": "a", "text": "x"}\n{"_id": "b", "text": "y", "title": "T"}\n',
    "escapes kept exactly": ('{"_id": "a", "text": "caf\\u00e9 \\ud83d\\ude00 tab\\t nl\\n \\"q\\" \\\\ \\/ '
                             'nul\\u0000 \\u2028 raw é"}\n').encode(),
    "commas inside strings": b'{"_id": "a", "text": "a, } and ,] stay"}\n',
    "spaces before the brace": b'{"_id": "a", "text": "x"  }\n{"_id": 5, "title": null, "text": "y"}\n',
    # the end of the record is checked whole, not in a window of its last characters
    "many spaces before the brace": b'{"_id": "a", "text": "x"' + b" " * 40 + b"}\n",
    "empty text": b'{"_id": "a", "text": "x"}\n\n{"_id": "b", "text": ""}\n{"_id": "c", "text": ""}\n',
}

# Files it hands to the general importer (valid or not: the general importer decides).
DECLINED = {
    "trailing comma": b'{"_id": "a", "text": "x",}\n',
    "repeated key": b'{"_id": "a", "text": "x", "text": "y"}\n',
    "repeated other key": b'{"_id": "a", "text": "x", "k": 1, "k": 2}\n',
    "repeated key and another": b'{"_id": "a", "text": "x", "text": "y", "k": 1}\n',
    "lone surrogate": b'{"_id": "a", "text": "x\\ud800y"}\n',
    "broken line": b'{"_id": "a", "text": "x"}\n{"_id": "b", "text": \n',
    "id twice": b'{"_id": "a", "text": "x"}\n{"_id": "b", "text": "y"}\n{"_id": "a", "text": "z"}\n',
    "id with a space": b'{"_id": "a b", "text": "x"}\n',
    "empty id": b'{"_id": " ", "text": "x"}\n',
    "unicode id": '{"_id": "caf\u00e9", "text": "x"}\n'.encode(),
    "float id": b'{"_id": 1.5, "text": "x"}\n',
    "huge integer id": b'{"_id": 123456789012345678901234567890, "text": "x"}\n',
    "numeric text": b'{"_id": "a", "text": 5}\n',
    "missing text": b'{"_id": "a", "text": "x"}\n{"_id": "b"}\n',
    "array line": b'{"_id": "a", "text": "x"}\n[1, 2]\n',
    "nan text": b'{"_id": "a", "text": NaN}\n',
    "not utf-8": b'{"_id": "a", "text": "x\xff"}\n',
    "raw tab in string": b'{"_id": "a", "text": "x\ty"}\n',
    "title a number": b'{"_id": "a", "title": "t", "text": "x"}\n{"_id": "b", "title": 3, "text": "y"}\n',
    "only blank lines": b"\n  \n",
    "trailing comma and spaces": b'{"_id": "a", "text": "x" ,  }\n',
    "trailing comma in other fields": b'{"_id": "a", "text": "x", "tags": [1, 2,]}\n',
    # valid, but with other fields the trailing-comma guard cannot tell a comma before } or ]
    # inside a string from one outside
    "commas inside strings and other fields": b'{"_id": "a", "text": "a, } and ,] stay", "k": 1}\n',
}


def _documents(db) -> pd.DataFrame:
    docs = read_documents(db).set_index("doc_id")
    docs["metadata"] = [None if pd.isna(m) else json.loads(m) for m in docs["metadata"]]
    return docs


def _general(db, path) -> ImportResult:
    """The general importer, called directly (what import_file did before streaming)."""
    source = read_source(path, str(path))
    result = ImportResult(kind="corpus", path=source.label, format=resolve_format("corpus", None, source))
    import_corpus(db, source, result, progress=no_progress, fields=FIELDS)
    return result


def _both(tmp_path, name: str, data: bytes):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(data)
    outcome = {}
    for how in ("import_file", "general"):
        with open_project(empty_project(tmp_path / f"{how}.duckdb")) as db:
            try:
                result = import_file(db, "corpus", path) if how == "import_file" else _general(db, path)
                outcome[how] = ("ok", result.rows, result.present, result.empty_texts, result.empty_example,
                                _documents(db))
            except InputError as exc:
                outcome[how] = ("error", str(exc), table_counts(db).get("documents"), table_counts(db).get("imports"))
    return path, outcome


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_streamed_import_stores_what_the_general_importer_stores(tmp_path, name):
    data = ACCEPTED[name]
    path, outcome = _both(tmp_path, name, data)
    streamed, general = outcome["import_file"], outcome["general"]
    assert streamed[0] == general[0] == "ok"
    assert streamed[1:5] == general[1:5]
    pd.testing.assert_frame_equal(streamed[5], general[5])
    # and the streamed path is the one that took it
    with open_project(empty_project(tmp_path / "direct.duckdb")) as db:
        direct = stream_jsonl_corpus(db, path, str(path), format=None, name=None, fields=FIELDS)
        assert direct is not None and direct.rows == general[1]


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_undecided_files_go_to_the_general_importer(tmp_path, name):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(DECLINED[name])
    with open_project(empty_project(tmp_path / "direct.duckdb")) as db:
        assert stream_jsonl_corpus(db, path, str(path), format=None, name=None, fields=FIELDS) is None
        assert table_counts(db)["documents"] == 0 and table_counts(db)["imports"] == 0  # nothing stored
    _, outcome = _both(tmp_path, name, DECLINED[name])
    assert outcome["import_file"][0] == outcome["general"][0]
    if outcome["general"][0] == "error":
        assert outcome["import_file"] == outcome["general"]
        assert outcome["general"][2:] == (0, 0)
    else:
        pd.testing.assert_frame_equal(outcome["import_file"][5], outcome["general"][5])


def test_one_field_named_for_two_roles_goes_to_the_general_importer(tmp_path):
    # --title-field _id: the id is the title too, and "lang" is metadata. The streamed path's key
    # counts assume three different fields, so it declines and the general importer decides.
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b'{"_id": "a", "text": "x", "lang": "en"}\n')
    fields = dict(FIELDS, title_field="_id")
    with open_project(empty_project(tmp_path / "direct.duckdb")) as db:
        assert stream_jsonl_corpus(db, path, str(path), format=None, name=None, fields=fields) is None
    with open_project(empty_project(tmp_path / "p.duckdb")) as db:
        assert import_file(db, "corpus", path, title_field="_id").rows == 1
        docs = _documents(db)
    assert docs.loc["a", "title"] == "a" and docs.loc["a", "metadata"] == {"lang": "en"}


def test_a_second_file_counts_equal_rows_and_refuses_changed_ones(tmp_path):
    first = tmp_path / "a.jsonl"
    first.write_bytes(b'{"_id": "a", "text": "x"}\n{"_id": "b", "text": "y"}\n')
    more = tmp_path / "b.jsonl"
    more.write_bytes(b'{"_id": "b", "text": "y"}\n{"_id": "c", "text": "z"}\n')
    changed = tmp_path / "c.jsonl"
    changed.write_bytes(b'{"_id": "c", "text": "z"}\n{"_id": "a", "text": "CHANGED"}\n')
    with open_project(empty_project(tmp_path / "p.duckdb")) as db:
        assert stream_jsonl_corpus(db, first, str(first), format=None, name=None, fields=FIELDS).rows == 2
        result = stream_jsonl_corpus(db, more, str(more), format=None, name=None, fields=FIELDS)
        assert (result.rows, result.present) == (1, 1)
        assert stream_jsonl_corpus(db, changed, str(changed), format=None, name=None, fields=FIELDS) is None
        with pytest.raises(InputError, match=r"c\.jsonl:2.*conflicts with the stored documents"):
            import_file(db, "corpus", changed)
        assert sorted(read_documents(db)["doc_id"]) == ["a", "b", "c"]
        assert table_counts(db)["imports"] == 2
        again = import_file(db, "corpus", first)
        assert again.already_imported is not None and again.rows == 0


def test_with_a_chunking_the_general_importer_chunks_the_new_documents(tmp_path):
    corpus = tmp_path / "a.jsonl"
    corpus.write_bytes(b'{"_id": "a", "text": "one two three"}\n')
    later = tmp_path / "b.jsonl"
    later.write_bytes(b'{"_id": "b", "text": "four five"}\n')
    from workbench.services.chunking import create_chunking

    with open_project(empty_project(tmp_path / "p.duckdb")) as db:
        import_file(db, "corpus", corpus)
        create_chunking(db, "whole", "fixed", size=1000)
        assert stream_jsonl_corpus(db, later, str(later), format=None, name=None, fields=FIELDS) is None
        result = import_file(db, "corpus", later)
        assert result.rows == 1 and result.chunked == {"whole": 1}
