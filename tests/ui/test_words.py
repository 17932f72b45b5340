"""Service errors in the page's words, rendered from their data (fields, hint, command) with no
rewriting: fields become the page's labels, commands become pages, server paths of uploads become
the uploaded name; text that is not an error's data is shown as it is."""

from __future__ import annotations

import pytest

from workbench.errors import InputError, StoreError
from workbench.ui.words import Field, cell, excerpt, page_message, params_text

CASES = [
    (StoreError("chunking 'x' already exists in /p/a.duckdb; choose another {field} (chunkings are immutable)",
                field="name"),
     {"--name": Field("Name")}, "chunking 'x' already exists in this project; choose another “Name” (chunkings are immutable)",
     "chunking 'x' already exists in /p/a.duckdb; choose another --name (chunkings are immutable)"),
    (InputError("2 rows with unknown doc ids; import the documents first, or {set_field:skip_unknown} to drop these rows",
                path="q.txt"),
     None, "q.txt: 2 rows with unknown doc ids; import the documents first, or tick “Skip rows with unknown ids” to drop these rows",
     "q.txt: 2 rows with unknown doc ids; import the documents first, or pass --skip-unknown to drop these rows"),
    (InputError("cannot tell the queries format from the file; {set_field:format} (one of tsv, jsonl)", path="/tmp/up123/t.tsv"),
     None, "t.tsv: cannot tell the queries format from the file; choose “Format” (one of tsv, jsonl)",
     "/tmp/up123/t.tsv: cannot tell the queries format from the file; pass --format (one of tsv, jsonl)"),
    (InputError("/p/a.duckdb holds no documents to chunk; import a corpus first ({command:import corpus FILE})"),
     None, "this project holds no documents to chunk; import a corpus first (on the Data page)",
     "/p/a.duckdb holds no documents to chunk; import a corpus first (`workbench import corpus FILE`)"),
    (InputError("no runs given", field="runs", hint="{set_field}"), {"--runs": Field("Runs to fuse", "choice")},
     "no runs given; choose “Runs to fuse”", "no runs given; pass --runs A,B"),
    (InputError("already exists; choose another {field:out}, or {set_field:force} to replace it", path="/p/x.tsv"),
     None, "x.tsv: already exists; choose another “File name”, or tick “Replace the existing file” to replace it",
     "/p/x.tsv: already exists; choose another --out, or pass --force to replace it"),
    (StoreError("pool 'p' already exists in /p/a.duckdb; add runs to it with {command}, or choose another {field:name}",
                command="pool --name p --runs NEW --add"),
     None, "pool 'p' already exists in this project; add runs to it with on the Retrieve & Pool page, or choose another “Name”",
     "pool 'p' already exists in /p/a.duckdb; add runs to it with `workbench pool --name p --runs NEW --add`, "
     "or choose another --name"),
    (StoreError("no project database at /p/b.duckdb; create one with {command} (add {field:demo} for the demo project)",
                command="--db /p/b.duckdb init"),
     {"demo": Field("Load the demo project", "check")},
     "no project database at /p/b.duckdb; create one with on the Overview page (add “Load the demo project” for the demo project)",
     "no project database at /p/b.duckdb; create one with `workbench --db /p/b.duckdb init` (add --demo for the demo project)"),
    (InputError("chunk-level qrels need a chunking; {set_field:chunking NAME} (see {command:status})"), None,
     "chunk-level qrels need a chunking; choose “Chunking” (see on the Overview page)",
     "chunk-level qrels need a chunking; pass --chunking NAME (see `workbench status`)"),
    (InputError("the runs use different chunkings; evaluate them with {field:level doc}, or {set_field:level doc}"), None,
     "the runs use different chunkings; evaluate them with “Level” = doc, or set “Level” to doc",
     "the runs use different chunkings; evaluate them with --level doc, or pass --level doc"),
    (InputError("see {command:judge --help}"), None, "see on the command line", "see `workbench judge --help`"),
]


@pytest.mark.parametrize("error,fields,expected,cli", CASES)
def test_page_message(error, fields, expected, cli):
    from workbench.cli.common import error_text

    out = page_message(error, fields, uploaded={"/tmp/up123/t.tsv": "t.tsv", "/p/x.tsv": "x.tsv"},
                       project="/p/a.duckdb")
    assert out == expected
    assert "--" not in out and "`" not in out and "{" not in out
    assert error_text(error) == cli


def test_cases_counted():
    assert len(CASES) == 11


def test_text_that_is_not_an_error_is_shown_as_it_is():
    """No rewriting: a plain message (or an error without data) keeps its words, flags and all."""
    text = "runs ['bm25', 'dense'] have no rows; pass --runs A,B (`workbench pool`)"
    assert page_message(text) == text
    assert page_message(InputError(text)) == text
    assert page_message(InputError("x", path="/p/a.duckdb"), project="/p/a.duckdb") == "this project: x"
    # a summary asked for with its fields as data: the page renders them, the CLI says the flag
    from workbench.errors import render_text

    summary = "skipped 1 rows with unknown doc ids ({field:skip_unknown})"
    assert page_message(summary) == "skipped 1 rows with unknown doc ids (“Skip rows with unknown ids”)"
    assert render_text(summary) == "skipped 1 rows with unknown doc ids (--skip-unknown)"


