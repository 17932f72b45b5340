"""A project for checking that an annotator labels blind (:mod:`workbench.services.visibility`).

The demo project (its chunk pool ``demo``, labelled by ``demo-sme``), judged by the offline judge
(every pool pair gets a grade and a reason), plus:

* calibration sample ``cal`` drawn from the pool; two annotators, ``alice`` and ``bob``, label
  its first :data:`LABELLED` pairs (alice grades 3, bob grades 0, each with a comment carrying a
  marker), so the two disagree on every one;
* one LLM label per sample pair from the judge configuration ``marker-judge``, whose reason
  carries :data:`JUDGE_MARKER`;
* one imported reference label (assessor ``nist``) on the first sample pair.

``carol`` is an annotator with no label of her own, and ``lea`` a lead and ``vi`` a viewer: for
carol every grade on a page is either the imported one or a leak.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tests.support.templates import demo_project
from workbench.config import load_settings
from workbench.services.calibration import workflow as cal
from workbench.services.judge.jobs import resolve_spec, run_job
from workbench.store.database import Database
from workbench.store.judgments import write_judgments

LABELLED = 12
JUDGE_MARKER = "ZQXJUDGEMARKER"
ALICE_MARKER = "ZQXALICENOTE"
BOB_MARKER = "ZQXBOBNOTE"
MARKERS = (JUDGE_MARKER, ALICE_MARKER, BOB_MARKER)
PASSWORDS = {"carol": "carol-Secret-1", "lea": "lea-Secret-2", "vi": "vi-Secret-3"}
ROLES = {"carol": "annotator", "lea": "lead", "vi": "viewer"}


def build(path: Path) -> dict:
    """Build the project at ``path``; returns ``{"sample_pairs": [(query_id, doc_id, chunk_id)],
    "reasons": every distinct LLM reason stored, "imported": (query_id, doc_id)}``."""
    demo_project(path)  # a copy of the worker's init --demo template
    spec = resolve_spec(load_settings(overrides={"judge": {"model": "offline-lexical"}}))
    run_job(path, "demo", spec)
    db = Database(path)
    try:
        cal.create_sample(db, "cal", "demo", size=100, seed=1, min_per_class=1)
        items = [cal.item(db, "cal", p) for p in range(LABELLED)]
        for position in range(LABELLED):
            cal.save_label(db, "cal", "alice", position, 3, comment=f"{ALICE_MARKER} {position}")
            cal.save_label(db, "cal", "bob", position, 0, comment=f"{BOB_MARKER} {position}")
        rows = []
        for found in items:
            rows.append({"query_id": found["query_id"], "doc_id": found["doc_id"], "start": int(found["start"]),
                         "end": int(found["end"]), "grade": 2, "source": "llm", "assessor": "marker-judge",
                         "model": "marker-judge", "prompt_hash": "marker", "reason": f"{JUDGE_MARKER} pair",
                         "status": "ok"})
        first = items[0]
        rows.append({"query_id": first["query_id"], "doc_id": first["doc_id"], "start": int(first["start"]),
                     "end": int(first["end"]), "grade": 1, "source": "imported", "assessor": "nist",
                     "status": "ok"})
        with db.transaction() as tx:
            write_judgments(tx, pd.DataFrame(rows))
        reasons = [str(r) for r in db.query_df(
            "SELECT DISTINCT reason FROM judgments WHERE source = 'llm' AND reason IS NOT NULL")["reason"]]
    finally:
        db.close()
    return {"sample_pairs": [(i["query_id"], i["doc_id"], i["chunk_id"]) for i in items], "reasons": reasons,
            "imported": (first["query_id"], first["doc_id"])}


def copy(path: Path) -> dict:
    """A copy at ``path`` of the project :func:`build` makes, built once per test process
    (:mod:`tests.support.templates`); returns :func:`build`'s dict (a copy: the caller may add to it)."""
    from tests.support.templates import copy_of

    return dict(copy_of("blind project", build, path))


def secrets_toml() -> str:
    """``.streamlit/secrets.toml`` for the three users (written by the project's own helper)."""
    from workbench.services.access import hash_password, secrets_entry

    return "\n".join(secrets_entry(name, ROLES[name], hash_password(pw)) for name, pw in PASSWORDS.items()) + "\n"
