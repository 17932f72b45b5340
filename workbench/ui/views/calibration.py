"""Calibration: can the LLM judge be trusted to label the rest of the pool?

The verdict comes first (pass / fail / inconclusive, with its reasons and the labels still
needed), then the figures with their 95% intervals, the confusion matrix as a heatmap, the
per-tag slices, the worst disagreements with the pair behind each, agreement among SMEs and the
corrected share of relevant pairs. The report reads only the sample's held-out part (the tuning
part may have shaped the prompt) and re-weights it to the pool. Export as JSON (the shape of
``workbench calibrate report --format json``) and CSV.

Drawing a sample is on this page too (a pool whose pairs the judge has graded).
"""

from __future__ import annotations

import html
import io
import math

import pandas as pd
import streamlit as st

from workbench.config import load_settings
from workbench.core.calibration.gate import GateThresholds
from workbench.errors import WorkbenchError
from workbench.services.calibration import verdicts
from workbench.services.calibration import workflow as cal
from workbench.services.calibration.workflow import report_json
from workbench.services.evaluation import ppi_project
from workbench.services.evaluation.ppi import MIN_PILOT
from workbench.services.evaluation.views import run_table
from workbench.ui import auth, charts, context
from workbench.ui.highlight import evidence_html
from workbench.ui.views import learned_judge
from workbench.ui.words import Field, binarising_note

FIGURE_NAMES = [
    ("tpr", "TPR: relevant pairs the judge finds"),
    ("tnr", "TNR: non-relevant pairs the judge rejects"),
    ("precision", "Precision of the judge's 'relevant'"),
    ("kappa", "Cohen's κ (relevant / not relevant)"),
    ("kappa_graded", "Cohen's κ (grades 0–3)"),
    ("kappa_linear", "Linear weighted κ"),
    ("kappa_quadratic", "Quadratic weighted κ"),
    ("msd", "Leniency: judge minus SME, mean grade"),
    ("exact", "Same grade"),
]
FIELDS = {"--pool": Field("Pool", "choice"), "--size": Field("Pairs to draw", "number"),
          "--seed": Field("Seed", "number"), "holdout_share": Field("Share held out for the gate", "number"),
          "design": Field("Design", "choice"), "queries": Field("Queries to draw (whole queries)", "number"),
          "name": Field("Sample name")}


def _fmt(x) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.3f}"


@context.page_run
def render() -> None:

    st.title("Calibration")
    st.caption("SME labels against the LLM judge: the judge may label the rest of the pool only when the "
               "lower confidence bounds clear the bar.")
    if not auth.may("see_all_labels"):
        # The report shows other SMEs' labels and the judge's: an annotator labels blind.
        st.info("The calibration report shows other people's labels and the judge's, so only leads and "
                "viewers see it. Your labels are on the Label page.")
        context.page_link("label", "Go to Label", ":material/edit_note:")
        return
    with context.project() as db:
        context.show_flash("calibration")
        if auth.may("sample"):
            _draw_form(db, cal)
        samples = cal.list_samples(db)
        if samples.empty:
            st.info("No calibration sample yet. Draw one above from a judged pool, then label it on the "
                    "Label page.")
            return
        sample = st.selectbox("Calibration sample", samples["name"].tolist(), key="calibration_sample")
        if auth.may("sample"):  # the active sample, who labels which pair, the guidelines
            from workbench.ui.views import calibration_routing

            calibration_routing.panel(db, sample)
        try:
            judges = verdicts.sample_judges(db, sample)
            judge = _judge_choice(judges)
            body = cal.report(db, sample, thresholds=_thresholds(), options=_options(cal),
                              judge=None if judge is None else judge.config.key, record=False)
            configs = cal.compare_judges(db, sample, options=_options(cal), thresholds=_thresholds())
            disagreements = cal.sme_disagreements(db, sample)
            pace = cal.throughput(db, sample)
        except WorkbenchError as exc:
            context.error(exc, FIELDS)
            return
    if judge is not None and not judge.gated:
        _gate_button(sample, judge)
    learned_judge.render_box(sample, judges)
    _report(body)
    _pace(pace)
    _configurations(configs)
    _labels_needed()
    _adjudication(sample, disagreements)


