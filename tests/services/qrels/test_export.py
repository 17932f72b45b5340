"""Exporting qrels: round trips per format, human/llm precedence, chunk level by the span rule."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from workbench.core.documents.chunking import ChunkingSpec, chunk_documents
from workbench.errors import InputError
from workbench.services.qrels.export import export_qrels
from workbench.services.ingest import import_file
from workbench.services.project.lifecycle import open_project
from workbench.store.chunks import write_chunking
from workbench.store.corpus import read_documents
from workbench.store.judgments import write_judgments

# Three documents of known lengths (100, 60 and 30 characters).
DOCS = [{"_id": "d1", "text": "a" * 100}, {"_id": "d2", "text": "b" * 60}, {"_id": "d3", "text": "c" * 30}]
QUERIES = "q1\tfirst\nq2\tsecond\nq10\ttenth\n"
TREC = "q1 Q0 d1 2\nq1 Q0 d2 0\nq10 Q0 d3 1\nq2 Q0 d2 3\n"


def write(tmp_path: Path, name: str, content: str | list) -> Path:
    path = tmp_path / name
    if isinstance(content, list):
        content = "".join(json.dumps(row) + "\n" for row in content)
    path.write_text(content, encoding="utf-8")
    return path


def new_project(tmp_path: Path, name: str = "p.duckdb"):
    db = open_project(tmp_path / name, create=True)
    import_file(db, "corpus", write(tmp_path, f"{name}.corpus.jsonl", DOCS))
    import_file(db, "queries", write(tmp_path, f"{name}.queries.tsv", QUERIES))
    return db


@pytest.fixture
def db(tmp_path):
    database = new_project(tmp_path)
    yield database
    database.close()


def sorted_lines(path: Path) -> list[str]:
    return sorted(path.read_text(encoding="utf-8").splitlines())


def llm_labels(db, rows: list[tuple]) -> None:
    """(query_id, doc_id, start, end, grade, status) rows from the LLM judge."""
    frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "start", "end", "grade", "status"])
    frame["source"] = "llm"
    frame["assessor"] = "judge-v1"
    frame["grade"] = frame["grade"].astype("Int8")
    with db.transaction() as tx:
        write_judgments(tx, frame)


# --- round trips -------------------------------------------------------------------------------
def test_trec_round_trip_is_byte_identical_after_sorting(db, tmp_path):
    source = write(tmp_path, "qrels.txt", TREC)
    import_file(db, "qrels", source)
    result = export_qrels(db, tmp_path / "out.txt", format="trec")
    assert (result.rows, result.queries) == (4, 3)
    assert sorted_lines(tmp_path / "out.txt") == sorted_lines(source)
    export_qrels(db, tmp_path / "classic.txt", format="trec", iteration="0")
    assert sorted_lines(tmp_path / "classic.txt")[0] == "q1 0 d1 2"


def test_beir_round_trip(db, tmp_path):
    source = write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t3\n")
    import_file(db, "qrels", source)
    export_qrels(db, tmp_path / "out.tsv", format="beir")
    text = (tmp_path / "out.tsv").read_text()
    assert text.splitlines()[0] == "query-id\tcorpus-id\tscore"
    assert sorted(text.splitlines()[1:]) == sorted(source.read_text().splitlines()[1:])


def test_jsonl_round_trip_carries_query_text_and_tags(tmp_path):
    db = open_project(tmp_path / "j.duckdb", create=True)
    import_file(db, "corpus", write(tmp_path, "c.jsonl", DOCS))
    rows = [{"query_id": "q1", "query": "first", "relevant": {"d1": 2, "d2": 0}, "tags": {"set": "dev"}},
            {"query_id": "q2", "query": "second", "relevant": {"d3": 1}, "tags": None}]
    import_file(db, "qrels", write(tmp_path, "rows.jsonl", rows))
    export_qrels(db, tmp_path / "out.jsonl", format="jsonl")
    back = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert back == rows
    db.close()


def test_spans_round_trip_into_a_fresh_project(db, tmp_path):
    spans = [{"query_id": "q1", "doc_id": "d1", "start": 0, "end": 10, "grade": 3, "assessor": "ana"},
             {"query_id": "q1", "doc_id": "d1", "start": 50, "end": 100, "grade": 1, "assessor": "ana"},
             {"query_id": "q2", "doc_id": "d2", "start": 5, "end": 6, "grade": 0, "assessor": "ben"}]
    import_file(db, "qrels", write(tmp_path, "spans.jsonl", spans))
    export_qrels(db, tmp_path / "out.jsonl", format="spans")
    assert [json.loads(x) for x in sorted_lines(tmp_path / "out.jsonl")] == \
        [{**json.loads(x), "tier": "imported"} for x in sorted(json.dumps(s) for s in spans)]
    other = new_project(tmp_path, "other.duckdb")
    import_file(other, "qrels", tmp_path / "out.jsonl")
    export_qrels(other, tmp_path / "again.jsonl", format="spans")
    assert (tmp_path / "again.jsonl").read_bytes() == (tmp_path / "out.jsonl").read_bytes()
    other.close()


def test_trec_to_beir_to_trec_across_projects(db, tmp_path):
    source = write(tmp_path, "qrels.txt", TREC)
    import_file(db, "qrels", source)
    export_qrels(db, tmp_path / "mid.tsv", format="beir")
    other = new_project(tmp_path, "other.duckdb")
    import_file(other, "qrels", tmp_path / "mid.tsv")
    export_qrels(other, tmp_path / "back.txt", format="trec")
    assert sorted_lines(tmp_path / "back.txt") == sorted_lines(source)
    other.close()


# --- sources -------------------------------------------------------------------------------------
def test_merged_prefers_human_labels_per_item(db, tmp_path):
    import_file(db, "qrels", write(tmp_path, "human.txt", "q1 0 d1 3\nq2 0 d2 1\n"))
    llm_labels(db, [
        ("q1", "d1", 0, 100, 0, "ok"),   # same document as a human label: the human one wins
        ("q1", "d2", 0, 60, 2, "ok"),    # only the LLM judged it: kept
        ("q1", "d2", 0, 30, 1, "ok"),    # second LLM span of the same doc: max grade (2) wins
        ("q1", "d3", 0, 30, None, "failed"),  # failed call: never a label
        ("q2", "d2", 10, 20, 3, "ok"),   # a span of a human-judged document: human wins at doc level
    ])
    from workbench.core.qrels_policy import QrelsPolicy

    lines = {}
    for source in ("human", "llm", "merged"):  # opted in to LLM labels of an uncalibrated judge
        export_qrels(db, tmp_path / f"{source}.out", source=source, policy=QrelsPolicy(llm_labels="all"))
        lines[source] = sorted_lines(tmp_path / f"{source}.out")
    assert lines["human"] == ["q1 Q0 d1 3", "q2 Q0 d2 1"]
    assert lines["llm"] == ["q1 Q0 d1 0", "q1 Q0 d2 2", "q2 Q0 d2 3"]
    assert lines["merged"] == ["q1 Q0 d1 3", "q1 Q0 d2 2", "q2 Q0 d2 1"]
    # the default policy: the judge has not passed the gate, so merged = the human labels
    export_qrels(db, tmp_path / "gated.out", source="merged")
    assert sorted_lines(tmp_path / "gated.out") == lines["human"]


def test_spans_keep_the_tier_that_decides_each_document(db, tmp_path):
    """The old rule kept LLM spans no human had judged *the same span* of; the one rule keeps, per
    query and document, the spans of the deciding tier only, and ungated LLM spans not at all."""
    from workbench.core.qrels_policy import QrelsPolicy

    import_file(db, "qrels", write(tmp_path, "h.jsonl", [
        {"query_id": "q1", "doc_id": "d1", "start": 0, "end": 10, "grade": 3, "assessor": "ana"}]))
    llm_labels(db, [("q1", "d1", 0, 10, 0, "ok"), ("q1", "d1", 10, 20, 2, "ok"), ("q1", "d2", 0, 5, 1, "ok")])

    def rows(name, **kw):
        result = export_qrels(db, tmp_path / name, format="spans", **kw)
        assert result.policy.startswith("qrels policy: ")
        return [(r["doc_id"], r["start"], r["end"], r["grade"], r["assessor"], r["tier"])
                for r in map(json.loads, (tmp_path / name).read_text().splitlines())]

    # default policy: the judge has not passed the gate, so only the imported span is left
    assert rows("gated.jsonl") == [("d1", 0, 10, 3, "ana", "imported")]
    # opted in: d1 is decided by the imported label (the LLM span 10-20 of d1 goes), d2 by the judge
    assert rows("all.jsonl", policy=QrelsPolicy(llm_labels="all")) == [
        ("d1", 0, 10, 3, "ana", "imported"), ("d2", 0, 5, 1, "|", "llm")]
    assert rows("llm.jsonl", source="llm") == [
        ("d1", 0, 10, 0, "|", "llm"), ("d1", 10, 20, 2, "|", "llm"), ("d2", 0, 5, 1, "|", "llm")]


# --- chunk level ---------------------------------------------------------------------------------
def _chunking(db, name="w40"):
    spec = ChunkingSpec(name, "fixed", {"size": 40})
    chunks = chunk_documents(spec, read_documents(db)[["doc_id", "text"]])
    with db.transaction() as tx:
        write_chunking(tx, name, spec.strategy, dict(spec.params), chunks)


def test_chunk_level_applies_the_span_rule(db, tmp_path):
    _chunking(db)  # d1 -> [0,40) [40,80) [80,100); d2 -> [0,40) [40,60); d3 -> [0,30)
    import_file(db, "qrels", write(tmp_path, "s.jsonl", [
        # overlaps chunk 0 by 30 of 40 (0.75: relevant) and chunk 1 by 10 of 40 (0.25: not matched)
        {"query_id": "q1", "doc_id": "d1", "start": 10, "end": 50, "grade": 2},
        # a 4-character span inside chunk 2: 4/min(20, 4) = 1.0
        {"query_id": "q1", "doc_id": "d1", "start": 90, "end": 94, "grade": 1},
    ]))
    import_file(db, "qrels", write(tmp_path, "doc.txt", "q2 0 d2 3\n"))  # whole document
    export_qrels(db, tmp_path / "chunks.txt", level="chunk", chunking="w40")
    assert sorted_lines(tmp_path / "chunks.txt") == [
        "q1 Q0 w40:d1:0 2", "q1 Q0 w40:d1:2 1", "q2 Q0 w40:d2:0 3", "q2 Q0 w40:d2:1 3"]
    export_qrels(db, tmp_path / "strict.txt", level="chunk", chunking="w40", min_overlap=1.0)
    assert sorted_lines(tmp_path / "strict.txt") == [
        "q1 Q0 w40:d1:2 1", "q2 Q0 w40:d2:0 3", "q2 Q0 w40:d2:1 3"]


def test_chunk_level_needs_an_existing_chunking(db, tmp_path):
    with pytest.raises(InputError, match="--chunking"):
        export_qrels(db, tmp_path / "x.txt", level="chunk")
    with pytest.raises(InputError, match="no chunking named 'nope'"):
        export_qrels(db, tmp_path / "x.txt", level="chunk", chunking="nope")
    with pytest.raises(InputError, match="span judgments do not depend on a chunking"):
        export_qrels(db, tmp_path / "x.txt", format="spans", level="chunk", chunking="nope")


def test_a_failed_write_leaves_no_half_written_file(tmp_path):
    from workbench.services.output_file import write_lines

    out = tmp_path / "qrels.txt"
    out.write_text("q0 Q0 d0 1\n")

    def lines():
        yield "q1 Q0 d1 2\n"
        raise OSError("disk full")

    with pytest.raises(InputError, match="cannot write: disk full; nothing was written"):
        write_lines(out, lines(), force=True)
    assert out.read_text() == "q0 Q0 d0 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["qrels.txt"]
