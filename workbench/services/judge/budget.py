"""Plan which pool pairs to judge within a budget (``workbench labels budget``).

``plan_budget(db, pool, budget=..., unit=...)``
    The pool's pairs that still need a label from the side the budget pays for (``calls`` and
    ``usd`` pay the LLM judge: pairs without any label, since an ``ok`` LLM judgment, a human
    label or an imported one (NIST qrels) each already labels the pair, and the qrels policy puts
    human and imported labels above the judge's; ``hours`` pay SMEs: pairs without a human or
    imported label), ordered by a strategy of
    :mod:`workbench.core.judging.budget` (pool priority, run-comparison weight over the pool's
    runs, judge disagreement, their combination, or a seeded random baseline), cut at the budget:
    one unit per judge call (times the judge's samples), the judge's estimated dollars per
    pair (:func:`workbench.services.judge.jobs.estimate` over the pool; needs a price in
    ``[judge.prices]``), or ``seconds_per_pair`` of SME time. Returns the chosen pairs and, per
    pooled run, the expected effect on the P@k interval from missing labels (widths and 95%
    half-widths before and after).

Judge disagreement per pair is the range of the ``ok`` grades the pair has from different
judgments (several judge configurations, samples' spread, LLM versus SME); a pair with one
grade or none has no disagreement known. Labels on synthetic queries count like any others.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from workbench.core.documents.spans import chunk_qrels, doc_qrels
from workbench.core.judging import budget as bj
from workbench.errors import InputError
from workbench.services.judge.jobs import estimate, resolve_spec
from workbench.store.chunks import read_chunks
from workbench.store.database import Database
from workbench.store.judgments import graded_judgments
from workbench.store.pools import read_pool, read_pool_pairs, read_pool_provenance

UNITS = ("calls", "usd", "hours")


@dataclass
class BudgetPlan:
    pool: str
    strategy: str
    unit: str
    budget: float
    candidates: int
    selected: int
    spent: float
    cost_per_pair: float
    k: int
    seed: int
    pairs: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)
    effect: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)

    def as_dict(self) -> dict:
        return {
            "pool": self.pool, "strategy": self.strategy, "unit": self.unit, "budget": self.budget,
            "candidates": self.candidates, "selected": self.selected, "spent": self.spent,
            "cost_per_pair": self.cost_per_pair, "k": self.k, "seed": self.seed,
            "effect": self.effect.to_dict(orient="records"),
            "pairs": self.pairs[["query_id", "doc_id", "chunk_id", "priority", "score"]].to_dict(orient="records"),
        }

    def summary(self) -> str:
        unit = {"calls": "judge calls", "usd": "USD", "hours": "SME hours"}[self.unit]
        lines = [f"pool {self.pool}: {self.selected:,} of {self.candidates:,} unlabelled pairs fit a budget of "
                 f"{self.budget:g} {unit} (spent {self.spent:.4g}; {self.cost_per_pair:.4g} per pair), "
                 f"strategy {self.strategy}"
                 + (" (the configured judge costs nothing per pair: the offline baseline or a free model)"
                    if self.unit == "usd" and self.cost_per_pair == 0 else "")]
        if len(self.effect):
            lines.append(f"expected effect on P@{self.k} per run (interval from missing labels: mean width, "
                         f"95% half-width) before -> after:")
            for r in self.effect.itertuples(index=False):
                lines.append(f"  {r.run}: width {r.width_before:.4f} -> {r.width_after:.4f}, "
                             f"half-width {r.half_width_before:.4f} -> {r.half_width_after:.4f}")
        return "\n".join(lines)


def _item(level: str) -> str:
    return "chunk_id" if level == "chunk" else "doc_id"


def _labels(db: Database, pool: dict) -> pd.DataFrame:
    """``query_id, item_id, grade, source`` of every graded judgment at the pool's level."""

    spans = graded_judgments(db, ["human", "imported", "llm"])
    parts = []
    for side, sources in (("human", ("human", "imported")), ("llm", ("llm",))):
        part = spans[spans["source"].isin(sources)]
        if part.empty:
            continue
        # graded per assessor, so that several judges' grades on one pair stay visible
        if pool["level"] == "chunk":
            chunks = read_chunks(db, pool["chunking"])
            graded = [chunk_qrels(chunks, g, min_overlap=0.5).rename(columns={"chunk_id": "item_id"}).assign(
                assessor=a) for a, g in part.groupby("assessor")]
        else:
            graded = [doc_qrels(g).rename(columns={"doc_id": "item_id"}).assign(assessor=a)
                      for a, g in part.groupby("assessor")]
        parts.extend(g.assign(side=side) for g in graded)
    if not parts:
        return pd.DataFrame({"query_id": pd.Series(dtype=str), "item_id": pd.Series(dtype=str),
                             "grade": pd.Series(dtype="int64"), "assessor": pd.Series(dtype=str),
                             "side": pd.Series(dtype=str)})
    out = pd.concat(parts, ignore_index=True)
    return out.astype({"query_id": str, "item_id": str})


