"""Coverage and width of ``--labels corrected`` (project-mode PPI++) on a simulated project.

The project of ``tests/support/ppi_project.py``: 30 queries x 12 pooled documents, a noisy judge
(``--judge-noise``: the share of its grades drawn at random, default 0.4) and the true grade of
every pair; two stored runs. Each repetition draws a query sample (``design="queries"``) with its
own seed, grades every pair of its queries with the true grade (a perfect SME), and asks for the
corrected estimates; the target is each run's mean over all 30 queries on the true grades (and the
difference of the two runs). Prints the share of 95% intervals covering the target and the
distribution of the width ratio PPI++ / human-only per interval (median, p95, max, share > 1.05;
runs and the difference), and the share of intervals whose standard error was capped at the
human-only one.

    .venv/bin/python -m benchmarks.ppi_project_coverage --reps 40 --queries 10
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, run from anywhere


def main(argv=None) -> None:
    from tests.support.ppi_project import RUNS, build_ppi_project
    from workbench.core.metrics.evaluation import evaluate
    from workbench.core.metrics.qrels_and_runs import Qrels
    from workbench.services.calibration import workflow as cal
    from workbench.services.evaluation.evaluate import stored_run
    from workbench.services.evaluation.ppi_project import corrected_project
    from workbench.store import calibration as store

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--queries", type=int, default=10)
    ap.add_argument("--measure", default="ndcg@10")
    ap.add_argument("--judge-noise", type=float, default=0.4, help="share of the judge's grades drawn at random")
    args = ap.parse_args(argv)
    m = args.measure
    with tempfile.TemporaryDirectory() as tmp:
        db, truth = build_ppi_project(Path(tmp) / "p.duckdb", judge_noise=args.judge_noise)
        keys = sorted(truth)
        true_q = Qrels(pa.array([q for q, _ in keys]), pa.array([d for _, d in keys]),
                       np.array([truth[k] for k in keys], dtype=np.int64))
        target = {}
        for r in RUNS:
            res = evaluate(true_q, stored_run(db, r, "doc"), [m], include_no_relevant=True)
            target[r] = float(np.mean(res.scores[m]))
        target_diff = target[RUNS[1]] - target[RUNS[0]]
        hits, hits_h, ratios, n, capped = {"runs": 0, "diff": 0}, {"runs": 0, "diff": 0}, [], 0, 0
        for rep in range(args.reps):
            name = f"q{rep}"
            cal.create_sample(db, name, "p", design="queries", queries=args.queries, seed=1000 + rep)
            for row in store.read_sample_items(db, name).itertuples(index=False):
                cal.save_label(db, name, "sme", int(row.position), truth[(row.query_id, row.doc_id)])
            rep_ = corrected_project(db, list(RUNS), [m], sample=name).report
            for r in RUNS:
                e = rep_.runs[m][r]
                hits["runs"] += e.ppi.low <= target[r] <= e.ppi.high
                hits_h["runs"] += e.human_only.low <= target[r] <= e.human_only.high
                ratios.append(e.width_ratio)
                capped += e.capped
            d = rep_.differences[m][RUNS[1]]
            ratios.append(d.width_ratio)
            capped += d.capped
            hits["diff"] += d.ppi.low <= target_diff <= d.ppi.high
            hits_h["diff"] += d.human_only.low <= target_diff <= d.human_only.high
            n += 1
        db.close()
    print(f"judge noise {args.judge_noise}: {n} query samples of {args.queries} of 30 queries, {m}; "
          f"targets {target} (diff {target_diff:+.4f})")
    print(f"coverage of the 95% intervals, runs: PPI++ {hits['runs'] / (2 * n):.3f}, human-only "
          f"{hits_h['runs'] / (2 * n):.3f}; difference: PPI++ {hits['diff'] / n:.3f}, human-only {hits_h['diff'] / n:.3f}")
    r = np.asarray(ratios, dtype=np.float64)
    ok = r[np.isfinite(r)]
    print(f"width PPI++ / human-only per interval (runs and difference, {ok.size} of {r.size} defined): "
          f"median {float(np.median(ok)):.3f}, p95 {float(np.quantile(ok, 0.95)):.3f}, max {float(ok.max()):.3f}, "
          f"share > 1.05 {float(np.mean(ok > 1.05)):.3f}; SE capped at the human-only one: {capped / r.size:.3f}")


if __name__ == "__main__":
    main()
