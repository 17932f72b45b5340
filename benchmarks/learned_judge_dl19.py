"""Does a judge learned from a few SME labels beat its source judge? TREC DL19 passage, real labels.

Data (/work/shared/datasets/trec-dl-2019-passage, see its SOURCE.md; research use only, nothing
of it is written into the project repository): NIST's graded judgments play the SMEs, the
published Llama-3.3-70B "4 prompts" labels play the source judge (imported with ``workbench
import judgments``), FLAN-T5-large's labels a second judge for the two-source variant.

The benchmark builds a temporary project at run time (deleted at the end): the passages, the 43
judged queries, the six shipped runs (rows of passages without text skipped), and one pool of
every judged (query, passage) pair (9,260) with the runs' top-100 provenance. A calibration
sample is drawn on the Llama grades (stratified as ``calibrate sample`` does) with 2,000
held-out pairs and a 500-pair tuning part; every held-out pair is labelled with its NIST grade.
Tuning labels: a stratified (by Llama grade, proportional, seeded) 200 of the 500 first, then all
500. After each, ``judge learn`` (the service) fits on the labelled tuning pairs only.

Figures, all on the 2,000 held-out pairs, re-weighted to the pool as the gate does
(``calibrate report``): binary κ (grade >= 2), TPR, TNR, quadratic-weighted κ (QWK) of the
learned judge and of the Llama labels alone, and the κ difference with a 95% percentile interval
from a query-clustered paired bootstrap (2,000 resamples of the 43 queries). Beside them, Kendall
τ (tau-b) between the six runs' nDCG@10 with each judge's grades of the 9,260 pool pairs as
qrels and their nDCG@10 with NIST's (the bundled metric engine). Repeated over ``--seeds``
sample seeds (a new sample, split and tuning subset each).

The dense cosine feature encodes the pool's passages with the project's encoder on the first
``learn`` (minutes on a shared 2-CPU machine). Its vectors are kept outside the project in
``--cache`` (default ``~/.cache/workbench-bench``, vectors and ids only, no text) and written
into the next temporary project's embeddings cache before ``learn`` runs, so reruns encode
nothing; ``--no-cache`` encodes afresh.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/learned_judge_dl19.py [--seeds 0 1 2] [--two-sources]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from workbench.core.calibration.gate import GateThresholds  # noqa: E402
from workbench.core.judging.learned import binary_figures  # noqa: E402
from workbench.services.calibration import verdicts  # noqa: E402
from workbench.services.calibration import workflow as cal  # noqa: E402
from workbench.services.calibration.workflow import ReportOptions  # noqa: E402
from workbench.services.ingest import import_file  # noqa: E402
from workbench.services.judge.imported import import_judgments  # noqa: E402
from workbench.services.judge import learned_dense  # noqa: E402
from workbench.services.judge.learned import DenseOptions, learn  # noqa: E402
from workbench.services.project.lifecycle import open_project  # noqa: E402
from workbench.store.calibration import read_sample_items  # noqa: E402
from workbench.store.database import insert_frame  # noqa: E402
from workbench.store.pools import create_pool, derive_pool_provenance  # noqa: E402

DATA = Path("/work/shared/datasets/trec-dl-2019-passage")
RUNS = ["BM25", "BM25_RM3", "D_BERT_KD_TASB", "OPEN_AI_ADA2", "SPLADE_P_P_ENSEMBLE_DISTIL", "REP_LLAMA"]
HOLDOUT, TUNING = 2000, 500
SIZES = (200, 500)


def build(path: Path) -> dict[str, str]:
    """The temporary project; returns ``{judge name: configuration key}``."""
    from workbench.services.project.lifecycle import open_project as op

    with op(path, create=True) as db:
        import_file(db, "corpus", DATA / "dl2019_document.jsonl")
        import_file(db, "queries", DATA / "topics.dl19-passage.txt", format="tsv")
        for run in RUNS:
            import_file(db, "run", DATA / "runs" / run / "trec_results_dl19_top100.txt", name=run, skip_unknown=True)
        qrels = pd.read_csv(DATA / "qrels.dl19-passage.txt", sep=" ", header=None,
                            names=["query_id", "it", "doc_id", "grade"], dtype=str)
        pairs = qrels[["query_id", "doc_id"]].drop_duplicates().reset_index(drop=True)
        with db.transaction() as tx:
            create_pool(tx, "judged", level="doc", chunking=None, depth=100, runs=RUNS)
            insert_frame(tx, "pool_pairs", pairs.assign(pool="judged", chunk_id=None,
                                                         priority=np.arange(1, len(pairs) + 1), rrf_score=0.0))
            derive_pool_provenance(tx, "judged", RUNS)
        keys = {}
        for name, file in (("llama70b", "dl2019_test_4prompts_llama70b.txt"),
                           ("flant5large", "dl2019_test_4prompts_flant5large.txt")):
            keys[name] = import_judgments(db, DATA / "llm-labels" / file, judge=name, pool="judged").config
    return keys


def _cache_file(cache: Path, key: str) -> Path:
    return cache / f"dl19-{key.replace('/', '_').replace('#', '_')}.npz"


def load_vectors(db, cache: Path) -> str:
    """Write the cached DL19 vectors (if any, for the encoder ``learn`` will choose) into the
    project's embeddings cache under the product's ids; says what it did."""
    from workbench.store.embeddings import write_embeddings

    key = learned_dense.choose_source(db, "judged", "doc", None).key
    file = _cache_file(cache, key)
    if not file.is_file():
        return f"no cached vectors for {key} in {cache}: learn encodes the pool's passages"
    data = np.load(file)
    for namespace, table, ids, vectors in ((learned_dense.DOCUMENTS, "documents", "doc_ids", "doc_vectors"),
                                           (learned_dense.QUERIES, "queries", "query_ids", "query_vectors")):
        column = "doc_id" if table == "documents" else "query_id"
        texts = dict(db.query_all(f"SELECT {column}, text FROM {table}"))
        where = {str(i): j for j, i in enumerate(data[ids])}
        mine = [i for i in where if i in texts]
        with db.transaction() as tx:
            write_embeddings(tx, namespace, key, [learned_dense.text_id(i, str(texts[i] or "")) for i in mine],
                             data[vectors][[where[i] for i in mine]])
    return f"read {len(data['doc_ids']):,} passage and {len(data['query_ids'])} query vectors of {key} from {file}"


def save_vectors(db, cache: Path) -> None:
    """Keep the project's DL19 vectors (ids without the text hash, vectors) in ``cache``."""
    from workbench.store.embeddings import read_embeddings

    key = learned_dense.choose_source(db, "judged", "doc", None).key
    file = _cache_file(cache, key)
    if file.is_file():
        return
    docs, doc_vectors = read_embeddings(db, learned_dense.DOCUMENTS, key)
    queries, query_vectors = read_embeddings(db, learned_dense.QUERIES, key)
    if not docs:
        return
    cache.mkdir(parents=True, exist_ok=True)
    np.savez(file, key=key, doc_ids=np.array([d.rsplit("#", 1)[0] for d in docs]), doc_vectors=doc_vectors,
             query_ids=np.array([q.rsplit("#", 1)[0] for q in queries]), query_vectors=query_vectors)


