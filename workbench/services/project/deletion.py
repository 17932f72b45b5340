"""Deleting runs, pools and chunkings, with what depends on them listed first.

What depends on what:

* a **pool** owns its pairs and their provenance, the judge jobs run on it and the calibration
  samples drawn from it (their items and label events): a new pool of the same name must not
  inherit job progress or a sample drawn from other pairs;
* a **run** owns its rows and its per-query latencies; the pools that pooled it are built from
  those rows, so they go too;
* a **chunking** owns its chunks and cached embeddings; the runs that rank its chunks and the
  pools over its chunks (or over those runs) go too.

Labels are never deleted: a judgment is anchored to a character span of a document, not to a
chunk, run or pool, so it survives and maps onto any other chunking later. The judge's stored
answers (``judge_samples``) stay too: they are the response cache, keyed by the texts, so a
later job on any pool reuses them instead of paying again.

Refused: deleting a pool (directly, or through its run or chunking) that has a calibration sample
with SME grades. Those grades are the agreement evidence the calibration gate decides from, and
the label events say which sample item each grade answered; deleting the sample would silently
change which LLM labels count in the qrels. Nothing is deleted and the error names the sample.

:func:`plan_deletion` says what would be deleted without changing anything (the CLI prints it
and stops unless ``--yes``; the app shows it before a confirm button); :func:`delete` carries
out a plan in one transaction, re-reading the dependencies first and refusing when they differ
from the plan the user confirmed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.errors import InputError
from workbench.services import access
from workbench.store.chunks import chunking_exists, delete_chunking, read_chunkings
from workbench.store.database import Database
from workbench.store.dependents import (
    count_latencies,
    delete_latencies,
    delete_pool_dependents,
    pool_calibration_samples,
    pool_judge_jobs,
)
from workbench.store.embeddings import count_embeddings
from workbench.store.meta import table_counts
from workbench.store.pools import count_pool_rows, delete_pools, pools_using, read_pool
from workbench.store.runs import (
    count_run_rows,
    delete_runs,
    run_exists,
    runs_on_chunking,
)

KINDS = ("run", "pool", "chunking")


@dataclass(frozen=True)
class DeletionPlan:
    """What deleting ``kind`` ``name`` removes (names and row counts) and what it keeps."""

    kind: str
    name: str
    runs: list[str] = field(default_factory=list)
    pools: list[str] = field(default_factory=list)
    chunkings: list[str] = field(default_factory=list)
    judge_jobs: list[int] = field(default_factory=list)
    calibration_samples: list[str] = field(default_factory=list)
    #: calibration samples of the pools holding SME grades -> how many (deleting them is refused)
    labelled_samples: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)  # what -> rows deleted
    labels_kept: int = 0

    def lines(self) -> list[str]:
        """The plan in words, one item per line."""
        out = [f"deleting {self.kind} {self.name!r} removes:"]
        for what, names in (("chunking", self.chunkings), ("run", self.runs), ("pool", self.pools),
                            ("judge job", [str(j) for j in self.judge_jobs]),
                            ("calibration sample", self.calibration_samples)):
            if names:
                out.append(f"  {what}{'s' if len(names) > 1 else ''}: {', '.join(names)}")
        for what, n in self.rows.items():
            if n:
                out.append(f"  {n:,} {what}")
        out.append(f"and keeps all {self.labels_kept:,} labels (labels are spans of documents, not of chunks, "
                   f"runs or pools)" + (" and the judge's stored answers (its response cache)"
                                        if self.judge_jobs else ""))
        return out

    def refusal(self) -> str | None:
        """Why this plan must not be carried out (SME grades would go), or None."""
        if not self.labelled_samples:
            return None
        sample, n = next(iter(self.labelled_samples.items()))
        pool = self.pools[0] if len(self.pools) == 1 else ", ".join(self.pools)
        return (f"cannot delete {self.kind} {self.name!r}: calibration sample {sample!r} of pool {pool} holds "
                f"{n:,} SME grades (the calibration gate's evidence; deleting the pool would delete the sample "
                f"and change which LLM labels count); nothing was deleted; keep the pool and give a new pool "
                f"another name")


def plan_deletion(db: Database, kind: str, name: str) -> DeletionPlan:
    """What deleting ``kind`` (run, pool or chunking) ``name`` would remove; changes nothing."""
    if kind not in KINDS:
        raise InputError(f"cannot delete a {kind!r}; choose one of {', '.join(KINDS)}")
    chunkings: list[str] = []
    runs: list[str] = []
    pools: list[str] = []
    if kind == "pool":
        if read_pool(db, name) is None:
            raise InputError(f"no pool named {name!r} in the project")
        pools = [name]
    elif kind == "run":
        if not run_exists(db, name):
            raise InputError(f"no run named {name!r} in the project")
        runs = [name]
        pools = pools_using(db, runs=runs)
    else:
        if not chunking_exists(db, name):
            known = ", ".join(read_chunkings(db)["name"]) or "none yet"
            raise InputError(f"no chunking named {name!r} in the project; known chunkings: {known}")
        chunkings = [name]
        runs = runs_on_chunking(db, name)
        pools = sorted(set(pools_using(db, runs=runs)) | set(pools_using(db, chunking=name)))
    pairs, provenance = count_pool_rows(db, pools) if pools else (0, 0)
    jobs = pool_judge_jobs(db, pools) if pools else []
    samples = pool_calibration_samples(db, pools) if pools else None
    sample_names = [] if samples is None else [str(s) for s in samples["name"]]
    labelled = {} if samples is None else {str(s): int(n) for s, n in zip(samples["name"], samples["sme_labels"])
                                           if int(n)}
    rows = {
        "chunks": int(read_chunkings(db).set_index("name")["chunks"].get(name, 0)) if chunkings else 0,
        "cached embeddings": count_embeddings(db, chunking=name) if chunkings else 0,
        "run rows": count_run_rows(db, runs) if runs else 0,
        "pool pairs": pairs,
        "pool provenance rows": provenance,
        "run latencies": count_latencies(db, runs) if runs else 0,
        "calibration items": 0 if samples is None else int(samples["items"].sum()),
        "label events (skips, can't judge)": 0 if samples is None else int(samples["events"].sum()),
    }
    labels = table_counts(db).get("judgments", 0)
    return DeletionPlan(kind, name, runs, pools, chunkings, jobs, sample_names, labelled, rows, labels)


def delete(db: Database, kind: str, name: str, *, expected: DeletionPlan | None = None) -> DeletionPlan:
    """Delete ``kind`` ``name`` with everything :func:`plan_deletion` lists, in one transaction.

    ``expected``: the plan the user confirmed; when what depends on the item changed since
    (a run or pool was made in between), nothing is deleted and an :class:`InputError` says so.
    """
    access.require("delete")
    plan = plan_deletion(db, kind, name)
    if (why := plan.refusal()) is not None:
        raise InputError(why)
    if expected is not None and (plan.runs, plan.pools, plan.chunkings, plan.judge_jobs,
                                 plan.calibration_samples) != (
            expected.runs, expected.pools, expected.chunkings, expected.judge_jobs, expected.calibration_samples):
        raise InputError(f"what depends on {kind} {name!r} changed since it was listed; nothing was deleted; "
                         f"look at the list again and confirm")
    with db.transaction() as cur:
        if plan.pools:
            delete_pool_dependents(cur, plan.pools)
            delete_pools(cur, plan.pools)
        if plan.runs:
            delete_latencies(cur, plan.runs)
            delete_runs(cur, plan.runs)
        for chunking in plan.chunkings:
            delete_chunking(cur, chunking)
    return plan
