"""SME calibration of the LLM judge: the sample, labelling, the agreement report and the gate.

Shared by ``workbench agree`` / ``workbench calibrate`` and the app's Label and Calibration pages.

- :func:`create_sample` draws a calibration sample from a judged pool
  (:mod:`workbench.core.calibration.sample`) and stores it with its seed, split and weights.
- :func:`next_item`, :func:`item`, :func:`save_label`, :func:`skip`, :func:`cant_judge`,
  :func:`undo`, :func:`progress`: one SME's labelling. Each action is one transaction, stored at
  once. A label is written to ``judgments`` (source ``human``, the SME as assessor) and to
  ``label_events`` (time on task, comment, evidence spans, whether the judge's output was shown
  after submitting). Nothing here returns the judge's grade or reason before the SME labelled
  the item: :func:`judge_output` refuses until then.
- :func:`report` and :func:`gate`: agreement of the judge with the SMEs on the **held-out**
  part only (the tuning part may have shaped the prompt), re-weighted to the pool with the
  sample's inclusion weights, plus per-slice figures, the worst disagreements, agreement among
  SMEs and the Rogan–Gladen corrected share of relevant pairs in the pool and of each pooled
  run's precision over its judged top-k items (micro-averaged: relevant / judged).
- :func:`agree_files` compares two label files (``workbench agree``).

Reference labels when several SMEs labelled an item: the lower median of their grades (so one
SME cannot pull a pair across the threshold alone); their mutual agreement is reported.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from workbench.core.calibration import agreement as core_agreement
from workbench.core.calibration.agreement import AgreementResult, agreement, worst_disagreements
from workbench.core.calibration.sample import HOLDOUT, TUNING, SampleSpec, draw_sample
from workbench.core.calibration.gate import GateResult, GateThresholds, decide
from workbench.core.calibration.label_pairs import pair_files, parse_label_file
from workbench.errors import InputError, StoreError
from workbench.services import access
from workbench.services.calibration.reference import (  # noqa: F401  (re-exported: callers import them here)
    ADJUDICATION,
    HIGH_RISK_RATE,
    ReportOptions,
    gated_part,
    reference_labels,
    slice_tags,
)
from workbench.store import calibration as store
from workbench.store.database import WRITER_WAIT, Database
from workbench.store.pools import read_pool

GRADES = (0, 1, 2, 3)
ACTIONS = ("label", "skip", "cant_judge")


# -- the sample ------------------------------------------------------------------------------

def create_sample(db: Database, name: str, pool: str, *, size: int = 200, seed: int = 0,
                  holdout_share: float = 0.75, threshold: int = 2, min_per_class: int = 50,
                  model: str | None = None, prompt_hash: str | None = None, design: str = "pairs",
                  queries: int | None = None, judge: str | None = None) -> dict:
    """Draw and store a calibration sample named ``name`` from ``pool``'s judged pairs (leads only).

    ``design="pairs"`` (the default) draws ``size`` pairs stratified by judge grade and query;
    ``design="queries"`` draws ``queries`` queries at random among those whose every pool pair
    has a judge grade, with all their pairs (what judge-corrected metric intervals need,
    :func:`workbench.core.calibration.sample.draw_query_sample`). Refuses an existing name (a
    sample is never overwritten: SMEs may have labelled it).
    """
    access.require("sample")
    if not name or not name.strip():
        raise InputError("a calibration sample needs a name")
    if design not in ("pairs", "queries"):
        raise InputError(f"unknown sample design {design!r}; expected pairs or queries")
    if read_pool(db, pool) is None:
        raise InputError(f"there is no pool named {pool!r}; build one with {{command:pool}} first")
    config = _stratifying_configuration(db, pool, judge, model, prompt_hash)
    judged = store.judged_pool_pairs(db, pool, model=model, prompt_hash=prompt_hash, config=config)
    recorded = {"model": model, "prompt_hash": prompt_hash, "config": config}
    if design == "queries":
        return _create_query_sample(db, name, pool, judged, queries=queries, seed=seed,
                                    holdout_share=holdout_share, threshold=threshold, judge=recorded)
    spec = SampleSpec(size=int(size), min_per_class=int(min_per_class), threshold=int(threshold),
                      holdout_share=float(holdout_share))
    try:
        if config is None:  # no judge graded the pool yet: a simple random sample of its pairs
            from workbench.core.calibration.sample import draw_unjudged_sample

            drawn = draw_unjudged_sample(store.pool_pair_spans(db, pool), int(size), holdout_share=float(holdout_share),
                                         seed=seed)
            drawn = type(drawn)(drawn.pairs, drawn.seed, drawn.spec, drawn.pool_size, drawn.notes + (
                "drawn before any judge graded the pool: a simple random sample of its pairs; gate each judge "
                "configuration once it has graded the held-out pairs",))
        else:
            drawn = draw_sample(judged, spec, seed=seed)
    except InputError as exc:
        total = store.count_pool_pairs(db, pool)
        raise type(exc)(f"pool {pool!r} ({total} pairs, {len(judged)} with an LLM grade): {exc}") from None
    items = drawn.pairs.copy()
    with db.transaction() as tx:
        if store.sample_exists(tx, name):
            raise InputError(f"a calibration sample named {name!r} exists already; pick another name "
                             f"(samples are never overwritten)")
        store.write_sample(
            tx, name=name, pool=pool, seed=int(seed), threshold=int(threshold),
            spec={"size": spec.size, "min_per_class": spec.min_per_class, "floor_size": spec.floor_size,
                  "floor_non_relevant": spec.floor_non_relevant, "holdout_share": spec.holdout_share},
            judge=recorded, pool_size=drawn.pool_size, notes=list(drawn.notes), items=items,
        )
    return {"name": name, "pool": pool, "seed": int(seed), "size": len(items), "judge": config,
            "holdout": int((items["part"] == HOLDOUT).sum()), "tuning": int((items["part"] == TUNING).sum()),
            "by_judge_grade": ({} if config is None else
                               {int(g): int(c) for g, c in items.groupby("stratum").size().items()}),
            "queries": int(items["query_id"].nunique()), "pool_judged": 0 if config is None else drawn.pool_size,
            "notes": list(drawn.notes)}


def _stratifying_configuration(db: Database, pool: str, judge: str | None, model: str | None,
                               prompt_hash: str | None) -> str | None:
    """The judge configuration whose grades a new sample of ``pool`` is drawn on (see
    :func:`create_sample`); None when no configuration graded the pool (the draw then says so)."""
    from workbench.services.calibration import verdicts

    graded = store.pool_configurations(db, pool)
    if judge is not None:
        return verdicts.find_configuration(db, judge, among=graded).key
    if model is not None or prompt_hash is not None:
        known = {c.key: c for c in verdicts.configurations(db)}
        graded = [k for k in graded if k in known and (model is None or known[k].model == model)
                  and (prompt_hash is None or known[k].prompt_hash == prompt_hash)]
        if not graded:
            asked = " and ".join(f"{k} {v!r}" for k, v in (("model", model), ("prompt hash", prompt_hash)) if v)
            raise InputError(f"pool {pool!r} ({store.count_pool_pairs(db, pool)} pairs, 0 with an LLM grade of "
                             f"{asked}): no judge configuration of that {asked.split()[0]} graded it; choose one "
                             f"of: {verdicts.choices(list(known.values()))}")
    if len(graded) > 1:
        known = {c.key: c for c in verdicts.configurations(db)}
        raise InputError(f"{len(graded)} judge configurations graded pool {pool!r}; a sample is drawn on one "
                         f"configuration's grades: choose it with {{field:judge CONFIG}} (key, key prefix or model): "
                         f"{verdicts.choices([known[k] for k in graded if k in known])}")
    return graded[0] if graded else None


def _create_query_sample(db: Database, name: str, pool: str, judged: pd.DataFrame, *, queries: int | None,
                         seed: int, holdout_share: float, threshold: int, judge: dict) -> dict:
    """:func:`create_sample`'s query design: the population is every query of the pool whose
    pool pairs all carry a judge grade; it is stored with the sample (``spec.population``)."""
    from workbench.core.calibration.sample import QuerySampleSpec, draw_query_sample

    if queries is None:
        raise InputError("the query design needs the number of queries to draw: {field:queries N}")
    per_query = store.pool_pairs_per_query(db, pool)
    judged_per_query = judged.groupby("query_id").size()
    complete = sorted(str(q) for q, k in judged_per_query.items() if int(k) == per_query.get(str(q), -1))
    eligible = judged[judged["query_id"].astype(str).isin(set(complete))]
    spec = QuerySampleSpec(queries=int(queries), threshold=int(threshold), holdout_share=float(holdout_share))
    try:
        drawn = draw_query_sample(eligible, spec, seed=seed)
    except InputError as exc:
        raise type(exc)(f"pool {pool!r} ({len(per_query)} queries, {len(complete)} with every pair judged): "
                        f"{exc}") from None
    items = drawn.pairs.copy()
    notes = []
    if len(complete) < len(per_query):
        notes.append(f"{len(per_query) - len(complete)} of the pool's {len(per_query)} queries have pairs without "
                     f"a judge grade and were not eligible")
    with db.transaction() as tx:
        if store.sample_exists(tx, name):
            raise InputError(f"a calibration sample named {name!r} exists already; pick another name "
                             f"(samples are never overwritten)")
        store.write_sample(
            tx, name=name, pool=pool, seed=int(seed), threshold=int(threshold),
            spec={"design": "queries", "queries": spec.queries, "holdout_share": spec.holdout_share,
                  "population_size": len(complete), "population": complete},
            judge=judge, pool_size=drawn.pool_size, notes=notes, items=items)
    return {"name": name, "pool": pool, "seed": int(seed), "design": "queries", "size": len(items),
            "judge": judge.get("config"),
            "holdout": int((items["part"] == HOLDOUT).sum()), "tuning": int((items["part"] == TUNING).sum()),
            "by_judge_grade": {int(g): int(c) for g, c in items.groupby("stratum").size().items()},
            "queries": int(items["query_id"].nunique()), "population_queries": len(complete),
            "pool_judged": drawn.pool_size, "notes": notes}


def list_samples(db: Database) -> pd.DataFrame:
    """Every calibration sample (name, pool, seed, created_at, items, holdout), newest first."""
    return store.read_samples(db)


def list_pools(db: Database) -> list[str]:
    """Names of the pools a sample could be drawn from."""
    from workbench.store.pools import read_pools

    return read_pools(db)["name"].tolist()


def _sample(db: Database, name: str | None) -> dict:
    if name is None:
        samples = store.read_samples(db)
        if samples.empty:
            raise InputError("the project has no calibration sample; draw one with {command}",
                             command="calibrate sample --pool POOL")
        name = str(samples.iloc[0]["name"])
    info = store.read_sample(db, name)
    if info is None:
        raise InputError(f"there is no calibration sample named {name!r}")
    return info


def tuning_pairs(db: Database, sample: str) -> pd.DataFrame:
    """The tuning part's pairs with their SME labels: the only pairs that may become few-shot
    examples or guide prompt changes. Held-out pairs are never returned."""
    labels = reference_labels(db, sample)
    return labels[labels["part"] == TUNING].reset_index(drop=True)


def few_shot_examples(db: Database, sample: str, *, per_grade: int = 1, seed: int = 0,
                      total: int | None = None) -> list[dict]:
    """Labelled examples for a judge prompt, drawn only from the sample's **tuning** part:
    up to ``per_grade`` pairs per SME grade (seeded), each with the query, its description, the
    passage text and the SME grade. With ``total`` (``judge --few-shot K``), K pairs stratified by
    grade instead: the grades share K as equally as their tuning pairs allow. The held-out part
    never reaches a prompt, so the gate measures the judge on pairs it was not tuned on."""
    from workbench.core.calibration.sample import water_fill

    tuning = tuning_pairs(db, sample)
    if tuning.empty:
        raise InputError(f"sample {sample!r} has no SME labels on its tuning part yet; label some of its "
                         f"tuning pairs first (only those may become examples)")
    rng = np.random.default_rng(int(seed))
    groups = list(tuning.groupby("grade", sort=True))
    if total is not None:
        if int(total) < 1:
            raise InputError(f"the number of few-shot examples must be at least 1, got {total}")
        if int(total) > len(tuning):
            raise InputError(f"{total} few-shot examples asked, but sample {sample!r} has {len(tuning)} SME "
                             f"labels on its tuning part; ask for at most {len(tuning)} or label more tuning pairs")
        quotas = water_fill(int(total), np.array([len(rows) for _, rows in groups], dtype=np.int64), rng)
    else:
        quotas = [min(per_grade, len(rows)) for _, rows in groups]
    picked = []  # (grade, position), in the order the examples are given
    for (grade, rows), quota in zip(groups, quotas):
        pick = rows.iloc[np.sort(rng.choice(len(rows), size=int(quota), replace=False))]
        picked.extend((int(grade), int(position)) for position in pick["position"])
    items = store.read_items(db, sample, [position for _, position in picked])  # one read for all
    out = []
    for grade, position in picked:
        found = items[position]
        text = found["text"] or ""
        out.append({"query_id": found["query_id"], "doc_id": found["doc_id"], "chunk_id": found["chunk_id"],
                    "query": found["query"], "description": found["description"],
                    "passage": text[found["start"]:found["end"]], "grade": grade,
                    "position": position, "part": found["part"]})
    return out


# -- labelling -------------------------------------------------------------------------------

def annotator_id(annotator: str) -> str:
    """The identity of an annotator id as typed: trimmed and case-folded, so ``"SME-Anna "`` and
    ``"sme-anna"`` are one person (labels, progress and agreement are kept under this form; the
    page shows what was typed, trimmed)."""
    from workbench.core.calibration.routing import annotator_identity

    return annotator_identity(annotator)


def _annotator(annotator: str, action: str | None = None) -> str:
    """The checked annotator id (:func:`annotator_id`). ``action``: the permission the call needs
    (:mod:`workbench.services.access`); an annotator acts and reads only as themselves, a lead or
    viewer may read anyone's labels (``None``: a read)."""
    if not isinstance(annotator, str) or not annotator.strip():
        raise InputError("labels need an annotator id; enter yours first")
    identity = annotator_id(annotator)
    if identity == ADJUDICATION:
        raise InputError(f"{ADJUDICATION!r} is reserved for resolved labels; choose another annotator id")
    actor = access.require(action) if action else access.current_actor()
    # The local operator (CLI, scripts) may act for anyone; a signed-in person only as themselves.
    if actor is not access.LOCAL_OPERATOR and annotator_id(actor.name) != identity and (
            action == "label" or not access.allowed(actor, "see_all_labels")):
        raise access.PermissionDenied(f"{actor.name} ({actor.role}) may only give and see their own labels, "
                                      f"not {annotator.strip()}'s")
    return identity


