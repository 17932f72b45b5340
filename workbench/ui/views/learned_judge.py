"""The Calibration page's "Learn a judge from the SME labels" box (``workbench judge learn``).

A lead picks the source judge configurations, a seed and whether to use the dense cosine; the
service fits on the sample's tuning part only and grades the pool as a new configuration. It runs
in the page's script run under a spinner: seconds once the passages' vectors are cached, minutes
the first time the dense encoder reads a large pool (as a dense run on the Retrieve page). The
box then shows the cross-validated figures, the operating point and the rule that chose it
(``targets``: the gate's TPR/TNR targets are met; ``kappa``: none met them, the largest κ the
model expects on the pool's pairs), kept
for the session; the held-out figures are the report below once the new configuration is picked.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.errors import WorkbenchError
from workbench.services.judge.learned import DenseOptions, learn
from workbench.ui import auth, context
from workbench.ui.words import Field

FIELDS = {"--from": Field("Source judges", "choice"), "--seed": Field("Seed", "number")}
RULES = {"targets": "meets the gate's TPR and TNR targets (cross-validated), with the largest κ among those",
         "kappa": "no threshold met the gate's TPR and TNR targets, so the one with the largest κ the model "
                  "expects on the pool's pairs"}


def render_box(sample: str, judges) -> None:
    """The box for ``sample``; ``judges``: the configurations that graded it
    (:func:`workbench.services.calibration.verdicts.sample_judges`)."""
    if not (auth.may("judge") and auth.may("see_all_labels")):
        return
    sources = [j for j in judges if j.config.model != "learned"]
    kept = st.session_state.get("learned_judge_result", {}).get(sample)
    with st.expander("Learn a judge from the SME labels", expanded=kept is not None):
        st.caption("Fits a small calibrated model on this sample's tuning labels only, from the chosen judges' "
                   "grades and retrieval signals, and grades the whole pool as a new judge configuration. Gate it "
                   "on the held-out part like any judge (pick it above).")
        if not sources:
            st.info("No judge configuration graded this sample's pool yet.")
            return
        with st.form(f"learned_judge_{sample}"):
            picked = st.multiselect("Source judges", range(len(sources)), default=list(range(len(sources))),
                                    format_func=lambda i: sources[i].config.label)
            seed = st.number_input("Seed", min_value=0, value=0, step=1,
                                   help="Cross-validation folds and the boosted trees use it; stored with the judge.")
            dense = st.checkbox("Dense cosine feature", value=True,
                                help="The project's dense encoder; the first run encodes the pool's passages.")
            go = st.form_submit_button("Learn the judge")
        if go:
            _learn(sample, [sources[i].config.key for i in picked], int(seed), bool(dense))
        if kept is not None:
            _show(kept)


def _learn(sample: str, sources: list[str], seed: int, dense: bool) -> None:

    if not sources:
        st.warning("Pick at least one source judge.")
        return
    try:
        with st.spinner("Learning the judge (features, cross-validation, grading the pool)…"), \
                context.project() as db:
            result = learn(db, sample, sources=sources, seed=seed, dense=DenseOptions(enabled=dense))
    except WorkbenchError as exc:
        context.error(exc, FIELDS)
        return
    st.session_state.setdefault("learned_judge_result", {})[sample] = result.as_dict() | {
        "words": result.operating.words()}
    st.rerun()  # the new configuration joins the page's judge list


def _show(r: dict) -> None:
    op = r["operating_point"]
    state = "learned" if r["created"] else "already stored (same inputs)"
    st.success(context.plain(f"Judge {r['label']} {state}: {r['tuning']} tuning labels ({r['relevant']} relevant), "
                             f"model: {r['model']}."))
    st.markdown(f"**Operating point**: p(relevant) ≥ {op['threshold']:.3f}, rule **{op['rule']}**: "
                f"{RULES.get(op['rule'], op['rule'])}.")
    st.dataframe(pd.DataFrame([{"figure": "TPR", "cross-validated on the tuning part": op["cv_tpr"]},
                               {"figure": "TNR", "cross-validated on the tuning part": op["cv_tnr"]},
                               {"figure": "Cohen's κ", "cross-validated on the tuning part": op["cv_kappa"]}]),
                 hide_index=True)
    st.caption("Grades given to the pool: " + ", ".join(f"{g}: {n:,}" for g, n in r["grade_counts"].items())
               + ". Held-out figures: pick the new configuration in 'Judge configuration' above.")
    for note in r.get("notes", []):
        st.caption(context.plain(note))
