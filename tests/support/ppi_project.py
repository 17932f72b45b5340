"""A judged document-level project (tests.support.calibration_project) with two stored runs,
for the project mode of PPI++ (``--labels corrected``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.support import templates
from tests.support.calibration_project import DOCS_PER_QUERY, QUERIES, build_project
from workbench.services.calibration import workflow as cal
from workbench.store import calibration as store
from workbench.store.database import Database
from workbench.store.runs import set_run_scope, write_run

RUNS = ("ra", "rb")


def build_ppi_project(path, *, seed: int = 0, judge_noise: float = 0.4):
    """The calibration project plus runs ``ra`` and ``rb`` (document level): each ranks its
    query's 12 pooled documents in a seeded random order, ``rb`` with the truly relevant ones
    pushed up, plus 2 documents of other queries (unjudged there). Returns ``(db, truth)``.

    Built once per test process for each ``(seed, judge_noise)`` and copied to ``path``
    (:mod:`tests.support.templates`)."""
    truth = templates.copy_of(("ppi_project", seed, judge_noise),
                              lambda where: _build(where, seed=seed, judge_noise=judge_noise), path)
    return Database(path), dict(truth)


def _build(path, *, seed: int, judge_noise: float) -> dict:
    db, truth = build_project(path, seed=seed, judge_noise=judge_noise)
    rng = np.random.default_rng(seed + 1)
    for run, boost in zip(RUNS, (0.0, 0.6)):
        rows = []
        for qi in range(QUERIES):
            q = f"q{qi:02d}"
            docs = [f"d{qi * DOCS_PER_QUERY + j}" for j in range(DOCS_PER_QUERY)]
            others = [f"d{((qi + 1) % QUERIES) * DOCS_PER_QUERY + j}" for j in range(2)]
            scores = rng.random(len(docs)) + boost * np.array([truth[(q, d)] >= 2 for d in docs])
            ranked = list(zip(docs + others, list(scores) + list(rng.random(2) * 0.5)))
            ranked.sort(key=lambda t: -t[1])
            rows += [{"query_id": q, "doc_id": d, "chunk_id": None, "rank": r + 1, "score": float(s)}
                     for r, (d, s) in enumerate(ranked)]
        with db.transaction() as tx:
            write_run(tx, run, "test", pd.DataFrame(rows))
            set_run_scope(tx, run, "doc", None)
    db.close()
    return truth


def label_queries(db, sample: str, truth: dict, queries: int, *, annotator: str = "sme-a",
                  partial: int = 0) -> list[str]:
    """Grade every pair of the sample's first ``queries`` queries (labelling order) with the
    true grade, and all but one pair of the next ``partial`` queries; returns the fully labelled
    query ids."""
    items = store.read_sample_items(db, sample)
    order = list(dict.fromkeys(items["query_id"].astype(str)))
    full, part = order[:queries], order[queries:queries + partial]
    for q in full + part:
        rows = items[items["query_id"] == q]
        if q in part:
            rows = rows.iloc[1:]
        for row in rows.itertuples(index=False):
            cal.save_label(db, sample, annotator, int(row.position), truth[(row.query_id, row.doc_id)])
    return full


def export_files(path, out, labelled) -> tuple:
    """The project's labels and runs as files by its export commands (real processes): the judge's
    qrels (every ok LLM grade), the SMEs' qrels of the ``labelled`` queries, and one TREC run file
    per run; what ``workbench ppi`` reads. Returns ``(human_qrels, judge_qrels, [run files])``."""
    import json

    from tests.conftest import run_cli

    for source in ("llm", "human"):
        proc = run_cli("--db", str(path), "export", "judgments", "--source", source, "--pool", "p",
                       "--out", str(out / f"{source}.jsonl"), cwd=out)
        assert proc.returncode == 0, proc.stderr
    runs = []
    for r in RUNS:
        proc = run_cli("--db", str(path), "export", "run", r, "--out", str(out / f"{r}.run"), cwd=out)
        assert proc.returncode == 0, proc.stderr
        runs.append(out / f"{r}.run")
    judge = [json.loads(line) for line in (out / "llm.jsonl").read_text().splitlines()]
    human = [json.loads(line) for line in (out / "human.jsonl").read_text().splitlines()]
    (out / "judge.qrels").write_text("".join(f"{j['query_id']} 0 {j['doc_id']} {j['grade']}\n"
                                             for j in judge if j["status"] == "ok"))
    (out / "human.qrels").write_text("".join(f"{h['query_id']} 0 {h['doc_id']} {h['grade']}\n"
                                             for h in human if h["query_id"] in set(labelled)))
    return out / "human.qrels", out / "judge.qrels", runs
