"""``workbench sweep`` end to end on the demo project (real subprocesses, a DuckDB file on disk)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import run_cli

TOKEN = re.compile(r"\w+|[^\w\s]")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("sweep")
    from tests.support.templates import demo_project

    return demo_project(folder / "demo.duckdb")  # what `init --demo` builds: the worker's template


def sweep(db: Path, *extra: str, env: dict | None = None):
    return run_cli("--db", str(db), "sweep", "--chunkings", "fixed:64,fixed:256", "--retrievers", "bm25",
                   "-m", "ndcg@10", "-m", "recall@10", "--labels", "human", "--budgets", "500,2000",
                   "--no-progress", *extra, env=env, timeout=300)


def floats(value):
    if isinstance(value, float):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from floats(v)
    elif isinstance(value, list):
        for v in value:
            yield from floats(v)


def brute_coverage(db: Path, run: str, budget: int) -> float:
    """Mean budgeted coverage by character sets, straight from the tables (the oracle)."""
    from workbench.store.database import Database

    con = Database(db, read_only=True)
    try:
        texts = dict(con.query_all("SELECT doc_id, text FROM documents"))
        rows = con.query_all("""SELECT r.query_id, r.rank, k.doc_id, k.start, k."end" FROM run_rows r
                                JOIN chunks k USING (chunk_id) WHERE r.run = ? ORDER BY r.query_id, r.rank""", [run])
        # the queries the evaluation scores: unanswerable ones (type unanswerable) are left out of
        # every column, coverage included (issue 19: one query set for all columns)
        gold = con.query_all("""SELECT query_id, doc_id, start, "end" FROM judgments
                                WHERE status = 'ok' AND grade >= 1 AND source <> 'llm'
                                  AND query_id NOT IN (SELECT query_id FROM queries
                                                       WHERE tags ->> 'type' = 'unanswerable')""")
    finally:
        con.close()
    starts_of = {}
    for d, t in texts.items():
        s = [m.start() for m in TOKEN.finditer(t)]
        starts_of[d] = ([0] + s[1:]) if s else ([0] if t else [])
    values = []
    for q in sorted({g[0] for g in gold}):
        gold_chars = {(d, i) for (qq, d, s, e) in gold if qq == q for i in range(s, e)}
        if not gold_chars:
            continue
        used, chars = 0, set()
        for (_, _, d, s, e) in (r for r in rows if r[0] == q):
            owned = [p for p in starts_of[d] if s <= p < e]
            if used + len(owned) <= budget:
                chars |= {(d, i) for i in range(s, e)}
                used += len(owned)
                continue
            if budget - used > 0:
                chars |= {(d, i) for i in range(s, owned[budget - used])}
            break
        values.append(len(chars & gold_chars) / len(gold_chars))
    return float(np.mean(values))


def test_sweep_json_shape_coverage_oracle_and_resume(demo):
    first = sweep(demo, "--format", "json")
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert set(out) == {"cells", "winner_by_budget"}
    assert [(c["chunking"], c["retriever"]) for c in out["cells"]] == [("fixed:64", "bm25"), ("fixed:256", "bm25")]
    for cell in out["cells"]:
        assert set(cell) == {"chunking", "retriever", "queries", "aggregate", "coverage", "judged@10"}
        assert cell["queries"] == 40  # 44 less the 4 unanswerable
        assert set(cell["aggregate"]) == {"ndcg@10", "recall@10"}
        assert set(cell["coverage"]) == {"500", "2000"}
        assert 0 <= cell["judged@10"] <= 1
    checked = 0
    for cell, run in zip(out["cells"], ["sweep.sweep-fixed64.bm25", "sweep.sweep-fixed256.bm25"]):
        for budget in ("500", "2000"):
            assert cell["coverage"][budget] == pytest.approx(brute_coverage(demo, run, int(budget)))
            checked += 1
    assert checked == 4
    for budget, winner in out["winner_by_budget"].items():
        best = max(out["cells"], key=lambda c: c["coverage"][budget])
        assert winner == {"chunking": best["chunking"], "retriever": best["retriever"]}
    # the stored evaluation agrees with `workbench eval --runs` on the same run
    ev = run_cli("--db", str(demo), "eval", "--runs", "sweep.sweep-fixed64.bm25", "--labels", "human",
                 "-m", "ndcg@10", "--format", "json", timeout=300)
    assert ev.returncode == 0, ev.stderr
    assert any(v == pytest.approx(out["cells"][0]["aggregate"]["ndcg@10"]) for v in floats(json.loads(ev.stdout)))
    again = sweep(demo, "--format", "json")
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("reusing run") == 2
    assert json.loads(again.stdout) == out


def test_low_judged_cells_list_pairs_and_pool_them(demo):
    table = sweep(demo)
    assert table.returncode == 0, table.stderr
    assert "unjudged top-10 pairs to pool and judge" in table.stdout
    assert "winner at 500 tokens" in table.stdout and "p95 ms" in table.stdout
    pooled = sweep(demo, "--pool", "newpairs")
    assert pooled.returncode == 0, pooled.stderr
    assert "added to pool newpairs.sweep-fixed64" in pooled.stdout
    stats = run_cli("--db", str(demo), "pool-stats", "--name", "newpairs.sweep-fixed64", timeout=300)
    assert stats.returncode == 0, stats.stderr


def test_bad_specs_are_one_line_errors(demo):
    for bad in (["--chunkings", "fixed:0"], ["--chunkings", "fixed:64:64"], ["--chunkings", "paragraphs"],
                ["--retrievers", "splade"], ["--budgets", "1k"]):
        args = {"--chunkings": "fixed:64", "--retrievers": "bm25", "--budgets": "1000"}
        args[bad[0]] = bad[1]
        done = run_cli("--db", str(demo), "sweep", *[x for kv in args.items() for x in kv], "-m", "ndcg@10",
                       timeout=120)
        assert done.returncode == 3, done.stderr  # bad input, whichever spec is wrong
        assert "Traceback" not in done.stderr and "'sweep'" not in done.stderr  # the user's spec is named
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    torch_int8 = run_cli("--db", str(demo), "sweep", "--chunkings", "fixed:64", "--retrievers", "dense",
                         "-m", "ndcg@10", "--backend", "torch", "--precision", "int8-safe", timeout=120)
    assert torch_int8.returncode == 3
    assert torch_int8.stderr.strip() == ("workbench sweep: error: --precision int8-safe applies to "
                                         "--backend onnx only; add --backend onnx")


def test_dense_without_sentence_transformers_is_skipped_per_cell(demo, tmp_path):
    blocker = tmp_path / "block" / "sentence_transformers"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'sentence_transformers'\")\n")
    copy = tmp_path / "copy.duckdb"
    shutil.copy(demo, copy)
    done = run_cli("--db", str(copy), "sweep", "--chunkings", "fixed:96", "--retrievers", "bm25,dense,hybrid",
                   "-m", "ndcg@10", "--format", "json", "--no-progress", "--backend", "torch",
                   env={"PYTHONPATH": str(tmp_path / "block")}, timeout=300,
                       process=True)  # the blocker works on a fresh interpreter's imports
    assert done.returncode == 0, done.stderr
    assert "dense skipped: dense retrieval needs sentence-transformers" in done.stderr
    assert "hybrid skipped:" in done.stderr
    assert [c["retriever"] for c in json.loads(done.stdout)["cells"]] == ["bm25"]


def test_latency_sidecar_import(demo, tmp_path):
    good = tmp_path / "lat.jsonl"
    good.write_text("\n".join(json.dumps({"query_id": f"q{i:03d}", "latency_ms": float(i)}) for i in range(1, 21)))
    done = run_cli("--db", str(demo), "latency", "import", "--run", "bm25", str(good), timeout=120)
    assert done.returncode == 0, done.stderr
    # numpy percentile of 1..20: p50 10.5, p95 19.05
    assert "p50 10.50 ms, p95 19.05 ms" in done.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query_id": "q001", "latency_ms": 3}\n{"query_id": "q002", "latency_ms": -1}\n')
    done = run_cli("--db", str(demo), "latency", "import", "--run", "bm25", str(bad), timeout=120)
    assert done.returncode != 0 and f"{bad}:2" in done.stderr and "Traceback" not in done.stderr


def test_gold_spans_follow_the_one_qrels_rule(demo, tmp_path):
    """The offline judge labels every pooled pair but has not passed the calibration gate: a
    merged sweep admits none of its labels (as qrels, export and evaluation do) and measures
    exactly what a human-only one does; `--labels llm` looks at the judge alone (the opt-in)."""
    path = tmp_path / "judged.duckdb"
    shutil.copy(demo, path)
    judged = run_cli("--db", str(path), "judge", "--pool", "demo", "--model", "offline-lexical", timeout=600)
    assert judged.returncode == 0, judged.stderr
    common = ["--chunkings", "fixed:256", "--retrievers", "bm25", "-m", "ndcg@10", "--budgets", "1000",
              "--format", "json"]
    llm = run_cli("--db", str(path), "sweep", *common, "--labels", "llm", timeout=600)
    merged = run_cli("--db", str(path), "sweep", *common, "--labels", "merged", timeout=600)
    human = run_cli("--db", str(path), "sweep", *common, "--labels", "human", timeout=600)
    assert llm.returncode == merged.returncode == human.returncode == 0, llm.stderr + merged.stderr + human.stderr
    assert "LLM from every judge configuration (opt-in)" in llm.stderr
    assert json.loads(merged.stdout)["cells"] == json.loads(human.stdout)["cells"]
    assert json.loads(llm.stdout)["cells"] != json.loads(human.stdout)["cells"]  # the judge's labels do differ
