"""Integrity checks for the embedded demo dataset in ``data/demo/``.

The demo is what a first-time user sees and what the LLM judge is calibrated
against, so these tests fail loudly when documents, queries or labels drift
apart (for example a document was edited but labels.jsonl not regenerated).
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter, defaultdict

import pytest
from tests.support.prerequisites import REPO

DEMO = REPO / "workbench" / "resources" / "demo"
QUERY_TYPES = {"policy", "procedure", "fact", "multi-hop", "unanswerable", "comparison"}


def _read_jsonl(name: str) -> list[dict]:
    path = DEMO / name
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            assert line.strip(), f"{name}:{lineno} is blank"
            rows.append(json.loads(line))
    return rows


def _load_builder():
    spec = importlib.util.spec_from_file_location("demo_build_labels", DEMO / "build_labels.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def documents() -> list[dict]:
    return _read_jsonl("documents.jsonl")


@pytest.fixture(scope="module")
def docs_by_id(documents) -> dict[str, dict]:
    return {d["doc_id"]: d for d in documents}


@pytest.fixture(scope="module")
def queries() -> list[dict]:
    return _read_jsonl("queries.jsonl")


@pytest.fixture(scope="module")
def labels() -> list[dict]:
    return _read_jsonl("labels.jsonl")


@pytest.fixture(scope="module")
def spec_rows() -> list[dict]:
    return _read_jsonl("labels_spec.jsonl")


def _unanswerable(query: dict) -> bool:
    return query["tags"]["type"] == "unanswerable"


# --- files and schemas -------------------------------------------------------


def test_expected_files_present():
    for name in ("documents.jsonl", "queries.jsonl", "labels.jsonl", "labels_spec.jsonl",
                 "build_labels.py", "README.md"):
        assert (DEMO / name).is_file(), f"missing data/demo/{name}"


def test_document_schema(documents):
    for d in documents:
        assert set(d) == {"doc_id", "title", "text", "metadata"}, d.get("doc_id")
        assert isinstance(d["doc_id"], str) and d["doc_id"].strip()
        assert isinstance(d["title"], str) and d["title"].strip()
        assert isinstance(d["text"], str)
        assert isinstance(d["metadata"].get("department"), str) and d["metadata"]["department"]
        updated = d["metadata"].get("updated")
        assert isinstance(updated, str) and len(updated) == 10 and updated[4] == "-" and updated[7] == "-"


def test_query_schema(queries):
    for q in queries:
        assert set(q) == {"query_id", "text", "description", "tags"}, q.get("query_id")
        assert q["text"].strip() and q["description"].strip()
        assert q["tags"]["type"] in QUERY_TYPES, q["query_id"]
        assert isinstance(q["tags"].get("source"), str) and q["tags"]["source"]


def test_label_schema(labels):
    for lab in labels:
        assert set(lab) == {"query_id", "doc_id", "start", "end", "grade", "assessor"}, lab
        for key in ("start", "end", "grade"):
            assert isinstance(lab[key], int) and not isinstance(lab[key], bool), lab
        assert lab["assessor"] == "demo-sme"


# --- sizes and uniqueness ----------------------------------------------------


def test_ids_unique(documents, queries):
    doc_ids = [d["doc_id"] for d in documents]
    query_ids = [q["query_id"] for q in queries]
    assert len(doc_ids) == len(set(doc_ids)), [k for k, n in Counter(doc_ids).items() if n > 1]
    assert len(query_ids) == len(set(query_ids)), [k for k, n in Counter(query_ids).items() if n > 1]
    assert len({q["text"] for q in queries}) == len(queries), "duplicate query text"


def test_collection_sizes(documents, queries):
    assert 35 <= len(documents) <= 45, len(documents)
    assert 35 <= len(queries) <= 45, len(queries)


def test_document_lengths(documents):
    bad = {d["doc_id"]: len(d["text"]) for d in documents if not 1000 <= len(d["text"]) <= 6000}
    assert not bad, f"documents outside 1,000-6,000 chars: {bad}"


def test_documents_are_ascii(documents):
    # README promises ASCII so that character offsets mean the same in every language.
    bad = [d["doc_id"] for d in documents if not d["text"].isascii()]
    assert not bad, f"non-ASCII characters in {bad}"


def test_documents_are_markdown_with_sections(documents):
    for d in documents:
        assert d["text"].startswith("# "), d["doc_id"]
        assert d["text"].count("\n## ") >= 3, d["doc_id"]


def test_query_mix(queries):
    types = Counter(q["tags"]["type"] for q in queries)
    assert types["unanswerable"] >= 3, types
    assert types["multi-hop"] >= 5, types


# --- labels ------------------------------------------------------------------


def test_every_query_has_labels(queries, labels):
    labelled = {lab["query_id"] for lab in labels}
    missing = [q["query_id"] for q in queries if q["query_id"] not in labelled]
    assert not missing, f"queries without labels: {missing}"


def test_labels_reference_known_ids(queries, docs_by_id, labels):
    query_ids = {q["query_id"] for q in queries}
    for lab in labels:
        assert lab["query_id"] in query_ids, lab
        assert lab["doc_id"] in docs_by_id, lab


def test_label_offsets_and_grades(docs_by_id, labels):
    for lab in labels:
        text = docs_by_id[lab["doc_id"]]["text"]
        assert 0 <= lab["start"] < lab["end"] <= len(text), lab
        assert lab["grade"] in (0, 1, 2, 3), lab


def test_spans_are_aligned_and_trimmed(docs_by_id, labels):
    for lab in labels:
        text = docs_by_id[lab["doc_id"]]["text"]
        span = text[lab["start"] : lab["end"]]
        assert span == span.strip(), f"span has leading/trailing whitespace: {lab}"
        assert lab["start"] == 0 or text[lab["start"] - 1] == "\n", f"span does not start a line: {lab}"
        assert lab["end"] == len(text) or text[lab["end"]] == "\n", f"span does not end a line: {lab}"


def test_span_sizes(docs_by_id, labels):
    for lab in labels:
        assert 80 <= lab["end"] - lab["start"] <= 2000, lab


def test_answerable_queries_have_relevant_span(queries, labels):
    best = defaultdict(int)
    for lab in labels:
        best[lab["query_id"]] = max(best[lab["query_id"]], lab["grade"])
    for q in queries:
        if not _unanswerable(q):
            assert best[q["query_id"]] >= 2, f"{q['query_id']} has no grade 2/3 span"


def test_unanswerable_queries_have_no_relevant_span(queries, labels):
    unanswerable = {q["query_id"] for q in queries if _unanswerable(q)}
    assert unanswerable
    bad = [lab for lab in labels if lab["query_id"] in unanswerable and lab["grade"] >= 2]
    assert not bad, f"unanswerable queries with grade >= 2: {bad}"


def test_no_conflicting_overlaps(labels):
    groups = defaultdict(list)
    for lab in labels:
        groups[(lab["query_id"], lab["doc_id"])].append(lab)
    for key, spans in groups.items():
        spans.sort(key=lambda s: (s["start"], s["end"]))
        for i, a in enumerate(spans):
            for b in spans[i + 1 :]:
                if b["start"] >= a["end"]:
                    break
                assert a["grade"] == b["grade"], f"overlapping spans with different grades for {key}: {a} {b}"


def test_no_duplicate_labels(labels):
    keys = [(lab["query_id"], lab["doc_id"], lab["start"], lab["end"]) for lab in labels]
    assert len(keys) == len(set(keys)), [k for k, n in Counter(keys).items() if n > 1]


def test_grade_zero_and_one_spans_exist(labels):
    grades = Counter(lab["grade"] for lab in labels)
    assert grades[0] >= 20 and grades[1] >= 20, grades


# --- spec and generator --------------------------------------------------------


def test_spec_rows_have_grades_and_notes(spec_rows):
    for row in spec_rows:
        assert row["grade"] in (0, 1, 2, 3), row
        assert isinstance(row.get("note"), str) and row["note"].strip(), row
        assert row.get("section") or (row.get("start_quote") and row.get("end_quote")), row


def test_labels_match_generator_output(tmp_path):
    builder = _load_builder()
    out = tmp_path / "labels.jsonl"
    rc = builder.main(["--documents", str(DEMO / "documents.jsonl"),
                       "--spec", str(DEMO / "labels_spec.jsonl"), "--out", str(out)])
    assert rc == 0
    committed = (DEMO / "labels.jsonl").read_text(encoding="utf-8")
    assert out.read_text(encoding="utf-8") == committed, (
        "data/demo/labels.jsonl is stale: run `python data/demo/build_labels.py`"
    )


def test_generator_rejects_bad_anchors(tmp_path):
    builder = _load_builder()
    docs = tmp_path / "docs.jsonl"
    text = "# T\n\nIntro.\n\n## A\n\nAlpha text here.\n\n## B\n\nBeta text. Beta again.\n"
    docs.write_text(json.dumps({"doc_id": "d", "title": "T", "text": text,
                                "metadata": {"department": "X", "updated": "2026-01-01"}}) + "\n")
    ok = {"query_id": "q", "doc_id": "d", "grade": 2, "note": "n"}

    def run(row):
        spec = tmp_path / "spec.jsonl"
        spec.write_text(json.dumps({**ok, **row}) + "\n")
        return builder.build_labels(docs, spec)

    [lab] = run({"section": "A"})
    assert text[lab["start"] : lab["end"]] == "## A\n\nAlpha text here."
    [lab] = run({"section": "B", "start_quote": "Beta text.", "end_quote": "again."})
    assert text[lab["start"] : lab["end"]] == "Beta text. Beta again."
    for bad in ({"section": "Missing"}, {"start_quote": "Beta", "end_quote": "again."},
                {"start_quote": "Alpha", "end_quote": "nowhere"}, {"section": "A", "grade": 4},
                {"section": "A", "doc_id": "unknown"}):
        with pytest.raises(builder.SpecError):
            run(bad)