def latest_sample(db: Database, annotator: str) -> str | None:
    """The sample the annotator last labelled in (None when they have not labelled yet, or that
    sample is gone): the Label page opens on it rather than on the newest sample."""
    name = store.latest_sample_of(db, _annotator(annotator))
    return name if name is not None and store.read_sample(db, name) is not None else None


def throughput(db: Database, sample: str, annotator: str | None = None) -> list[dict]:
    """Per annotator of ``sample``: ``labels``, ``answers`` (labels, skips, can't judge),
    ``hours`` of time on task (the seconds each pair was on screen before its answer, summed) and
    ``labels_per_hour`` (labels / hours; None before any timed answer). ``annotator``: only that
    one (their own pace); every annotator's needs the right to see all labels."""
    who = _annotator(annotator) if annotator is not None else None
    if who is None:
        access.require("see_all_labels")
    out = []
    for row in store.time_on_task(db, sample).itertuples(index=False):
        if who is not None and row.annotator != who:
            continue
        hours = float(row.seconds) / 3600.0
        out.append({"annotator": str(row.annotator), "labels": int(row.labels), "answers": int(row.answers),
                    "hours": hours, "labels_per_hour": (int(row.labels) / hours) if hours > 0 else None})
    return out


def next_item(db: Database, sample: str, annotator: str, *, after: int = -1,
              overlap: int | None = None) -> dict | None:
    """The next item the annotator has not labelled (skipped ones come back last), or None.
    ``overlap = k``: only items fewer than ``k`` other SMEs have answered (0 or None: all)."""
    if overlap is not None and overlap < 0:
        raise InputError(f"the overlap must be 0 (every SME labels every pair) or more, got {overlap}")
    from workbench.services.calibration import routing

    who = _annotator(annotator)
    mine = routing.assigned_to(db, sample, who)
    if mine is not None:  # the lead's assignment decides who labels which pair (overlap included)
        ahead = labelling_view(db, sample, who, after=after, depth=1)
        return None if ahead["position"] is None else item(db, sample, ahead["position"])
    position = store.next_open_position(db, sample, who, after=after, overlap=overlap or None)
    return None if position is None else item(db, sample, position)


