"""Real collections end to end: TREC DL 2019 passage and Cranfield from ../shared/datasets.

Expected counts are computed here from the files with plain Python (not with the import code)
and checked against the figures in each dataset's SOURCE.md. Skipped when ../shared is absent,
failing in CI (tests/shared_data.py).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tests.support.prerequisites import shared_path
from workbench.errors import InputError
from workbench.services.qrels.export import export_qrels
from workbench.services.ingest import import_file
from workbench.services.project.lifecycle import open_project
from workbench.store.corpus import read_queries
from workbench.store.judgments import read_judgments
from workbench.store.meta import table_counts

pytestmark = pytest.mark.shared

RUNS = ("BM25", "BM25_RM3", "D_BERT_KD_TASB", "OPEN_AI_ADA2", "SPLADE_P_P_ENSEMBLE_DISTIL", "REP_LLAMA")


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]


@pytest.fixture(scope="module")
def dl19(tmp_path_factory):
    root = shared_path("datasets", "trec-dl-2019-passage")
    db = open_project(tmp_path_factory.mktemp("dl19") / "dl19.duckdb", create=True)
    results = {
        "corpus": import_file(db, "corpus", root / "dl2019_document.jsonl"),
        "queries": import_file(db, "queries", root / "topics.dl19-passage.txt"),
        "qrels": import_file(db, "qrels", root / "qrels.dl19-passage.txt"),
    }
    for run in RUNS:
        results[run] = import_file(db, "run", root / "runs" / run / "trec_results_dl19_top100.txt", name=run,
                                   skip_unknown=True)
    yield root, db, results
    db.close()


def test_dl19_corpus_queries_and_qrels_counts(dl19):
    root, db, results = dl19
    docs = [json.loads(line) for line in _lines(root / "dl2019_document.jsonl")]
    topics = _lines(root / "topics.dl19-passage.txt")
    qrels = _lines(root / "qrels.dl19-passage.txt")
    assert (len(docs), len(topics), len(qrels)) == (10_818, 43, 9_260)  # SOURCE.md
    counts = table_counts(db)
    assert counts["documents"] == results["corpus"].rows == len(docs)
    assert counts["queries"] == results["queries"].rows == len(topics)
    assert counts["judgments.imported.ok"] == results["qrels"].rows == len(qrels)
    grades = Counter(read_judgments(db)["grade"].tolist())
    assert grades == Counter(int(line.split()[3]) for line in qrels) == {0: 5158, 1: 1601, 2: 1804, 3: 697}
    # whole-document spans: end = the passage's length in characters
    lengths = {d["docid"]: len(d["doc"]) for d in docs}
    spans = read_judgments(db)
    assert (spans["start"] == 0).all()
    assert spans["end"].tolist() == [lengths[d] for d in spans["doc_id"]]


def test_dl19_runs_keep_known_passages_and_report_dropped_rows(dl19):
    root, db, results = dl19
    known = {json.loads(line)["docid"] for line in _lines(root / "dl2019_document.jsonl")}
    for run in RUNS:
        rows = [line.split() for line in _lines(root / "runs" / run / "trec_results_dl19_top100.txt")]
        kept = sum(1 for r in rows if r[2] in known)
        result = results[run]
        assert (result.rows, result.skipped_total, result.level) == (kept, len(rows) - kept, "doc"), run
        assert result.skipped == {"unknown doc ids": len(rows) - kept}
        assert db.query_value("SELECT count(*) FROM run_rows WHERE run = ?", [run]) == kept
        per_query = 1000 if run == "REP_LLAMA" else 100  # SOURCE.md
        assert len(rows) == 43 * per_query
        assert 0.55 <= kept / len(rows) <= 0.68 or run == "REP_LLAMA"  # SOURCE.md: @100 share 0.56-0.67


def test_dl19_unknown_passages_in_runs_fail_without_skip_unknown(dl19, tmp_path):
    root, db, _ = dl19
    before = table_counts(db)
    path = tmp_path / "copy.txt"
    path.write_bytes((root / "runs" / "BM25" / "trec_results_dl19_top100.txt").read_bytes() + b"\n")
    with pytest.raises(InputError, match=r"rows name .* doc ids that are not in the project.*--skip-unknown"):
        import_file(db, "run", path, name="bm25-strict")
    assert table_counts(db) == before


def test_dl19_trec_qrels_round_trip_is_byte_identical_after_sorting(dl19, tmp_path):
    root, db, _ = dl19
    out = tmp_path / "qrels.txt"
    result = export_qrels(db, out, format="trec", source="human")
    assert result.rows == 9_260
    assert sorted(out.read_bytes().split(b"\n")) == sorted((root / "qrels.dl19-passage.txt").read_bytes().split(b"\n"))


def test_dl19_reimport_is_a_no_op(dl19):
    root, db, _ = dl19
    before = table_counts(db)
    again = import_file(db, "qrels", root / "qrels.dl19-passage.txt")
    assert again.already_imported is not None and table_counts(db) == before


def test_cranfield_corpus_queries_and_qrels(tmp_path):
    root = shared_path("datasets", "cranfield")
    raw_qrels = [line.split() for line in _lines(root / "cranqrel")]
    codes = Counter(int(r[2]) for r in raw_qrels)
    assert len(raw_qrels) == 1_837 and codes == {1: 128, 2: 387, 3: 734, 4: 363, -1: 225}  # SOURCE.md
    n_docs = sum(1 for line in _lines(root / "cran.all.1400") if line.startswith(".I "))
    n_queries = sum(1 for line in _lines(root / "cran.qry") if line.startswith(".I "))
    assert (n_docs, n_queries) == (1_400, 225)

    with open_project(tmp_path / "cran.duckdb", create=True) as db:
        assert import_file(db, "corpus", root / "cran.all.1400").rows == n_docs
        assert import_file(db, "queries", root / "cran.qry").rows == n_queries
        result = import_file(db, "qrels", root / "cranqrel")
        assert (result.rows, result.excluded) == (len(raw_qrels) - codes[-1], codes[-1])
        grades = Counter(read_judgments(db)["grade"].tolist())
        assert grades == {3: codes[1], 2: codes[2], 1: codes[3] + codes[4]}
        # Positional query numbering (SOURCE.md quirk 1): qrels query 3 is `.I 004`.
        queries = read_queries(db).set_index("query_id")
        assert "composite slabs" in queries.loc["3", "text"]
        assert json.loads(queries.loc["3", "tags"]) == {"smart_id": "004"}
        docs = db.query_df("SELECT doc_id, title, length(text) AS n FROM documents WHERE doc_id IN ('1', '471', '995')")
        empty = dict(zip(docs["doc_id"], docs["n"]))
        assert empty["471"] == 0 and empty["995"] == 0 and empty["1"] > 0