def _judge_choice(judges):
    """The judge configuration the report is about: the sample's own first."""
    if not judges:
        return None
    labels = [j.config.label + (" (the sample's own)" if j.own else "" if j.gated else " (not gated here)")
              for j in judges]
    pick = st.selectbox("Judge configuration", range(len(judges)), format_func=lambda i: labels[i],
                        key="calibration_judge",
                        help="Every figure below uses this configuration's grades only. Only a configuration "
                             "gated here, with its own pass, has its labels in the qrels.")
    return judges[pick]


def _gate_button(sample: str, judge) -> None:
    """A configuration not gated on this sample: the figures are shown, its labels stay out of the
    qrels until a lead gates it here."""

    st.info(f"{judge.config.label} is not gated on this sample: its labels stay out of the qrels "
            f"whatever the verdict below says, until it is gated.")
    if not auth.may("sample"):
        return
    if st.button("Gate this judge configuration", key="calibration_gate_judge"):
        try:
            with context.project() as db:
                body = cal.gate(db, sample, thresholds=_thresholds(), options=_options(cal), judge=judge.config.key)
        except WorkbenchError as exc:
            context.error(exc, FIELDS)
            return
        context.flash("calibration", context.plain(
            f"Gated {judge.config.label} on {sample}: {body['gate']['verdict']}."))
        st.rerun()


def _adjudication(sample: str, found: list[dict]) -> None:
    """SMEs who graded a pair differently, side by side; a lead records the resolved label."""

    st.subheader("Where SMEs disagree")
    if not found:
        st.caption("No pair has two SMEs with different grades.")
        return
    smes = sorted({name for d in found for name in d["grades"]})
    context.table([{"pair": d["position"] + 1, "query": d["query_id"], "document": d["doc_id"],
                    **{name: d["grades"].get(name, "–") for name in smes},
                    "resolved": "–" if d["resolved"] is None else f"{d['resolved']} by {d['resolved_by']}"}
                   for d in found], key="calibration-sme-disagreements")
    pick = st.selectbox("Pair", range(len(found)), format_func=lambda i: f"pair {found[i]['position'] + 1}",
                        key="calibration_adjudicate_pair",
                        help="Each SME's grade, the evidence they marked in the passage and their comment, "
                             "side by side.")
    _side_by_side(found[pick])
    lead = context.annotator()
    if not lead:
        st.caption("Enter your annotator id in the sidebar to resolve a disagreement; it is recorded with "
                   "the resolved label.")
        return
    with st.form("calibration_adjudicate"):
        st.caption(f"Resolving pair {found[pick]['position'] + 1}.")
        grade = st.radio("Resolved grade", [0, 1, 2, 3], horizontal=True)
        note = st.text_input("Why (optional)")
        if st.form_submit_button("Record resolved label"):
            try:
                with context.project() as db:
                    cal.adjudicate(db, sample, found[pick]["position"], int(grade), lead=lead, comment=note)
            except WorkbenchError as exc:
                context.error(exc, FIELDS)
                return
            context.flash("calibration", context.plain(
                f"Recorded grade {grade} for pair {found[pick]['position'] + 1}, resolved by {lead}."))
            st.rerun()