def _cost_per_pair(db: Database, pool: str, unit: str, settings, seconds_per_pair: float) -> float:
    if unit == "hours":
        if seconds_per_pair <= 0:
            raise InputError(f"seconds per pair must be positive, got {seconds_per_pair}")
        return seconds_per_pair / 3600.0
    if settings is None:
        return 1.0

    spec = resolve_spec(settings)
    if unit == "calls":
        return float(spec.samples)
    est = estimate(db, pool, spec)
    if est.cost_usd is None:
        raise InputError(f"no price for model {spec.model!r} in [judge.prices]; add one, or budget in judge "
                         f"calls ({{field:unit calls}})")
    if est.to_send == 0:
        return 0.0
    return float(est.cost_usd) / est.to_send * spec.samples


def plan_budget(db: Database, pool: str, *, budget: float, unit: str = "calls", strategy: str = "combined",
                k: int = 10, threshold: int = 2, seed: int = 0, seconds_per_pair: float = 30.0,
                settings=None) -> BudgetPlan:
    """Choose the pairs to judge within ``budget`` (module docstring)."""
    if unit not in UNITS:
        raise InputError(f"unknown budget unit {unit!r}; expected one of {', '.join(UNITS)}")
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}")
    info = read_pool(db, pool)
    if info is None:
        raise InputError(f"no pool named {pool!r}; see {{command:status}} for the pools, or make one with "
                         f"{{command:pool}}")
    item = _item(info["level"])
    pairs = read_pool_pairs(db, pool).rename(columns={item: "item_id"})
    pairs["item_id"] = pairs["item_id"].astype(str)
    pairs["query_id"] = pairs["query_id"].astype(str)
    prov = read_pool_provenance(db, pool).rename(columns={item: "item_id"})
    if len(prov):
        ranks = prov.astype({"query_id": str, "item_id": str}).pivot_table(
            index=["query_id", "item_id"], columns="run", values="rank", aggfunc="min")
        ranks.columns = [bj.RANK_PREFIX + str(c) for c in ranks.columns]
        pairs = pairs.merge(ranks.reset_index(), on=["query_id", "item_id"], how="left")
    labels = _labels(db, info)
    if len(labels):
        spread = labels.groupby(["query_id", "item_id"])["grade"].agg(lambda g: g.max() - g.min() if len(g) > 1
                                                                       else np.nan)
        pairs = pairs.merge(spread.rename("spread").reset_index(), on=["query_id", "item_id"], how="left")
    # Pairs already labelled are not "unlabelled": for the judge, any label counts (a human or
    # imported label outranks the judge's in every qrels); for SME hours, human and imported ones.
    paid = labels if unit != "hours" else labels[labels["side"] == "human"]
    done = set(zip(paid["query_id"], paid["item_id"]))
    todo = pairs[[(q, i) not in done for q, i in zip(pairs["query_id"], pairs["item_id"])]]
    cost = _cost_per_pair(db, pool, unit, settings, seconds_per_pair)
    ordered = bj.order_pairs(todo, strategy, k=k, seed=seed)
    chosen = bj.select_within_budget(ordered, float(budget), cost)
    # the relevance rate behind the half-widths comes from this pool's labelled pairs only (labels of
    # other queries, synthetic ones included, say nothing about this pool)
    in_pool = set(zip(pairs["query_id"], pairs["item_id"]))
    known = {(q, i): int(g) for q, i, g in zip(labels["query_id"], labels["item_id"], labels["grade"])
             if (q, i) in in_pool}
    effect = bj.interval_effect(pairs, known, set(zip(chosen["query_id"], chosen["item_id"])), k=k,
                                threshold=threshold)
    chosen = chosen.rename(columns={"item_id": item})
    if item == "chunk_id":
        chosen["chunk_id"] = chosen["chunk_id"].astype(str)
    else:
        chosen["chunk_id"] = None
    return BudgetPlan(pool=pool, strategy=strategy, unit=unit, budget=float(budget), candidates=len(todo),
                      selected=len(chosen), spent=float(chosen["cost"].sum()) if len(chosen) else 0.0,
                      cost_per_pair=cost, k=k, seed=seed, pairs=chosen, effect=effect)