def item(db: Database, sample: str, position: int) -> dict:
    """One item as an SME sees it, without the judge's output."""
    found = store.read_item(db, sample, position)
    if found is None:
        raise InputError(f"sample {sample!r} has no item at position {position}")
    return found


def my_state(db: Database, sample: str, annotator: str, position: int) -> dict | None:
    """The annotator's current state of one item (None when untouched or cleared)."""
    return my_states(db, sample, annotator).get(int(position))


def my_states(db: Database, sample: str, annotator: str) -> dict[int, dict]:
    """``{position: state}``: the annotator's current state of every item they answered
    (``action``, ``grade``, ``comment``, ``evidence``, ``revealed``); untouched and cleared
    (undone) items are absent. Answers the Label page kept and has not stored yet (the
    project was busy, :mod:`workbench.services.calibration.pending`) count: this annotator's
    only, applied on top in order (:func:`~workbench.services.calibration.pending.merge_states`,
    their states marked ``pending``)."""
    from workbench.services.calibration import pending

    annotator = _annotator(annotator)
    states = {int(position): {"action": action, "grade": None if grade is None else int(grade), "comment": comment,
                              "evidence": None if evidence is None else json.loads(evidence),
                              "revealed": bool(revealed)}
              for position, action, grade, comment, evidence, revealed in store.answered(db, sample, annotator)}
    kept = pending.waiting(db.path, annotator=annotator, sample=sample)
    return pending.merge_states(states, kept) if kept else states


def query_places(db: Database, sample: str) -> dict | None:
    """For a query-design sample (``calibrate sample --design queries``), where each pair stands
    in its query: ``{position: QueryPlace}`` (:mod:`workbench.core.calibration.query_place`,
    ``place.words()`` is "query 3 of 12 · pair 5 of 40 of this query"); None for a pair-design
    sample. Items never change once drawn, so a caller reads it once per sample (the Label page
    does, outside its key-press path). Ids only, no grade: any role may read it."""
    from workbench.core.calibration.query_place import query_places as places

    info = store.read_sample(db, sample)
    if info is None:
        raise InputError(f"there is no calibration sample named {sample!r}")
    if info["spec"].get("design") != "queries":
        return None
    return places(store.item_queries(db, sample))


def progress_of(states: dict[int, dict], total: int) -> dict:
    """One annotator's progress from :func:`my_states`: ``total``, ``labelled``, ``skipped``,
    ``cant_judge`` and ``open`` (items with no answer yet; skipped ones count as answered)."""
    actions = [s["action"] for s in states.values()]
    return {"total": int(total), "labelled": actions.count("label"), "skipped": actions.count("skip"),
            "cant_judge": actions.count("cant_judge"), "open": int(total) - len(actions)}


# -- the Label page: one read per key press ------------------------------------------------

