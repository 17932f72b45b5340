"""Evaluate: how good are the project's retrievers, measured with its qrels?

Choose runs (or the stages of a pipeline), measures and a cutoff k. The page shows, in order:
a warning for each run whose top k is too little judged (with one click to add it to a pool),
the means with 95% intervals, the comparison of every run with the first (paired test,
Benjamini–Hochberg), the per-query difference of two chosen runs (queries sorted by the
difference, worst for the run first, both runs' top results side by side with their grades,
unjudged ones marked), the per-query distribution with the share of queries at zero, the
per-query drill-down worst first (the query, the run's top results with their grades, unjudged
ones marked), the per-tag slices, quality against latency when runs record latencies, the
stage report with reranker lift, and the stored evaluations and judge-vs-human ranking when
the project has them. Every number comes from :mod:`workbench.services.evaluation.views`.
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from workbench.core.metrics.measures import parse_measures
from workbench.errors import WorkbenchError
from workbench.services import access, visibility
from workbench.services.evaluation import ppi_project
from workbench.services.evaluation import views as ev
from workbench.ui import charts, context
from workbench.ui.words import LABEL_SOURCE_WORDS, Field, qrels_note

MEASURES = {"nDCG": "ndcg@{k}", "Recall": "recall@{k}", "Precision": "P@{k}", "MRR": "recip_rank@{k}",
            "MAP": "map@{k}"}
SOURCES = LABEL_SOURCE_WORDS
TESTS = {"Randomization (permutation)": "randomization", "Paired t-test": "t", "Bootstrap": "bootstrap"}
FIELDS = {"--runs": Field("Runs", "choice"), "-m": Field("Measures", "choice"), "--level": Field("Level", "choice")}
LEVELS = {"doc": "doc (by document)", "chunk": "chunk"}  # the service's (and the CLI's) words, explained
DIFF_ROWS = 50  # per-query difference rows shown before "Show every query"
LOW_JUDGED = 0.5  # below this share of judged top-k items, a run's score is not comparable
CORRECTED = "Judge, corrected by SME labels"  # PPI++ (services.evaluation.ppi_project)


def _num(x, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _measure_names(words: list[str], k: int) -> list[str]:

    out = []
    for word in words:
        name = MEASURES[word].format(k=k)
        try:
            parse_measures([name])
        except WorkbenchError:
            name = name.split("@")[0]
        out.append(name)
    return out


@context.page_run
def render() -> None:

    st.title("Evaluate")
    st.caption("Score the project's runs with its qrels; compare them with paired tests.")
    context.show_flash("evaluate")
    with context.project() as db:
        runs = ev.run_table(db)
        if runs.empty:
            st.info("No run yet: run a retriever on Retrieve & Pool, then come back to evaluate it.")
            context.page_link("retrieve", "Go to Retrieve & Pool", ":material/manage_search:")
            return
        choices = _choices(runs)
        if not choices["runs"]:
            st.info("Choose at least one run above.")
            return
        if not choices["measures"]:
            st.info("Choose at least one measure above.")
            return
        if choices["source"] == "corrected":
            _corrected(db, choices)
            return
        try:
            with st.spinner("Scoring the runs…"):
                evaluation = ev.evaluate_runs(db, choices["runs"], choices["measures"], source=choices["source"],
                                              level=choices["level"])
                judged = ev.judged_shares(db, evaluation, k=choices["k"])
        except WorkbenchError as exc:
            context.error(exc, FIELDS)
            if "no labels" in str(exc):
                context.page_link("judge", "Go to Judge", ":material/gavel:")
            return
        _judged_warning(db, ev, judged, choices["k"], choices["source"])
        st.caption(context.plain(next(iter(evaluation.statements.values()))))
        for note in evaluation.notes:
            st.caption(context.plain(qrels_note(note)))
        means = ev.means_with_ci(evaluation)
        _means(means)
        if len(choices["runs"]) > 1:
            _comparison(ev, evaluation, choices)
        _per_query_difference(db, ev, evaluation, choices)
        measure = st.selectbox("Measure for the details below", choices["measures"], key="evaluate_detail_measure")
        _distribution(ev, evaluation, means, measure)
        _drilldown(db, ev, evaluation, choices, measure)
        _slices(db, ev, evaluation, measure)
        _latency(db, ev, means, choices["runs"], measure)
        if len(choices["runs"]) > 1:
            _stages(ev, evaluation, choices)
        _rank_agreement(db, ev, choices)
        _save(db, ev, choices)
        _history(db, ev)


def _choices(runs: pd.DataFrame) -> dict:
    names = runs["name"].tolist()
    left, right = st.columns([3, 2])
    chosen = left.multiselect("Runs (the first is the baseline)", names, default=names[:2], key="evaluate_runs")
    words = right.multiselect("Measures", list(MEASURES), default=["nDCG", "Recall"], key="evaluate_measures")
    a, b, c, d = st.columns(4)
    k = int(a.number_input("Cutoff k", min_value=1, max_value=1000, value=10, step=1, key="evaluate_k"))

    sources = [w for w, v in SOURCES.items() if v != "llm" or visibility.can_read("judge_output")]
    if visibility.can_read("judge_output") and visibility.can_read("others_labels"):
        sources.append(CORRECTED)  # reads the judge's grades and every SME's labels
    picked = b.selectbox("Labels", sources, key="evaluate_source")
    source = "corrected" if picked == CORRECTED else SOURCES[picked]
    test = TESTS[c.selectbox("Paired test", list(TESTS), key="evaluate_test")]
    level = d.selectbox("Level", list(LEVELS), index=list(LEVELS).index(_own_level(runs, chosen)),
                        format_func=LEVELS.get, key="evaluate_level",
                        help="doc scores every run by document (a chunk run's document takes its best chunk); "
                             "chunk scores chunk runs of one chunking by chunk.")
    return {"runs": chosen, "measures": _measure_names(words, k), "k": k, "source": source, "test": test,
            "level": level}


def _own_level(runs: pd.DataFrame, chosen: list[str]) -> str:
    """The Level the page opens with: the chosen runs' own when they share one (chunk runs of one
    chunking, or document runs), else doc, the one level runs of several chunkings compare at."""
    picked = runs[runs["name"].isin(chosen)]
    scopes = {(str(r.level), None if pd.isna(r.chunking) else str(r.chunking)) for r in picked.itertuples()}
    return next(iter(scopes))[0] if len(scopes) == 1 else "doc"


def _judged_warning(db, ev, judged: pd.DataFrame, k: int, source: str) -> None:
    for row in judged.itertuples(index=False):
        if row.judged_at_k >= LOW_JUDGED:
            continue
        holding = ev.pools_holding_run(db, row.run)
        if holding:
            # Its pairs are pooled already: what is missing is labels these qrels admit.
            pools = ", ".join(holding)
            why = ("label them on the Label page" if source == "human" else
                   "judge them on the Judge page; the judge's labels count here once it passes the "
                   "calibration gate (label a sample on the Label page, read the verdict on the Calibration "
                   "page), or choose Labels = LLM judge only")
            st.warning(context.plain(
                f"Run {row.run}: only {row.judged_at_k:.0%} of its top {k} results are judged under these labels, "
                f"so its score is not comparable yet. Its results are already in pool {pools}: {why}."))
            continue
        st.warning(context.plain(
            f"Run {row.run}: only {row.judged_at_k:.0%} of its top {k} results are judged, so its score is "
            f"not comparable yet. Add it to a pool, then judge the new pairs on the Judge page."))
        pools = ev.pools_for_run(db, row.run)
        if not pools:
            st.caption(context.plain(f"No pool of the same kind takes run {row.run}: build one with it on "
                                     "Retrieve & Pool."))
            continue
        cols = st.columns([2, 2, 3])
        pool = cols[0].selectbox("Pool", pools, key=f"evaluate_pool_{row.run}", label_visibility="collapsed")
        if cols[1].button(f"Add {row.run} to pool {pool}", key=f"evaluate_add_{row.run}"):
            try:
                with st.spinner(f"Adding {row.run} to pool {pool}…"):
                    summary = ev.add_run_to_pool(db, pool, row.run)
            except WorkbenchError as exc:
                context.error(exc, FIELDS)
                return
            added = getattr(summary, "pairs_added", None)
            context.flash("evaluate", context.plain(
                f"Added run {row.run} to pool {pool}" + (f" ({added:,} new pairs)" if added is not None else "")
                + ": judge the new pairs on the Judge page."))
            st.rerun()
        with cols[2]:
            context.page_link("judge", "Judge the new pairs", ":material/gavel:")


def _means(means: pd.DataFrame) -> None:
    st.subheader("Means with 95% intervals")
    context.table([{"run": r.run, "measure": r.measure, "mean": _num(r.mean),
                    "95% interval": f"{_num(r.ci_low)} – {_num(r.ci_high)}", "queries": r.queries,
                    "queries at zero": f"{r.zero_share:.0%}"} for r in means.itertuples(index=False)],
                  key="evaluate-means")
    # Each measure's row: a rule from ci_low to ci_high and a point at the mean, per run.
    y = {"field": "run", "sort": None, "title": None, "type": "nominal"}
    color = {"field": "run", "legend": None, "type": "nominal"}
    tooltip = [{"field": "run", "type": "nominal"}, {"field": "measure", "type": "nominal"},
               *({"field": f, "type": "quantitative"} for f in ("mean", "ci_low", "ci_high"))]
    charts.vega_lite(means, {
        "facet": {"row": {"field": "measure", "title": None, "type": "nominal"}},
        "spec": {"height": 40 * means["run"].nunique() + 20, "layer": [
            {"mark": {"strokeWidth": 2, "type": "rule"},
             "encoding": {"color": color, "y": y, "x2": {"field": "ci_high"},
                          "x": {"field": "ci_low", "title": "mean (95% interval)", "type": "quantitative"}}},
            {"mark": {"filled": True, "size": 80, "type": "point"},
             "encoding": {"color": color, "y": y, "tooltip": tooltip,
                          "x": {"field": "mean", "type": "quantitative"}}}]}}, width="stretch")


def _comparison(ev, evaluation, choices: dict) -> None:
    st.subheader("Comparison with the baseline")
    try:
        with st.spinner("Running the paired tests…"):
            result = ev.compare(evaluation, choices["measures"], test=choices["test"])
    except WorkbenchError as exc:
        context.error(exc, FIELDS)
        return
    st.caption(context.plain(
        f"Baseline {result.baseline}; {result.n_common_queries} queries in common; two-sided {result.test} "
        f"test (seed {result.seed}, {result.n_resamples:,} resamples); p adjusted by Benjamini–Hochberg "
        "over every row."))
    context.table([{"measure": r.measure, "run": r.run, "baseline": _num(r.baseline_mean), "run mean": _num(r.run_mean),
                    "Δ": f"{r.delta:+.3f}", "95% interval of Δ": f"{r.ci_low:+.3f} – {r.ci_high:+.3f}",
                    "p": _num(r.p_value, 4), "p adjusted": _num(r.p_adjusted, 4),
                    "significant (5%)": "yes" if r.p_adjusted < 0.05 else "no",
                    "wins / ties / losses": f"{r.wins} / {r.ties} / {r.losses}"}
                   for r in result.table.itertuples(index=False)], key="evaluate-comparison")


def _graded(items) -> str:
    """A top list in the page's words: ``d4 (grade 1) · x1 (unjudged)``."""
    return " · ".join(f"{i} (unjudged)" if g is None else f"{i} (grade {g})" for i, g in items) or "no results"


