"""The import service on small files written here: every format, every check, all-or-nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from workbench.core.documents.chunking import ChunkingSpec, chunk_documents
from workbench.errors import InputError
from workbench.services.ingest import import_file
from workbench.services.project.lifecycle import open_project
from workbench.store import imports as imports_table
from workbench.store.chunks import write_chunking
from workbench.store.corpus import read_documents, read_queries
from workbench.store.judgments import read_judgments
from workbench.store.meta import table_counts
from workbench.store.runs import read_run_rows

DOCS = [
    {"_id": "d1", "title": "Alpha", "text": "alpha text about cats", "lang": "en"},
    {"_id": "d2", "title": "Beta", "text": "beta text about dogs and more dogs"},
    {"_id": "d3", "title": "", "text": "gamma"},
]


@pytest.fixture
def db(db_path):
    database = open_project(db_path, create=True)
    yield database
    database.close()


def write(tmp_path: Path, name: str, content: str | bytes | list) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, list):
        content = "".join(json.dumps(row) + "\n" for row in content)
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def snapshot(db) -> dict:
    return table_counts(db)


@pytest.fixture
def project(db, tmp_path):
    """A project with DOCS and two queries."""
    import_file(db, "corpus", write(tmp_path, "corpus.jsonl", DOCS))
    import_file(db, "queries", write(tmp_path, "queries.tsv", "q1\tcats\nq2\tdogs\n"))
    return db


# --- corpus formats --------------------------------------------------------------------------
def test_beir_corpus_keeps_title_text_and_other_fields_as_metadata(db, tmp_path):
    result = import_file(db, "corpus", write(tmp_path, "corpus.jsonl", DOCS))
    assert (result.rows, result.format) == (3, "jsonl")
    docs = read_documents(db).set_index("doc_id")
    assert docs.loc["d1", "title"] == "Alpha" and docs.loc["d2", "text"] == DOCS[1]["text"]
    assert json.loads(docs.loc["d1", "metadata"]) == {"lang": "en"}
    assert pd.isna(docs.loc["d2", "metadata"])


def test_generic_jsonl_fields_are_recognised_and_can_be_named(db, tmp_path):
    path = write(tmp_path, "dl.jsonl", [{"docid": "7", "doc": "seven"}, {"docid": "8", "doc": "eight"}])
    assert import_file(db, "corpus", path).rows == 2
    odd = write(tmp_path, "odd.jsonl", [{"pid": 9, "passage": "nine", "heading": "N"}])
    with pytest.raises(InputError, match=r"odd\.jsonl:1: cannot tell which field holds the document id.*--id-field"):
        import_file(db, "corpus", odd)
    result = import_file(db, "corpus", odd, id_field="pid", text_field="passage", title_field="heading")
    assert result.rows == 1
    docs = read_documents(db).set_index("doc_id")
    assert docs.loc["9", "title"] == "N" and docs.loc["7", "text"] == "seven"


def test_folder_corpus_ids_are_relative_paths_and_titles_headings(db, tmp_path):
    folder = tmp_path / "handbook"
    write(folder, "intro.md", "Some preface.\n\n# Getting started\n\nBody.\n")
    write(folder, "guides/setup.txt", "plain text, no heading")
    write(folder, "guides/image.png", b"\x89PNG not text")
    write(folder, ".hidden/notes.md", "# secret")
    result = import_file(db, "corpus", folder)
    assert (result.format, result.rows) == ("folder", 2)
    docs = read_documents(db).set_index("doc_id")
    assert sorted(docs.index) == ["guides/setup", "intro"]
    assert docs.loc["intro", "title"] == "Getting started"
    assert docs.loc["guides/setup", "title"] == "setup"
    assert docs.loc["intro", "text"] == "Some preface.\n\n# Getting started\n\nBody.\n"


def test_folder_with_two_files_of_one_id_is_refused(db, tmp_path):
    folder = tmp_path / "dup"
    write(folder, "a.txt", "one")
    write(folder, "a.md", "two")
    with pytest.raises(InputError, match="1 duplicate doc ids.*a.md.*a.txt|1 duplicate doc ids.*a.txt.*a.md"):
        import_file(db, "corpus", folder)


SMART_DOCS = """.I 1
.T
experimental investigation of the
aerodynamics of a wing .
.A
brenckman,m.
.B
j. ae. scs. 25, 1958, 324.
.W
experimental investigation of the
aerodynamics of a wing .
  an experimental study .