def _side_by_side(d: dict) -> None:
    """One column per SME: their grade, the passage with the evidence they marked in ``<mark>``
    (:func:`workbench.ui.highlight.evidence_html`, corpus text escaped) and their comment."""

    text = d.get("text") or ""
    st.html(f'<div style="font-weight: 600">{html.escape(str(d.get("query") or d["query_id"]))}</div>'
            f'<div style="margin-top: 0.2rem">{html.escape(str(d.get("title") or d["doc_id"]))}</div>')
    names = sorted(d["grades"])
    for column, name in zip(st.columns(len(names)), names):
        grade = d["grades"][name]
        note = d.get("notes", {}).get(name) or {}
        evidence = note.get("evidence") or []
        comment = note.get("comment")
        under = (d.get("guidelines") or {}).get(name)  # only where the guidelines changed mid-sample
        passage = evidence_html(text, d.get("start") or 0, len(text) if d.get("end") is None else d["end"],
                                evidence, grade=grade, window=200)
        column.html(
            f'<div data-testid="calibration-sme-view" data-sme="{html.escape(name, quote=True)}">'
            f'<div style="font-weight: 600">{html.escape(name)} · grade {int(grade)}</div>'
            f'<div style="font-size: 0.85em; color: rgba(49, 51, 63, 0.7)">'
            f'{"evidence marked: " + str(len(evidence)) if evidence else "no evidence marked"}'
            + (f' · <span data-testid="calibration-sme-guidelines">labelled under guidelines {html.escape(under)}'
               '</span>' if under else "") + '</div>'
            f'<div style="white-space: pre-wrap; font-size: 0.9em; border-left: 3px solid #ddd; padding-left: 0.6em; '
            f'max-height: 22em; overflow-y: auto">{passage}</div>'
            f'<div data-testid="calibration-sme-comment" style="margin-top: 0.4rem">'
            + (f"<b>Comment:</b> {html.escape(comment)}" if comment else
               '<span style="color: rgba(49, 51, 63, 0.6)">no comment</span>')
            + "</div></div>")


def _configurations(configs: list[dict]) -> None:
    st.subheader("Judge configurations on the tuning part")
    if not configs:
        st.info("No SME labels on the tuning part yet. Compare judge configurations there, choose one, "
                "then gate it on the held-out part once.")
        return
    st.caption("Compare and choose on the tuning part; only the held-out part decides the verdict above. "
               "Best first; a few-shot judge is compared without the pairs shown to it as examples.")
    context.table([{"judge configuration": c["label"],
                    "examples in the prompt": (f"few-shot ({c['few_shot']})" if c.get("few_shot") else "zero-shot"),
                    "pairs": c["n"],
                    "TPR": f"{_fmt(c['tpr'])} ({_fmt(c['ci']['tpr'][0])}–{_fmt(c['ci']['tpr'][1])})",
                    "TNR": f"{_fmt(c['tnr'])} ({_fmt(c['ci']['tnr'][0])}–{_fmt(c['ci']['tnr'][1])})",
                    "κ": f"{_fmt(c['kappa'])} ({_fmt(c['ci']['kappa'][0])}–{_fmt(c['ci']['kappa'][1])})",
                    "leniency": _fmt(c["msd"]), "would be": c["verdict"]} for c in configs],
                  key="calibration-configurations")


def _thresholds():

    return GateThresholds.from_settings(load_settings())


def _options(cal):

    settings = load_settings()
    tags = settings.get("calibration", "high_risk_tags")
    return cal.ReportOptions(threshold=int(settings.get("calibration", "relevant_min_grade")),
                             n_boot=int(settings.get("calibration", "bootstrap_resamples")),
                             high_risk_tags=tuple(t.strip() for t in tags.split(",") if t.strip()),
                             high_risk_rate=float(settings.get("calibration", "high_risk_min_rate")))


DESIGNS = {"Pairs (to test the judge)": "pairs", "Whole queries (for corrected scores)": "queries"}


