"""Document qrels summarised in SQL for the Qrels page (:mod:`workbench.store.qrels_counts`).

:func:`doc_summary` decides the admission exactly as :func:`workbench.services.qrels.rule.admitted_spans`
does (tiers of the policy narrowed to the source, the judge gate's passed configurations, the
synthetic-query filter) and counts the document qrels in SQL, so a project whose judge passed
the gate (a million admitted LLM labels) is not read into pandas to show counts. The counts,
the left-out notes, the statement and the fingerprint equal those of :func:`project_qrels`
followed by :func:`workbench.services.qrels.answerability.without_unanswerable` (the export's
qrels); where the SQL does not model a step (an annotator's limited view, synthetic queries
taken in with labels made by construction) it answers None and the caller takes the rule.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pandas as pd

from workbench.core.qrels_policy import QrelsPolicy
from workbench.services import lazy, visibility
from workbench.services.qrels.answerability import unanswerable_ids
from workbench.services.qrels.rule import ProjectQrels, default_policy, judge_configuration_states
from workbench.store.database import Database
from workbench.store.qrels_counts import (
    count_doc_pool_pairs_labelled,
    doc_qrels_counts,
    doc_qrels_lines,
    llm_label_counts,
)
from workbench.store.synthetic_queries import synthetic_query_ids


@dataclass(frozen=True)
class Admission:
    """Which labels the rule admits for one source: ``tiers``, ``llm_configs`` (None: every
    judge configuration), ``without_queries`` (synthetic ones left out), and the policy.
    ``llm_total`` / ``llm_admitted``: the ok graded LLM labels and those of a configuration that
    passed (both 0 when the gate is not asked). Where every graded configuration passed,
    ``llm_configs`` is None (no per-label filter); where none did, ``llm`` leaves ``tiers``:
    the same labels are admitted either way."""

    policy: QrelsPolicy
    tiers: list[str]
    llm_configs: list[str] | None
    without_queries: list[str]
    passed: tuple[str, ...] = ()
    configurations: tuple[tuple[str, str], ...] = ()
    llm_total: int = 0
    llm_admitted: int = 0


@dataclass(frozen=True)
class DocSummary:
    """What the Qrels page shows of the document qrels of one source."""

    statement: str
    notes: tuple[str, ...]
    rows: int
    queries: int
    by_grade: dict
    by_tier: dict
    left_out: list[str]
    admission: Admission
    unanswerable: list[str]
    db: Database
    pools: dict
    judged: dict | None = None

    def fingerprint(self) -> str:
        """:attr:`ProjectQrels.fingerprint` of these qrels, hashed over lines DuckDB writes (read
        on demand: it orders every row)."""

        adm, pol = self.admission, self.admission.policy
        h = hashlib.sha256()
        h.update(repr((sorted(pol.as_dict().items()), "doc", None)).encode())
        h.update(doc_qrels_lines(self.db, order=list(pol.order), tiers=adm.tiers, llm_configs=adm.llm_configs,
                                 without_queries=adm.without_queries, sme_rule=pol.sme_rule, ties=pol.ties,
                                 left_out=self.unanswerable).encode())
        return h.hexdigest()[:16]


def admission(db: Database, source: str, settings, policy: QrelsPolicy | None = None) -> Admission | None:
    """The admission of ``source`` under ``policy`` (None: the settings'; module docstring),
    None where the SQL does not model it."""

    if visibility.limited():
        return None
    pol = (policy if policy is not None else default_policy(settings)).for_source(source)
    synthetic = sorted(synthetic_query_ids(db))
    if pol.synthetic != "exclude" and synthetic:  # labels by construction pass the gate: the rule decides
        return None
    if pol.synthetic == "only":  # and no synthetic query: no qrels; the rule says so with its notes
        return None
    tiers = [t for t in pol.order if t != "llm" or pol.llm_labels != "none"]
    per_config = llm_label_counts(db) if "llm" in tiers and pol.llm_labels == "passed_gate" else {}
    llm_total = sum(per_config.values())
    if llm_total:
        found = judge_configuration_states(db, settings)
        configs = tuple((s.config.label, s.state) for s in found)
        passed = tuple(s.config.key for s in found if s.state == "passed")
        admitted = sum(n for key, n in per_config.items() if key in passed)
        # every graded configuration passed (or none did): the same labels without matching each one's configuration
        llm_configs = None if admitted in (0, llm_total) else list(passed)
        if not admitted:
            tiers = [t for t in tiers if t != "llm"]
        return Admission(pol, tiers, llm_configs, synthetic, passed, configs, llm_total, admitted)
    return Admission(pol, tiers, None, synthetic if pol.synthetic == "exclude" else [])


def doc_summary(db: Database, *, source: str = "merged", settings=None, policy: QrelsPolicy | None = None,
                pools=()) -> DocSummary | None:
    """Counts, notes, statement (and, on demand, fingerprint) of the document qrels of ``source`` without
    unanswerable queries (module docstring); None where the rule must build them. ``pools``:
    document pools whose pairs with an admitted label, and with a person's, are counted in the
    same query (``DocSummary.pools``: ``{pool: (labelled, by people)}``; for ``merged`` these
    are the pairs of its qrels and of the ``human`` source's). ``DocSummary.judged``: ``{pool:
    pairs with an ok graded LLM label}`` (synthetic queries left out unless the policy takes them
    in) where the admission takes every LLM label, else None."""

    if settings is None:
        settings = lazy.config.load_settings()
    adm = admission(db, source, settings, policy)
    if adm is None:
        return None
    pol = adm.policy
    unanswerable = sorted(map(str, unanswerable_ids(db)))
    got = doc_qrels_counts(db, order=list(pol.order), tiers=adm.tiers, llm_configs=adm.llm_configs,
                           without_queries=adm.without_queries, sme_rule=pol.sme_rule, ties=pol.ties,
                           left_out=unanswerable, pools=list(pools))
    notes = []
    dropped = adm.llm_total - adm.llm_admitted
    if dropped:
        notes.append(f"{dropped:,} LLM labels left out: their judge configuration has not passed "
                     f"the calibration gate (`workbench calibrate report`), or opt in with llm_labels = all")
    left = got["left_out"]
    if left:
        notes.append(f"{len(left):,} unanswerable queries left out ({', '.join(left[:5])}"
                     f"{', ...' if len(left) > 5 else ''}): nothing in the corpus answers "
                     f"them, so they have no ranking score")
    # the statement as ProjectQrels words it (it needs no table)
    shell = ProjectQrels(_empty(), pol, "doc", None, adm.passed, (), adm.configurations)
    pairs = {p: (n, people) for p, (n, people, _) in got["pools"].items()}
    every_llm_label = "llm" in adm.tiers and adm.llm_configs is None
    judged = {p: n for p, (*_, n) in got["pools"].items()} if every_llm_label else None
    return DocSummary(shell.statement(), tuple(notes), got["rows"], got["queries"], got["by_grade"],
                      got["by_tier"], left, adm, unanswerable, db, pairs, judged)


def doc_pool_labelled(db: Database, pool: str, adm: Admission) -> int:
    """Pairs of the document pool ``pool`` with a label admitted by ``adm`` (its qrels rows)."""

    return count_doc_pool_pairs_labelled(db, pool, tiers=adm.tiers, llm_configs=adm.llm_configs,
                                         without_queries=adm.without_queries)


def _empty():

    return pd.DataFrame({"query_id": [], "item_id": [], "grade": [], "tier": [], "assessors": []})
