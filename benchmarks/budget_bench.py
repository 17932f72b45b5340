"""Budgeted judging on TREC DL 2019 passages: how close does a budgeted subset of the pool get to
the system ranking under the full NIST labels?

The six shipped runs (BM25, BM25+RM3, TAS-B, ada-002, SPLADE, RepLLaMA) are pooled to a depth
(default 10, RRF priority); for each strategy of :mod:`workbench.core.judging.budget` and each
budget (pairs judged), the selected pairs take their NIST grade (an unjudged pooled pair counts
0), everything else stays unjudged, and each run's nDCG@10 (and AP) is computed with the metric
engine. The table is Kendall's tau-b between that ranking and the full-qrels ranking; ``random``
is the mean over seeds (range in brackets). ``disagreement`` uses the two LLM label sets shipped
with the collection (Llama-70B and Flan-T5-large): spread = |grade_a - grade_b|.

    .venv/bin/python benchmarks/budget_bench.py [--depth 10] [--seeds 10] [--measure ndcg@10]

Seeded: the same arguments print the same table.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from workbench.core.judging import budget as bj
from workbench.core.metrics.readers import read_qrels, read_trec_run  # noqa: E402

DATA = REPO.parent / "shared" / "datasets" / "trec-dl-2019-passage"
RUNS = ("BM25", "BM25_RM3", "D_BERT_KD_TASB", "OPEN_AI_ADA2", "SPLADE_P_P_ENSEMBLE_DISTIL", "REP_LLAMA")


def as_dict(obj) -> dict:
    """{query: {item: value}} from a Qrels/Run value or a dict."""
    if isinstance(obj, dict):
        return obj
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise TypeError(type(obj))


def load(data: Path):
    qrels = as_dict(read_qrels(data / "qrels.dl19-passage.txt"))
    runs = {name: as_dict(read_trec_run(data / "runs" / name / "trec_results_dl19_top100.txt")) for name in RUNS}
    judged_queries = set(qrels)
    runs = {n: {q: items for q, items in r.items() if q in judged_queries} for n, r in runs.items()}
    a = as_dict(read_qrels(data / "llm-labels" / "dl2019_test_4prompts_llama70b.txt"))
    b = as_dict(read_qrels(data / "llm-labels" / "dl2019_test_4prompts_flant5large.txt"))
    spread = {(q, d): abs(int(g) - int(b[q][d])) for q, items in a.items() for d, g in items.items()
              if q in b and d in b[q]}
    return qrels, runs, spread


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--depth", type=int, default=10)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--measure", action="append", default=None)
    p.add_argument("--budgets", default="50,100,200,300,400,600,800,1000,all")
    args = p.parse_args(argv)
    measures = args.measure or ["ndcg@10", "AP"]
    started = time.perf_counter()
    qrels, runs, spread = load(args.data)
    pool = bj.pool_from_runs(runs, args.depth)
    budgets = [len(pool) if b == "all" else int(b) for b in args.budgets.split(",")]
    budgets = sorted({min(b, len(pool)) for b in budgets})
    print(f"DL19 passages: {len(qrels)} queries, {len(runs)} runs, depth-{args.depth} pool of {len(pool):,} pairs; "
          f"spread known for {sum((q, i) in spread for q, i in zip(pool['query_id'], pool['item_id'])):,} pairs; "
          f"random = mean of {args.seeds} seeds")
    for measure in measures:
        truth = bj.system_scores(qrels, runs, measure)
        print(f"\n{measure} under the full qrels: " + ", ".join(f"{n} {v:.4f}" for n, v in
                                                               sorted(truth.items(), key=lambda kv: -kv[1])))
        table = bj.simulate(qrels, runs, depth=args.depth, budgets=budgets, measure=measure,
                            seeds=range(args.seeds), spread=spread)
        strategies = list(dict.fromkeys(table["strategy"]))
        print(f"Kendall tau-b vs the full-qrels ranking ({measure}), by budget (pairs judged):")
        print("| budget | share | " + " | ".join(strategies) + " |")
        print("|---:|---:|" + "---:|" * len(strategies))
        for budget, group in table.groupby("budget", sort=True):
            cells = []
            for s in strategies:
                row = group[group["strategy"] == s].iloc[0]
                cell = f"{row['tau']:.3f}"
                if s == "random":
                    cell += f" [{row['tau_min']:.2f}, {row['tau_max']:.2f}]"
                cells.append(cell)
            print(f"| {budget} | {group['share'].iloc[0]:.0%} | " + " | ".join(cells) + " |")
    print("\nExpected effect on the intervals (combined strategy): mean over the runs of the P@10 (grade >= 2)\n"
          "interval from unjudged pairs in the top 10 (width) and the 95% half-width of the label uncertainty\n"
          "(unjudged pairs relevant at the judged share), with the budget's pairs judged:")
    print("| budget | width | half-width |")
    print("|---:|---:|---:|")
    ordered = bj.order_pairs(pool.assign(spread=[spread.get((q, i), float("nan")) for q, i in
                                                 zip(pool["query_id"], pool["item_id"])]), "combined", k=10)
    for budget in budgets:
        chosen = ordered.head(budget)
        judged = {(q, i): int(qrels.get(q, {}).get(i, 0)) for q, i in zip(chosen["query_id"], chosen["item_id"])}
        effect = bj.interval_effect(pool, judged, set(), k=10)
        print(f"| {budget} | {effect['width_before'].mean():.3f} | {effect['half_width_before'].mean():.3f} |")
    print(f"\n({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