def _draw_form(db, cal) -> None:
    pools = cal.list_pools(db)
    with st.expander("Draw a calibration sample", expanded=cal.list_samples(db).empty):
        if not pools:
            st.info("There is no pool yet: build one on the Retrieve & Pool page, then judge it on the Judge page.")
            return
        with st.form("calibration_draw"):
            pool = st.selectbox("Pool", pools)
            size = st.number_input("Pairs to draw", min_value=100, max_value=5000, value=200, step=50)
            seed = st.number_input("Seed", min_value=0, value=0, step=1,
                                   help="The same seed draws the same sample; it is stored with it.")
            share = st.slider("Share held out for the gate", 0.5, 1.0, 0.75, 0.05,
                              help="Only held-out labels decide the gate; the rest may be used to tune the judge.")
            design = st.selectbox("Design", list(DESIGNS), key="calibration_design",
                              help="Pairs: stratified by the judge's grade, to test the judge. Whole queries: "
                                   "every pooled pair of queries drawn at random, for scores corrected by SME "
                                   "labels on the Evaluate page.")
            queries = st.number_input("Queries to draw (whole queries)", min_value=2, max_value=100_000, value=30,
                                      step=1, key="calibration_queries")
            name = st.text_input("Sample name", value="", placeholder="default: POOL-seedSEED")
            if st.form_submit_button("Draw sample"):
                from workbench.services.calibration.request import SampleRequest

                by_query = DESIGNS[design] == "queries"
                try:
                    out = SampleRequest(pool, size=int(size), seed=int(seed), holdout_share=float(share),
                                        design=DESIGNS[design], queries=int(queries) if by_query else None,
                                        name=name).check().run(db, load_settings())
                except WorkbenchError as exc:
                    context.error(exc, FIELDS)
                    return
                context.flash("calibration", context.plain(
                    f"Drew sample {out['name']}: {out['size']} pairs over {out['queries']} queries, "
                    f"{out['holdout']} held out. " + " ".join(out["notes"])))
                st.rerun()


def _verdict(body: dict) -> None:
    gate = body["gate"]
    verdict = gate["verdict"]
    text = {"pass": "PASS: the judge may label the rest of the pool",
            "fail": "FAIL: the judge is not good enough yet",
            "inconclusive": "INCONCLUSIVE: not enough evidence either way"}[verdict]
    reasons = "\n".join(f"- {context.plain(r)}" for r in gate["reasons"])
    more = ""
    if verdict == "inconclusive":
        n = gate["more_labels_needed"]
        # With no count, the last reason already says why (core.gate: not yet, or never).
        more = (f"\n\nAbout **{n}** more held-out labels would decide it (if the rates stay as they are)."
                if n is not None else "")
    kind = {"pass": st.success, "fail": st.error, "inconclusive": st.warning}[verdict]
    kind(f"**{text}**\n\n{reasons}{more}")


def _pace(rows: list[dict]) -> None:
    """Labels per hour of time on task, per SME (time on task: how long each pair was on screen
    before its answer)."""
    if not rows:
        return
    st.subheader("Labelling pace")
    context.table([{"SME": t["annotator"], "labels": t["labels"], "answers": t["answers"],
                    "time on task": f"{t['hours'] * 60:,.1f} min",
                    "labels per hour": "n/a" if t["labels_per_hour"] is None else f"{t['labels_per_hour']:,.0f}"}
                   for t in rows], key="calibration-pace")


