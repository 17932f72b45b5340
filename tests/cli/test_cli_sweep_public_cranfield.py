"""``workbench sweep`` on a public collection: a seeded Cranfield subset, four chunk sizes × BM25 and
hybrid (BM25 + dense, RRF), end to end from the CLI (shared data: skipped locally when absent,
fails in CI).

The subset (``tests/support/public_subset.py``: 10 queries drawn with seed 20261130, every
document their qrels name, 40 seeded distractors; 137 documents, about 1,850 chunks over the four
chunkings) keeps the dense encoding of the hybrid cells within CI time on a 2-core machine. The
full-collection run for the note is the same command on the whole of ``../shared/datasets/cranfield``
(see the module docstring of ``tests/ui/test_ui_experiments_public.py`` for the command).

Oracle: every cell's nDCG@10 and recall@10 are recomputed by pytrec_eval from the stored run and
chunk qrels built here from the raw ``cranqrel`` (codes 1→3, 2→2, 3→1, 4→1, -1 left out; a
Cranfield label covers the whole document, so every chunk of a judged document carries its grade).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter

from tests.support.prerequisites import require_module, shared_path
from tests.support.public_subset import (
    BUDGETS,
    CHUNKINGS,
    N_QUERIES,
    smart_blocks,
    swept_subset_project,
    write_cranfield_subset,
)

GRADE = {"1": 3, "2": 2, "3": 1, "4": 1}  # cranqrel code -> 0-3 grade (README, SOURCE.md); -1 left out


def test_the_subset_keeps_every_judged_document_and_renumbers_the_queries(tmp_path):
    root = shared_path("datasets", "cranfield")
    subset = write_cranfield_subset(root, tmp_path / "s")
    original = [block for _, block in smart_blocks((root / "cran.qry").read_text())]
    mine = [block for _, block in smart_blocks(subset.queries.read_text())]
    assert len(mine) == len(subset.query_map) == N_QUERIES
    for new, old in subset.query_map.items():  # cranqrel numbers queries by position (SOURCE.md quirk 1)
        assert mine[int(new) - 1] == original[int(old) - 1]
    raw = [line.split() for line in (root / "cranqrel").read_text().splitlines() if line.strip()]
    expected = Counter((q, d, c) for q, d, c in raw if q in set(subset.query_map.values()))
    back = {old: new for new, old in subset.query_map.items()}
    written = Counter(tuple(line.split()) for line in subset.qrels.read_text().splitlines())
    assert written == Counter((back[q], d, c) for (q, d, c), n in expected.items() for _ in range(n))
    docs = {rid for rid, _ in smart_blocks(subset.corpus.read_text())}
    assert {d for _, d, _ in written} <= docs and len(docs) == len(subset.doc_ids)
    again = write_cranfield_subset(root, tmp_path / "t")  # seeded: the same subset every time
    assert again.doc_ids == subset.doc_ids and again.query_map == subset.query_map


def test_cranfield_sweep_four_chunk_sizes_by_two_retrievers(tmp_path_factory):
    pytrec_eval = require_module("pytrec_eval")
    # `workbench sweep` of public_subset.sweep_argv (4 chunkings x bm25, hybrid) run from scratch on
    # the imported subset, once per session (the page test of tests/ui/test_ui_experiments_public.py
    # starts from the same project): its exit code, output and stored runs.
    done = swept_subset_project(tmp_path_factory)
    subset, db = done.subset, str(done.db)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    cells = out["cells"]
    assert [(c["chunking"], c["retriever"]) for c in cells] == [(s, r) for s in CHUNKINGS for r in ("bm25", "hybrid")]
    for cell in cells:
        values = [cell["coverage"][b] for b in BUDGETS]
        assert 0 < values[0] and all(x <= y for x, y in itertools.pairwise(values)) and values[-1] <= 1, cell
        assert 0 <= cell["judged@10"] <= 1
    for budget, winner in out["winner_by_budget"].items():
        best = max(c["coverage"][budget] for c in cells)
        first = next(c for c in cells if c["coverage"][budget] == best)
        assert winner == {"chunking": first["chunking"], "retriever": first["retriever"]}
    assert set(out["winner_by_budget"]) == set(BUDGETS)

    # Oracle: pytrec_eval on the stored runs and chunk qrels made from the raw files here.
    from workbench.store.chunks import read_chunkings, read_chunks
    from workbench.store.database import Database
    from workbench.store.runs import read_run_rows

    doc_grade: dict[str, dict[str, int]] = {}
    for line in subset.qrels.read_text().splitlines():
        q, d, code = line.split()
        if code in GRADE:
            doc_grade.setdefault(q, {})[d] = GRADE[code]
    checked = 0
    with Database(db, read_only=True) as store:
        names = {json.dumps(json.loads(p) if isinstance(p, str) else p, sort_keys=True): n
                 for n, p in read_chunkings(store)[["name", "params"]].itertuples(index=False)}
        for cell in cells:
            size = int(cell["chunking"].split(":")[1])
            chunking = names[json.dumps({"overlap": 0, "size": size, "unit": "tokens"}, sort_keys=True)]
            chunks = read_chunks(store, chunking)
            qrels = {q: {str(c): g for c, d in zip(chunks["chunk_id"], chunks["doc_id"].astype(str))
                         for g in [grades.get(d)] if g} for q, grades in doc_grade.items()}
            rows = read_run_rows(store, f"sweep.{chunking}.{cell['retriever']}")
            run: dict[str, dict[str, float]] = {}
            # Stored scores: ties (common under RRF) are broken as trec_eval does, as the engine does.
            for q, c, score in rows[["query_id", "chunk_id", "score"]].itertuples(index=False):
                run.setdefault(str(q), {})[str(c)] = float(score)
            evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_10"})
            per_query = evaluator.evaluate(run)
            assert len(per_query) == N_QUERIES
            for ours, theirs in (("ndcg@10", "ndcg_cut_10"), ("recall@10", "recall_10")):
                expected = sum(v[theirs] for v in per_query.values()) / len(per_query)
                assert abs(cell["aggregate"][ours] - expected) < 1e-9, (cell["chunking"], cell["retriever"], ours)
                checked += 1
    assert checked == 16  # 8 cells × 2 measures, each a mean over the subset's 10 queries