def _per_query_difference(db, ev, evaluation, choices: dict) -> None:
    st.subheader("Per-query difference")
    runs = list(evaluation.results)
    if len(runs) < 2:
        st.info("Choose at least two runs above (the first is the baseline) to see, query by query, where one "
                "run does better or worse than the other. With only one run in the project, run another "
                "retriever on Retrieve & Pool first.")
        return
    cols = st.columns(4)
    baseline = cols[0].selectbox("Baseline run", runs, index=0, key="evaluate_diff_baseline")
    run = cols[1].selectbox("Compared with", [r for r in runs if r != baseline], key="evaluate_diff_run")
    measure = cols[2].selectbox("Measure", choices["measures"], key="evaluate_diff_measure")
    top = int(cols[3].number_input("Top results shown", min_value=1, max_value=20, value=min(5, choices["k"]),
                                   step=1, key="evaluate_diff_top"))
    try:
        with st.spinner("Comparing the runs query by query…"):
            frame = ev.per_query_difference(db, evaluation, baseline, run, measure, k=top)
    except WorkbenchError as exc:
        context.error(exc, FIELDS)
        return
    if frame.empty:
        st.info(context.plain(f"No query has a {measure} value in both runs: the queries need relevant "
                              "results labelled (label pairs on the Label page)."))
        return
    worse, better = int((frame["delta"] < 0).sum()), int((frame["delta"] > 0).sum())
    st.caption(context.plain(
        f"Δ = {run} − {baseline} on {measure}, worst for {run} first: {run} does worse on {worse} queries, better "
        f"on {better}, the same on {len(frame) - worse - better}. Each result carries its grade; unjudged results "
        "count as not relevant, so a run whose top results are unjudged may be better than its score says."))
    shown = frame
    if len(frame) > DIFF_ROWS and not st.toggle(f"Show every query ({len(frame):,})", key="evaluate_diff_all"):
        shown = frame.head(DIFF_ROWS)
    context.table([{"query": r.query_id, "query text": r.query, f"baseline: {baseline}": _num(r.baseline_value),
                    f"run: {run}": _num(r.run_value), "Δ": f"{r.delta:+.3f}",
                    f"top {top} of {baseline}": _graded(r.baseline_top), f"top {top} of {run}": _graded(r.run_top)}
                   for r in shown.itertuples(index=False)], key="evaluate-per-query-diff")


