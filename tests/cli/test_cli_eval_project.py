"""``workbench eval --runs``: stored runs against the project's qrels, in the file mode's JSON
shape, checked against the file mode on the exported files and against ir_measures; each
evaluation is stored and counted by status."""

from __future__ import annotations

import json

import pytest

from tests.support.prerequisites import require_module

from workbench.store.database import Database


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from tests.conftest import run_cli
    from tests.support.templates import demo_project

    # what `init --demo` builds: a copy of the worker's template
    path = demo_project(tmp_path_factory.mktemp("evalproject") / "demo.duckdb")
    done = run_cli("--db", str(path), "retrieve", "bm25", "--chunking", "sections", "--name", "flat", "--k1", "0.5",
                   "--b", "0.3", "--no-progress")
    assert done.returncode == 0, done.stderr
    return path


def _unanswerable(path) -> set[str]:
    from workbench.services.qrels.answerability import unanswerable_ids
    from workbench.services.project.lifecycle import open_project

    db = open_project(path)
    try:
        return set(map(str, unanswerable_ids(db)))
    finally:
        db.close()


def test_same_json_as_the_file_mode_on_the_exported_files(cli, demo, tmp_path):
    measures = ["-m", "ndcg@10", "-m", "P@5", "-m", "AP"]
    stored = cli("--db", str(demo), "eval", "--runs", "bm25", *measures, "--format", "json")
    assert stored.returncode == 0, stored.stderr
    assert "qrels policy: adjudicated > sme > imported > llm" in stored.stderr
    assert "chunk level (sections)" in stored.stderr
    qrels, run = tmp_path / "qrels.txt", tmp_path / "bm25.txt"
    assert cli("--db", str(demo), "export", "qrels", "--level", "chunk", "--chunking", "sections",
               "--out", str(qrels)).returncode == 0
    assert cli("--db", str(demo), "export", "run", "bm25", "--out", str(run)).returncode == 0
    # the project mode leaves unanswerable queries out of ranking measures and so does the export
    # by default (dropping them again by hand changes nothing)
    drop = _unanswerable(demo)
    assert drop, "the demo marks some queries unanswerable"
    kept = [line for line in qrels.read_text().splitlines() if line.split()[0] not in drop]
    qrels.write_text("\n".join(kept) + "\n")
    files = cli("eval", str(qrels), str(run), *measures, "--format", "json")
    assert files.returncode == 0, files.stderr
    a, b = json.loads(stored.stdout), json.loads(files.stdout)
    assert list(a) == list(b) == ["bm25"]
    assert a["bm25"].keys() == b["bm25"].keys() == {"aggregate", "per_query", "counts"}
    # the project counts the unanswerable queries it left out under their own name; in file mode
    # the exported run still answers them, so they are queries only in the run there
    counts = dict(a["bm25"]["counts"])
    assert counts.pop("excluded_unanswerable") == len(drop) and counts["only_in_run"] == 0
    assert counts == {**b["bm25"]["counts"], "only_in_run": 0} and b["bm25"]["counts"]["only_in_run"] == len(drop)
    assert a["bm25"]["per_query"].keys() == b["bm25"]["per_query"].keys()
    for q, row in a["bm25"]["per_query"].items():
        assert row == pytest.approx(b["bm25"]["per_query"][q])
    assert a["bm25"]["aggregate"] == pytest.approx(b["bm25"]["aggregate"])


