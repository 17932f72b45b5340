"""Do the PPI++ intervals of ``workbench ppi`` cover, and how much narrower are they?

Simulation on real data (TREC DL 2019 passage, ``../shared/datasets/trec-dl-2019-passage``):

* population: the 43 judged queries; truth: each run's mean over all 43 with NIST's labels
  (and each run's difference from the first, BM25);
* human sample: NIST's labels on a random subset of n queries (a fresh seed per draw);
* judge: published LLM labels for every query, one of
  ``llama70b`` (Llama-3.3-70B, 4-prompt method; the stronger published labels: binary κ 0.39),
  ``flant5large`` (FLAN-T5-large, same method; binary κ 0.32), and
  ``llama70b-noisy`` (a weak judge made here: each llama70b label replaced, with probability
  0.5, by a uniformly random grade 0-3, seed 0);
* six runs (BM25, BM25+RM3, TAS-B, ada-002, SPLADE++, RepLLaMA).

Per configuration it reports the coverage of the 95% PPI++ intervals (runs and paired
differences) and of the human-only intervals, and the distribution over draws of the PPI++
interval's width over the human-only one on the same draw: median, 95th percentile, maximum and
the share of intervals more than 1.05 times as wide. Beside them, measured on the same draws, the
uncapped jackknife interval (the PPI++ interval before its standard error was capped at the
human-only one: :func:`workbench.core.metrics.ppi.jackknife_std_error`): its coverage and its
share wider than 1.05x; the share of intervals the cap changed; and the coverage of the
alternative the cap was chosen over, falling back to the human-only estimate and interval
whenever the cap applies. Per-query values are computed once by the same service ``workbench ppi`` calls
(:func:`workbench.services.evaluation.ppi.load_values`); a draw keeps n of the 43 queries as
labelled, which is exactly what a HUMAN_QRELS of those n queries gives (a query's values depend
on its own labels only). A few draws per judge are also run through the real command
(``python -m workbench ppi`` on a written subset qrels file) and must give the same numbers.

    .venv/bin/python benchmarks/ppi_coverage.py [--draws 1000] [--sizes 5,10,20,30] [--plan-draws 200]
        [--measures 'ndcg@10,AP(rel=2)@100,P@5'] [--data ../shared/datasets/trec-dl-2019-passage]

It also checks `--plan`: from a random pilot it plans the labelled queries for a target half-width
(nDCG@10), draws a fresh sample of that size and reports the half-width it reaches.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.core.metrics.ppi import jackknife_std_error, t_quantile  # noqa: E402
from workbench.services.evaluation.ppi import PerQueryValues, estimate, load_values, plan  # noqa: E402

DL19 = ROOT.parent / "shared" / "datasets" / "trec-dl-2019-passage"
RUNS = ("BM25", "BM25_RM3", "D_BERT_KD_TASB", "OPEN_AI_ADA2", "SPLADE_P_P_ENSEMBLE_DISTIL", "REP_LLAMA")
MEASURES = ("ndcg@10", "AP(rel=2)@100", "P@5", "P(rel=2)@5", "RR(rel=2)@10")
JUDGES = ("llama70b", "flant5large", "llama70b-noisy")
NOISE = 0.5


def run_files(folder: Path = DL19) -> list[Path]:
    return [next((folder / "runs" / r).glob("*.txt")) for r in RUNS]


def judge_file(judge: str, workdir: Path, folder: Path = DL19) -> Path:
    """The judge's qrels file; the noisy judge is written to ``workdir``."""
    if judge in ("llama70b", "flant5large"):
        return folder / "llm-labels" / f"dl2019_test_4prompts_{judge}.txt"
    rng = np.random.default_rng(0)
    lines = (folder / "llm-labels" / "dl2019_test_4prompts_llama70b.txt").read_text().splitlines()
    out = []
    for line in lines:
        q, it, doc, grade = line.split()
        if rng.random() < NOISE:
            grade = str(int(rng.integers(0, 4)))
        out.append(f"{q} {it} {doc} {grade}")
    path = workdir / "llama70b-noisy.qrels"
    path.write_text("\n".join(out) + "\n")
    return path