def _distribution(ev, evaluation, means: pd.DataFrame, measure: str) -> None:
    st.subheader("Per-query distribution")
    values = ev.per_query(evaluation, measure)
    zero = means[means["measure"] == measure]
    st.caption(context.plain(" · ".join(f"{r.run}: mean {_num(r.mean)}, {r.zero_share:.0%} of queries at 0"
                                        for r in zero.itertuples(index=False))))
    charts.vega_lite(values, {"mark": {"opacity": 0.7, "type": "bar"}, "height": 220, "encoding": {
        "x": {"bin": {"maxbins": 20}, "field": "value", "title": measure, "type": "quantitative"},
        "y": {"aggregate": "count", "stack": None, "title": "queries", "type": "quantitative"},
        "color": {"field": "run", "type": "nominal"}}}, width="stretch")


def _drilldown(db, ev, evaluation, choices: dict, measure: str) -> None:
    st.subheader("Worst queries")
    run = st.selectbox("Run", choices["runs"], key="evaluate_drill_run")
    ranked = ev.worst_queries(db, evaluation, run, measure, limit=None)
    if ranked.empty:
        st.info("No query scored for this measure.")
        return
    st.caption(context.plain(f"The run's top {choices['k']} for each query, with the grade of each result; "
                             "unjudged results are marked, since they count as not relevant."))
    for row in ranked.head(10).itertuples(index=False):
        with st.expander(f"{row.query_id} · {measure} {_num(row.value)}"):
            _query_detail(db, ev, evaluation, run, row, choices["k"])
    labels = {r.query_id: f"{r.query_id} · {measure} {_num(r.value)}" for r in ranked.itertuples(index=False)}
    chosen = st.selectbox("Any query (worst first)", list(labels), format_func=labels.get, index=None,
                          placeholder="type a query id", key="evaluate_query")
    if chosen is not None:
        row = next(r for r in ranked.itertuples(index=False) if r.query_id == chosen)
        with st.container(border=True, key="evaluate_query_detail"):
            _query_detail(db, ev, evaluation, run, row, choices["k"])