def _report(body: dict) -> None:
    st.subheader("Verdict")
    st.html(f'<div data-testid="calibration-verdict" data-verdict="{html.escape(body["gate"]["verdict"])}"></div>')
    _verdict(body)
    st.caption(f"Judge configuration {body['judge']['label']}. "
               f"{body['labelled']} of {body['items']} pairs labelled; {body['labelled_in_part']} in the held-out "
               f"part. " + ("Figures are re-weighted to the pool. " if body["weighted"] else "")
               + binarising_note("calibration", calibration=body["threshold"]))
    a = body["agreement"]
    if a is None:
        st.info("No SME labels on the held-out part yet. Label pairs on the Label page.")
        context.page_link("label", "Go to Label", ":material/edit_note:")
        return
    st.subheader("Figures with 95% intervals")
    context.table([{"figure": label, "value": _fmt(a[key]),
                    "95% interval": f"{_fmt(a['ci'][key][0])} – {_fmt(a['ci'][key][1])}"}
                   for key, label in FIGURE_NAMES], key="calibration-figures")
    b = a["bootstrap"]
    st.caption(f"{b['resamples']} bootstrap resamples by {b['resampling']}, seed {b['seed']}.")
    _heatmap(a, weighted=body["weighted"])
    if body["slices"]:
        st.subheader("By query tag")
        context.table([{"tag": s["tag"] + (" (high risk)" if s["high_risk"] else ""), "pairs": s["n"],
                        "TPR": _fmt(s["tpr"]), "TNR": _fmt(s["tnr"]), "κ": _fmt(s["kappa"]),
                        "needs": f"TPR, TNR ≥ {s['min_rate']:.2f}", "verdict": s["verdict"]}
                       for s in body["slices"]], key="calibration-slices")
    if body["disagreements"]:
        st.subheader("Worst disagreements")
        rows = body["disagreements"]
        context.table([{"pair": d["position"] + 1, "query": d["query_id"], "item": d["chunk_id"] or d["doc_id"],
                        "SME": d["sme_grade"], "judge": d["judge_grade"]} for d in rows], key="calibration-disagreements")
        _drill_down(body["sample"], rows)
    sme = body["sme_agreement"]
    if sme:
        st.subheader("Agreement among SMEs")
        st.write(f"Krippendorff's α (ordinal): {_fmt(sme['alpha_ordinal'])}")
        binary = f"Cohen's κ (relevant / not relevant, grade ≥ {sme['threshold']})"
        context.table([{"SMEs": f"{p['a']} / {p['b']}", "shared pairs": p["n"],
                        "Cohen's κ (grades 0–3, unweighted)": _fmt(p["kappa"]), binary: _fmt(p["kappa_binary"])}
                       for p in sme["pairwise_kappa"]], key="calibration-sme")
    cp = body["corrected_prevalence"]
    if cp:
        st.subheader("Relevant share of the pool")
        st.write(f"The judge calls {_fmt(cp['observed'])} of the {cp['n_observed']} judged pairs relevant; "
                 f"corrected for its measured error rates: {_fmt(cp['estimate'])} "
                 f"(95% interval {_fmt(cp['ci'][0])} – {_fmt(cp['ci'][1])}).")
        if cp["note"]:
            st.caption(context.plain(cp["note"]))
    if body["corrected_precision"]:
        st.subheader("Runs' precision, corrected")
        st.caption("Share of each run's top results (those the judge graded) that the judge calls relevant, "
                   "and the same share corrected for the judge's measured error rates.")
        context.table([{"run": r["run"], "top k": r["k"], "judged": r["judged"], "judge says": _fmt(r["observed"]),
                        "corrected": _fmt(r["estimate"]),
                        "95% interval": f"{_fmt(r['ci'][0])} – {_fmt(r['ci'][1])}"}
                       for r in body["corrected_precision"]], key="calibration-runs")
    _exports(body)


def _heatmap(a: dict, *, weighted: bool = False) -> None:
    levels = a["levels"]
    # Cells count labelled pairs (counts are counts); the re-weighted cells behind the figures
    # are named as weights in the caption, never shown as pairs.
    counts = a.get("counts", a["confusion"])
    rows = [{"SME grade": str(r), "judge grade": str(c), "pairs": float(counts[i][j])}
            for i, r in enumerate(levels) for j, c in enumerate(levels)]
    frame = pd.DataFrame(rows)
    xy = {"x": {"field": "judge grade", "title": "Judge grade", "type": "ordinal"},
          "y": {"field": "SME grade", "title": "SME grade", "type": "ordinal"}}
    st.subheader("Confusion matrix")
    charts.vega_lite(frame, {"width": 320, "height": 280, "layer": [  # shaded cells, each with its count
        {"mark": {"type": "rect"},
         "encoding": {**xy, "color": {"field": "pairs", "scale": {"scheme": "blues"}, "type": "quantitative"}}},
        {"mark": {"type": "text"},
         "encoding": {**xy, "text": {"field": "pairs", "format": ".0f", "type": "quantitative"}}}]})
    relevant = a.get("relevant_pairs")
    note = (f"{relevant} reference-relevant and {a.get('not_relevant_pairs')} reference-non-relevant pairs. "
            if relevant is not None else "")
    st.caption(f"Each cell counts labelled pairs. {note}"
               + ("The figures use these pairs re-weighted to the pool (weights, not pairs: "
                  + "; ".join(f"SME {r} / judge {c}: {float(a['confusion'][i][j]):.1f}"
                              for i, r in enumerate(levels) for j, c in enumerate(levels)
                              if float(a["confusion"][i][j]) > 0) + ")." if weighted else ""))


