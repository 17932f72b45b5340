"""The label-multiplier figures of ``docs/label-multipliers.md`` match what the code computes: the demo's synthetic
queries (offline-template baseline, deterministic) and the DL19 near-duplicate propagation."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from tests.support.prerequisites import REPO, shared_path
from workbench.config import load_settings
from workbench.core.documents import near_duplicates as nd
from workbench.core.metrics.readers import read_qrels
from tests.support.templates import demo_project
from workbench.services.project.lifecycle import open_project
from workbench.services.qrels.synthetic_queries import bm25_baseline, synthesize


def _page() -> str:
    return " ".join((REPO / "docs" / "label-multipliers.md").read_text(encoding="utf-8").split())


def test_docs_synthetic_query_figures(tmp_path, monkeypatch):
    m = re.search(r"On the demo \(`sections`, (\d+) chunks × (\d+), seed (\d+), offline-template\): (\d+) questions, "
                  r"overlap ([\d.]+) before → ([\d.]+) after rewriting, (\d+) flagged; BM25 finds the source chunk "
                  r"\(hit@10\) for ([\d.]+) of the original questions and ([\d.]+) of the rewritten ones \(MRR@10 "
                  r"([\d.]+) → ([\d.]+)\)", _page())
    assert m, "docs/label-multipliers.md has no synthetic-query demo figures"
    chunks, k, seed, created, before, after, flagged, hit0, hit1, mrr0, mrr1 = m.groups()
    path = tmp_path / "demo.duckdb"
    demo_project(path)  # what init --demo builds: a copy of the worker's template
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings = load_settings(None, {"project": {"db": str(path)}, "judge": {"model": "offline-template"}})
    report = synthesize(settings, "sections", per_chunk=int(k), seed=int(seed))
    assert (report.chunks, report.created, report.flagged) == (int(chunks), int(created), int(flagged))
    assert f"{report.overlap_before:.3f}" == before and f"{report.overlap_after:.3f}" == after
    with open_project(path) as db:
        base = bm25_baseline(db, "sections", k=10)
    # within 0.001 of the page: BM25 ties among the 837 questions' scores order differently on
    # another CPU's float arithmetic (0.915 against the page's 0.916 on an AVX2-only AMD EPYC)
    found = [base[s][m] for s in ("before", "after") for m in ("hit", "mrr")]
    assert all(abs(f - float(d)) <= 0.0011 for f, d in zip(found, [hit0, mrr0, hit1, mrr1])), (found, m.groups())


def test_docs_dl19_propagation_figures():
    m = re.search(r"at Jaccard ≥ 0\.8: ([\d,]+) pairs in ([\d,]+) clusters, (\d+) labels propagated; propagated vs "
                  r"direct grades on ([\d,]+) labelled pairs: exact ([\d.]+), binary \(grade ≥ 2\) ([\d.]+), κ ([\d.]+)",
                  _page())
    assert m, "docs/label-multipliers.md has no DL19 propagation figures"
    pairs_n, clusters_n, propagated, n, exact, binary, kappa = m.groups()
    data = shared_path("datasets", "trec-dl-2019-passage")
    docs = [json.loads(line) for line in (data / "dl2019_document.jsonl").read_text(encoding="utf-8").splitlines()]
    pairs = nd.near_duplicate_pairs([d["docid"] for d in docs], [d["doc"] for d in docs], threshold=0.8)
    qrels = read_qrels(data / "qrels.dl19-passage.txt").to_dict()
    labels = pd.DataFrame([(q, d, g) for q, items in qrels.items() for d, g in items.items()],
                          columns=["query_id", "item_id", "grade"])
    got = nd.propagation_agreement(labels, pairs)
    assert f"{len(pairs):,}" == pairs_n and f"{len(set(nd.clusters(pairs).values())):,}" == clusters_n
    assert len(nd.propagate(labels, pairs)) == int(propagated)
    assert f"{got['n']:,}" == n
    assert (f"{got['exact']:.3f}", f"{got['binary']:.3f}", f"{got['kappa']:.3f}") == (exact, binary, kappa)
    # the kappa is scikit-learn's on the leave-one-out grades
    from sklearn.metrics import cohen_kappa_score

    loo = nd.leave_one_out(labels, pairs)
    assert got["kappa"] == pytest.approx(cohen_kappa_score(loo["direct"], loo["propagated"], labels=[0, 1, 2, 3]))
