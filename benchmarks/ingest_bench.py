"""Import of TREC DL 2019 passage (and Cranfield) end to end through the import service.

Run: python benchmarks/ingest_bench.py [--repeat 3]. Prints timings; no assertions.
Data: ../shared/datasets/trec-dl-2019-passage (10,818 passages, 43 queries, 9,260 qrels, six
runs with --skip-unknown) and ../shared/datasets/cranfield (1,400 / 225 / 1,837 rows).

Each figure is one ``import_file`` call on a fresh project: read + hash + parse + validate
against the store + one transaction (rows and ledger). The best of ``--repeat`` fresh projects
is reported, then a re-import of everything (the sha256 ledger no-op) and a TREC qrels export.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "datasets"
DL19 = SHARED / "trec-dl-2019-passage"
CRANFIELD = SHARED / "cranfield"
RUNS = ("BM25", "BM25_RM3", "D_BERT_KD_TASB", "OPEN_AI_ADA2", "SPLADE_P_P_ENSEMBLE_DISTIL", "REP_LLAMA")


def steps() -> list[tuple[str, str, Path, dict]]:
    out = [
        ("dl19 corpus", "corpus", DL19 / "dl2019_document.jsonl", {}),
        ("dl19 queries", "queries", DL19 / "topics.dl19-passage.txt", {}),
        ("dl19 qrels", "qrels", DL19 / "qrels.dl19-passage.txt", {}),
    ]
    out += [(f"dl19 run {run}", "run", DL19 / "runs" / run / "trec_results_dl19_top100.txt",
             {"name": run, "skip_unknown": True}) for run in RUNS]
    out += [
        ("cranfield corpus", "corpus", CRANFIELD / "cran.all.1400", {}),
        ("cranfield queries", "queries", CRANFIELD / "cran.qry", {}),
        ("cranfield qrels", "qrels", CRANFIELD / "cranqrel", {}),
    ]
    return out


def one_pass(workdir: Path, number: int) -> dict:
    from workbench.services.qrels.export import export_qrels
    from workbench.services.ingest import import_file
    from workbench.services.project.lifecycle import open_project

    timings: dict[str, tuple[float, int, int]] = {}
    # DL19 and Cranfield share no ids, but give each its own project as a user would.
    dbs = {"dl19": open_project(workdir / f"dl19-{number}.duckdb", create=True),
           "cranfield": open_project(workdir / f"cran-{number}.duckdb", create=True)}
    try:
        for label, kind, path, options in steps():
            db = dbs[label.split()[0]]
            started = time.perf_counter()
            result = import_file(db, kind, path, **options)
            timings[label] = (time.perf_counter() - started, result.rows, result.skipped_total + result.excluded)
        started = time.perf_counter()
        for label, kind, path, options in steps():
            import_file(dbs[label.split()[0]], kind, path, **options)
        timings["re-import all (ledger no-op)"] = (time.perf_counter() - started, 0, 0)
        started = time.perf_counter()
        exported = export_qrels(dbs["dl19"], workdir / f"qrels-{number}.txt", format="trec")
        timings["dl19 export qrels (trec)"] = (time.perf_counter() - started, exported.rows, 0)
    finally:
        for db in dbs.values():
            db.close()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="fresh projects to time (best is shown)")
    args = parser.parse_args()
    missing = [str(p) for p in (DL19, CRANFIELD) if not p.is_dir()]
    if missing:
        sys.exit(f"shared datasets not found: {', '.join(missing)}")
    with tempfile.TemporaryDirectory() as tmp:
        passes = [one_pass(Path(tmp), i) for i in range(args.repeat)]
    print(f"import service, best of {args.repeat} fresh projects")
    print(f"{'step':<38}{'seconds':>9}{'rows':>10}{'dropped':>9}{'rows/s':>11}")
    total = 0.0
    for label in passes[0]:
        best = min(p[label][0] for p in passes)
        _, rows, dropped = passes[0][label]
        rate = f"{rows / best:,.0f}" if rows and best > 0 else ""
        print(f"{label:<38}{best:>9.3f}{rows:>10,}{dropped:>9,}{rate:>11}")
        if label.startswith("dl19") and "export" not in label:
            total += best
    print(f"{'dl19 end to end (all 9 imports)':<38}{total:>9.3f}")


if __name__ == "__main__":
    main()