def open_for_labelling(path: str | Path, *, wait: float | None = None, migrate: bool = False) -> Database:
    """The project, opened for one unit of Label page work and closed by the caller at its end.

    The page never keeps the file open between key presses: DuckDB lets one process write a
    file at a time, and the judge job and CLI commands in other processes must get it between
    two presses. It waits (with backoff, up to ``wait`` seconds; ``None``: the store's
    ``WRITER_WAIT``) while another process holds the file, so a judge job writing a batch
    delays an SME's label by a moment instead of refusing it. ``migrate``: apply pending migrations (the page's first open does; the key
    presses after it need not, and open the file as a visit: attached to the process's DuckDB
    instance for the press and detached after it, see :mod:`workbench.store.database`, so the
    lock is held as before without starting a DuckDB instance per press). A missing project is
    an error, never created.

    Opening drains the answers the Label page kept while the project was busy
    (:func:`workbench.services.calibration.pending.drain`, each stored exactly once); one that
    cannot be stored now stays kept for the next open."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"no project database at {path}; create one with {{command}}", command=f"--db {path} init")
    db = Database(path, migrate=migrate, wait=WRITER_WAIT if wait is None else max(0.0, float(wait)),
                  visit=not migrate)
    drain_kept(db)
    return db


def drain_kept(db: Database, *, annotator: str | None = None) -> list[dict]:
    """Store the answers the Label page kept for ``db``'s project (:func:`store_accepted` each,
    in order; only ``annotator``'s when given): :func:`workbench.services.calibration.pending.drain`."""
    from workbench.services.calibration import pending

    return pending.drain(db, lambda answer: store_accepted(db, answer), annotator=annotator)


def keep_answer(path: str | Path, *, sample: str, annotator: str, action: str, position: int | None = None,
                grade: int | None = None, evidence=None, comment: str | None = None, seconds: float | None = None,
                reveal: bool = False) -> dict:
    """Keep one Label page answer on disk next to the project until it can be stored
    (:func:`workbench.services.calibration.pending.keep`), checked first: the caller may label as
    ``annotator`` (as :func:`save_label` requires) and the answer is well formed. Returns the
    kept answer (its ``id``). ``action``: ``label``, ``skip``, ``cant_judge`` or ``undo``."""
    from workbench.services.calibration import pending

    return pending.keep(path, sample=sample, annotator=_annotator(annotator, "label"), action=action,
                        position=position, grade=grade, evidence=evidence, comment=comment, seconds=seconds,
                        reveal=reveal)


def stored_answer(db: Database, answer_id: str) -> dict | None:
    """The stored answer with id ``answer_id`` (``{"event_id", "position"}``, both None for an
    undo that found nothing to undo), None when it is not stored."""
    cur = db.cursor()
    try:
        return store.answer_event(cur, answer_id)
    finally:
        cur.close()


def drain_in_background(path: str | Path, *, wait: float = 5.0, every: float | None = None) -> None:
    """Have a background thread of this process store the kept answers of the project at
    ``path`` as soon as it is free (:func:`workbench.services.calibration.pending.kick`; each
    attempt opens it for labelling, waiting up to ``wait`` seconds, which drains)."""
    from workbench.services.calibration import pending

    def attempt(project: Path) -> None:
        open_for_labelling(project, wait=wait).close()

    pending.kick(path, attempt, **({} if every is None else {"every": every}))


def labelling_view(db: Database, sample: str, annotator: str, *, position: int | None = None,
                   after: int | None = None, overlap: int | None = None, have=(), depth: int = 2) -> dict:
    """What the Label page needs to show ``position`` and answer the next key press without
    another read, in one go:

    - ``position``: the pair to show (``None`` given: the first pair the annotator has not
      answered after ``after``, as :func:`next_item` picks it; ``None`` returned: every pair is
      answered);
    - ``next``: the pair that comes after ``position`` once it is answered (the page moves
      there at the key press; the pair on screen itself is never ``next``, so ``None`` means
      it is the last open pair; after a skip, the skipped pair itself comes back);
    - ``ahead``: the ``depth`` pairs that come after ``position`` when each is answered in
      turn, as far as can be told now (``next`` is the first, ``then`` the second); the browser
      holds them, so the key presses after this one draw their pair at once;
    - ``items``: the items at ``position``, those ``ahead`` and the two neighbours (previous / next
      buttons) that are not in ``have`` (positions the caller holds already; items never
      change once drawn), as :func:`item` gives them, without the judge's output;
    - ``states``, ``total``, ``progress``: :func:`my_states`, the sample's size, :func:`progress_of`.

    ``overlap``: as in :func:`next_item`. When the lead assigned the sample's pairs
    (:mod:`workbench.services.calibration.routing`), only the annotator's assigned pairs are
    served (``overlap`` is the assignment's then; a ``position`` not theirs is replaced by their
    first open pair), ``assigned`` lists them (None without an assignment) and ``progress``
    counts them only.

    Three small reads (the annotator's answers, the sample's size, the items not held; a fourth,
    the pairs others filled, only with an overlap): the queue order is worked out from the
    answers (:func:`workbench.core.calibration.label_order.open_in_order`, the order of
    :func:`next_item`), not queried again per pair."""
    from workbench.core.calibration.label_order import open_in_order

    if overlap is not None and overlap < 0:
        raise InputError(f"the overlap must be 0 (every SME labels every pair) or more, got {overlap}")
    annotator = _annotator(annotator)
    states = my_states(db, sample, annotator)
    total = store.count_items(db, sample)
    actions = {p: s["action"] for p, s in states.items()}
    from workbench.services.calibration import routing

    mine = routing.assigned_to(db, sample, annotator)
    if mine is not None:
        full = set(range(total)) - mine
        if position is not None and int(position) not in mine:
            position = None  # not theirs (another id's pair, say): their first open pair instead
    else:
        full = store.filled_by_others(db, sample, annotator, overlap) if overlap else ()
    if position is None:
        first = open_in_order(total, actions, after=-1 if after is None else int(after), full=full)
        position = first[0] if first else None
    elif not 0 <= int(position) < total:
        raise InputError(f"sample {sample!r} has no item at position {position}")
    following, ahead = None, []
    if position is not None:
        position = int(position)
        ahead = open_in_order(total, actions, after=position, besides=position, full=full, limit=max(1, int(depth)))
        following = ahead[0] if ahead else None
    held = {int(p) for p in have}
    wanted = {p for p in (position, *ahead, None if position is None else position - 1,
                          None if position is None else position + 1)
              if p is not None and 0 <= p < total and p not in held}
    done = progress_of(states, total) if mine is None else progress_of(
        {p: s for p, s in states.items() if p in mine}, len(mine))
    return {"total": total, "states": states, "progress": done, "position": position,
            "assigned": None if mine is None else sorted(mine),
            "next": following, "then": ahead[1] if len(ahead) > 1 else None, "ahead": ahead,
            "items": store.read_items(db, sample, wanted)}


def _check_evidence(evidence, doc_len: int | None) -> list[list[int]] | None:
    if evidence is None:
        return None
    spans = []
    for span in evidence:
        if not isinstance(span, (list, tuple)) or len(span) != 2:
            raise InputError(f"evidence span {span!r} is not [start, end]")
        s, e = int(span[0]), int(span[1])
        if s < 0 or e <= s or (doc_len is not None and e > doc_len):
            raise InputError(f"evidence span [{s}, {e}) is not inside the document (0..{doc_len})")
        spans.append([s, e])
    return spans


