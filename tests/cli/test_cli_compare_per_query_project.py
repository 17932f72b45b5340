"""``workbench compare --runs A,B --per-query``: the project's stored runs query by query, against
the qrels the project compare uses, through ``python -m workbench``.

A hand-worked project (the files of :mod:`tests.cli.test_cli_compare_per_query`, imported) is
checked against numbers worked out by hand, and against the file mode on the same files; the
demo project (chunk runs, unanswerable queries) against the file mode on its exported qrels and
runs. The Evaluate page's service (:func:`workbench.services.evaluation.views.per_query_difference`)
is checked against the CLI's rows.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.support.trec_files import write_run

# the file mode's test data without its "-1" line (the project stores grades 0-3 only): d8 is
# then unlabelled, which both modes mark unjudged as the file mode marks a label below 0
QRELS = "q1 0 d1 1\nq1 0 d2 1\nq2 0 d3 1\nq3 0 d4 1\nq3 0 d5 2\nq4 0 d6 1\nq4 0 d9 0\n"
BASE_TOP = {"q1": ["d1", "x1"], "q2": ["x1", "x2"], "q3": ["d4", "d5"], "q4": ["d8", "d6"]}
NEW_TOP = {"q1": ["d1", "d2"], "q2": ["d3", "x1"], "q3": ["d4", "x1"], "q4": ["d6", "x1"]}
DOCS = ["d1", "d2", "d3", "d4", "d5", "d6", "d8", "d9", "x1", "x2"]

# precision@2 by hand: base q1 .5 q2 0 q3 1 q4 .5; new q1 1 q2 .5 q3 .5 q4 .5
# delta ascending, ties by query id: q3 -.5, q4 0, q1 +.5, q2 +.5
EXPECTED = [
    ("q3", 1.0, 0.5, -0.5, [("d4", 1), ("d5", 2)], [("d4", 1), ("x1", None)]),
    ("q4", 0.5, 0.5, 0.0, [("d8", None), ("d6", 1)], [("d6", 1), ("x1", None)]),
    ("q1", 0.5, 1.0, 0.5, [("d1", 1), ("x1", None)], [("d1", 1), ("d2", 1)]),
    ("q2", 0.0, 0.5, 0.5, [("x1", None), ("x2", None)], [("d3", 1), ("x1", None)]),
]


def _ok(*args):
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def hand(tmp_path_factory):
    """A project holding the hand-worked corpus, queries, qrels and the runs base and new."""
    folder = tmp_path_factory.mktemp("perquery")
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": d, "text": f"text of {d}"}) + "\n"
                                                 for d in DOCS))
    (folder / "queries.tsv").write_text("".join(f"q{i}\tquestion {i}\n" for i in range(1, 5)))
    (folder / "t.qrels").write_text(QRELS)
    write_run(folder / "base.run", BASE_TOP, "base")
    write_run(folder / "new.run", NEW_TOP, "new")
    db = folder / "p.duckdb"
    _ok("--db", str(db), "init")
    for kind, name in (("corpus", "corpus.jsonl"), ("queries", "queries.tsv"), ("qrels", "t.qrels"),
                       ("run", "base.run"), ("run", "new.run")):
        _ok("--db", str(db), "import", kind, str(folder / name))
    return folder


def _rows(payload):
    return [(r["query_id"], r["baseline_value"], r["run_value"], r["delta"],
             [(t["id"], t["grade"]) for t in r["baseline_top"]], [(t["id"], t["grade"]) for t in r["run_top"]])
            for r in payload["per_query"]]


def test_stored_runs_per_query_by_hand(hand):
    done = _ok("--db", str(hand / "p.duckdb"), "compare", "--runs", "base,new", "-m", "P@2", "--per-query",
               "--top", "2", "--test", "ttest", "--format", "json")
    payload = json.loads(done.stdout)
    assert _rows(payload) == EXPECTED
    assert {(r["measure"], r["baseline"], r["run"]) for r in payload["per_query"]} == {("P@2", "base", "new")}
    assert payload["comparisons"][0]["delta"] == pytest.approx(0.125)  # the normal comparison too
    assert payload["metadata"]["run_files"] == {"base": "stored run base", "new": "stored run new"}
    assert "qrels policy:" in done.stderr and "stored as evaluation" in done.stderr


def test_stored_and_file_mode_agree_on_the_same_files(hand):
    args = ["-m", "P@2", "-m", "ndcg@2", "--per-query", "--top", "2", "--test", "ttest", "--format", "json"]
    stored = json.loads(_ok("--db", str(hand / "p.duckdb"), "compare", "--runs", "base,new", *args).stdout)
    files = json.loads(_ok("compare", str(hand / "t.qrels"), str(hand / "base.run"), str(hand / "new.run"),
                           *args).stdout)
    assert stored["per_query"] == files["per_query"]
    assert len(stored["per_query"]) == 8 and stored["per_query"][0].keys() == files["per_query"][0].keys()
    assert stored["comparisons"] == files["comparisons"]


def test_stored_runs_print_the_table_and_the_per_query_section(hand):
    done = _ok("--db", str(hand / "p.duckdb"), "compare", "--runs", "base,new", "-m", "P@2", "--per-query",
               "--top", "2")
    out = done.stdout
    assert out.index("W/T/L") < out.index("per query: P@2, new - base (sorted by delta; (?) = unjudged)")
    lines = [line for line in out.splitlines() if line[:3] in ("q1 ", "q2 ", "q3 ", "q4 ")]
    assert [line.split()[0] for line in lines] == ["q3", "q4", "q1", "q2"]
    assert lines[1].endswith("d8(?) d6(1)  d6(1) x1(?)")


def test_corrected_labels_have_no_per_query_values(hand):
    done = run_cli("--db", str(hand / "p.duckdb"), "compare", "--runs", "base,new", "-m", "P@2", "--per-query",
                   "--labels", "corrected")
    assert done.returncode == 2 and "corrected estimates (PPI++) are not per query" in done.stderr, done.stderr


def test_the_evaluate_page_service_gives_the_same_rows(hand):
    from workbench.services.evaluation import views
    from workbench.store.database import Database

    with Database(hand / "p.duckdb") as db:
        evaluation = views.evaluate_runs(db, ["base", "new"], ["P@2"])
        frame = views.per_query_difference(db, evaluation, "base", "new", "P@2", k=2)
        assert [(r.query_id, r.baseline_value, r.run_value, r.delta, r.baseline_top, r.run_top)
                for r in frame.itertuples(index=False)] == EXPECTED
        assert frame["query"].tolist() == ["question 3", "question 4", "question 1", "question 2"]
        # the other way round: the baseline is the run chosen first, delta changes sign
        flipped = views.per_query_difference(db, evaluation, "new", "base", "P@2", k=2)
        assert flipped["query_id"].tolist() == ["q1", "q2", "q4", "q3"]
        assert flipped["delta"].tolist() == [-0.5, -0.5, 0.0, 0.5]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo project with a second chunk run (flat), both runs and the qrels exported."""
    folder = tmp_path_factory.mktemp("perquerydemo")
    from tests.support.templates import demo_project

    db = demo_project(folder / "demo.duckdb")  # what `init --demo` builds: the worker's template
    _ok("--db", str(db), "retrieve", "bm25", "--chunking", "sections", "--name", "flat", "--k1", "0.5",
        "--b", "0.3", "--no-progress")
    _ok("--db", str(db), "export", "qrels", "--level", "chunk", "--chunking", "sections",
        "--out", str(folder / "qrels.txt"))
    for run in ("bm25", "flat"):
        _ok("--db", str(db), "export", "run", run, "--out", str(folder / f"{run}.txt"))
    return folder