def run_ndcg(qrels: dict) -> dict[str, float]:
    """nDCG@10 of each of the six runs with ``qrels`` (``{query: {doc: grade}}``)."""
    from workbench.core.metrics.evaluation import evaluate

    return {run: evaluate(qrels, DATA / "runs" / run / "trec_results_dl19_top100.txt", "ndcg@10").aggregate["ndcg@10"]
            for run in RUNS}


def config_qrels(db, config: str) -> dict:
    from workbench.store.learned_judge import pool_config_grades

    grades = pool_config_grades(db, "judged", [config])
    out: dict = {}
    for q, d, g in zip(grades["query_id"], grades["doc_id"], grades["grade"]):
        out.setdefault(str(q), {})[str(d)] = int(g)
    return out


def kendall(a: dict, b: dict) -> float:
    from scipy.stats import kendalltau

    return float(kendalltau([a[r] for r in RUNS], [b[r] for r in RUNS]).statistic)


def nist() -> dict[tuple[str, str], int]:
    qrels = pd.read_csv(DATA / "qrels.dl19-passage.txt", sep=" ", header=None,
                        names=["query_id", "it", "doc_id", "grade"], dtype={"query_id": str, "doc_id": str})
    return {(q, d): int(g) for q, d, g in zip(qrels["query_id"], qrels["doc_id"], qrels["grade"])}