def _record(db: Database, sample: str, annotator: str, position: int, action: str, *, grade=None,
            comment=None, evidence=None, seconds=None, reveal=False, undoes=None,
            assessor: str | None = None, check_evidence: bool = False, require_evidence: bool = False,
            answer_id: str | None = None) -> int:
    """Store one action in one transaction. ``check_evidence``: ``evidence`` as given, checked
    against the document's length here (one look-up by id in the same transaction, not a read
    of the whole item); ``require_evidence``: grades 2–3 refused without a span. ``answer_id``:
    the answer's unique id (the Label page's kept answers): recorded in the same transaction,
    and an id stored already stores nothing again (returns the event it made)."""
    with db.transaction() as tx:
        if answer_id is not None:
            done = store.answer_event(tx, answer_id)
            if done is not None:
                return done["event_id"]
        keys = store.item_keys(tx, sample, position)
        if keys is None:
            raise InputError(f"sample {sample!r} has no item at position {position}")
        if check_evidence and evidence is not None:
            evidence = _check_evidence(evidence, store.document_length(tx, keys["doc_id"]))
        if require_evidence and grade is not None and grade >= 2 and not evidence:
            raise InputError("grades 2 and 3 need evidence: mark the sentence(s) that support the grade")
        before = store.current_state(tx, sample, annotator, position)
        if before is not None and before["judgment_id"] is not None:
            store.delete_human_judgment(tx, before["judgment_id"])
        judgment_id = None
        if action == "label":
            judgment_id = store.write_human_judgment(
                tx, **keys, grade=int(grade), assessor=assessor or annotator, reason=comment)
        event_id = store.write_event(
            tx, sample=sample, position=position, annotator=annotator, action=action,
            grade=None if grade is None else int(grade), judgment_id=judgment_id, comment=comment,
            evidence=evidence, seconds=seconds, revealed=reveal, undoes=undoes)
        if answer_id is not None:
            store.write_answer_id(tx, answer_id, event_id, position)
        return event_id


def save_label(db: Database, sample: str, annotator: str, position: int, grade: int, *,
               comment: str | None = None, evidence: list | None = None, seconds: float | None = None,
               reveal: bool = False, require_evidence: bool = False) -> int:
    """Store one SME grade at once (replacing the SME's earlier label of the item).

    ``evidence``: document character spans ``[[start, end], ...]`` supporting the grade;
    ``require_evidence`` makes them mandatory for grades 2–3. ``reveal``: the judge's output
    will be shown now that the label is in (recorded with the label).
    """
    annotator = _annotator(annotator, "label")
    if isinstance(grade, bool) or grade not in GRADES:
        raise InputError(f"grade {grade!r} is not one of 0, 1, 2, 3")
    _check_assigned(db, sample, annotator, [position])
    # The position, the spans (bounded by the document's length) and the required evidence are
    # checked in the storing transaction: a refusal stores nothing.
    return _record(db, sample, annotator, position, "label", grade=grade, comment=comment or None,
                   evidence=evidence, seconds=seconds, reveal=reveal, check_evidence=True,
                   require_evidence=require_evidence)


def save_labels(db: Database, sample: str, annotator: str, grades, *, seconds: float | None = None) -> list[int]:
    """:func:`save_label` of each ``{position: grade}`` in turn, all in one transaction (all or
    nothing) and a handful of statements instead of six per label: the same ``judgments`` rows
    and ``label`` events, numbered in the same order (each replacing the annotator's earlier
    label of the item), stored at one moment. For labels given elsewhere and entered at once (a
    spreadsheet of SME grades, a simulated SME); no comment, evidence or reveal. Returns the
    event ids."""
    annotator = _annotator(annotator, "label")
    labels = [(int(position), grade) for position, grade in grades.items()]
    for _, grade in labels:
        if isinstance(grade, bool) or grade not in GRADES:
            raise InputError(f"grade {grade!r} is not one of 0, 1, 2, 3")
    if not labels:
        return []
    positions = [p for p, _ in labels]
    _check_assigned(db, sample, annotator, positions)
    with db.transaction() as tx:
        keys = store.items_keys(tx, sample, positions)
        missing = [p for p in positions if p not in keys]
        if missing:
            raise InputError(f"sample {sample!r} has no item at position {missing[0]}")
        store.delete_human_judgments(tx, store.current_judgment_ids(tx, sample, annotator, positions))
        frame = pd.DataFrame([{**keys[p], "position": p, "grade": int(g), "seconds": seconds} for p, g in labels])
        return store.write_labels(tx, sample=sample, annotator=annotator, labels=frame)


def _check_assigned(db: Database, sample: str, annotator: str, positions) -> None:
    from workbench.services.calibration import routing

    routing.check_assigned(db, sample, annotator, positions)


def skip(db: Database, sample: str, annotator: str, position: int, *, seconds: float | None = None,
         comment: str | None = None) -> int:
    annotator = _annotator(annotator, "label")
    _check_assigned(db, sample, annotator, [position])
    return _record(db, sample, annotator, position, "skip", seconds=seconds, comment=comment or None)


def cant_judge(db: Database, sample: str, annotator: str, position: int, *, seconds: float | None = None,
               comment: str | None = None) -> int:
    annotator = _annotator(annotator, "label")
    _check_assigned(db, sample, annotator, [position])
    return _record(db, sample, annotator, position, "cant_judge", seconds=seconds, comment=comment or None)


def undo(db: Database, sample: str, annotator: str, *, answer_id: str | None = None) -> int | None:
    """Revert the annotator's latest action in the sample; returns the position it touched
    (None when there is nothing to undo). Stored as a new event: nothing is erased from history.
    ``answer_id``: as in :func:`_record` (an undo stored already reverts nothing more)."""
    return _undo(db, sample, _annotator(annotator, "label"), answer_id=answer_id)


def _undo(db: Database, sample: str, annotator: str, *, answer_id: str | None = None) -> int | None:
    cur = db.cursor()
    try:
        done = store.answer_event(cur, answer_id) if answer_id is not None else None
        if done is not None:
            return done["position"]
        target = store.last_undoable_event(cur, sample, annotator)
        if target is not None:
            before = store.event_before(cur, sample, annotator, target["position"], target["event_id"])
    finally:
        cur.close()
    if target is None:
        if answer_id is not None:  # so a replay does not undo what comes after it
            with db.transaction() as tx:
                if store.answer_event(tx, answer_id) is None:
                    store.write_answer_id(tx, answer_id, None, None)
        return None
    if before is None or before["action"] == "clear":
        _record(db, sample, annotator, target["position"], "clear", undoes=target["event_id"], answer_id=answer_id)
    else:
        _record(db, sample, annotator, target["position"], before["action"], grade=before["grade"],
                comment=before["comment"], evidence=before["evidence"], seconds=before["seconds"],
                reveal=before["revealed"], undoes=target["event_id"], answer_id=answer_id)
    return target["position"]


