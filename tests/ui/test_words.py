"""Service messages in the page's words: flags become fields, commands become pages, server
paths of uploads become the uploaded name, Python list/dict text becomes words."""

from __future__ import annotations

import pytest

from workbench.ui.words import Field, cell, excerpt, page_message, params_text

CASES = [
    ("chunking 'x' already exists in /p/a.duckdb; choose another --name (chunkings are immutable)",
     {"--name": Field("Name")}, "chunking 'x' already exists in this project; choose another “Name” (chunkings are immutable)"),
    ("q.txt: 2 rows with unknown doc ids; import the documents first, or pass --skip-unknown to drop these rows",
     None, "q.txt: 2 rows with unknown doc ids; import the documents first, or tick “Skip rows with unknown ids” to drop these rows"),
    ("/tmp/up123/t.tsv: cannot tell the queries format from the file; pass --format (one of tsv, jsonl)",
     None, "t.tsv: cannot tell the queries format from the file; choose “Format” (one of tsv, jsonl)"),
    ("/p/a.duckdb holds no documents to chunk; import a corpus first (`workbench import corpus FILE`)",
     None, "this project holds no documents to chunk; import a corpus first (on the Data page)"),
    ("no runs given; pass --runs A,B", {"--runs": Field("Runs to fuse", "choice")}, "no runs given; choose “Runs to fuse”"),
    ("runs ['bm25', 'dense'] have no rows; nothing to pool", None, "runs bm25, dense have no rows; nothing to pool"),
    ("pool 'p' has {'depth': 20, 'level': 'chunk'}", None, "pool 'p' has depth = 20, level = 'chunk'"),
    ("see `workbench judge --help`", None, "see on the command line"),
]


@pytest.mark.parametrize("message,fields,expected", CASES)
def test_page_message(message, fields, expected):
    out = page_message(message, fields, uploaded={"/tmp/up123/t.tsv": "t.tsv"}, project="/p/a.duckdb")
    assert out == expected
    assert "--" not in out and "`" not in out


def test_cases_counted():
    assert len(CASES) == 8


def test_cells_and_params():
    assert cell(None) == "" and cell(float("nan")) == "" and cell(3) == 3
    assert params_text('{"max_size": 2000, "overlap": 0}') == "max_size = 2000, overlap = 0"
    assert params_text({"a": None, "b": 1}) == "b = 1"
    assert params_text({"retriever": "bm25", "k": 5}, skip=("retriever",)) == "k = 5"


def test_excerpt_never_cuts_a_word():
    text = "alpha beta gamma delta epsilon"
    assert excerpt(text, 100) == text
    cut = excerpt(text, 14)
    assert cut == "alpha beta …"
    assert all(word in text.split() for word in cut.rstrip(" …").split())


def test_an_error_that_names_its_field_is_rendered_by_each_front_end_without_rewriting():
    """Errors as data: the service says which field; the CLI names its flag, the page its label."""
    from workbench.cli.common import error_text
    from workbench.core.formats.names import check_name
    from workbench.errors import InputError, StoreError
    from workbench.services.retrieval.runs import read_runs_checked

    with pytest.raises(InputError) as caught:
        read_runs_checked(None, [])
    exc = caught.value
    assert (exc.what, exc.field, exc.hint) == ("no runs given", "runs", "{set_field}")
    assert error_text(exc) == "no runs given; pass --runs A,B"
    assert page_message(exc, {"--runs": Field("Runs to fuse", "choice")}) == "no runs given; choose “Runs to fuse”"
    with pytest.raises(InputError) as caught:
        check_name("a,b", "run", "choose another {field}", field="name")
    assert error_text(caught.value).endswith("; choose another --name")
    assert page_message(caught.value, {"name": Field("Run name")}).endswith("; choose another “Run name”")
    # a page's own words are never rewritten: "--" in a value stays as it is
    odd = StoreError("pool 'a--b' already exists in /p/a.duckdb", field="name", hint="choose another {field}")
    assert page_message(odd, project="/p/a.duckdb") == "pool 'a--b' already exists in this project; choose another “Name”"
    assert str(odd) == "pool 'a--b' already exists in /p/a.duckdb; choose another --name"