def _query_detail(db, ev, evaluation, run: str, row, k: int) -> None:
    context.escaped(row.query, css="font-weight: 600")
    top = ev.top_results(db, evaluation, run, row.query_id, k=k)
    context.table([{"rank": t.rank, "item": t.item_id, "score": _num(t.score),
                    "grade": "unjudged" if pd.isna(t.grade) else int(t.grade)}
                   for t in top.itertuples(index=False)], key=f"evaluate-top-{row.query_id}")


def _slices(db, ev, evaluation, measure: str) -> None:
    frame = ev.slices(db, evaluation, measure)
    st.subheader("By query tag")
    if frame.empty:
        st.caption("The queries carry no tags: add tags to the queries file on the Data page to see slices.")
        return
    charts.vega_lite(frame, {"mark": {"type": "bar"}, "height": max(120, 22 * len(frame)), "encoding": {
        "y": {"field": "tag", "title": None, "type": "nominal"},
        "x": {"field": "mean", "title": f"mean {measure}", "type": "quantitative"},
        "color": {"field": "run", "type": "nominal"}, "yOffset": {"field": "run", "type": "nominal"},
        "tooltip": [{"field": "run", "type": "nominal"}, {"field": "tag", "type": "nominal"},
                    {"field": "queries", "type": "quantitative"}, {"field": "mean", "type": "quantitative"}]}},
        width="stretch")


