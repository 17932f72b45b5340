"""Bad input on import is refused with one clear line and nothing stored (issue 8, item 7):
ids with whitespace, a byte-order mark, huge grades, non-finite scores, names that cannot be
used later, symbolic link loops, null ids, and values too long to echo."""

from __future__ import annotations

import codecs
import json
import os

import pytest

from tests.support import templates
from tests.support.retrieval_fixtures import write_corpus
from workbench.errors import InputError
from workbench.services.chunking import create_chunking
from workbench.services.qrels.export import export_qrels, export_run
from workbench.services.ingest import import_file
from workbench.services.pooling.pools import build_pool
from workbench.services.retrieval.runs import run_bm25
from workbench.store.corpus import read_documents, read_queries
from workbench.store.database import Database
from workbench.store.judgments import read_judgments
from workbench.store.meta import table_counts


def _corpus_project(path) -> None:
    db = Database(path)
    write_corpus(db)
    db.close()


@pytest.fixture
def project(db_path):
    # the small corpus project, built once per worker and copied (5 ms, not a migration and a write per test)
    templates.copy_of("import_bad_input_corpus", _corpus_project, db_path)
    db = Database(db_path)
    yield db
    db.close()


def _write(tmp_path, name: str, text: str, *, bom: bool = False):
    path = tmp_path / name
    path.write_bytes((codecs.BOM_UTF8 if bom else b"") + text.encode("utf-8"))
    return path


def _jsonl(rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


# --- ids with whitespace --------------------------------------------------------------------------
@pytest.mark.parametrize("kind,name,text,line,shown", [
    ("corpus", "c.jsonl", _jsonl([{"_id": "ok", "text": "t"}, {"_id": "a b", "text": "t"}]), 2, "'a b'"),
    ("corpus", "c.jsonl", _jsonl([{"_id": "tab\there", "text": "t"}]), 1, "'tab\\\\there'"),
    ("queries", "q.tsv", "q9\tfine\nq 10\tspaced id\n", 2, "'q 10'"),
    ("queries", "q.jsonl", _jsonl([{"query_id": "new\nline", "text": "t"}]), 1, "'new\\\\nline'"),
    # BEIR's reader splits at whitespace, so the spaced id shows as a wrong field count there
    ("qrels", "q.tsv", "query-id\tcorpus-id\tscore\nq1\tcats\t1\nq1\tdog s\t1\n", 3, None),
    ("qrels", "s.jsonl", _jsonl([{"query_id": "q1", "doc_id": "ca ts", "start": 0, "end": 3, "grade": 1}]), 1,
     "'ca ts'"),
])
def test_ids_with_whitespace_are_refused_at_file_and_line(project, tmp_path, kind, name, text, line, shown):
    before = table_counts(project)
    path = _write(tmp_path, name, text)
    expected = rf"{name}:{line}: " + (rf"\w+ {shown} contains a space, tab or newline" if shown else "")
    with pytest.raises(InputError, match=expected) as caught:
        import_file(project, kind, path)
    assert "\n" not in str(caught.value)
    assert table_counts(project) == before


def test_a_folder_file_with_a_space_is_named(project, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "my notes.md").write_text("# Notes\nhello\n")
    with pytest.raises(InputError, match=r"doc_id 'my notes' \(file my notes.md\) contains a space"):
        import_file(project, "corpus", folder)


def test_every_export_reads_back_through_its_own_importer(project, tmp_path):
    """Round trip: what we export, we import again unchanged (every qrels format, and runs)."""
    labels = tmp_path / "labels.jsonl"
    labels.write_text(_jsonl([{"query_id": "q1", "doc_id": "cats", "start": 0, "end": 7, "grade": 2},
                              {"query_id": "q2", "doc_id": "plants", "start": 4, "end": 30, "grade": 3}]))
    import_file(project, "qrels", labels, format="spans", assessor="sme")
    create_chunking(project, "fixed", "fixed", size=20, overlap=5)
    run_bm25(project, "fixed", "bm25", k=10)
    checked = 0
    for fmt in ("trec", "beir", "jsonl", "spans"):
        out = tmp_path / f"export.{fmt}"
        export_qrels(project, out, format=fmt, source="human")
        with Database(tmp_path / f"fresh_{fmt}.duckdb") as fresh:
            write_corpus(fresh)
            result = import_file(fresh, "qrels", out, format=fmt, assessor="sme")
            got = read_judgments(fresh)[["query_id", "doc_id", "start", "end", "grade"]]
        want = read_judgments(project)[["query_id", "doc_id", "start", "end", "grade"]]
        if fmt != "spans":  # document-level formats come back as whole-document spans of the max grade
            lengths = read_documents(project).set_index("doc_id")["text"].str.len()
            want = want.groupby(["query_id", "doc_id"], as_index=False)["grade"].max()
            want["start"] = 0
            want["end"] = want["doc_id"].map(lengths)
            want = want[["query_id", "doc_id", "start", "end", "grade"]]
        key = ["query_id", "doc_id", "start"]
        assert result.rows == len(want)
        assert got.sort_values(key).reset_index(drop=True).astype(str).equals(
            want.sort_values(key).reset_index(drop=True).astype(str)), fmt
        checked += 1
    run_out = tmp_path / "bm25.trec"
    export_run(project, "bm25", run_out)
    assert import_file(project, "run", run_out, name="bm25_back").rows == project.query_value(
        "SELECT count(*) FROM run_rows WHERE run = 'bm25'")
    checked += 1
    assert checked == 5


# --- byte-order mark --------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,fmt,name,text", [
    ("corpus", "jsonl", "c.jsonl", _jsonl([{"_id": "bom-doc", "text": "t"}])),
    ("queries", "jsonl", "q.jsonl", _jsonl([{"query_id": "bom-q", "text": "t"}])),
    ("queries", "tsv", "q.tsv", "bom-q\tt\n"),
    ("qrels", "trec", "q.trec", "q1 0 cats 1\n"),
    ("qrels", "beir", "q.tsv", "q1\tcats\t1\n"),
    ("qrels", "jsonl", "q.jsonl", _jsonl([{"query_id": "q1", "relevant": {"cats": 1}}])),
    ("qrels", "spans", "s.jsonl", _jsonl([{"query_id": "q1", "doc_id": "cats", "start": 0, "end": 3, "grade": 1}])),
    ("run", "trec", "r.trec", "q1 Q0 cats 1 2.5 x\n"),
])
def test_a_byte_order_mark_is_stripped_in_every_reader(project, tmp_path, kind, fmt, name, text):
    result = import_file(project, kind, _write(tmp_path, name, text, bom=True), format=fmt, skip_unknown=False)
    assert result.rows == 1 and not result.skipped
    ids = {
        "corpus": lambda: read_documents(project)["doc_id"],
        "queries": lambda: read_queries(project)["query_id"],
        "qrels": lambda: read_judgments(project)["query_id"],
        "run": lambda: project.query_df("SELECT query_id FROM run_rows")["query_id"],
    }[kind]()
    assert not any(str(i).startswith("\ufeff") for i in ids)