.I 2
.T
empty abstract
.A
.B
.W
.I 3
.T
third
.W
third text
"""


def test_smart_corpus(db, tmp_path):
    result = import_file(db, "corpus", write(tmp_path, "cran.all.1400", SMART_DOCS))
    assert (result.format, result.rows) == ("smart", 3)
    docs = read_documents(db).set_index("doc_id")
    assert docs.loc["1", "title"] == "experimental investigation of the\naerodynamics of a wing ."
    assert docs.loc["1", "text"] == ("experimental investigation of the\naerodynamics of a wing .\n"
                                     "  an experimental study .")
    assert docs.loc["2", "text"] == ""
    assert json.loads(docs.loc["1", "metadata"]) == {"author": "brenckman,m.", "bib": "j. ae. scs. 25, 1958, 324."}


def test_smart_text_before_first_record_names_the_line(db, tmp_path):
    with pytest.raises(InputError, match=r"bad\.all:1: text before the first '\.I <id>'"):
        import_file(db, "corpus", write(tmp_path, "bad.all", "hello\n.I 1\n.W\nx\n"), format="smart")


# --- query formats -----------------------------------------------------------------------------
def test_query_formats(db, tmp_path):
    jsonl = write(tmp_path, "q.jsonl", [
        {"query_id": "a", "text": "first", "description": "long form", "tags": {"topic": "x"}},
        {"query_id": 2, "text": "second"},
    ])
    assert import_file(db, "queries", jsonl).rows == 2
    beir = write(tmp_path, "queries.jsonl", [{"_id": "b1", "text": "beir q", "metadata": {"k": 1}}])
    assert import_file(db, "queries", beir, format="beir").rows == 1
    tsv = write(tmp_path, "topics.tsv", "query_id\ttext\nt1\twhat is x\nt2\twhy y ?\n")
    assert import_file(db, "queries", tsv).format == "tsv"
    smart = write(tmp_path, "other.qry", ".I 010\n.W\nsmart query\n")
    assert import_file(db, "queries", smart).format == "smart"
    queries = read_queries(db).set_index("query_id")
    assert sorted(queries.index) == ["010", "2", "a", "b1", "t1", "t2"]
    assert queries.loc["a", "description"] == "long form"
    assert json.loads(queries.loc["a", "tags"]) == {"topic": "x"}
    assert json.loads(queries.loc["b1", "tags"]) == {"k": 1}
    assert queries.loc["t2", "text"] == "why y ?"


def test_cranfield_queries_are_numbered_by_position(db, tmp_path):
    path = write(tmp_path, "cran.qry", ".I 001\n.W\nfirst\nquery .\n.I 002\n.W\nsecond .\n.I 004\n.W\nthird .\n")
    result = import_file(db, "queries", path)
    assert result.format == "cranfield"
    queries = read_queries(db).set_index("query_id")
    assert queries.loc["3", "text"] == "third ."  # written as .I 004
    assert json.loads(queries.loc["3", "tags"]) == {"smart_id": "004"}
    assert queries.loc["1", "text"] == "first\nquery ."


def test_tsv_with_wrong_column_count_names_the_line(db, tmp_path):
    with pytest.raises(InputError, match=r"q\.tsv:2: expected 2 tab-separated columns.*got 3"):
        import_file(db, "queries", write(tmp_path, "q.tsv", "q1\tok\nq2\ttoo\tmany\n"))
    with pytest.raises(InputError, match=r"s\.tsv:1: .*got 1 \(no tab"):
        import_file(db, "queries", write(tmp_path, "s.tsv", "q1 spaces only\n"), format="tsv")


# --- qrels formats -----------------------------------------------------------------------------
def _labels(db) -> pd.DataFrame:
    return read_judgments(db).sort_values(["query_id", "doc_id", "start"]).reset_index(drop=True)


def test_trec_qrels_become_whole_document_spans(project, tmp_path):
    result = import_file(project, "qrels", write(tmp_path, "nist.txt", "q1 0 d1 2\nq1 0 d2 0\nq2 Q0 d2 3\n"))
    assert (result.rows, result.format, result.name) == (3, "trec", "nist")
    labels = _labels(project)
    assert labels[["query_id", "doc_id", "start", "end", "grade"]].values.tolist() == [
        ["q1", "d1", 0, len(DOCS[0]["text"]), 2],
        ["q1", "d2", 0, len(DOCS[1]["text"]), 0],
        ["q2", "d2", 0, len(DOCS[1]["text"]), 3],
    ]
    assert set(labels["source"]) == {"imported"} and set(labels["status"]) == {"ok"}
    assert set(labels["assessor"]) == {"nist"}


def test_beir_qrels_with_header_and_named_assessor(project, tmp_path):
    path = write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t2\n")
    result = import_file(project, "qrels", path, assessor="beir-team")
    assert (result.rows, result.format) == (2, "beir")
    assert set(_labels(project)["assessor"]) == {"beir-team"}


def test_jsonl_qrels_rows_register_their_queries(project, tmp_path):
    rows = [{"query_id": "q9", "query": "new question", "relevant": {"d1": 3, "d3": 0}, "tags": {"set": "dev"}},
            {"query_id": "q1", "query": "cats", "relevant": {"d2": 1}}]
    result = import_file(project, "qrels", write(tmp_path, "rows.jsonl", rows))
    assert (result.format, result.rows, result.queries_added) == ("jsonl", 3, 1)
    queries = read_queries(project).set_index("query_id")
    assert queries.loc["q9", "text"] == "new question" and json.loads(queries.loc["q9", "tags"]) == {"set": "dev"}


def test_span_qrels_keep_offsets_and_row_assessors(project, tmp_path):
    rows = [{"query_id": "q1", "doc_id": "d1", "start": 0, "end": 5, "grade": 3, "assessor": "ana"},
            {"query_id": "q1", "doc_id": "d1", "start": 6, "end": 10, "grade": 1}]
    result = import_file(project, "qrels", write(tmp_path, "spans.jsonl", rows), assessor="team")
    assert (result.format, result.rows) == ("spans", 2)
    labels = _labels(project)
    assert labels[["start", "end", "grade", "assessor"]].values.tolist() == [[0, 5, 3, "ana"], [6, 10, 1, "team"]]


def test_cranfield_qrels_map_codes_and_exclude_minus_one(db, tmp_path):
    import_file(db, "corpus", write(tmp_path, "cran.all", SMART_DOCS), format="smart")
    import_file(db, "queries", write(tmp_path, "cran.qry", ".I 001\n.W\na .\n.I 005\n.W\nb .\n"))
    qrels = "1 1 1\n1 2 2 \n1 3 -1\n2 1 3\n2 2 4\n2 3 5\n"
    result = import_file(db, "qrels", write(tmp_path, "cranqrel", qrels))
    assert (result.format, result.rows, result.excluded) == ("cranfield", 5, 1)
    grades = {(q, d): g for q, d, g in _labels(db)[["query_id", "doc_id", "grade"]].itertuples(index=False)}
    # lower code = more relevant: 1->3, 2->2, 3->1, 4->1, 5->0; the -1 row is not stored.
    assert grades == {("1", "1"): 3, ("1", "2"): 2, ("2", "1"): 1, ("2", "2"): 1, ("2", "3"): 0}
    assert "excluded 1 rows with Cranfield code -1" in result.summary()


# --- runs ----------------------------------------------------------------------------------------
RUN = "q1 Q0 d1 1 9.5 sys\nq1 Q0 d2 2 7.0 sys\nq1 Q0 d3 3 7.0 sys\nq2 Q0 d2 1 3.0 sys\n"


def test_document_run_ranks_by_score(project, tmp_path):
    result = import_file(project, "run", write(tmp_path, "bm25.run", RUN))
    assert (result.name, result.level, result.rows) == ("bm25", "doc", 4)
    rows = read_run_rows(project, "bm25")
    # ties (7.0) ordered by doc id descending, as trec_eval does
    assert rows[["query_id", "doc_id", "rank"]].values.tolist() == [
        ["q1", "d1", 1], ["q1", "d3", 2], ["q1", "d2", 3], ["q2", "d2", 1]]
    assert rows["chunk_id"].isna().all()
    runs = project.query_df("SELECT level, chunking FROM runs WHERE name = 'bm25'")
    assert runs.values.tolist() == [["doc", None]]


def _chunk(db, name="fixed8"):
    spec = ChunkingSpec(name, "fixed", {"size": 8})
    chunks = chunk_documents(spec, read_documents(db)[["doc_id", "text"]])
    with db.transaction() as tx:
        write_chunking(tx, name, spec.strategy, dict(spec.params), chunks)
    return chunks


def test_chunk_run_is_detected_with_its_chunking(project, tmp_path):
    chunks = _chunk(project)
    ids = chunks["chunk_id"].tolist()
    lines = f"q1 Q0 {ids[0]} 1 2.0 x\nq1 Q0 {ids[3]} 2 1.0 x\n"
    result = import_file(project, "run", write(tmp_path, "dense.run", lines), name="dense")
    assert (result.level, result.chunking) == ("chunk", "fixed8")
    rows = read_run_rows(project, "dense")
    owner = dict(zip(chunks["chunk_id"], chunks["doc_id"]))
    assert rows["chunk_id"].tolist() == [ids[0], ids[3]]
    assert rows["doc_id"].tolist() == [owner[ids[0]], owner[ids[3]]]


def test_run_mixing_documents_and_chunks_is_refused(project, tmp_path):
    chunk_id = _chunk(project)["chunk_id"].iloc[0]
    lines = f"q1 Q0 d1 1 2.0 x\nq1 Q0 {chunk_id} 2 1.0 x\n"
    with pytest.raises(InputError, match=r"mix\.run:2: mixes document ids \(1 rows.*line 1\) and chunk ids"):
        import_file(project, "run", write(tmp_path, "mix.run", lines))


def test_run_with_a_taken_name_and_other_rows_is_refused(project, tmp_path):
    import_file(project, "run", write(tmp_path, "a/bm25.run", RUN))
    changed = RUN.replace("9.5", "9.9")
    with pytest.raises(InputError, match=r"run 'bm25' already exists.*1 of its .* differ.*9\.5 stored vs 9\.9.*--name"):
        import_file(project, "run", write(tmp_path, "b/bm25.run", changed))
    assert import_file(project, "run", write(tmp_path, "b/bm25.run", changed), name="bm25-v2").rows == 4


def test_bad_run_score_names_the_line(project, tmp_path):
    with pytest.raises(InputError, match=r"r\.run:2: score \(5th field\) must be a number, got 'high'"):
        import_file(project, "run", write(tmp_path, "r.run", "q1 Q0 d1 1 2.0 x\nq1 Q0 d2 2 high x\n"))


# --- checks with file:line ------------------------------------------------------------------------
def test_non_utf8_bytes_report_line_and_byte_offset(db, tmp_path):
    data = b'{"_id": "a", "text": "ok"}\n{"_id": "b", "text": "caf\xe9"}\n'
    in_line = data.split(b"\n")[1].index(b"\xe9")
    in_file = data.index(b"\xe9")
    with pytest.raises(InputError, match=rf"latin\.jsonl:2: not UTF-8: byte 0xe9 at byte offset {in_line} of the "
                                         rf"line \(byte {in_file} of the file\)"):
        import_file(db, "corpus", write(tmp_path, "latin.jsonl", data))
    with pytest.raises(InputError, match=r"latin\.txt:1: not UTF-8"):
        import_file(db, "qrels", write(tmp_path, "latin.txt", b"q\xff 0 d1 1\n"), format="trec")


def test_broken_json_and_missing_fields_name_the_line(db, tmp_path):
    with pytest.raises(InputError, match=r"c\.jsonl:2: not valid JSON"):
        import_file(db, "corpus", write(tmp_path, "c.jsonl", '{"_id": "a", "text": "x"}\n{"_id": "b", \n'))
    with pytest.raises(InputError, match=r"m\.jsonl:2: lacks the field 'text'"):
        import_file(db, "corpus", write(tmp_path, "m.jsonl", [{"_id": "a", "text": "x"}, {"_id": "b"}]))
    with pytest.raises(InputError, match=r"n\.jsonl:1: field '_id' must be a string"):
        import_file(db, "corpus", write(tmp_path, "n.jsonl", [{"_id": ["x"], "text": "x"}]))


def test_qrels_column_count_and_numbers_are_checked(project, tmp_path):
    with pytest.raises(InputError, match=r"cols\.txt:2: expected 4 fields"):
        import_file(project, "qrels", write(tmp_path, "cols.txt", "q1 0 d1 1\nq1 0 d2\n"), format="trec")
    with pytest.raises(InputError, match=r"num\.txt:2: grade \(4th field\) must be an integer, got 'x'"):
        import_file(project, "qrels", write(tmp_path, "num.txt", "q1 0 d1 1\nq1 0 d2 x\n"), format="trec")
    with pytest.raises(InputError, match=r"range\.txt:2: grade 7 is outside 0-3 \(1 rows"):
        import_file(project, "qrels", write(tmp_path, "range.txt", "q1 0 d1 1\nq1 0 d2 7\n"), format="trec")
    with pytest.raises(InputError, match=r"span\.jsonl:1: field 'start' must be an integer"):
        import_file(project, "qrels", write(tmp_path, "span.jsonl", [
            {"query_id": "q1", "doc_id": "d1", "start": "0", "end": 3, "grade": 1}]))


def test_unknown_doc_ids_are_an_error_with_count_and_examples(project, tmp_path):
    qrels = "q1 0 d1 1\nq1 0 zz9 1\nq2 0 zz9 0\nq2 0 zz7 2\n"
    path = write(tmp_path, "qrels.txt", qrels)
    before = snapshot(project)
    with pytest.raises(InputError) as info:
        import_file(project, "qrels", path)
    message = str(info.value)
    assert message.startswith(f"{path}:2: 3 rows name 2 doc ids that are not in the project")
    assert "'zz9' (line 2), 'zz7' (line 4)" in message and "--skip-unknown" in message
    assert snapshot(project) == before
    result = import_file(project, "qrels", path, skip_unknown=True)
    assert result.rows == 1 and result.skipped == {"unknown doc ids": 3}
    assert "skipped 3 rows with unknown doc ids" in result.summary()


def test_unknown_query_ids_are_an_error(project, tmp_path):
    with pytest.raises(InputError, match=r"q\.txt:2: 1 rows name 1 query ids .*'q404'.*import the queries first"):
        import_file(project, "qrels", write(tmp_path, "q.txt", "q1 0 d1 1\nq404 0 d1 1\n"))
    run = write(tmp_path, "r.run", "q404 Q0 d1 1 1.0 x\nq1 Q0 nope 1 1.0 x\nq1 Q0 d1 2 0.5 x\n")
    result = import_file(project, "run", run, skip_unknown=True)
    assert result.rows == 1 and result.skipped == {"unknown doc ids": 1, "unknown query ids": 1}


def test_span_outside_the_document_is_refused(project, tmp_path):
    n = len(DOCS[0]["text"])
    rows = [{"query_id": "q1", "doc_id": "d1", "start": 0, "end": n, "grade": 1},
            {"query_id": "q1", "doc_id": "d1", "start": 3, "end": n + 1, "grade": 1}]
    with pytest.raises(InputError, match=rf"s\.jsonl:2: 1 spans end after the end of their document .*'d1' span "
                                         rf"\[3, {n + 1}\) but the text has {n} characters"):
        import_file(project, "qrels", write(tmp_path, "s.jsonl", rows))
    with pytest.raises(InputError, match=r"t\.jsonl:1: span \[5, 2\) is not a span"):
        import_file(project, "qrels", write(tmp_path, "t.jsonl", [
            {"query_id": "q1", "doc_id": "d1", "start": 5, "end": 2, "grade": 1}]))


def test_duplicates_within_a_file_are_refused(db, tmp_path):
    with pytest.raises(InputError, match=r"docs\.jsonl:3: 1 duplicate doc ids \(first: a at lines 1, 3\)"):
        import_file(db, "corpus", write(tmp_path, "docs.jsonl", [
            {"_id": "a", "text": "x"}, {"_id": "b", "text": "y"}, {"_id": "a", "text": "x"}]))
    import_file(db, "corpus", write(tmp_path, "ok.jsonl", DOCS))
    import_file(db, "queries", write(tmp_path, "q.tsv", "q1\tx\n"))
    with pytest.raises(InputError, match=r"dq\.txt:3: 1 duplicate judgments.*q1/d1 at lines 1, 3"):
        import_file(db, "qrels", write(tmp_path, "dq.txt", "q1 0 d1 1\nq1 0 d2 1\nq1 0 d1 2\n"))
    with pytest.raises(InputError, match=r"dr\.run:2: 1 duplicate results"):
        import_file(db, "run", write(tmp_path, "dr.run", "q1 Q0 d1 1 2 x\nq1 Q0 d1 2 1 x\n"))


# --- ledger, conflicts, transactions ----------------------------------------------------------------
def test_same_file_twice_is_a_no_op(project, tmp_path):
    path = write(tmp_path, "qrels.txt", "q1 0 d1 1\nq2 0 d2 2\n")
    first = import_file(project, "qrels", path)
    before = snapshot(project)
    again = import_file(project, "qrels", path)
    assert first.rows == 2 and again.rows == 0
    assert again.already_imported["rows"] == 2
    assert "already imported" in again.summary() and "nothing to do" in again.summary()
    assert snapshot(project) == before
    assert project.query_value("SELECT count(*) FROM imports WHERE kind = 'qrels'") == 1


def test_same_rows_in_other_bytes_are_counted_as_present(project, tmp_path):
    again = import_file(project, "corpus", write(tmp_path, "copy.jsonl", list(reversed(DOCS))))
    assert (again.rows, again.present) == (0, 3)
    assert "3 rows were already stored" in again.summary()


def test_conflicting_corpus_version_says_what_differs_and_stores_nothing(project, tmp_path):
    changed = [dict(DOCS[0], text="alpha text about CATS"), {"_id": "d4", "text": "new"},
               dict(DOCS[2], title="Gamma")]
    before = snapshot(project)
    with pytest.raises(InputError) as info:
        import_file(project, "corpus", write(tmp_path, "v2.jsonl", changed))
    message = str(info.value)
    assert "v2.jsonl:1: conflicts with the stored documents: 2 have the same id but different content" in message
    assert "'d1' (line 1): text 'alpha text about cats' stored vs 'alpha text about CATS' in the file" in message
    assert "'d3' (line 3): title '' stored vs 'Gamma'" in message
    assert "nothing was imported" in message
    assert snapshot(project) == before


def test_conflicting_queries_and_qrels_versions(project, tmp_path):
    with pytest.raises(InputError, match=r"q\.tsv:1: conflicts with the stored queries: 1 .*'q2'.*'dogs' stored vs 'wolves'"):
        import_file(project, "queries", write(tmp_path, "q.tsv", "q2\twolves\nq3\tnew\n"))
    import_file(project, "qrels", write(tmp_path, "v1/nist.txt", "q1 0 d1 1\nq1 0 d2 0\n"))
    with pytest.raises(InputError, match=r"nist\.txt:2: conflicts with the stored judgments of assessor 'nist': 1 .*"
                                         r"'q1/d2'.*grade 0 stored vs 2 in the file.*--assessor"):
        import_file(project, "qrels", write(tmp_path, "v2/nist.txt", "q1 0 d1 1\nq1 0 d2 2\n"))
    assert read_queries(project)["query_id"].tolist() == ["q1", "q2"]
    assert len(read_judgments(project)) == 2


def test_a_failing_import_leaves_every_table_unchanged(project, tmp_path, monkeypatch):
    # JSONL rows would register query q9 before the unknown doc is found: that must roll back too.
    rows = [{"query_id": "q9", "query": "new", "relevant": {"d1": 1}},
            {"query_id": "q9", "query": "new", "relevant": {"missing-doc": 1}}]
    before = snapshot(project)
    with pytest.raises(InputError, match="missing-doc"):
        import_file(project, "qrels", write(tmp_path, "rows.jsonl", rows))
    assert snapshot(project) == before

    # A failure after the rows were written (here: the ledger insert) rolls the rows back.
    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(imports_table, "record_import", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        import_file(project, "run", write(tmp_path, "bm25.run", RUN))
    assert snapshot(project) == before
    assert project.query_value("SELECT count(*) FROM runs") == 0


def test_undetectable_format_asks_for_format(db, tmp_path):
    with pytest.raises(InputError, match=r"weird\.dat: cannot tell the qrels format.*--format"):
        import_file(db, "qrels", write(tmp_path, "weird.dat", "a b c d e\n"))
    with pytest.raises(InputError, match=r"nope\.txt: file not found"):
        import_file(db, "corpus", tmp_path / "nope.txt")
    with pytest.raises(InputError, match="unknown corpus format 'csv'"):
        import_file(db, "corpus", write(tmp_path, "x.csv", "a,b\n"), format="csv")