def all_values(judge: str, workdir: Path, measures=MEASURES, folder: Path = DL19) -> PerQueryValues:
    """Per-query values with every query labelled by NIST (draws take subsets)."""
    return load_values(folder / "qrels.dl19-passage.txt", judge_file(judge, workdir, folder),
                       run_files(folder), list(measures))


@dataclass
class Ratios:
    """PPI++ width / human-only width over intervals (a zero human-only width is left out:
    ``undefined`` counts those)."""

    median: float
    p95: float
    max: float
    over_105: float  # share > 1.05
    undefined: int

    @classmethod
    def of(cls, ratios) -> Ratios:
        r = np.asarray(ratios, dtype=np.float64)
        ok = r[np.isfinite(r)]
        if not ok.size:
            return cls(math.nan, math.nan, math.nan, math.nan, int(r.size))
        return cls(float(np.median(ok)), float(np.quantile(ok, 0.95)), float(ok.max()),
                   float(np.mean(ok > 1.05)), int(r.size - ok.size))


@dataclass
class Coverage:
    runs_ppi: float
    runs_human: float
    diffs_ppi: float
    diffs_human: float
    width_runs: float  # mean PPI++ width / mean human-only width
    width_diffs: float
    median_lambda: float
    n_run_intervals: int
    n_diff_intervals: int
    ratio_runs: Ratios | None = None  # per-interval PPI++ width / human-only width
    ratio_diffs: Ratios | None = None
    runs_uncapped: float = math.nan  # coverage of the uncapped jackknife interval
    diffs_uncapped: float = math.nan
    ratio_runs_uncapped: Ratios | None = None
    ratio_diffs_uncapped: Ratios | None = None
    capped_runs: float = math.nan  # share of intervals whose SE the cap changed
    capped_diffs: float = math.nan
    runs_fallback: float = math.nan  # coverage when a capped interval is replaced by the human-only one
    diffs_fallback: float = math.nan


def _uncapped(y: np.ndarray, f: np.ndarray, idx: np.ndarray, e, confidence: float) -> tuple[float, float]:
    """The interval before the cap: ``θ̂ ± t_{n−1}·SE_jack`` (n >= 3)."""
    half = t_quantile((1 + confidence) / 2, len(y) - 1) * jackknife_std_error(y, f[idx], f)
    return e.ppi.estimate - half, e.ppi.estimate + half


