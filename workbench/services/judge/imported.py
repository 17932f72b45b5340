"""``workbench import judgments FILE --judge NAME``: an external judge's grades as a judge
configuration.

The file is TREC qrels (``qid iter doc_id grade``) or the JSON lines ``workbench export
judgments`` writes (rows with ``status`` ``ok`` and a grade; ``chunk_id`` when present). Its
grades (integers 0-3) land on the pairs of one pool (``pool``; the project's only pool when not
named): a row with a chunk id grades that pool pair, a row without one every pooled chunk of
its (query, document) (TREC qrels are document-level; in a document-level pool that is the
document's one pair). Rows of no pool pair are counted and left out.

They are stored as one judge configuration: a ``judge_jobs`` row (``judge = 'imported-judge'``,
``model`` = ``NAME``, ``prompt_id = 'imported'``, ``prompt_hash`` = the file's sha256,
``config_key = sha256('import:' + NAME + file sha256)``) and one ``llm`` / ``ok`` judgment per
graded pool pair, so the gate (``calibrate gate --judge NAME``), the qrels rule, PPI,
agreement and ``judge learn --from NAME`` treat it like any judge. Importing the same bytes
under the same name again writes nothing.

Refused in one line (nothing written): a grade that is not an integer 0-3; a pair graded twice
with different grades; a file with no row on the pool; an empty ``NAME``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.core.formats import labels as label_formats
from workbench.core.formats.lines import decode_utf8, read_json_objects
from workbench.errors import InputError, clip
from workbench.services import access, lazy
from workbench.store import learned_judge as store
from workbench.store.database import Database
from workbench.store.judging import create_job, find_job, recount_job, update_job, write_job_judgments
from workbench.store.pools import read_pool, read_pools

JUDGE = "imported-judge"
FORMATS = ("trec", "jsonl")


@dataclass
class ImportedJudge:
    name: str
    config: str
    pool: str
    rows: int
    graded: int
    pool_pairs: int
    outside: int
    created: bool

    def summary(self) -> str:
        if not self.created:
            return (f"judge {self.name!r}: these grades are stored already as configuration {self.config[:12]} "
                    f"on pool {self.pool!r}; nothing written")
        outside = f"; {self.outside:,} file rows name no pair of the pool and were left out" if self.outside else ""
        return (f"imported {self.graded:,} grades of judge {self.name!r} on pool {self.pool!r} "
                f"({self.graded:,} of its {self.pool_pairs:,} pairs) from {self.rows:,} file rows{outside}; "
                f"configuration {self.config[:12]}: gate it with {{command:calibrate gate --judge {self.config[:12]}}}")


def _format(data: bytes, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise InputError(f"unknown judgments format {clip(fmt)}; expected one of {', '.join(FORMATS)}")
        return fmt
    first = next((line.strip() for line in data.splitlines() if line.strip()), b"")
    return "jsonl" if first.startswith(b"{") else "trec"


def _jsonl(text: str, path: str) -> pd.DataFrame:

    rows = []
    for line, obj in read_json_objects(text, path):
        for key in ("query_id", "doc_id"):
            if not isinstance(obj.get(key), (str, int)) or isinstance(obj.get(key), bool):
                raise InputError(f"{key} missing or not a string; expected the JSON lines `workbench export "
                                 f"judgments` writes", path=path, line=line)
        if obj.get("status", "ok") != "ok" or obj.get("grade") is None:
            continue
        chunk = obj.get("chunk_id")
        rows.append((line, str(obj["query_id"]), str(obj["doc_id"]), None if chunk is None else str(chunk),
                     obj["grade"]))
    frame = pd.DataFrame(rows, columns=["line", "query_id", "doc_id", "chunk_id", "grade"])
    bad = frame[[not (isinstance(g, int) and not isinstance(g, bool)) for g in frame["grade"]]]
    if len(bad):
        r = bad.iloc[0]
        raise InputError(f"grade {r['grade']!r} is not an integer 0-3", path=path, line=int(r["line"]))
    frame["grade"] = frame["grade"].astype("int64")
    return frame


def read_grades(path: Path, label: str, fmt: str | None) -> tuple[pd.DataFrame, str, str]:
    """(``line, query_id, doc_id, chunk_id, grade`` rows, format, sha256 of the bytes)."""

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read it ({exc.strerror or exc})", path=label) from None
    sha = hashlib.sha256(data).hexdigest()
    fmt = _format(data, fmt)
    text = decode_utf8(data, label)
    if fmt == "trec":
        frame = label_formats.qrels_frame(lazy.core_metrics_readers.read_trec_qrels(path, careful=True)).assign(chunk_id=None)
    else:
        frame = _jsonl(text, label)
    if frame.empty:
        raise InputError("holds no graded judgments", path=label)
    label_formats.check_grades(frame, label)
    return frame, fmt, sha


def _pool(db: Database, pool: str | None) -> dict:
    if pool is None:
        names = read_pools(db)["name"].astype(str).tolist()
        if len(names) != 1:
            raise InputError(f"the project has {len(names)} pools; name the one the grades are for with "
                             f"{{field:pool P}}: {', '.join(names) or 'none (build one with {command:pool})'}")
        pool = names[0]
    info = read_pool(db, pool)
    if info is None:
        raise InputError(f"there is no pool named {clip(pool)}")
    return info


def _on_pool(frame: pd.DataFrame, spans: pd.DataFrame, label: str) -> tuple[pd.DataFrame, int]:
    """The file's grades on the pool's pairs (one per pair) and how many file rows matched none."""
    keyed = spans.assign(_row=np.arange(len(spans)))
    by_chunk = frame[frame["chunk_id"].notna()]
    by_doc = frame[frame["chunk_id"].isna()].drop(columns="chunk_id")
    a = by_chunk.merge(keyed, on=["query_id", "doc_id", "chunk_id"], how="left")
    b = by_doc.merge(keyed, on=["query_id", "doc_id"], how="left")
    matched = pd.concat([a, b], ignore_index=True)
    outside = int(matched["_row"].isna().sum())  # a row that matches no pair stays once, unmatched
    matched = matched[matched["_row"].notna()]
    clash = matched.groupby("_row")["grade"].nunique()
    if (clash > 1).any():
        row = int(clash[clash > 1].index[0])
        first = spans.iloc[row]
        raise InputError(f"{int((clash > 1).sum()):,} pool pairs get different grades from this file (first: query "
                         f"{first['query_id']!r}, document {first['doc_id']!r}); an imported judge gives one grade "
                         f"per pair: keep one judge's rows (e.g. {{command:export judgments --source llm}})",
                         path=label)
    graded = matched.drop_duplicates("_row").sort_values("_row")
    return spans.iloc[graded["_row"].astype(int).to_numpy()].assign(grade=graded["grade"].to_numpy()), outside


def import_judgments(db: Database, path: str | Path, *, judge: str, pool: str | None = None,
                     format: str | None = None, label: str | None = None) -> ImportedJudge:
    """Import an external judge's grades (module docstring)."""
    access.require("judge")
    name = (judge or "").strip()
    if not name:
        raise InputError("{field:judge} is empty; name the external judge (it becomes the configuration's model)")
    path = Path(path)
    label = label or str(path)
    frame, fmt, sha = read_grades(path, label, format)
    info = _pool(db, pool)
    spans = store.pool_pair_spans(db, info["name"], str(info["level"]))
    graded, outside = _on_pool(frame, spans, label)
    if graded.empty:
        raise InputError(f"none of its {len(frame):,} rows names a pair of pool {info['name']!r}; check the "
                         f"query and document ids, or name another pool with {{field:pool P}}", path=label)
    key = hashlib.sha256(("import:" + name + sha).encode()).hexdigest()
    existing = find_job(db, info["name"], key)
    result = ImportedJudge(name, key, info["name"], len(frame), len(graded), len(spans), outside, True)
    if existing is not None and store.job_has_judgments(db, existing["job_id"]):
        result.created = False
        return result
    with db.transaction() as tx:
        job = create_job(tx, pool=info["name"], judge=JUDGE, model=name, base_url=None, prompt_id="imported",
                         prompt_hash=sha, params={"file": label, "sha256": sha, "format": fmt}, samples=1,
                         aggregate="majority", config_key=key, budget_usd=None)
        out = graded.copy()
        out["source"] = "llm"
        out["assessor"] = name
        out["prompt_hash"] = sha
        out["model"] = name
        out["status"] = "ok"
        out["raw_response"] = [json.dumps({"imported": label, "grade": int(g)}) for g in out["grade"]]
        out["job_id"] = job
        write_job_judgments(tx, out)
        update_job(tx, job, state="finished", total=len(out), started=True, finished=True)
        recount_job(tx, job)
    return result