def _latency(db, ev, means: pd.DataFrame, runs: list[str], measure: str) -> None:
    latency = ev.latencies(db, runs)
    if not latency:
        return
    st.subheader("Quality against latency")
    points = means[(means["measure"] == measure) & means["run"].isin(latency)][["run", "mean"]].copy()
    points = points.rename(columns={"mean": "quality"})
    points["latency"] = points["run"].map(latency)
    points["frontier"] = ev.pareto_frontier(points)
    xy = {"x": {"field": "latency", "title": "p95 latency per query (ms)", "type": "quantitative"},
          "y": {"field": "quality", "title": measure, "type": "quantitative"}}
    charts.vega_lite(points, {"height": 260, "layer": [  # the runs, and a line along the Pareto frontier
        {"mark": {"filled": True, "size": 90, "type": "point"},
         "encoding": {**xy, "color": {"field": "frontier", "type": "nominal"},
                      "tooltip": [{"field": "run", "type": "nominal"}, {"field": "quality", "type": "quantitative"},
                                  {"field": "latency", "type": "quantitative"}]}},
        {"mark": {"type": "line"}, "encoding": xy, "transform": [{"filter": "datum.frontier"}]}]}, width="stretch")


def _stages(ev, evaluation, choices: dict) -> None:
    st.subheader("Stages")
    st.caption("Read the runs in the order chosen as the stages of one pipeline (e.g. retriever, then reranker).")
    try:
        report = ev.stage_report(evaluation, choices["measures"])
    except WorkbenchError as exc:
        context.error(exc, FIELDS)
        return
    table = report.table.reset_index().rename(columns={"index": "stage"})
    context.table([{c: (_num(v) if isinstance(v, float) else v) for c, v in row.items()}
                   for row in table.to_dict("records")], key="evaluate-stages")
    names = list(report.table.index)
    cols = st.columns(4)
    pre = cols[0].selectbox("Before reranking", names, index=0, key="evaluate_pre")
    post = cols[1].selectbox("After reranking", names, index=len(names) - 1, key="evaluate_post")
    pool_measure = cols[2].selectbox("Candidate pool measure", choices["measures"],
                                     index=len(choices["measures"]) - 1, key="evaluate_pool_measure")
    measure = cols[3].selectbox("Measure", choices["measures"], key="evaluate_lift_measure")
    try:
        lift = ev.stage_lift(report, pool_measure=pool_measure, pre_stage=pre, post_stage=post, measure=measure)
    except WorkbenchError as exc:
        context.error(exc, FIELDS)
        return
    if math.isnan(lift.value):
        st.caption(context.plain(f"Reranker lift undefined: {getattr(lift, 'reason', '')}"))
    else:
        st.metric("Reranker lift (share of the recoverable gap closed)", f"{lift.value:.2f}")


def _save(db, ev, choices: dict) -> None:

    if not access.allowed(access.current_actor(), "build"):  # a write: leads only (the service checks too)
        return
    if st.button("Save this evaluation", key="evaluate_save",
                 help="Stores the runs, the qrels policy and fingerprint, the measures and every per-query "
                      "value, so results can be compared across time."):
        try:
            with st.spinner("Saving the evaluation…"):
                saved = ev.evaluate_runs(db, choices["runs"], choices["measures"], source=choices["source"],
                                         level=choices["level"], store=True)
        except WorkbenchError as exc:
            context.error(exc, FIELDS)
            return
        context.flash("evaluate", context.plain(f"Saved evaluation {saved.evaluation_id}."))
        st.rerun()