def coverage(values: PerQueryValues, n: int, draws: int, *, seed: int = 0, confidence: float = 0.95,
             measures=None) -> dict[str, Coverage]:
    """Coverage and width ratios per measure over ``draws`` random labelled subsets of size
    ``n`` (n >= 3)."""
    measures = list(measures or values.measures)
    first = values.runs[0]
    truth = {m: {r: float(values.human[m][r].mean()) for r in values.runs} for m in measures}
    ids = list(values.query_ids)
    keys = ("rp", "rh", "dp", "dh", "wrp", "wrh", "wdp", "wdh", "lam", "ru", "du", "wru", "wdu", "rc", "dc", "rf", "df")
    acc = {m: {k: [] for k in keys} for m in measures}
    for d in range(draws):
        rng = np.random.default_rng([seed, d])
        chosen = sorted(rng.choice(len(ids), size=n, replace=False).tolist())
        sub = values.subset([ids[i] for i in chosen])
        report = estimate(sub, confidence=confidence)
        idx = sub.labelled
        for m in measures:
            a = acc[m]
            y, f = sub.human[m], values.judge[m]
            for r, e in report.runs[m].items():
                t = truth[m][r]
                lo, hi = _uncapped(y[r], f[r], idx, e, confidence)
                a["rp"].append(e.ppi.low <= t <= e.ppi.high)
                a["rh"].append(e.human_only.low <= t <= e.human_only.high)
                a["ru"].append(lo <= t <= hi)
                a["wrp"].append(e.ppi.high - e.ppi.low)
                a["wrh"].append(e.human_only.high - e.human_only.low)
                a["wru"].append(hi - lo)
                a["rc"].append(e.capped)
                a["rf"].append(a["rh"][-1] if e.capped else a["rp"][-1])
                a["lam"].append(e.lam)
            for r, e in report.differences[m].items():
                t = truth[m][r] - truth[m][first]
                lo, hi = _uncapped(y[r] - y[first], f[r] - f[first], idx, e, confidence)
                a["dp"].append(e.ppi.low <= t <= e.ppi.high)
                a["dh"].append(e.human_only.low <= t <= e.human_only.high)
                a["du"].append(lo <= t <= hi)
                a["wdp"].append(e.ppi.high - e.ppi.low)
                a["wdh"].append(e.human_only.high - e.human_only.low)
                a["wdu"].append(hi - lo)
                a["dc"].append(e.capped)
                a["df"].append(a["dh"][-1] if e.capped else a["dp"][-1])
    out = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for m, a in acc.items():
            wrh, wdh = np.array(a["wrh"]), np.array(a["wdh"])
            out[m] = Coverage(
                runs_ppi=float(np.mean(a["rp"])), runs_human=float(np.mean(a["rh"])),
                diffs_ppi=float(np.mean(a["dp"])), diffs_human=float(np.mean(a["dh"])),
                width_runs=float(np.mean(a["wrp"]) / np.mean(wrh)),
                width_diffs=float(np.mean(a["wdp"]) / np.mean(wdh)),
                median_lambda=float(np.median(a["lam"])),
                n_run_intervals=len(a["rp"]), n_diff_intervals=len(a["dp"]),
                ratio_runs=Ratios.of(np.array(a["wrp"]) / wrh), ratio_diffs=Ratios.of(np.array(a["wdp"]) / wdh),
                runs_uncapped=float(np.mean(a["ru"])), diffs_uncapped=float(np.mean(a["du"])),
                ratio_runs_uncapped=Ratios.of(np.array(a["wru"]) / wrh),
                ratio_diffs_uncapped=Ratios.of(np.array(a["wdu"]) / wdh),
                capped_runs=float(np.mean(a["rc"])), capped_diffs=float(np.mean(a["dc"])),
                runs_fallback=float(np.mean(a["rf"])), diffs_fallback=float(np.mean(a["df"])))
    return out


@dataclass
class PlanCheck:
    n_ppi: float  # median planned labelled queries
    n_human: float
    realised_ppi: float  # median realised half-width / target at the planned n
    realised_human: float
    reached_ppi: float  # share of fresh samples of the planned size whose half-width <= target
    reached_human: float


def plan_check(values: PerQueryValues, measure: str, pilot_n: int, half_width: float, draws: int, *,
               seed: int = 0) -> PlanCheck:
    """Plan from a random pilot of ``pilot_n`` queries (``workbench ppi --plan``), then draw a fresh
    sample of the planned size and measure the half-width it gets (runs only)."""
    ids = list(values.query_ids)
    one = PerQueryValues(values.query_ids, values.labelled, values.runs, [measure], values.judge, values.human)
    rows = {k: [] for k in ("np", "nh", "rp", "rh")}
    for d in range(draws):
        rng = np.random.default_rng([seed, d, 7])
        pilot = sorted(rng.choice(len(ids), size=pilot_n, replace=False).tolist())
        planned = plan(one.subset([ids[i] for i in pilot]), half_width).runs[measure]
        for r, p in planned.items():
            rows["np"].append(p.n_ppi)
            rows["nh"].append(p.n_human)
            for n, key, side in ((p.n_ppi, "rp", "ppi"), (p.n_human, "rh", "human_only")):
                fresh = sorted(rng.choice(len(ids), size=max(n, 2), replace=False).tolist())
                e = estimate(one.subset([ids[i] for i in fresh])).runs[measure][r]
                rows[key].append(getattr(e, side).half_width / half_width)
    return PlanCheck(n_ppi=float(np.median(rows["np"])), n_human=float(np.median(rows["nh"])),
                     realised_ppi=float(np.median(rows["rp"])), realised_human=float(np.median(rows["rh"])),
                     reached_ppi=float(np.mean(np.array(rows["rp"]) <= 1 + 1e-12)),
                     reached_human=float(np.mean(np.array(rows["rh"]) <= 1 + 1e-12)))


