"""Calibration samples: drawing one from a judged pool and reading what it holds.

- :func:`create_sample` draws a calibration sample from a judged pool
  (:mod:`workbench.core.calibration.sample`) and stores it with its seed, split and weights; a
  sample is never overwritten (SMEs may have labelled it).
- :func:`list_samples`, :func:`list_pools`, :func:`sample_info`: what there is to label.
- :func:`tuning_pairs`, :func:`few_shot_examples`: the **tuning** part's labelled pairs, the only
  ones that may reach a judge prompt (the held-out part is what the gate measures on).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.core.calibration.sample import (
    HOLDOUT,
    TUNING,
    QuerySampleSpec,
    SampleSpec,
    draw_query_sample,
    draw_sample,
    draw_unjudged_sample,
    water_fill,
)
from workbench.errors import InputError
from workbench.services import access
from workbench.services.calibration import verdicts
from workbench.services.calibration.reference import reference_labels
from workbench.store import calibration as store
from workbench.store.database import Database
from workbench.store.pools import read_pool, read_pools


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

    return read_pools(db)["name"].tolist()


def sample_info(db: Database, name: str | None) -> dict:
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
