"""A small, seeded subset of the Cranfield collection (``../shared/datasets/cranfield``) for sweep
tests that must finish in CI time.

Why Cranfield: its abstracts are 74–482 tokens (10th–99th percentile, median 159, in the
chunker's ``\\w+|[^\\w\\s]`` tokens), so fixed chunk sizes of 32–256 tokens cut a document into
1–15 chunks and a chunk-size sweep is not degenerate. (TREC DL19 passages are so short that every
size above ~128 tokens gives one chunk per passage.)

The subset (:func:`write_cranfield_subset`):

- ``n_queries`` queries drawn without replacement by ``numpy.random.default_rng(seed)`` from the
  225 of ``cran.qry``, kept in file order;
- every document any ``cranqrel`` row of those queries names (``-1`` rows included: those
  documents are on topic, so they stay in the corpus as hard distractors though the importer
  leaves their ``-1`` grade out), plus ``n_distractors`` other documents drawn by the same
  generator;
- the three files written in the original SMART format, byte for byte per record, so the real
  Cranfield importer reads them. ``cranqrel`` numbers queries by their position in ``cran.qry``
  (SOURCE.md quirk 1), so the subset's qrels are renumbered to the positions 1..n of the subset's
  own ``cran.qry``; :attr:`CranfieldSubset.query_map` records ``new -> original`` positions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

SEED = 20261130
N_QUERIES = 10
N_DISTRACTORS = 40
CHUNKINGS = ("fixed:32", "fixed:64", "fixed:128", "fixed:256")  # the grid the CLI and page tests run
BUDGETS = ("250", "500", "1000", "2000")


@dataclass(frozen=True)
class CranfieldSubset:
    folder: Path
    corpus: Path
    queries: Path
    qrels: Path
    doc_ids: tuple[str, ...]
    query_map: dict[str, str]  # subset position -> original position, as strings
    qrels_rows: int  # rows written, -1 rows included
    seed: int


def smart_blocks(text: str) -> list[tuple[str, str]]:
    """``(id, record text)`` for each ``.I <id>`` record of a SMART file, record text verbatim."""
    blocks: list[tuple[str, str]] = []
    for piece in ("\n" + text).split("\n.I ")[1:]:
        rid = piece.split("\n", 1)[0].strip()
        blocks.append((rid, ".I " + piece.rstrip("\n") + "\n"))
    return blocks


def write_cranfield_subset(root: Path, out: Path, *, n_queries: int = N_QUERIES,
                           n_distractors: int = N_DISTRACTORS, seed: int = SEED) -> CranfieldSubset:
    rng = np.random.default_rng(seed)
    docs = smart_blocks((root / "cran.all.1400").read_text(encoding="utf-8"))
    queries = smart_blocks((root / "cran.qry").read_text(encoding="utf-8"))
    rows = [line.split() for line in (root / "cranqrel").read_text(encoding="utf-8").splitlines() if line.strip()]
    chosen = sorted(rng.choice(len(queries), size=n_queries, replace=False).tolist())  # 0-based positions
    new_position = {str(p + 1): str(i + 1) for i, p in enumerate(chosen)}
    kept_rows = [(new_position[q], d, code) for q, d, code in rows if q in new_position]
    needed = {d for _, d, _ in kept_rows}
    others = sorted({rid for rid, _ in docs} - needed, key=int)
    distractors = set(rng.choice(others, size=n_distractors, replace=False).tolist())
    keep = needed | distractors
    out.mkdir(parents=True, exist_ok=True)
    corpus, qry, qrel = out / "cran.all.subset", out / "cran.qry", out / "cranqrel"
    corpus.write_text("".join(block for rid, block in docs if rid in keep), encoding="utf-8")
    qry.write_text("".join(queries[p][1] for p in chosen), encoding="utf-8")
    qrel.write_text("".join(f"{q} {d} {code}\n" for q, d, code in kept_rows), encoding="utf-8")
    return CranfieldSubset(out, corpus, qry, qrel, tuple(sorted(keep, key=int)),
                           {new: old for old, new in new_position.items()}, len(kept_rows), seed)


def build_subset_project(tmp_path: Path) -> tuple[CranfieldSubset, str]:
    """A project holding the subset, imported through the CLI as a user would (shared data via
    ``shared_path``: skipped locally when absent, fails in CI). Returns ``(subset, db path)``."""
    from tests.conftest import run_cli
    from tests.support.prerequisites import shared_path

    subset = write_cranfield_subset(shared_path("datasets", "cranfield"), tmp_path / "cranfield-subset")
    db = str(tmp_path / "cran.duckdb")
    for step in (["init"], ["import", "corpus", str(subset.corpus)], ["import", "queries", str(subset.queries)],
                 ["import", "qrels", str(subset.qrels)]):
        done = run_cli("--db", db, *step, timeout=300)
        if done.returncode != 0:
            raise AssertionError(f"{' '.join(step)} failed: {done.stderr}")
    return subset, db


def sweep_argv(db: str) -> list[str]:
    """The 4 × 2 grid (:data:`CHUNKINGS` × BM25, hybrid) the CLI and page tests run, as argv."""
    return ["--db", db, "sweep", "--chunkings", ",".join(CHUNKINGS), "--retrievers", "bm25,hybrid",
            "-m", "ndcg@10", "-m", "recall@10", "--budgets", ",".join(BUDGETS), "--labels", "human",
            "--format", "json", "--no-progress"]


@dataclass(frozen=True)
class SweptSubset:
    """The subset project after ``workbench sweep`` of :func:`sweep_argv` ran on it from scratch
    (every chunk text encoded), with that run's exit code, stdout and stderr. Shared: read it or
    copy :attr:`db`; never change it."""

    subset: CranfieldSubset
    db: Path
    returncode: int
    stdout: str
    stderr: str


def swept_subset_project(tmp_path_factory) -> SweptSubset:
    """:func:`build_subset_project` and the CLI sweep of :func:`sweep_argv`, once per test session
    across the xdist workers (the dense encoding of the ~1,850 chunks is most of a minute of CPU;
    the CLI test and the Experiments page test both start from it)."""
    import pickle

    from tests.conftest import run_cli
    from tests.support.retrieval_fixtures import default_onnx_export
    from tests.support.templates import shared_once

    def build(folder: Path) -> None:
        default_onnx_export(tmp_path_factory)  # the run's one export, which the hybrid cells encode with
        subset, db = build_subset_project(folder)
        done = run_cli(*sweep_argv(db), timeout=900)
        (folder / "sweep.pickle").write_bytes(pickle.dumps(
            SweptSubset(subset, Path(db), done.returncode, done.stdout, done.stderr)))

    folder = shared_once(tmp_path_factory, "cranfield-swept", build)
    return pickle.loads((folder / "sweep.pickle").read_bytes())