def store_accepted(db: Database, answer: dict) -> int | None:
    """Store one answer the Label page accepted and kept
    (:mod:`workbench.services.calibration.pending`), exactly once: its ``id`` is stored with it
    and an id stored already stores nothing again. Who may label was checked when it was
    accepted (in the page session of its annotator), so any drain stores it; what only the
    project can check (the pair exists, the evidence lies inside the document) is checked here
    and refused with :class:`InputError`. Returns the pair the answer touched (an undo's, None
    when there was nothing to undo)."""
    annotator = annotator_id(answer.get("annotator"))
    if not annotator or annotator == ADJUDICATION:
        raise InputError(f"answer {answer.get('id')} has no annotator id it may be stored under")
    sample, action, answer_id = answer["sample"], answer["action"], answer["id"]
    if action == "undo":
        return _undo(db, sample, annotator, answer_id=answer_id)
    position = int(answer["position"])
    if action in ACTIONS:
        _check_assigned(db, sample, annotator, [position])  # refused for good: told on the page
    if action == "label":
        grade = answer.get("grade")
        if isinstance(grade, bool) or grade not in GRADES:
            raise InputError(f"grade {grade!r} is not one of 0, 1, 2, 3")
        _record(db, sample, annotator, position, "label", grade=grade, comment=answer.get("comment") or None,
                evidence=answer.get("evidence"), seconds=answer.get("seconds"), reveal=bool(answer.get("reveal")),
                check_evidence=True, require_evidence=True, answer_id=answer_id)
    elif action in ("skip", "cant_judge"):
        _record(db, sample, annotator, position, action, seconds=answer.get("seconds"),
                comment=answer.get("comment") or None, answer_id=answer_id)
    else:
        raise InputError(f"unknown labelling action {action!r}")
    return position


def judge_output(db: Database, sample: str, annotator: str, position: int) -> dict:
    """The judge's grade and reason for an item, only once this annotator labelled it; never to a
    signed-in annotator (:mod:`workbench.services.visibility`: they label blind)."""
    from workbench.services import visibility

    visibility.require_read("judge_output")
    state = my_state(db, sample, annotator, position)
    if state is None or state["action"] != "label":
        raise InputError("the judge's label is shown only after you submit yours")
    return store.read_judge_output(db, sample, position) or {}


def sme_disagreements(db: Database, sample: str) -> list[dict]:
    """Items two or more SMEs graded differently, their grades side by side, and the resolved
    label (with who resolved it) when a lead adjudicated the item.

    Each also has ``notes``: ``{sme: {"comment", "evidence"}}``, what each SME's label says
    besides the grade (evidence: document spans ``[[start, end], ...]`` or None), and the pair as
    the SMEs saw it: ``start``, ``end`` (the judged passage), ``query``, ``title``, ``text`` (the
    whole document, which the evidence spans index into). Leads and viewers only, as the grades."""
    access.require("see_all_labels")
    table = store.label_table(db, sample)
    labelled = table[table["action"] == "label"]
    smes = labelled[labelled["annotator"] != ADJUDICATION]
    resolved = store.resolutions(db, sample)
    out = []
    for position, rows in smes.groupby("position", sort=True):
        grades = {str(a): int(g) for a, g in zip(rows["annotator"], rows["grade"])}
        if len(set(grades.values())) < 2:
            continue
        first = rows.iloc[0]
        r = resolved.get(int(position))
        out.append({"position": int(position), "query_id": str(first["query_id"]), "doc_id": str(first["doc_id"]),
                    "grades": grades, "resolved": None if r is None else r["grade"],
                    "resolved_by": None if r is None else r["by"]})
    if out:
        notes = store.label_notes(db, sample)
        items = store.read_items(db, sample, [d["position"] for d in out])
        for d in out:
            found = items.get(d["position"], {})
            d["notes"] = {name: notes.get((d["position"], name), {"comment": None, "evidence": None})
                          for name in d["grades"]}
            d.update({k: found.get(k) for k in ("start", "end", "query", "title", "text")})
    return out


def adjudicate(db: Database, sample: str, position: int, grade: int, *, lead: str,
               comment: str | None = None) -> int:
    """Record the resolved label of an item the SMEs disagree on (replacing an earlier
    resolution); it becomes the item's reference grade. ``lead`` is who resolved it.
    Only a lead may (:mod:`workbench.services.access`); in the app ``lead`` is the signed-in user."""
    actor = access.require("adjudicate")
    lead = _annotator(lead)
    if actor is not access.LOCAL_OPERATOR and lead != actor.name:
        raise access.PermissionDenied(f"{actor.name} may not record a resolution in {lead}'s name")
    if isinstance(grade, bool) or grade not in GRADES:
        raise InputError(f"grade {grade!r} is not one of 0, 1, 2, 3")
    if not any(d["position"] == int(position) for d in sme_disagreements(db, sample)):
        raise InputError(f"pair {position + 1} has no disagreement between SMEs to resolve")
    return _record(db, sample, ADJUDICATION, int(position), "label", grade=grade, comment=comment or None,
                   assessor=lead)


def judge_reason(db: Database, sample: str, position: int) -> dict:
    """The judge's output for an item, for the report's drill-down into disagreements (items
    an SME has labelled already; the labelling page uses :func:`judge_output`). Leads and viewers only."""
    from workbench.services import visibility

    visibility.require_read("judge_output")
    return store.read_judge_output(db, sample, position) or {}


def report_json(body: dict) -> str:
    """A report as JSON text: NaN and infinities as null, numpy numbers as numbers."""
    def clean(value):
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        if hasattr(value, "item") and not isinstance(value, (str, bytes)):
            value = value.item()
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value

    return json.dumps(clean(body), indent=2, ensure_ascii=False, default=str)


def progress(db: Database, sample: str, annotator: str) -> dict:
    states = store.current_states(db, sample, _annotator(annotator))
    counts = states["action"].value_counts().to_dict() if not states.empty else {}
    total = store.count_items(db, sample)
    seconds = states.loc[states["action"] != "clear", "seconds"].dropna()
    return {"total": total, "labelled": int(counts.get("label", 0)), "skipped": int(counts.get("skip", 0)),
            "cant_judge": int(counts.get("cant_judge", 0)),
            "open": total - int(sum(v for k, v in counts.items() if k != "clear")),
            "median_seconds": float(seconds.median()) if len(seconds) else None}


# -- the report ------------------------------------------------------------------------------

def result_dict(result: AgreementResult, verdict: GateResult) -> dict:
    """The agreement figures in the ``workbench agree --format json`` shape."""
    out = {"n": result.n}
    for name in ("tpr", "tnr", "precision", "kappa", "kappa_graded", "kappa_linear", "kappa_quadratic"):
        out[name] = result.figures[name]
    out["msd"] = result.figures["msd"]
    out["exact"] = result.figures["exact"]
    out["confusion"] = [[float(x) if not float(x).is_integer() else int(x) for x in row] for row in result.confusion]
    # ``confusion`` holds weights when the figures are re-weighted; ``counts`` is always pairs.
    out["counts"] = [[int(round(float(x))) for x in row] for row in result.pair_counts]
    out["relevant_pairs"], out["not_relevant_pairs"] = result.relevant_pairs, result.not_relevant_pairs
    out["ci"] = {name: [lo, hi] for name, (lo, hi) in result.ci.items()}
    out["gate"] = verdict.as_dict()
    out["threshold"] = result.threshold
    out["levels"] = list(result.levels)
    out["bootstrap"] = {"seed": result.seed, "resamples": result.n_boot, "resampling": result.resampling,
                        "stratified": result.stratified,
                        "interval": result.interval, "confidence": result.confidence, "queries": result.n_queries}
    out["notes"] = list(result.notes)
    return out


