"""What a role may read: the one rule every page, download, preview and peek asks.

Writes are checked by :func:`workbench.services.access.require`; this module decides reads, so
that nobody is swayed before labelling (an annotator labels blind):

- a **lead** or a **viewer** reads everything: every person's labels, the LLM judge's grades and
  reasons, qrels and label files in every format, evaluations;
- an **annotator** reads their own human labels and the project's imported reference labels
  (qrels files imported with ``workbench import qrels``), and nothing else that carries a grade:
  no other person's label, no adjudicated or propagated label (both are copies of other people's
  grades), no LLM judge grade, reason or raw reply (also not the offline judge's, computed on the
  fly), and no qrels or judgment download. Qrels, pool peeks, pool statistics and evaluations an
  annotator sees are computed from their own labels plus the imported ones only.

Passages, pair ids, "no label yet", rubrics, instructions and run downloads carry no grade and
stay readable for every role.

:func:`can_read` answers for one kind of output (:data:`READS`), :func:`require_read` refuses in
one line, :func:`label_scope` says whose labels the caller sees (None: everyone's), and
:func:`visible_spans` / :func:`visible_judgments` filter rows by it. The qrels rule
(:func:`workbench.services.qrels.rule.admitted_spans`) applies :func:`visible_spans` to every
label it admits, so everything derived from qrels follows the same rule.
"""

from __future__ import annotations

import pandas as pd

from workbench.services import access
from workbench.services.access import Actor, PermissionDenied

#: kind of output -> roles that may read it (an annotator reads a limited view where one exists).
READS: dict[str, frozenset[str]] = {
    "judge_output": frozenset({"lead", "viewer"}),   # LLM / offline judge grades, reasons, raw replies
    "others_labels": frozenset({"lead", "viewer"}),  # other people's, adjudicated and propagated labels
    "label_files": frozenset({"lead", "viewer"}),    # qrels and judgment downloads, any format
}

#: What each kind is called in a refusal (page words).
READ_WORDS = {
    "judge_output": "see the LLM judge's grades or reasons",
    "others_labels": "see other people's labels",
    "label_files": "download qrels or judgments",
}

#: The tiers of :func:`workbench.store.qrels_labels.labelled_spans` an annotator may read (their
#: own ``sme`` rows are kept by assessor).
REFERENCE_TIERS = frozenset({"imported"})

#: Added to the notes of what an annotator reads, so the page says why it holds fewer labels.
LIMITED_NOTE = ("Shown from your own labels and the imported reference labels only: other people's labels "
                "and the judge's stay hidden until a lead shares the results")


def _actor(actor: Actor | None) -> Actor:
    return access.current_actor() if actor is None else actor


def can_read(what: str, actor: Actor | None = None) -> bool:
    """Whether the actor (default: the running call's, :func:`access.current_actor`) may read
    ``what`` (one of :data:`READS`; an unknown kind is a programming error)."""
    if what not in READS:
        raise KeyError(f"unknown kind of output {what!r}")
    return _actor(actor).role in READS[what]


def require_read(what: str, actor: Actor | None = None) -> Actor:
    """Raise :class:`PermissionDenied` (one line) unless the actor may read ``what``."""
    actor = _actor(actor)
    if not can_read(what, actor):
        who = f"{actor.name} ({actor.role})" if actor.name else f"this session ({actor.role})"
        raise PermissionDenied(f"{who} may not {READ_WORDS[what]}: annotators label blind; "
                               f"ask a lead or viewer for it")
    return actor


def label_scope(actor: Actor | None = None) -> str | None:
    """None when the actor sees every label; else the name whose human labels they see (their
    own), next to the imported reference labels."""
    actor = _actor(actor)
    return None if can_read("others_labels", actor) else actor.name


def limited(actor: Actor | None = None) -> bool:
    """Whether what the actor reads is limited to their own and imported labels."""
    return label_scope(actor) is not None


def visible_spans(spans: pd.DataFrame, actor: Actor | None = None) -> pd.DataFrame:
    """The rows of a ``tier, assessor`` label frame (the qrels rule's) the actor may read:
    all, or an annotator's own ``sme`` rows and the ``imported`` ones."""
    name = label_scope(actor)
    if name is None:
        return spans
    keep = spans["tier"].isin(REFERENCE_TIERS) | ((spans["tier"] == "sme") & (spans["assessor"] == name))
    return spans.loc[keep]


def visible_judgments(judgments: pd.DataFrame, actor: Actor | None = None) -> pd.DataFrame:
    """The rows of a ``source, assessor`` judgments frame the actor may read: all, or an
    annotator's own human labels and the imported ones (never ``llm``)."""
    name = label_scope(actor)
    if name is None:
        return judgments
    source = judgments["source"]
    keep = (source == "imported") | ((source != "llm") & (source != "imported") & (judgments["assessor"] == name))
    return judgments.loc[keep]