def check_cli(values: PerQueryValues, judge_path: Path, n: int, seed: int, workdir: Path,
              folder: Path = DL19) -> float:
    """Run ``workbench ppi`` on a written subset of NIST's qrels; the largest absolute difference
    from the in-process numbers (must be ~0)."""
    rng = np.random.default_rng([seed, 99])
    ids = list(values.query_ids)
    chosen = {ids[i] for i in rng.choice(len(ids), size=n, replace=False)}
    human = workdir / f"human-{seed}.qrels"
    nist = (folder / "qrels.dl19-passage.txt").read_text().splitlines()
    human.write_text("\n".join(line for line in nist if line.split()[0] in chosen) + "\n")
    argv = [sys.executable, "-m", "workbench", "ppi", str(human), str(judge_path), *map(str, run_files(folder)),
            *[x for m in values.measures for x in ("-m", m)], "--seed", str(seed), "--format", "json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's workbench, whatever is installed
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=300, env=env)
    if done.returncode:
        raise SystemExit(f"workbench ppi failed: {done.stderr.strip()}")
    got = json.loads(done.stdout)
    want = estimate(values.subset(sorted(chosen))).to_json()
    assert got["n_labelled"] == n and got["n_unlabelled"] == len(ids) - n
    worst = 0.0
    for m, block in want["measures"].items():
        for part in ("runs", "differences"):
            for r, row in block[part].items():
                other = got["measures"][m][part][r]
                for key in ("estimate", "ci", "human_only_ci"):
                    worst = max(worst, float(np.max(np.abs(np.subtract(row[key], other[key])))))
    return worst