def report(db: Database, sample: str | None = None, *, thresholds: GateThresholds = GateThresholds(),
           options: ReportOptions = ReportOptions(), judge: str | None = None, record: bool = True) -> dict:
    """The calibration report of a sample (the latest one when ``sample`` is None) for one judge
    configuration: ``judge`` (key, prefix or model), else the sample's own
    (:func:`workbench.services.calibration.verdicts.default_configuration`). Every figure (the
    agreement, the gate, the slices, the disagreements, the observed share of relevant pairs and
    its Rogan–Gladen correction, each run's corrected precision) uses that configuration's grades
    only; ``judge`` in the output names it. With ``record`` the verdict is stored with the
    project: reporting on a configuration gates it (:func:`workbench.services.calibration.verdicts.record`);
    a page that only shows the report passes ``record=False`` and gates on a lead's request."""
    from workbench.services.calibration import verdicts

    access.require("see_all_labels")
    info = _sample(db, sample)
    name = info["name"]
    config = _chosen_configuration(db, name, info, judge)
    gate_ = verdicts.gate_configuration(db, name, config, thresholds, options, keep_boot=True)
    if record:
        access.require("sample")  # a stored verdict decides which labels enter the qrels: leads only
        verdicts.record(db, gate_)
    labels = reference_labels(db, name)
    part = gate_.part
    total_items = store.count_items(db, name)
    base = {"sample": name, "pool": info["pool"], "seed": info["seed"], "part": options.part,
            "judge": gate_.config.as_dict(), "items": total_items, "labelled": len(labels),
            "labelled_in_part": len(gated_part(labels, options)), "not_graded_by_judge": gate_.missing,
            "weighted": options.weighted, "threshold": options.threshold}
    result, verdict = gate_.result, gate_.verdict
    if result is None:
        return {**base, "agreement": None, "gate": verdict.as_dict(), "slices": [], "disagreements": [],
                "sme_agreement": _sme_agreement(db, name), "corrected_prevalence": None,
                "corrected_precision": []}
    body = result_dict(result, verdict)
    worst = worst_disagreements(part["grade"].to_numpy(), part["judge_grade"].to_numpy(),
                                threshold=options.threshold, limit=options.disagreements)
    disagreements = [
        {"position": int(part.iloc[i]["position"]), "query_id": str(part.iloc[i]["query_id"]),
         "doc_id": str(part.iloc[i]["doc_id"]),
         "chunk_id": None if pd.isna(part.iloc[i]["chunk_id"]) else str(part.iloc[i]["chunk_id"]),
         "sme_grade": int(part.iloc[i]["grade"]), "judge_grade": int(part.iloc[i]["judge_grade"])}
        for i in worst
    ]
    relevant, judged = store.count_judge_relevant(db, name, config)
    corrected = None
    if judged:
        share = core_agreement.corrected_share(relevant, judged, result, seed=options.seed)
        corrected = {"observed": share.observed, "n_observed": share.n_observed, "estimate": share.estimate,
                     "ci": list(share.ci), "clipped": share.clipped, "note": share.note}
    runs = []
    for row in store.run_judged_shares(db, name, options.precision_k, config).itertuples(index=False):
        if int(row.judged) == 0:
            continue
        share = core_agreement.corrected_share(int(row.relevant), int(row.judged), result, seed=options.seed)
        runs.append({"run": row.run, "k": options.precision_k, "judged": int(row.judged),
                     "observed": share.observed, "estimate": share.estimate, "ci": list(share.ci),
                     "note": share.note})
    return {**base, "agreement": body, "gate": verdict.as_dict(), "slices": gate_.slices,
            "disagreements": disagreements, "sme_agreement": _sme_agreement(db, name),
            "corrected_prevalence": corrected, "corrected_precision": runs}


def _chosen_configuration(db: Database, sample: str, info: dict, judge: str | None) -> str:
    """The configuration a report or gate is about: ``judge`` among those that graded the
    sample's pairs, else the sample's default."""
    from workbench.services.calibration import verdicts

    if judge is None:
        return verdicts.default_configuration(db, sample, info)
    graded = list(dict.fromkeys(store.judge_grades_for_sample(db, sample)["config"].astype(str)))
    return verdicts.find_configuration(db, judge, among=graded).key


def compare_judges(db: Database, sample: str | None = None, *, part: str = TUNING,
                   options: ReportOptions = ReportOptions(),
                   thresholds: GateThresholds = GateThresholds()) -> list[dict]:
    """Every judge configuration (:mod:`workbench.store.judge_configs`) that graded the sample's pairs, against the
    SMEs on ``part`` (the tuning part by default: compare and choose there, then gate the chosen
    one on the held-out part once), each with its figures, intervals and the verdict the gate
    would give. Sorted by binary κ, best first; configurations with no labelled pair are left out.
    A few-shot configuration (``judge --few-shot``) is compared without its own examples (they
    are in its prompt): ``few_shot`` is its number of examples (0: zero-shot) and
    ``examples_left_out`` how many of this sample's pairs that removed."""
    info = _sample(db, sample)
    labels = reference_labels(db, info["name"])
    if part != "all":
        labels = labels[labels["part"] == part]
    from workbench.services.calibration import verdicts
    from workbench.store.judge_configs import few_shot_by_config

    grades = store.judge_grades_for_sample(db, info["name"])
    shots = few_shot_by_config(db)
    shots_by_prompt = store.few_shot_configurations(db)  # grades written without a job
    known = {c.key: c for c in verdicts.configurations(db)}
    out = []
    for config, rows in grades.groupby("config", sort=False):
        model, prompt_hash = rows["model"].iloc[0], rows["prompt_hash"].iloc[0]
        merged = labels.merge(rows[["position", "grade"]].rename(columns={"grade": "config_grade"}), on="position")
        few = shots.get(str(config)) or shots_by_prompt.get((str(model), str(prompt_hash)))
        left_out = 0
        if few is not None and few.get("sample") == info["name"]:
            examples = merged["position"].astype(int).isin({int(p) for p in few.get("positions", [])})
            left_out = int(examples.sum())
            merged = merged[~examples]
        if merged.empty:
            continue
        r = agreement(merged["grade"].to_numpy(), merged["config_grade"].to_numpy(), threshold=options.threshold,
                      query_ids=merged["query_id"].astype(str).to_numpy(),
                      weights=merged["weight"].to_numpy() if options.weighted else None,
                      strata=merged["stratum"].to_numpy() if options.weighted else None,
                      seed=options.seed, n_boot=options.n_boot)
        out.append({"config": str(config), "label": verdicts.describe(db, str(config), known).label,
                    "model": model or None, "prompt_hash": prompt_hash or None, "n": r.n,
                    **{k: r.figures[k] for k in ("tpr", "tnr", "precision", "kappa", "kappa_graded", "msd")},
                    "ci": {k: list(r.ci[k]) for k in ("tpr", "tnr", "precision", "kappa", "kappa_graded", "msd")},
                    "verdict": decide(r, thresholds).verdict,
                    "few_shot": int(few["k"]) if few is not None else 0, "examples_left_out": left_out})
    return sorted(out, key=lambda d: -(d["kappa"] if d["kappa"] == d["kappa"] else -2.0))