def _history(db, ev) -> None:

    st.subheader("Saved evaluations")
    if visibility.limited():  # scored with everyone's labels: an annotator labels blind
        st.caption("Saved evaluations were scored with everyone's labels, so leads and viewers see them.")
        return
    try:
        frame = ev.stored_evaluations(db)
    except WorkbenchError as exc:
        context.error(exc, FIELDS)
        return
    if frame.empty:
        st.caption("No saved evaluation yet: press Save this evaluation to keep one.")
        return
    st.dataframe(frame, hide_index=True, width="stretch")


def _rank_agreement(db, ev, choices: dict) -> None:
    if len(choices["runs"]) < 2:
        return
    st.subheader("Judge against people: do they rank the runs the same way?")
    with st.spinner("Scoring the runs under both kinds of labels…"):
        frame, reason = ev.rank_agreement(db, choices["runs"], choices["measures"], level=choices["level"])
    if reason:
        st.caption(context.plain(f"Not available: {reason}. It needs labels from people and from the LLM judge "
                                 "(judge the pool on the Judge page)."))
        return
    context.table([{"measure": r.measure, "runs": r.runs, "Kendall τ": _num(r.tau), "τ_AP": _num(r.tau_ap),
                    "ranking by people": ", ".join(map(str, r.ranking_human)),
                    "ranking by the judge": ", ".join(map(str, r.ranking_judge)),
                    "note": r.reason or ""} for r in frame.itertuples(index=False)], key="evaluate-rank-agreement")


def _corrected(db, choices: dict) -> None:
    """"Judge, corrected by SME labels": PPI++ estimates beside the human-only intervals, and
    how many labelled queries they rest on (services.evaluation.ppi_project)."""

    status = ppi_project.sample_status(db)
    if status is None:
        st.info("No query sample yet. Corrected scores need SME labels on every pooled pair of a few queries "
                "drawn at random: draw a query sample on the Calibration page (Design: Whole queries), then "
                "grade every pair of its queries on the Label page.")
        context.page_link("calibration", "Go to Calibration", ":material/balance:")
        return
    if status.labelled < 2:
        st.info(context.plain(
            f"Query sample {status.sample}: {status.labelled} of its {status.drawn} queries are fully labelled. "
            "Grade every pair of at least 2 of its queries on the Label page to see corrected scores."))
        context.page_link("label", "Go to Label", ":material/edit_note:")
        return
    try:
        with st.spinner("Scoring the runs on the judge's and the SMEs' labels…"):
            done = ppi_project.corrected_project(db, choices["runs"], choices["measures"], level=choices["level"])
    except WorkbenchError as exc:
        context.error(exc, FIELDS)
        return
    report = done.report
    st.metric("Labelled queries it rests on", f"{report.n_labelled} of {report.n_labelled + report.n_unlabelled}")
    st.caption(context.plain(
        f"Query sample {status.sample} (seed {status.seed}): {status.labelled} of its {status.drawn} queries fully "
        f"labelled by SMEs; the judge labelled all {report.n_labelled + report.n_unlabelled}. PPI++ uses every judge "
        "label and corrects its bias with the SME labels; the human-only interval uses the labelled queries alone."))
    st.subheader("Means with 95% intervals: corrected and human-only")
    context.table([{"run": r, "measure": m, "corrected": _num(e.ppi.estimate),
                    "corrected 95% interval": f"{_num(e.ppi.low)} – {_num(e.ppi.high)}",
                    "human-only": _num(e.human_only.estimate),
                    "human-only 95% interval": f"{_num(e.human_only.low)} – {_num(e.human_only.high)}",
                    "judge only": _num(e.judge_only), "width ratio": _num(e.width_ratio, 2)}
                   for m, by_run in report.runs.items() for r, e in by_run.items()], key="evaluate-corrected")
    if len(choices["runs"]) > 1:
        st.subheader(f"Difference from {report.first_run}")
        context.table([{"run": r, "measure": m, "corrected Δ": f"{e.ppi.estimate:+.3f}",
                        "corrected 95% interval": f"{e.ppi.low:+.3f} – {e.ppi.high:+.3f}",
                        "human-only Δ": f"{e.human_only.estimate:+.3f}",
                        "human-only 95% interval": f"{e.human_only.low:+.3f} – {e.human_only.high:+.3f}"}
                       for m, by_run in report.differences.items() for r, e in by_run.items()],
                      key="evaluate-corrected-differences")
