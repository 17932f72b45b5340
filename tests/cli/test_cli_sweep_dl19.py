"""``workbench sweep`` on TREC DL19 passages (shared data; skipped locally when absent, fails in CI).

The judged passages are the corpus; NIST's passage qrels become whole-passage span labels, so
every chunking of a passage gets chunk qrels from the same spans. Checks the sweep runs end to
end from the CLI over four chunk sizes, the JSON shape, and that the coverage of a configuration
grows with the budget (more context never covers less).
"""

from __future__ import annotations

import json

from tests.conftest import run_cli
from tests.support.prerequisites import shared_path


def test_dl19_sweep_four_chunk_sizes(tmp_path):
    folder = shared_path("datasets", "trec-dl-2019-passage")
    db = str(tmp_path / "dl19.duckdb")
    for step in (["init"], ["import", "corpus", "--id-field", "docid", str(folder / "dl2019_document.jsonl")],
                 ["import", "queries", str(folder / "topics.dl19-passage.txt")],
                 ["import", "qrels", str(folder / "qrels.dl19-passage.txt")]):
        done = run_cli("--db", db, *step, timeout=600)
        assert done.returncode == 0, done.stderr
    done = run_cli("--db", db, "sweep", "--chunkings", "fixed:16,fixed:32,fixed:64,fixed:128", "--retrievers", "bm25",
                   "-m", "ndcg@10", "--rel", "2", "--budgets", "250,1000", "--format", "json", "--no-progress",
                   timeout=1200)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert [c["chunking"] for c in out["cells"]] == ["fixed:16", "fixed:32", "fixed:64", "fixed:128"]
    for cell in out["cells"]:
        assert 0 < cell["coverage"]["250"] <= cell["coverage"]["1000"] <= 1
        assert 0 <= cell["aggregate"]["ndcg@10"] <= 1
    assert set(out["winner_by_budget"]) == {"250", "1000"}
