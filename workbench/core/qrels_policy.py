"""The one rule from span judgments to qrels: a merge policy over label tiers.

Every label belongs to one **tier**; a tier earlier in :attr:`QrelsPolicy.order` wins an item
outright (the default order is the trust order)::

    adjudicated  a lead's resolution of an SME disagreement
    sme          labels given by people in the workbench (several SMEs: see ``sme_rule``)
    imported     qrels imported from files (e.g. NIST assessments)
    llm          the LLM judge, only from a judge configuration that passed the calibration
                 gate unless ``llm_labels = "all"`` (the user's opt-in); ``"none"`` drops them

Per item (document, or chunk of a chunking) and query:

1. **per assessor**: the maximum grade over the assessor's spans that map to the item (the span
   rule of :mod:`workbench.core.documents.spans`: a document takes every span in it; a chunk takes the
   spans matching it with overlap / shorter >= ``min_overlap``);
2. **per tier**, over its assessors, by ``sme_rule``:
   ``majority`` the most frequent grade, a tie between grades broken by ``ties``
   (``higher``: the higher grade, ``lower``: the lower); ``max``; ``min``; ``lower_median``
   (the lower median: one assessor cannot pull an item across a threshold alone);
3. **across tiers**: the item's grade is the one of the first tier in ``order`` that graded it.

An LLM assessor is one judge configuration (model and prompt hash). Only judged items appear
(absent = unjudged). Document-level qrels never depend on a chunking (they come from the spans,
not from chunk labels), so they are the same under every chunking.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from workbench.core.documents.spans import chunk_qrels, doc_qrels
from workbench.errors import ConfigError

TIERS = ("adjudicated", "sme", "imported", "llm")
SME_RULES = ("majority", "max", "min", "lower_median")
TIES = ("higher", "lower")
LLM_LABELS = ("passed_gate", "all", "none")
SYNTHETIC = ("exclude", "include", "only")
LEVELS = ("doc", "chunk")
# Keys of the composite query id used to map every (tier, assessor) in one pass: a control
# character never found in ids read from text files.
_SEP = "\x1f"


@dataclass(frozen=True)
class QrelsPolicy:
    """How judgments become qrels (module docstring). Stated in every output via :meth:`describe`."""

    order: tuple[str, ...] = TIERS
    sme_rule: str = "majority"
    ties: str = "higher"
    llm_labels: str = "passed_gate"
    propagated: bool = False
    synthetic: str = "exclude"
    min_overlap: float = 0.5

    def __post_init__(self) -> None:
        order = tuple(self.order)
        object.__setattr__(self, "order", order)
        bad = [t for t in order if t not in TIERS]
        if bad or len(set(order)) != len(order):
            raise ConfigError(f"qrels order {list(order)!r} must list distinct tiers among {', '.join(TIERS)}")
        for value, allowed, what in ((self.sme_rule, SME_RULES, "sme_rule"), (self.ties, TIES, "ties"),
                                     (self.llm_labels, LLM_LABELS, "llm_labels"),
                                     (self.synthetic, SYNTHETIC, "synthetic")):
            if value not in allowed:
                raise ConfigError(f"qrels {what} {value!r} is not one of {', '.join(allowed)}")
        if not 0.0 < float(self.min_overlap) <= 1.0:
            raise ConfigError(f"qrels min_overlap must be in (0, 1], got {self.min_overlap!r}")

    @classmethod
    def from_settings(cls, settings) -> QrelsPolicy:
        """From the ``[qrels]`` section of :class:`workbench.config.Settings`."""
        def get(key):
            return settings.get("qrels", key)
        return cls(order=tuple(t.strip() for t in str(get("order")).split(",") if t.strip()), sme_rule=str(get("sme_rule")), ties=str(get("ties")),
                   llm_labels=str(get("llm_labels")), propagated=bool(get("propagated")),
                   synthetic=str(get("synthetic")),
                   min_overlap=float(settings.get("evaluation", "min_overlap")))

    def for_source(self, source: str) -> QrelsPolicy:
        """The policy behind ``--source``/``--labels``: ``human`` = every tier but ``llm``;
        ``llm`` = the LLM tier alone (asking for the judge's labels by name is the opt-in to
        ungated ones); ``merged`` = this policy."""
        if source == "merged":
            return self
        if source == "human":
            return replace(self, order=tuple(t for t in self.order if t != "llm"))
        if source == "llm":
            return replace(self, order=("llm",), llm_labels="all" if self.llm_labels != "none" else "none")
        raise ConfigError(f"unknown label source {source!r}; expected human, llm or merged")

    def as_dict(self) -> dict:
        out = asdict(self)
        out["order"] = list(self.order)
        return out

    def describe(self) -> str:
        """One line stating the policy (printed with every qrels output)."""
        llm = {"passed_gate": "LLM only from a judge configuration that passed the gate",
               "all": "LLM from every judge configuration (opt-in)", "none": "no LLM labels"}[self.llm_labels]
        several = (f"majority, ties to the {self.ties} grade" if self.sme_rule == "majority"
                   else self.sme_rule.replace("_", " "))
        llm = f"{llm}; " if "llm" in self.order else ""
        return (f"qrels policy: {' > '.join(self.order)}; several assessors: {several}; {llm}"
                f"propagated labels {'on' if self.propagated else 'off'}; synthetic queries "
                + {"exclude": "excluded", "include": "included", "only": "only"}[self.synthetic])


def combine_grades(grades: np.ndarray, rule: str = "majority", ties: str = "higher") -> int:
    """One grade from several assessors' grades of one item (rule in the module docstring)."""
    g = np.sort(np.asarray(grades, dtype=np.int64))
    if g.size == 0:
        raise ValueError("no grade to combine")
    if rule == "max":
        return int(g[-1])
    if rule == "min":
        return int(g[0])
    if rule == "lower_median":
        return int(g[(g.size - 1) // 2])
    values, counts = np.unique(g, return_counts=True)
    best = values[counts == counts.max()]
    return int(best.max() if ties == "higher" else best.min())


def merge_qrels(spans: pd.DataFrame, policy: QrelsPolicy, *, level: str = "doc",
                chunks: pd.DataFrame | None = None) -> pd.DataFrame:
    """Qrels from graded spans under ``policy``.

    ``spans``: ``query_id, doc_id, start, end, grade, tier, assessor`` (tiers outside
    ``policy.order`` are ignored; the caller has already applied the gate and the synthetic
    filter). ``chunks`` (``chunk_id, doc_id, start, end``) is needed for ``level="chunk"``.
    Returns ``query_id, item_id, grade, tier, assessors`` (the winning tier and how many of its
    assessors graded the item), sorted by query_id, item_id.
    """
    if level not in LEVELS:
        raise ConfigError(f"unknown qrels level {level!r}; expected doc or chunk")
    empty = pd.DataFrame({"query_id": pd.Series(dtype="str"), "item_id": pd.Series(dtype="str"),
                          "grade": pd.Series(dtype="int64"), "tier": pd.Series(dtype="str"),
                          "assessors": pd.Series(dtype="int64")})
    spans = spans[spans["tier"].isin(policy.order) & spans["grade"].notna()]
    if spans.empty:
        return empty
    key = (spans["tier"].astype(str) + _SEP + spans["assessor"].fillna("").astype(str) + _SEP
           + spans["query_id"].astype(str))
    keyed = pd.DataFrame({"query_id": key.to_numpy(), "doc_id": spans["doc_id"].astype(str).to_numpy(),
                          "start": spans["start"].to_numpy(), "end": spans["end"].to_numpy(),
                          "grade": spans["grade"].astype("float64").to_numpy()})
    if level == "doc":
        per = doc_qrels(keyed).rename(columns={"doc_id": "item_id"})
    else:
        if chunks is None:
            raise ConfigError("chunk-level qrels need a chunking")
        per = chunk_qrels(chunks, keyed, min_overlap=policy.min_overlap).rename(columns={"chunk_id": "item_id"})
    if per.empty:
        return empty
    parts = per["query_id"].str.split(_SEP, n=2, expand=True)
    return _combine_tiers(parts[0].to_numpy(dtype=object), parts[2].to_numpy(dtype=object),
                          per["item_id"].astype(str).to_numpy(dtype=object),
                          per["grade"].astype("int64").to_numpy(), policy)


def _combine_tiers(tier: np.ndarray, query: np.ndarray, item: np.ndarray, grade: np.ndarray,
                   policy: QrelsPolicy) -> pd.DataFrame:
    """Steps 2 and 3 of the rule on one row per (tier, assessor, query, item): each tier's grade
    by ``policy.sme_rule`` over its assessors (:func:`combine_grades`, vectorised), then the first
    tier of ``policy.order``. On integer codes: a pandas groupby, sort and drop_duplicates chain
    has a fixed cost per call even for a handful of labels, which every qrels, pool peek and
    status pays (docs/performance.md)."""
    rank_of = {t: i for i, t in enumerate(policy.order)}
    rank = np.fromiter((rank_of[t] for t in tier), dtype=np.int64, count=len(tier))
    queries, q_code = np.unique(query, return_inverse=True)  # code point order, as str sorts
    items, i_code = np.unique(item, return_inverse=True)
    n_items, n_tiers = len(items), len(policy.order)
    key = (q_code.astype(np.int64) * n_items + i_code) * n_tiers + rank
    groups, group = np.unique(key, return_inverse=True)  # by query, item, then tier rank
    size = np.bincount(group, minlength=len(groups))
    rule = policy.sme_rule
    if rule == "max":
        best = np.full(len(groups), np.iinfo(np.int64).min)
        np.maximum.at(best, group, grade)
    elif rule == "min":
        best = np.full(len(groups), np.iinfo(np.int64).max)
        np.minimum.at(best, group, grade)
    elif rule == "lower_median":
        ordered = grade[np.lexsort((grade, group))]
        best = ordered[np.cumsum(size) - size + (size - 1) // 2]
    else:  # majority: most votes, a tie to the higher (or lower) grade
        values, g_code = np.unique(grade, return_inverse=True)
        votes = np.bincount(group * len(values) + g_code, minlength=len(groups) * len(values))
        top = votes.reshape(len(groups), len(values))
        top = top == top.max(axis=1, keepdims=True)
        pick = (len(values) - 1 - np.argmax(top[:, ::-1], axis=1)) if policy.ties == "higher" else np.argmax(top, axis=1)
        best = values[pick]
    pair = groups // n_tiers
    first = np.ones(len(groups), dtype=bool)  # the first tier in the order of each (query, item)
    first[1:] = pair[1:] != pair[:-1]
    pair, won = pair[first], groups[first] % n_tiers
    return pd.DataFrame({
        "query_id": pd.array(queries[pair // n_items], dtype="str"),
        "item_id": pd.array(items[pair % n_items], dtype="str"),
        "grade": best[first].astype(np.int64),
        "tier": pd.array(np.asarray(policy.order, dtype=object)[won], dtype="str"),
        "assessors": size[first].astype(np.int64),
    })


def decisive_spans(spans: pd.DataFrame, policy: QrelsPolicy) -> pd.DataFrame:
    """The span judgments behind the document-level qrels of ``policy``: per (query, document),
    the spans of the first tier in ``policy.order`` that labelled the document for the query
    (tiers outside the order are dropped; the caller has applied the gate and the synthetic
    filter, as for :func:`merge_qrels`).

    Per document this is exactly what step 3 of the rule looks at, so the spans read back as one
    tier (``workbench import qrels --format spans``, assessors kept) give the same document
    qrels. Chunk qrels may differ: a chunk the winning tier left unlabelled takes a lower tier's
    grade at chunk level, and no single set of spans reproduces both levels.
    Returns the rows of ``spans`` that are kept, in their order.
    """
    kept = spans[spans["tier"].isin(policy.order) & spans["grade"].notna()]
    if kept.empty:
        return kept
    rank = kept["tier"].map({t: i for i, t in enumerate(policy.order)})
    best = rank.groupby([kept["query_id"].astype(str), kept["doc_id"].astype(str)], sort=False).transform("min")
    return kept[rank == best]
