"""``workbench import`` and ``workbench export`` in a real subprocess."""

from __future__ import annotations

import json

from workbench.store.database import Database
from workbench.store.meta import table_counts

DOCS = [{"doc_id": "d1", "title": "One", "text": "first document"},
        {"doc_id": "d2", "title": "Two", "text": "second document"}]


def _files(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS))
    queries = tmp_path / "topics.tsv"
    queries.write_text("q1\tfirst\nq2\tsecond\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 Q0 d1 2\nq2 Q0 d2 1\nq2 Q0 d9 3\n")
    run = tmp_path / "bm25.txt"
    run.write_text("q1 Q0 d1 1 3.5 bm25\nq1 Q0 d2 2 1.5 bm25\nq2 Q0 d9 1 2.0 bm25\n")
    return corpus, queries, qrels, run


def test_import_and_export_round_trip(cli, db_path, tmp_path):
    corpus, queries, qrels, run = _files(tmp_path)
    db = ["--db", str(db_path)]
    assert cli(*db, "init").returncode == 0
    out = cli(*db, "import", "corpus", str(corpus))
    assert out.returncode == 0, out.stderr
    assert "imported 2 documents" in out.stdout and "format jsonl" in out.stdout
    assert cli(*db, "import", "queries", str(queries), "--format", "tsv").returncode == 0

    strict = cli(*db, "import", "qrels", str(qrels))
    assert strict.returncode == 3 and "Traceback" not in strict.stderr
    line = strict.stderr.strip()
    assert len(line.splitlines()) == 1
    assert f"{qrels}:3: 1 rows name 1 doc ids that are not in the project (first: 'd9' (line 3))" in line

    ok = cli(*db, "import", "qrels", str(qrels), "--skip-unknown", "--assessor", "nist")
    assert ok.returncode == 0, ok.stderr
    assert "imported 2 judgments" in ok.stdout and "skipped 1 rows with unknown doc ids" in ok.stdout
    again = cli(*db, "import", "qrels", str(qrels), "--skip-unknown")
    assert again.returncode == 0 and "already imported" in again.stdout

    ran = cli(*db, "import", "run", str(run), "--name", "bm25", "--skip-unknown")
    assert ran.returncode == 0, ran.stderr
    assert "run 'bm25' (doc level)" in ran.stdout and "skipped 1 rows" in ran.stdout

    target = tmp_path / "out" / "qrels.txt"
    exported = cli(*db, "export", "qrels", "--format", "trec", "--out", str(target))
    assert exported.returncode == 0, exported.stderr
    assert "wrote 2 qrels for 2 queries" in exported.stdout
    assert sorted(target.read_text().splitlines()) == ["q1 Q0 d1 2", "q2 Q0 d2 1"]
    beir = tmp_path / "qrels.tsv"
    assert cli(*db, "export", "qrels", "--format", "beir", "--source", "human", "--out", str(beir)).returncode == 0
    assert beir.read_text().splitlines() == ["query-id\tcorpus-id\tscore", "q1\td1\t2", "q2\td2\t1"]

    with Database(db_path) as database:
        counts = table_counts(database)
    assert (counts["documents"], counts["queries"], counts["judgments"], counts["run_rows"], counts["imports"]) == \
        (2, 2, 2, 2, 4)


def test_field_options_and_folder_corpus(cli, db_path, tmp_path):
    db = ["--db", str(db_path)]
    cli(*db, "init")
    odd = tmp_path / "odd.jsonl"
    odd.write_text(json.dumps({"pid": "p1", "passage": "x"}) + "\n")
    bad = cli(*db, "import", "corpus", str(odd))
    assert bad.returncode == 3 and "--id-field" in bad.stderr
    good = cli(*db, "import", "corpus", str(odd), "--id-field", "pid", "--text-field", "passage")
    assert good.returncode == 0, good.stderr
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# Title A\ntext")
    folder_import = cli(*db, "import", "corpus", str(folder))
    assert folder_import.returncode == 0 and "format folder" in folder_import.stdout


def test_export_errors_are_one_line(cli, db_path, tmp_path):
    cli("--db", str(db_path), "init")
    result = cli("--db", str(db_path), "export", "qrels", "--level", "chunk", "--out", str(tmp_path / "x"))
    assert result.returncode == 3 and "--chunking" in result.stderr and "Traceback" not in result.stderr
    missing = cli("--db", str(tmp_path / "absent.duckdb"), "import", "corpus", str(tmp_path / "x.jsonl"))
    assert missing.returncode != 0 and "init" in missing.stderr


def test_help_lists_kinds_and_options(cli):
    assert "import" in cli("--help").stdout and "export" in cli("--help").stdout
    text = cli("import", "qrels", "--help").stdout
    for option in ("--format", "--name", "--assessor", "--skip-unknown", "cranfield"):
        assert option in text
    text = cli("export", "qrels", "--help").stdout
    for option in ("--format", "--level", "--chunking", "--source", "--out", "merged"):
        assert option in text