def _drill_down(sample: str, rows: list[dict]) -> None:

    labels = [f"pair {d['position'] + 1}: SME {d['sme_grade']}, judge {d['judge_grade']}" for d in rows]
    pick = st.selectbox("Look at a pair", range(len(rows)), format_func=lambda i: labels[i],
                        key="calibration_drill", index=None, placeholder="choose a disagreement")
    if pick is None:
        return
    d = rows[pick]
    with context.project() as db:
        item = cal.item(db, sample, d["position"])
        judge = cal.judge_reason(db, sample, d["position"])
    st.html(f'<div style="font-weight: 600">{html.escape(item["query"] or item["query_id"])}</div>'
            f'<div style="font-weight: 600; margin-top: 0.4rem">{html.escape(item["title"] or item["doc_id"])}</div>'
            f'<div style="white-space: pre-wrap">{html.escape((item["text"] or "")[item["start"]:item["end"]])}</div>')
    st.html(f"<div><b>Judge's reason:</b> {html.escape(judge.get('reason') or '—')}</div>")


def _exports(body: dict) -> None:
    st.subheader("Export")
    a = body["agreement"]
    csv = io.StringIO()
    pd.DataFrame([{"figure": k, "value": a[k], "lo": a["ci"][k][0], "hi": a["ci"][k][1]}
                  for k, _ in FIGURE_NAMES]).to_csv(csv, index=False)

    cols = st.columns(2)
    cols[0].download_button("Download report (JSON)", report_json(body),
                            file_name=f"calibration-{body['sample']}.json", mime="application/json")
    cols[1].download_button("Download figures (CSV)", csv.getvalue(), file_name=f"calibration-{body['sample']}.csv",
                            mime="text/csv")


def _labels_needed() -> None:
    """How many labelled queries reach a target interval half-width, with the judge corrected by
    SME labels (PPI++) and with SME labels alone, from the query sample's labelled queries as the
    pilot (the service of ``workbench ppi --plan``: services.evaluation.ppi_project)."""

    st.subheader("Labels needed")
    with context.project() as db:
        status = ppi_project.sample_status(db)
        if status is None:
            st.caption("Draw a query sample above (Design: Whole queries) and grade every pair of a few of its "
                       "queries: from that pilot this box estimates how many labelled queries a run's score needs.")
            return
        if status.labelled < MIN_PILOT:
            st.caption(context.plain(
                f"Query sample {status.sample}: {status.labelled} of its {status.drawn} queries fully labelled. Grade "
                f"every pair of at least {MIN_PILOT} of them on the Label page for an estimate of the labels needed."))
            return
        names = run_table(db)["name"].tolist()
        if not names:
            st.caption("No run yet: run a retriever on Retrieve & Pool to plan its labels.")
            return
        cols = st.columns([3, 2, 2])
        runs = cols[0].multiselect("Runs (differences are from the first)", names, default=names[:2],
                                   key="calibration_plan_runs")
        measure = cols[1].selectbox("Measure", ["ndcg@10", "P@10", "recall@100", "map"], key="calibration_plan_measure")
        half = cols[2].number_input("Target half-width", min_value=0.005, max_value=0.5, value=0.05, step=0.005,
                                    format="%.3f", key="calibration_plan_half_width")
        if not runs:
            st.caption("Choose at least one run.")
            return
        try:
            plan, _ = ppi_project.corrected_plan(db, runs, [measure], float(half))
        except WorkbenchError as exc:
            context.error(exc, FIELDS)
            return
    rows = [{"target": f"{r} (mean)", "labelled queries, judge corrected": p.n_ppi,
             "labelled queries, SME labels only": p.n_human} for r, p in plan.runs[measure].items()]
    rows += [{"target": f"{r} − {plan.first_run}", "labelled queries, judge corrected": p.n_ppi,
              "labelled queries, SME labels only": p.n_human} for r, p in plan.differences[measure].items()]
    context.table(rows, key="calibration-labels-needed")
    st.caption(context.plain(
        f"For a 95% interval of ±{float(half):g} on {measure}, from a pilot of {plan.n_pilot} labelled queries of "
        f"{plan.n_total} (query sample {status.sample}); rough with a small pilot. You have {status.labelled}."))