def test_several_fields_are_the_errors_data():
    error = InputError("choose another {field:out}, or {set_field:force}", field="out")
    assert error.fields == ("out", "force") and error.field == "out"
    assert InputError("{field:runs} and {field:level doc}", field=("pool",)).fields == ("pool", "runs", "level")


def test_words_has_no_regular_expressions():
    """The page renders errors from their data: ui/words.py imports no ``re`` and calls no ``re.sub``."""
    import ast
    import pathlib

    import workbench.ui.words as words

    source = pathlib.Path(words.__file__).read_text()
    tree = ast.parse(source)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names} | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "re" not in imported and "regex" not in imported
    assert "re.sub" not in source and "re.compile" not in source
    # the check can fail: the same scan over a source that imports re
    fake = ast.parse("import re\nx = re.sub('a', 'b', 'c')")
    assert "re" in {alias.name for node in ast.walk(fake) if isinstance(node, ast.Import) for alias in node.names}


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


def test_status_texts_and_notes_are_rendered_by_each_front_end():
    """Not only errors: a job's stored message, a server problem and a summary name options as
    placeholders, which the Judge page words with its fields and buttons and the CLI with flags
    (:func:`workbench.cli.common.cli_text`), nothing rewritten. The services' own tests check
    that they write these texts (tests/services/judge/test_judge.py)."""
    import asyncio
    import socket
    from pathlib import Path

    from workbench.cli.common import cli_text, error_text
    from workbench.errors import ConfigError
    from workbench.llm.client import ClientConfig, JudgeClient
    from workbench.services.qrels.export import RunExportResult
    from workbench.ui.views.judge import FIELDS, command_words

    budget = "stopped: the budget of $0.10 is reached (spent $0.1000); raise {field:budget} and run again to continue"
    assert page_message(budget, FIELDS).endswith("; raise “Budget in USD (0 = no cap)” and run again to continue")
    assert cli_text(budget).endswith("; raise --budget and run again to continue")
    retry = "2 pairs failed or gave invalid output; {command:judge --pool demo --retry-failed} judges them again"
    assert page_message(retry, FIELDS, command=command_words) == \
        "2 pairs failed or gave invalid output; “Retry failed” judges them again"
    assert cli_text(retry) == "2 pairs failed or gave invalid output; `workbench judge --pool demo --retry-failed` " \
                              "judges them again"
    assert command_words("import corpus FILE") == "on the Data page"  # other commands: the page that runs them

    # the real client's words for a server that cannot be reached
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = JudgeClient(ClientConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_attempts=1,
                                      backoff_initial=0.01, timeout=5.0), "sk-test")

    async def check():
        try:
            return await client.check_server()
        finally:
            await client.aclose()

    problem = ConfigError(asyncio.run(check()))
    assert error_text(problem).endswith("; check --base-url and that the server runs")
    assert page_message(problem, FIELDS).endswith("; check “Server URL” and that the server runs")

    run = RunExportResult(path=Path("/p/run.txt"), run="bm25", level="doc", chunking=None, rows=3, queries=1,
                          replaced=True)
    assert run.summary().endswith("; replaced the file that was there (--force)")
    assert cli_text(run.summary(data=True)) == run.summary()
    assert page_message(run.summary(data=True)).endswith("; replaced the file that was there (“Replace the existing file”)")


def test_an_error_crosses_a_process_as_data_and_keeps_its_words():
    """The Judge page's job runs in its own process: the CLI writes its error as data
    (:func:`workbench.errors.error_data`) and the page rebuilds it, so it words the fields itself."""
    import json

    from workbench.cli.common import error_text
    from workbench.errors import ConfigError, StoreLockedError, error_data, error_from_data
    from workbench.services.access import PermissionDenied

    sent = ConfigError("cannot reach the judge server at http://h/v1 (refused); check {field:base_url} "
                       "and that the server runs", hint="or see {command:judge --help}")
    back = error_from_data(json.loads(json.dumps(error_data(sent))))
    assert type(back) is ConfigError and back.exit_code == 2 and back.fields == ("base_url",)
    assert error_text(back) == error_text(sent) and "--base-url" in error_text(back)
    assert page_message(back, {"--base-url": Field("Server URL")}) == page_message(sent, {"--base-url": Field("Server URL")})
    assert "“Server URL”" in page_message(back, {"--base-url": Field("Server URL")})
    assert type(error_from_data(error_data(StoreLockedError("locked")))) is StoreLockedError
    # a subclass defined elsewhere comes back as its nearest kind here; an unknown kind as the base
    assert type(error_from_data(error_data(PermissionDenied("annotators label")))).__name__ == "WorkbenchError"
    assert type(error_from_data({"kind": "Nope", "what": "x"})).__name__ == "WorkbenchError"