def test_demo_chunk_runs_agree_with_the_file_mode_on_the_exports(demo):
    args = ["-m", "ndcg@10", "-m", "P@5", "--per-query", "--top", "3", "--format", "json"]
    stored = json.loads(_ok("--db", str(demo / "demo.duckdb"), "compare", "--runs", "bm25,flat", *args).stdout)
    files = json.loads(_ok("compare", str(demo / "qrels.txt"), str(demo / "bm25.txt"), str(demo / "flat.txt"),
                           *args).stdout)
    # the export leaves unanswerable queries out of the qrels, so neither mode lists them
    assert [r["query_id"] for r in stored["per_query"]] == [r["query_id"] for r in files["per_query"]]
    for a, b in zip(stored["per_query"], files["per_query"]):
        assert a == {**b, "baseline_value": pytest.approx(b["baseline_value"]),
                     "run_value": pytest.approx(b["run_value"]), "delta": pytest.approx(b["delta"])}
    ndcg = [r for r in stored["per_query"] if r["measure"] == "ndcg@10"]
    assert [r["delta"] for r in ndcg] == sorted(r["delta"] for r in ndcg)
    assert any(t["grade"] is None for r in ndcg for t in r["run_top"]), "the demo's runs reach unjudged chunks"
    assert any(r["delta"] != 0 for r in ndcg), "the two runs differ on some query"