def test_stored_values_match_ir_measures(cli, demo, tmp_path):
    ir_measures = require_module("ir_measures")
    from ir_measures import AP, P, nDCG

    done = cli("--db", str(demo), "eval", "--runs", "bm25", "--level", "doc", "-m", "ndcg@10", "-m", "P@5",
               "-m", "AP", "--format", "json")
    assert done.returncode == 0, done.stderr
    evaluation_id = int(done.stderr.split("stored as evaluation ")[1].split()[0])
    with Database(demo) as db:
        values = db.query_df("SELECT measure, query_id, value FROM evaluation_values WHERE evaluation_id = ?",
                             [evaluation_id])
        stored = db.query_df("SELECT labels, level, qrels_fingerprint, runs::VARCHAR AS runs FROM evaluations "
                             "WHERE evaluation_id = ?", [evaluation_id]).iloc[0]
    assert (stored["labels"], stored["level"], json.loads(stored["runs"])) == ("merged", "doc", ["bm25"])
    qrels, run = tmp_path / "q.txt", tmp_path / "r.txt"
    cli("--db", str(demo), "export", "qrels", "--out", str(qrels))
    cli("--db", str(demo), "export", "run", "bm25", "--out", str(run))
    drop = _unanswerable(demo)
    qrels_rows = [ir_measures.Qrel(q, d, int(g)) for q, _, d, g in (x.split() for x in qrels.read_text().splitlines())
                  if q not in drop]
    # the document-level run: each document's best chunk score, as the service does
    best: dict[tuple[str, str], float] = {}
    with Database(demo) as db:
        rows = db.query_df("SELECT query_id, doc_id, score FROM run_rows WHERE run = 'bm25'")
    for q, d, s in rows.itertuples(index=False):
        best[(q, d)] = max(best.get((q, d), float("-inf")), float(s))
    run_rows = [ir_measures.ScoredDoc(q, d, s) for (q, d), s in best.items()]
    names = {"ndcg@10": nDCG @ 10, "P@5": P @ 5, "AP": AP}
    oracle = {(names_back, m.query_id): m.value
              for names_back, measure in names.items()
              for m in ir_measures.iter_calc([measure], qrels_rows, run_rows)}
    checked = 0
    for measure, q, value in values.itertuples(index=False):
        if (measure, q) in oracle:
            assert value == pytest.approx(oracle[(measure, q)], abs=1e-9), (measure, q)
            checked += 1
    assert checked == 3 * 40  # 40 answerable queries with labels, three measures


def test_status_counts_stored_evaluations_and_bad_input_is_one_line(cli, demo, tmp_path):
    with Database(demo) as db:
        before = db.query_value("SELECT count(*) FROM evaluations")
    assert cli("--db", str(demo), "eval", "--runs", "bm25", "-m", "P@5").returncode == 0
    status = cli("--db", str(demo), "status").stdout
    after = before + 1  # the demo fixture may hold evaluations of earlier tests (whichever ran first)
    assert f"{after} stored evaluation{'' if after == 1 else 's'}" in status
    bad = cli("--db", str(demo), "eval", "--runs", "bm25,nope", "-m", "P@5")
    assert bad.returncode == 3 and "no run named 'nope'" in bad.stderr and "Traceback" not in bad.stderr
    both = cli("--db", str(demo), "eval", "--runs", "bm25", str(tmp_path / "x"), "-m", "P@5")
    assert both.returncode == 2 and len(both.stderr.strip().splitlines()) == 1
    wrong = cli("--db", str(demo), "eval", "--runs", "bm25", "--level", "chunk", "--chunking", "other", "-m", "P@5")
    assert wrong.returncode == 2 and "sections" in wrong.stderr
    with Database(demo) as db:
        assert db.query_value("SELECT count(*) FROM evaluations") == before + 1  # refusals store nothing


def test_compare_stored_runs_equals_compare_on_the_exported_files(cli, demo, tmp_path):
    args = ["-m", "ndcg@10", "-m", "P@5", "--resamples", "500", "--seed", "3", "--format", "json"]
    stored = cli("--db", str(demo), "compare", "--runs", "bm25,flat", *args)
    assert stored.returncode == 0, stored.stderr
    drop = _unanswerable(demo)
    qrels = tmp_path / "qrels.txt"
    cli("--db", str(demo), "export", "qrels", "--level", "chunk", "--chunking", "sections", "--out", str(qrels))
    qrels.write_text("".join(x + "\n" for x in qrels.read_text().splitlines() if x.split()[0] not in drop))
    files = []
    for name in ("bm25", "flat"):
        files.append(tmp_path / f"{name}.txt")
        cli("--db", str(demo), "export", "run", name, "--out", str(files[-1]))
    by_file = cli("compare", str(qrels), *map(str, files), *args)
    assert by_file.returncode == 0, by_file.stderr
    a, b = json.loads(stored.stdout)["comparisons"], json.loads(by_file.stdout)["comparisons"]
    assert len(a) == len(b) == 2
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for key, value in x.items():
            assert value == (pytest.approx(y[key]) if isinstance(value, float) else y[key]), key


