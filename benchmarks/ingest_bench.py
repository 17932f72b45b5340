"""Import of TREC DL 2019 passage (and Cranfield) end to end through the import service.

Run: python benchmarks/ingest_bench.py [--repeat 3]. Prints timings; no assertions.
Data: ../shared/datasets/trec-dl-2019-passage (10,818 passages, 43 queries, 9,260 qrels, six
runs with --skip-unknown) and ../shared/datasets/cranfield (1,400 / 225 / 1,837 rows).

Each figure is one ``import_file`` call on a fresh project: read + hash + parse + validate
against the store + one transaction (rows and ledger). The best of ``--repeat`` fresh projects
is reported, then a re-import of everything (the sha256 ledger no-op) and a TREC qrels export.

``--scale 200000,2000000`` instead times ``workbench import corpus`` on a BEIR corpus.jsonl of
that many documents (DL19 passage texts under new ids, written once to a temporary folder) next
to a bare DuckDB load of the same file (``read_json`` into a table of the same schema: what the
import would cost if it checked nothing), side by side in one run. Each is a whole process
(interpreter start, imports, the load, commit); the figures are its CPU time (user + system) and
peak resident memory (``wait4`` rusage), best of ``--repeat`` (alternating the two).
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


# -- import corpus vs a bare DuckDB load, whole processes -----------------------------------------

BARE_LOAD = """
import sys, duckdb
db = duckdb.connect(sys.argv[1])
db.execute("CREATE TABLE documents (doc_id VARCHAR PRIMARY KEY, title VARCHAR, text VARCHAR NOT NULL, metadata JSON)")
db.execute("BEGIN")
db.execute("INSERT INTO documents SELECT _id, title, text, NULL FROM read_json(?, format='newline_delimited', "
           "columns={'_id': 'VARCHAR', 'title': 'VARCHAR', 'text': 'VARCHAR'})", [sys.argv[2]])
db.execute("COMMIT")
print(db.execute("SELECT count(*) FROM documents").fetchone()[0])
"""


def write_corpus(path: Path, n: int) -> int:
    """A BEIR corpus.jsonl of ``n`` documents: DL19 passages (cycled) under new ids, with a title."""
    import json

    texts = [json.loads(line)["doc"] for line in (DL19 / "dl2019_document.jsonl").read_text().splitlines() if line]
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            out.write(json.dumps({"_id": f"d{i}", "title": f"passage {i % len(texts)}", "text": texts[i % len(texts)]},
                                 ensure_ascii=False) + "\n")
    return path.stat().st_size


def whole_process(command: list[str]) -> tuple[float, float, float, str]:
    """``command`` as a child process: wall s, CPU s (user + system), peak RSS MB, stdout."""
    import os

    read, write = os.pipe()
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: stdout to the pipe, stderr kept
        os.close(read)
        os.dup2(write, 1)
        try:
            os.execv(command[0], command)
        finally:
            os._exit(127)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status, usage = os.wait4(pid, 0)
    wall = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(command[:5])} failed with status {os.waitstatus_to_exitcode(status)}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, b"".join(chunks).decode()


def scale(sizes: list[int], repeat: int) -> None:
    python = sys.executable
    print(f"import corpus vs a bare DuckDB load of the same file, whole processes, best of {repeat}")
    print(f"{'documents':>10}{'file MB':>9}  {'what':<24}{'wall s':>8}{'CPU s':>8}{'peak MB':>9}"
          f"{'CPU x':>7}{'mem x':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            corpus = Path(tmp) / f"corpus-{n}.jsonl"
            size = write_corpus(corpus, n)
            best: dict[str, list[float]] = {}
            for i in range(repeat):
                for what in ("bare duckdb load", "workbench import corpus"):
                    db = Path(tmp) / f"{what.split()[0]}-{n}-{i}.duckdb"
                    if what.startswith("bare"):
                        command = [python, "-c", BARE_LOAD, str(db), str(corpus)]
                    else:
                        command = [python, "-m", "workbench", "--db", str(db), "import", "corpus", str(corpus)]
                    if not what.startswith("bare"):  # the project exists before the import
                        whole_process([python, "-m", "workbench", "--db", str(db), "init"])
                    wall, cpu, rss, out = whole_process(command)
                    row = best.setdefault(what, [wall, cpu, rss])
                    best[what] = [min(row[0], wall), min(row[1], cpu), min(row[2], rss)]
                    db.unlink(missing_ok=True)
            bare = best["bare duckdb load"]
            for what, (wall, cpu, rss) in best.items():
                ratio = "" if what.startswith("bare") else f"{cpu / bare[1]:>7.2f}{rss / bare[2]:>7.2f}"
                print(f"{n:>10,}{size / 1e6:>9.1f}  {what:<24}{wall:>8.2f}{cpu:>8.2f}{rss:>9.0f}{ratio}")
            corpus.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="fresh projects to time (best is shown)")
    parser.add_argument("--scale", metavar="N,N", help="time import corpus against a bare DuckDB load at these "
                                                      "corpus sizes (documents), e.g. 200000,2000000")
    args = parser.parse_args()
    missing = [str(p) for p in (DL19, CRANFIELD) if not p.is_dir()]
    if missing:
        sys.exit(f"shared datasets not found: {', '.join(missing)}")
    if args.scale:
        scale([int(n.replace("_", "")) for n in args.scale.split(",")], args.repeat)
        return
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