def _ratios(r: Ratios) -> str:
    return f"{r.median:.2f} / {r.p95:.2f} / {r.max:.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--sizes", default="5,10,20,30")
    ap.add_argument("--measures", default=",".join(MEASURES[:4]),
                    help="comma-separated (a measure holding a comma cannot be given here)")
    ap.add_argument("--judges", default=",".join(JUDGES))
    ap.add_argument("--data", type=Path, default=DL19, help="the trec-dl-2019-passage folder")
    ap.add_argument("--seed", type=int, default=2019)
    ap.add_argument("--cli-checks", type=int, default=2, help="draws per judge run through the real command")
    ap.add_argument("--plan-draws", type=int, default=200, help="pilots per judge for the --plan check")
    ap.add_argument("--plan-half-width", type=float, default=0.08)
    ap.add_argument("--pilot", type=int, default=8)
    args = ap.parse_args()
    folder = args.data
    if not folder.exists():
        raise SystemExit(f"TREC DL19 not found at {folder} (give --data)")
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    measures = [m.strip() for m in args.measures.split(",") if m.strip()]
    judges = [j.strip() for j in args.judges.split(",") if j.strip()]
    rows, plans = [], []
    load_before = os.getloadavg()
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for judge in judges:
            values = all_values(judge, workdir, measures, folder)
            for k in range(args.cli_checks):
                worst = check_cli(values, judge_file(judge, workdir, folder), 15, args.seed + k, workdir, folder)
                assert worst < 1e-9, f"the command differs from the in-process numbers by {worst}"
            for n in sizes:
                start = time.perf_counter()
                cov = coverage(values, n, args.draws, seed=args.seed)
                took = time.perf_counter() - start
                for m, c in cov.items():
                    rows.append((judge, n, m, c))
                print(f"# {judge} n={n}: {args.draws} draws in {took:.1f} s, load {os.getloadavg()[0]:.1f}",
                      file=sys.stderr, flush=True)
            if args.plan_draws:
                plans.append((judge, plan_check(values, "ndcg@10", args.pilot, args.plan_half_width,
                                                args.plan_draws, seed=args.seed)))
    load_after = os.getloadavg()
    level = 95
    print(f"PPI++ on TREC DL19 (43 queries, 6 runs, 5 differences vs BM25), {args.draws} draws of n labelled "
          f"queries per row (seed {args.seed}), nominal {level}%; {time.perf_counter() - began:.0f} s on "
          f"{os.cpu_count()} cores, load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    print()
    print("Coverage: PPI++ (SE capped at the human-only SE), the uncapped jackknife on the same draws, "
          "falling back to human-only where capped instead, human-only; median λ (runs)")
    print()
    print("| judge | n | measure | runs: PPI++ | uncapped | fallback | human | diffs: PPI++ | uncapped "
          "| fallback | human | median λ |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for judge, n, m, c in rows:
        print(f"| {judge} | {n} | {m} | {c.runs_ppi:.3f} | {c.runs_uncapped:.3f} | {c.runs_fallback:.3f} | "
              f"{c.runs_human:.3f} | {c.diffs_ppi:.3f} | {c.diffs_uncapped:.3f} | {c.diffs_fallback:.3f} | "
              f"{c.diffs_human:.3f} | {c.median_lambda:.2f} |")
    print()
    print("Width of each PPI++ interval / the human-only interval of the same draw: median / p95 / max and the "
          "share > 1.05; the uncapped jackknife's share > 1.05 and max; the share of intervals the cap changed")
    print()
    print("| judge | n | measure | runs: med / p95 / max | runs > 1.05 | uncapped > 1.05 (max) | capped "
          "| diffs: med / p95 / max | diffs > 1.05 | uncapped > 1.05 (max) | capped |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    undefined = 0
    for judge, n, m, c in rows:
        undefined += c.ratio_runs.undefined + c.ratio_diffs.undefined
        print(f"| {judge} | {n} | {m} | {_ratios(c.ratio_runs)} | {c.ratio_runs.over_105:.3f} | "
              f"{c.ratio_runs_uncapped.over_105:.3f} ({c.ratio_runs_uncapped.max:.2f}) | {c.capped_runs:.3f} | "
              f"{_ratios(c.ratio_diffs)} | {c.ratio_diffs.over_105:.3f} | "
              f"{c.ratio_diffs_uncapped.over_105:.3f} ({c.ratio_diffs_uncapped.max:.2f}) | {c.capped_diffs:.3f} |")
    print()
    print(f"intervals with a zero human-only width (left out of the ratios): {undefined}")
    if plans:
        print()
        print(f"--plan check (ndcg@10, runs): pilot of {args.pilot} random queries, target half-width "
              f"{args.plan_half_width:g}, {args.plan_draws} pilots per judge; then a fresh sample of the planned "
              "size: median realised half-width / target, and the share of samples reaching the target")
        print()
        print("| judge | planned n: PPI++ | planned n: human | realised: PPI++ | realised: human "
              "| reached: PPI++ | reached: human |")
        print("|---|---|---|---|---|---|---|")
        for judge, c in plans:
            print(f"| {judge} | {c.n_ppi:.0f} | {c.n_human:.0f} | {c.realised_ppi:.2f} | {c.realised_human:.2f} | "
                  f"{c.reached_ppi:.2f} | {c.reached_human:.2f} |")
    print()
    print(f"command line checked against the in-process numbers on {args.cli_checks} draws per judge (n = 15)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