def stratified_subset(items: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """``n`` rows, allocated to strata in proportion (largest remainder), drawn at random within."""
    rng = np.random.default_rng(seed)
    sizes = items.groupby("stratum").size()
    exact = sizes / sizes.sum() * n
    quota = np.floor(exact).astype(int)
    for s in (exact - quota).sort_values(ascending=False).index[: n - int(quota.sum())]:
        quota[s] += 1
    parts = [rows.iloc[rng.choice(len(rows), size=int(quota[s]), replace=False)] for s, rows in items.groupby("stratum")]
    return pd.concat(parts)


def figures(db, sample: str, config: str) -> tuple[dict, pd.DataFrame]:
    g = verdicts.gate_configuration(db, sample, config, GateThresholds(), ReportOptions())
    f = g.result.figures
    return ({"kappa": f["kappa"], "kappa_ci": g.result.ci["kappa"], "tpr": f["tpr"], "tnr": f["tnr"],
             "qwk": f["kappa_quadratic"], "n": g.result.n, "verdict": g.verdict.verdict}, g.part)


def kappa_difference(a: pd.DataFrame, b: pd.DataFrame, *, seed: int = 0, n_boot: int = 2000) -> tuple[float, float, float]:
    """κ(a) - κ(b) on their common held-out pairs, with a query-clustered paired bootstrap."""
    m = a.merge(b[["position", "judge_grade"]], on="position", suffixes=("_a", "_b"))
    y = m["grade"].to_numpy() >= 2
    da, db_ = m["judge_grade_a"].to_numpy() >= 2, m["judge_grade_b"].to_numpy() >= 2
    w = m["weight"].to_numpy(dtype=float)
    codes, queries = pd.factorize(m["query_id"])
    point = binary_figures(y, da, w)["kappa"] - binary_figures(y, db_, w)["kappa"]
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(n_boot):
        times = np.bincount(rng.integers(0, len(queries), len(queries)), minlength=len(queries))
        ww = w * times[codes]
        diffs.append(binary_figures(y, da, ww)["kappa"] - binary_figures(y, db_, ww)["kappa"])
    lo, hi = np.percentile(diffs, [2.5, 97.5])
    return float(point), float(lo), float(hi)


def one_seed(db, keys: dict, seed: int, two_sources: bool, dense: bool, cache: Path | None) -> list[dict]:
    truth = nist()
    truth_qrels: dict = {}
    for (q, d), g in truth.items():
        truth_qrels.setdefault(q, {})[d] = g
    truth_ndcg = run_ndcg(truth_qrels)
    print("NIST order: " + " > ".join(f"{r} {truth_ndcg[r]:.3f}" for r in sorted(RUNS, key=lambda r: -truth_ndcg[r])),
          flush=True)
    name = f"dl19-s{seed}"
    cal.create_sample(db, name, "judged", size=HOLDOUT + TUNING, seed=seed, holdout_share=HOLDOUT / (HOLDOUT + TUNING),
                      min_per_class=50, judge=keys["llama70b"])
    items = read_sample_items(db, name)
    held = items[items["part"] == "holdout"]
    cal.save_labels(db, name, "nist", {int(p): truth[(q, d)] for p, q, d in zip(held["position"], held["query_id"],
                                                                               held["doc_id"])})
    tuning = items[items["part"] == "tuning"]
    first = stratified_subset(tuning, SIZES[0], seed)
    rows = []
    base, base_part = figures(db, name, keys["llama70b"])
    rows.append({"seed": seed, "judge": "llama70b alone", "tuning": 0, **base, "diff": None, "seconds": None,
                 "tau": kendall(run_ndcg(config_qrels(db, keys["llama70b"])), truth_ndcg)})
    done: set[int] = set()
    for size, subset in ((SIZES[0], first), (SIZES[1], tuning)):
        new = subset[~subset["position"].isin(done)]
        cal.save_labels(db, name, "nist", {int(p): truth[(q, d)] for p, q, d in zip(new["position"], new["query_id"],
                                                                                   new["doc_id"])})
        done |= set(int(p) for p in new["position"])
        variants = [("learned from llama70b", [keys["llama70b"]])]
        if two_sources:
            variants.append(("learned from llama70b+flant5", [keys["llama70b"], keys["flant5large"]]))
        for label, sources in variants:
            t = time.perf_counter()
            result = learn(db, name, sources=sources, seed=seed, dense=DenseOptions(enabled=dense))
            seconds = time.perf_counter() - t
            if cache is not None:
                save_vectors(db, cache)
            fig, part = figures(db, name, result.config)
            diff = kappa_difference(part, base_part, seed=seed)
            ndcg = run_ndcg(config_qrels(db, result.config))
            rows.append({"seed": seed, "judge": label, "tuning": size, **fig, "diff": diff, "seconds": seconds,
                         "model": result.model, "rule": result.operating.rule, "cv_kappa": result.operating.kappa,
                         "tau": kendall(ndcg, truth_ndcg),
                         "order": " > ".join(sorted(RUNS, key=lambda r: -ndcg[r]))})
            print(_line(rows[-1]), flush=True)
            print(f"    order: {rows[-1]['order']}", flush=True)
    print(_line(rows[0]), flush=True)
    return rows


def _line(r: dict) -> str:
    diff = "" if r["diff"] is None else f"  Δκ {r['diff'][0]:+.3f} [{r['diff'][1]:+.3f}, {r['diff'][2]:+.3f}]"
    extra = "" if r.get("model") is None else (f"  ({r['model']}; op {r['rule']}, CV κ {r['cv_kappa']:.3f}; "
                                               f"{r['seconds']:.1f} s)")
    return (f"seed {r['seed']} {r['judge']:<30} tuning {r['tuning']:>3}: κ {r['kappa']:.3f} "
            f"[{r['kappa_ci'][0]:.3f}, {r['kappa_ci'][1]:.3f}] TPR {r['tpr']:.3f} TNR {r['tnr']:.3f} "
            f"QWK {r['qwk']:.3f} τ {r['tau']:.3f} n {r['n']} {r['verdict']}{diff}{extra}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--two-sources", action="store_true", help="also learn from llama70b and flant5large")
    ap.add_argument("--no-dense", action="store_true", help="leave the dense cosine feature out")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "workbench-bench",
                    help="where the DL19 vectors are kept between runs (outside the project)")
    ap.add_argument("--no-cache", action="store_true", help="encode the passages afresh")
    args = ap.parse_args(argv)
    cache = None if args.no_cache else args.cache
    print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
    where = Path(tempfile.mkdtemp(prefix="learned-dl19-"))
    try:
        t = time.perf_counter()
        keys = build(where / "dl19.duckdb")
        print(f"project built in {time.perf_counter() - t:.0f} s")
        rows = []
        with open_project(where / "dl19.duckdb") as db:
            if cache is not None and not args.no_dense:
                print(load_vectors(db, cache), flush=True)
            for seed in args.seeds:
                rows += one_seed(db, keys, seed, args.two_sources, not args.no_dense, cache)
        frame = pd.DataFrame(rows)
        print("\nmedian (min-max) over seeds:")
        for (judge, tuning), g in frame.groupby(["judge", "tuning"], sort=False):
            parts = [f"{k} {g[k].median():.3f} ({g[k].min():.3f}-{g[k].max():.3f})" for k in ("kappa", "tpr", "tnr", "qwk", "tau")]
            print(f"  {judge:<30} tuning {tuning:>3}: " + ", ".join(parts))
        print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(where, ignore_errors=True)


if __name__ == "__main__":
    main()
