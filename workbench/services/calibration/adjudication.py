"""SMEs among themselves: their agreement, their disagreements and a lead's resolution of them.

- :func:`sme_agreement`: Krippendorff's α and pairwise κ among SMEs on the items several labelled.
- :func:`sme_disagreements`: the items two or more SMEs graded differently, side by side.
- :func:`adjudicate`: a lead's resolved label, which becomes the item's reference grade
  (:func:`workbench.services.calibration.reference.reference_labels`).
"""

from __future__ import annotations

import numpy as np

from workbench.core.calibration import agreement as core_agreement
from workbench.errors import InputError
from workbench.services import access
from workbench.services.calibration.labelling import GRADES, checked_annotator, record_action
from workbench.services.calibration.reference import ADJUDICATION
from workbench.store import calibration as store
from workbench.store.database import Database


def sme_agreement(db: Database, sample: str) -> dict | None:
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



def sme_disagreements(db: Database, sample: str) -> list[dict]:
    """Items two or more SMEs graded differently, their grades side by side, and the resolved
    label (with who resolved it) when a lead adjudicated the item.

    Each also has ``notes``: ``{sme: {"comment", "evidence"}}``, what each SME's label says
    besides the grade (evidence: document spans ``[[start, end], ...]`` or None), and the pair as
    the SMEs saw it: ``start``, ``end`` (the judged passage), ``query``, ``title``, ``text`` (the
    whole document, which the evidence spans index into), and ``guidelines``: ``{sme: "v2"}``, the
    guidelines version each SME's label was given under, when the sample's labels were given
    under more than one (else ``{}``). Leads and viewers only, as the grades."""
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
        from workbench.services.calibration import guidelines

        notes = store.label_notes(db, sample)
        items = store.read_items(db, sample, [d["position"] for d in out])
        # "labelled under guidelines v<n>" only where the guidelines changed mid-sample
        changed = guidelines.labelled_under(db, sample)["changed"]
        record = guidelines.guidelines(db, sample) if changed else None
        for d in out:
            found = items.get(d["position"], {})
            mine = {name: notes.get((d["position"], name), {}) for name in d["grades"]}
            d["notes"] = {name: {"comment": n.get("comment"), "evidence": n.get("evidence")} for name, n in mine.items()}
            d["guidelines"] = {name: guidelines.version_words(record, n.get("guidelines_sha256"))
                               for name, n in mine.items()} if changed else {}
            d.update({k: found.get(k) for k in ("start", "end", "query", "title", "text")})
    return out


def adjudicate(db: Database, sample: str, position: int, grade: int, *, lead: str,
               comment: str | None = None) -> int:
    """Record the resolved label of an item the SMEs disagree on (replacing an earlier
    resolution); it becomes the item's reference grade. ``lead`` is who resolved it.
    Only a lead may (:mod:`workbench.services.access`); in the app ``lead`` is the signed-in user."""
    actor = access.require("adjudicate")
    lead = checked_annotator(lead)
    if actor is not access.LOCAL_OPERATOR and lead != actor.name:
        raise access.PermissionDenied(f"{actor.name} may not record a resolution in {lead}'s name")
    if isinstance(grade, bool) or grade not in GRADES:
        raise InputError(f"grade {grade!r} is not one of 0, 1, 2, 3")
    if not any(d["position"] == int(position) for d in sme_disagreements(db, sample)):
        raise InputError(f"pair {position + 1} has no disagreement between SMEs to resolve")
    return record_action(db, sample, ADJUDICATION, int(position), "label", grade=grade, comment=comment or None,
                         assessor=lead)