# --- values ------------------------------------------------------------------------------------------
def test_a_huge_grade_is_one_line(project, tmp_path):
    with pytest.raises(InputError, match=r"q\.trec:1: .*too large") as caught:
        import_file(project, "qrels", _write(tmp_path, "q.trec", "q1 0 cats 99999999999999999999999\n"))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("score", ["nan", "inf", "-inf", "1e400", "-1e400"])
def test_non_finite_scores_are_refused(project, tmp_path, score):
    with pytest.raises(InputError, match=r"r\.trec:2: .*score"):
        import_file(project, "run", _write(tmp_path, "r.trec", f"q1 Q0 cats 1 2.5 x\nq1 Q0 dogs 2 {score} x\n"))
    assert project.query_value("SELECT count(*) FROM runs") == 0


@pytest.mark.parametrize("kind,name,text", [
    ("queries", "q.jsonl", _jsonl([{"query_id": None, "text": "t"}])),
    ("corpus", "c.jsonl", _jsonl([{"_id": None, "text": "t"}])),
    ("qrels", "q.jsonl", _jsonl([{"query_id": None, "relevant": {"cats": 1}}])),
    ("qrels", "s.jsonl", _jsonl([{"query_id": None, "doc_id": "cats", "start": 0, "end": 3, "grade": 1}])),
])
def test_a_null_id_is_refused_not_read_as_none(project, tmp_path, kind, name, text):
    with pytest.raises(InputError, match=rf"{name}:1: .*null"):
        import_file(project, kind, _write(tmp_path, name, text))
    assert "None" not in set(read_queries(project)["query_id"]) | set(read_documents(project)["doc_id"])


def test_long_values_are_cut_in_messages(project, tmp_path):
    huge = "x" * 1_000_000
    with pytest.raises(InputError) as caught:
        import_file(project, "qrels", _write(tmp_path, "q.trec", f"q1 0 {huge} 1\n"), format="trec")
    assert len(str(caught.value)) < 1_000 and "1000000 characters" in str(caught.value)


# --- names ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["a,b", "my run", "", "-x", "x" * 101])
def test_one_name_rule_for_import_retrieve_and_pool(project, tmp_path, bad):
    create_chunking(project, "fixed", "fixed", size=20, overlap=5)
    run = _write(tmp_path, "r.trec", "q1 Q0 cats 1 2.5 x\n")
    if bad:  # an empty --name means "the file stem"
        with pytest.raises(InputError, match="run name .* is not allowed: use letters, digits"):
            import_file(project, "run", run, name=bad)
    with pytest.raises(InputError, match="run name .* is not allowed"):
        run_bm25(project, "fixed", bad, k=5)
    run_bm25(project, "fixed", "good", k=5)
    with pytest.raises(InputError, match="pool name .* is not allowed"):
        build_pool(project, bad, ["good"], 5)
    assert project.query_value("SELECT count(*) FROM runs") == 1


def test_a_file_stem_that_is_no_name_asks_for_one(project, tmp_path):
    run = _write(tmp_path, "a,b.trec", "q1 Q0 cats 1 2.5 x\n")
    with pytest.raises(InputError, match=r"the file name 'a,b.trec' does not give one; pass --name"):
        import_file(project, "run", run)
    assert import_file(project, "run", run, name="ab").rows == 1


# --- paths ------------------------------------------------------------------------------------------------
def test_a_symlink_loop_is_reported_as_such(project, tmp_path):
    loop = tmp_path / "loop.trec"
    loop.symlink_to(loop)
    with pytest.raises(InputError, match="symbolic link loop"):
        import_file(project, "run", loop)
    dangling = tmp_path / "dangling.trec"
    dangling.symlink_to(tmp_path / "gone.trec")
    with pytest.raises(InputError, match="file not found .a symbolic link to a missing file"):
        import_file(project, "run", dangling)


def test_a_fifo_is_refused_instead_of_hanging(project, tmp_path):
    fifo = tmp_path / "run.trec"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        import_file(project, "run", fifo)