def _sme_agreement(db: Database, sample: str) -> dict | None:
    """Agreement among SMEs on items several of them labelled: Krippendorff's α (ordinal) and,
    per two SMEs, Cohen's κ unweighted on grades 0–3 (``kappa``) and on relevant / not relevant
    at the sample's threshold, grade ≥ ``threshold`` (``kappa_binary``). None with fewer than
    two SMEs."""
    table = store.label_table(db, sample)
    labelled = table[(table["action"] == "label") & (table["annotator"] != ADJUDICATION)]
    annotators = sorted(labelled["annotator"].unique().tolist())
    if len(annotators) < 2:
        return None
    positions = sorted(labelled["position"].unique().tolist())
    col = {p: i for i, p in enumerate(positions)}
    ratings = np.full((len(annotators), len(positions)), np.nan)
    per: dict[str, dict[int, int]] = {a: {} for a in annotators}
    for row in labelled.itertuples(index=False):
        ratings[annotators.index(row.annotator), col[row.position]] = int(row.grade)
        per[row.annotator][int(row.position)] = int(row.grade)
    pairs = core_agreement.pairwise_kappa(per)
    threshold = int(store.read_sample(db, sample)["threshold"])
    binary = core_agreement.pairwise_binary_kappa(per, threshold=threshold)
    return {"annotators": annotators, "threshold": threshold,
            "alpha_ordinal": core_agreement.krippendorff_alpha(ratings, level="ordinal", levels=GRADES),
            "pairwise_kappa": [{"a": a, "b": b, "n": n, "kappa": k, "kappa_binary": kb}
                               for (a, b, n, k), (*_, kb) in zip(pairs, binary)]}


def gate(db: Database, sample: str | None = None, *, thresholds: GateThresholds = GateThresholds(),
         options: ReportOptions = ReportOptions(), judge: str | None = None) -> dict:
    """The gate verdict of one judge configuration on a sample's held-out part (the ``gate`` of
    :func:`report`, without the rest of the report): ``judge`` (key, prefix or model) or the
    sample's own configuration. The verdict is stored with the project, so gating a
    configuration here admits its labels to the qrels once it passes."""
    from workbench.services.calibration import verdicts

    access.require("see_all_labels")
    info = _sample(db, sample)
    name = info["name"]
    gate_ = verdicts.gate_configuration(db, name, _chosen_configuration(db, name, info, judge), thresholds, options)
    access.require("sample")  # a stored verdict decides which labels enter the qrels: leads only
    verdicts.record(db, gate_)
    return {"sample": name, "judge": gate_.config.as_dict(), "gate": gate_.verdict.as_dict(), "n": len(gate_.part),
            "not_graded_by_judge": gate_.missing}


# -- two label files -------------------------------------------------------------------------

def _read_text(path: str | Path) -> str:
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file; check the path", path=str(p)) from None
    except IsADirectoryError:
        raise InputError("is a directory; pass a label file", path=str(p)) from None
    except OSError as exc:
        raise InputError(f"cannot be read: {exc.strerror}", path=str(p)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("is not UTF-8 text", path=str(p), line=data[: exc.start].count(b"\n") + 1) from None


def agree_files(reference: str | Path, candidate: str | Path, *, threshold: int = 2, seed: int = 0,
                scale_max: int = 3, clip: bool = False, n_boot: int = 2000,
                thresholds: GateThresholds = GateThresholds()) -> dict:
    """``workbench agree``: the agreement of ``candidate`` with ``reference`` (the human side).

    Its ``notes`` name the options they concern as placeholders (``{field:clip}``, see
    :mod:`workbench.errors`) for the front end to word (:func:`workbench.errors.render_text`)."""
    if scale_max not in (3, 4):
        raise InputError(f"scale 0-{scale_max} is not supported; use 0-3 or 0-4")
    ref = parse_label_file(_read_text(reference), str(reference), scale_max=scale_max, clip=clip)
    cand = parse_label_file(_read_text(candidate), str(candidate), scale_max=scale_max, clip=clip)
    paired = pair_files(ref, cand)
    if len(paired.reference) == 0:
        raise InputError(
            f"{reference} and {candidate} share no (query_id, item) pair ({len(ref.keys)} and "
            f"{len(cand.keys)} labels); check that both use the same ids (and both spans or neither)")
    levels = tuple(range(scale_max + 1))
    if threshold not in levels[1:]:
        raise InputError(f"{{field:threshold {threshold}}} must be a grade between 1 and {scale_max}")
    result = agreement(paired.reference, paired.candidate, levels=levels, threshold=threshold,
                       query_ids=paired.query_ids, seed=seed, n_boot=n_boot)
    verdict = decide(result, thresholds)
    out = result_dict(result, verdict)
    out["only_reference"] = paired.only_reference
    out["only_candidate"] = paired.only_candidate
    out["scale"] = f"0-{scale_max}"
    out["clipped"] = {"reference": ref.clipped, "candidate": cand.clipped}
    out["not_labels"] = {"reference": ref.not_labels, "candidate": cand.not_labels}
    out["reference"] = str(reference)
    out["candidate"] = str(candidate)
    if clip and (ref.clipped or cand.clipped):
        out["notes"].append(f"{{field:clip}} lowered {ref.clipped} reference and {cand.clipped} candidate grades "
                            f"above {scale_max} to {scale_max}")
    if math.isnan(out["kappa"]):
        out["notes"].append("κ is undefined: one side uses a single label")
    return out


__all__ = [
    "ReportOptions",
    "adjudicate",
    "agree_files",
    "annotator_id",
    "cant_judge",
    "compare_judges",
    "create_sample",
    "few_shot_examples",
    "gate",
    "item",
    "judge_output",
    "labelling_view",
    "latest_sample",
    "list_pools",
    "list_samples",
    "my_state",
    "my_states",
    "next_item",
    "open_for_labelling",
    "progress",
    "progress_of",
    "report",
    "save_label",
    "save_labels",
    "skip",
    "sme_disagreements",
    "throughput",
    "tuning_pairs",
    "undo",
]