def test_stages_of_stored_runs_equal_stages_on_the_exported_files(cli, demo, tmp_path):
    drop = _unanswerable(demo)
    qrels = tmp_path / "qrels.txt"
    cli("--db", str(demo), "export", "qrels", "--level", "chunk", "--chunking", "sections", "--out", str(qrels))
    qrels.write_text("".join(x + "\n" for x in qrels.read_text().splitlines() if x.split()[0] not in drop))
    for name in ("bm25", "flat"):
        cli("--db", str(demo), "export", "run", name, "--out", str(tmp_path / f"{name}.txt"))
    args = ["-m", "recall@10", "-m", "ndcg@10", "--format", "json"]
    stored = cli("--db", str(demo), "stages", "--stage", "first=bm25", "--stage", "second=flat", *args)
    files = cli("stages", str(qrels), "--stage", f"first={tmp_path / 'bm25.txt'}",
                "--stage", f"second={tmp_path / 'flat.txt'}", *args)
    assert stored.returncode == 0 and files.returncode == 0, stored.stderr + files.stderr
    a, b = json.loads(stored.stdout), json.loads(files.stdout)
    assert a.keys() == b.keys()
    assert a["table"]["second"]["ndcg@10"] > 0
    for key in a:
        if key not in ("run_files", "qrels"):
            assert json.dumps(a[key], sort_keys=True) == json.dumps(b[key], sort_keys=True), key


def test_a_run_missing_documents_says_so(cli, demo, tmp_path):
    import shutil

    copy = tmp_path / "copy.duckdb"
    shutil.copy(demo, copy)
    extra = tmp_path / "more.jsonl"
    extra.write_text(json.dumps({"doc_id": "late-doc", "title": "Late", "text": "imported after the run"}) + "\n")
    done = cli("--db", str(copy), "import", "corpus", str(extra))
    assert done.returncode == 0, done.stderr
    ev = cli("--db", str(copy), "eval", "--runs", "bm25", "-m", "P@5")
    assert ev.returncode == 0, ev.stderr
    assert "note: run 'bm25' covers 41 of 42 documents" in ev.stderr


def test_stored_evaluations_list_the_history_with_their_means(cli, demo):
    from workbench.services.evaluation.evaluate import stored_evaluation_values, stored_evaluations
    from workbench.services.project.lifecycle import open_project

    done = cli("--db", str(demo), "eval", "--runs", "bm25,flat", "-m", "ndcg@10", "--labels", "human", "--format", "json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    db = open_project(demo)
    try:
        history = stored_evaluations(db)
        latest = history.iloc[0]
        assert latest["runs"] == ["bm25", "flat"] and latest["labels"] == "human"
        assert latest["qrels_policy"]["order"] == ["adjudicated", "sme", "imported"]
        assert latest["means"] == {r: pytest.approx(body[r]["aggregate"]) for r in ("bm25", "flat")}
        assert list(history["evaluation_id"]) == sorted(history["evaluation_id"], reverse=True)
        values = stored_evaluation_values(db, int(latest["evaluation_id"]))
        for run in ("bm25", "flat"):
            mine = values[values["run"] == run].set_index("query_id")["value"].to_dict()
            assert mine == pytest.approx({q: v["ndcg@10"] for q, v in body[run]["per_query"].items()})
    finally:
        db.close()
