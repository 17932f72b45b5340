"""Experiments: chunkings × retrievers on the same span labels, compared at equal context budget.

The page runs a sweep grid (:func:`workbench.services.evaluation.sweep.run_sweep`, the same service as
``workbench sweep``) with progress, then shows the table of cells, the winner at each budget,
coverage against budget per configuration, quality against p95 latency with the Pareto
frontier, the cells whose top 10 is little judged (with one click to pool them), the
per-tag slices of one configuration against another with a paired test, and, when the grid
ran hybrid next to dense or BM25 on a chunking, hybrid's lift over each of its parts per slice
(the slices it moves next to how little the mean moves).
"""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from workbench import lazylibs
from workbench.core.metrics.pareto import pareto_frontier
from workbench.core.rag.context_budget import parse_budgets
from workbench.errors import WorkbenchError
from workbench.services.evaluation import sweep
from workbench.services.jobs import SweepRequest, documents
from workbench.services.retrieval.registry import RETRIEVERS, sweep_retrievers
from workbench.services.tags import query_tags
from workbench.ui import charts, context, jobs_panel
from workbench.ui.words import LABEL_SOURCE_WORDS, Field

CHUNKINGS = ["fixed:32", "fixed:64", "fixed:128", "fixed:256", "fixed:512", "fixed:1024", "fixed:2048",
             "fixed:512:64", "section", "sentences", "document"]
MEASURES = ["ndcg@10", "recall@10", "P@10", "recip_rank@10"]
LABELS = LABEL_SOURCE_WORDS
KEY = "experiments_result"


def _num(x, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _retrievers() -> dict[str, str]:
    """The retrievers a sweep runs (the registry's), by their name on this page."""

    return {RETRIEVERS[name].sweep_title or RETRIEVERS[name].title: name for name in sweep_retrievers()}


def _form() -> dict | None:
    retrievers_by_title = _retrievers()
    with st.form("sweep"):
        chunkings = st.multiselect("Chunkings", CHUNKINGS, default=["fixed:256", "fixed:512"],
                                   help="fixed:SIZE is SIZE tokens per chunk; fixed:SIZE:OVERLAP overlaps windows")
        retrievers = st.multiselect("Retrievers", list(retrievers_by_title), default=["BM25"])
        measures = st.multiselect("Measures", MEASURES, default=["ndcg@10", "recall@10"])
        budgets = st.text_input("Context budgets (tokens)", "1000,2000,4000,8000")
        labels = st.selectbox("Labels", list(LABELS))
        go = st.form_submit_button("Run the grid", type="primary")
    if not go:
        return None
    return {"chunkings": chunkings, "retrievers": [retrievers_by_title[r] for r in retrievers], "measures": measures,
            "budgets": budgets, "labels": LABELS[labels]}


PENDING = "experiments_show_job"
JOB_FIELDS = {"--chunkings": Field("Chunkings", "choice"), "--retrievers": Field("Retrievers", "choice"),
              "--budgets": Field("Context budgets (tokens)")}


def _background(db, choice: dict) -> bool:
    """Start the grid as a background job when it is large (documents x cells from ``[jobs]
    background_from``, :mod:`workbench.services.jobs`); True when the page handed it to a job
    (started, or refused with the error shown)."""

    size = documents(db) * len(choice["chunkings"]) * len(choice["retrievers"])
    if not jobs_panel.in_background("sweep", size):
        return False
    try:
        budgets = tuple(parse_budgets(choice["budgets"]))
    except WorkbenchError as exc:
        context.error(exc, JOB_FIELDS)
        return True
    request = SweepRequest(tuple(choice["chunkings"]), tuple(choice["retrievers"]), tuple(choice["measures"]),
                           budgets, choice["labels"])
    if jobs_panel.launch(request, flash_key="experiments", fields=JOB_FIELDS):
        st.rerun()
    return True


def _show_job(job: dict) -> None:
    """After a grid job finished: measure it on the page (every run is stored, so it only evaluates)."""
    request = job["request"]
    st.session_state[PENDING] = {"chunkings": list(request["chunkings"]), "retrievers": list(request["retrievers"]),
                                 "measures": list(request["measures"]),
                                 "budgets": ",".join(str(b) for b in request["budgets"]) or "1000,2000,4000,8000",
                                 "labels": request["labels"]}


def _run(db, choice: dict) -> None:

    if not choice["chunkings"] or not choice["retrievers"] or not choice["measures"]:
        st.warning("Choose at least one chunking, one retriever and one measure, then run the grid.")
        return
    if not choice.get("from_job") and _background(db, choice):
        return
    status = st.status("Running the grid…", expanded=True)
    try:
        result = sweep.run_sweep(db, ",".join(choice["chunkings"]), ",".join(choice["retrievers"]),
                                 choice["measures"], budgets=parse_budgets(choice["budgets"]),
                                 labels=choice["labels"], progress=context.progress,
                                 notify=lambda line: status.text(line))
    except WorkbenchError as exc:
        status.update(label="The grid stopped", state="error")
        context.error(exc)
        return
    status.update(label="Grid done", state="complete", expanded=False)
    st.session_state[KEY] = result


def _cells_frame(result) -> pd.DataFrame:
    rows = []
    for c in result.cells:
        if c.skipped:
            continue
        row = {"configuration": f"{c.chunking} × {c.retriever}", "chunking": c.chunking, "retriever": c.retriever}
        row.update({m: c.aggregate.get(m) for m in result.measures})
        row.update({f"coverage@{b}": c.coverage.get(b) for b in result.budgets})
        row.update({"judged@10": c.judged, "p50 ms": c.latency_p50, "p95 ms": c.latency_p95})
        rows.append(row)
    return pd.DataFrame(rows)


def _charts(result, frame: pd.DataFrame) -> None:

    long = pd.DataFrame([{"configuration": r["configuration"], "budget": b, "coverage": r[f"coverage@{b}"]}
                         for r in frame.to_dict("records") for b in result.budgets])
    st.subheader("Gold text covered at each context budget")
    charts.vega_lite(long, {"mark": {"point": True, "type": "line"}, "encoding": {
        "x": {"field": "budget", "scale": {"type": "log"}, "title": "context budget (tokens)", "type": "quantitative"},
        "y": {"field": "coverage", "scale": {"domain": [0, 1]}, "title": "share of gold characters",
              "type": "quantitative"},
        "color": {"field": "configuration", "type": "nominal"},
        "tooltip": [{"field": "configuration", "type": "nominal"}, {"field": "budget", "type": "quantitative"},
                    {"field": "coverage", "type": "quantitative"}]}}, width="stretch")
    measure = result.measures[0]
    points = frame[["configuration", measure, "p95 ms"]].rename(columns={measure: "quality", "p95 ms": "latency"})
    points = points.dropna()
    if points.empty:
        return
    points["frontier"] = pareto_frontier(points["quality"], points["latency"])
    st.subheader(f"{measure} against p95 latency")
    xy = {"x": {"field": "latency", "title": "p95 latency (ms)", "type": "quantitative"},
          "y": {"field": "quality", "title": measure, "type": "quantitative"}}
    charts.vega_lite(points, {"layer": [  # a dashed line along the frontier, then the configurations
        {"mark": {"color": "gray", "strokeDash": [4, 3], "type": "line"}, "encoding": xy,
         "transform": [{"filter": "datum.frontier"}]},
        {"mark": {"filled": True, "size": 90, "type": "point"}, "encoding": {
            **xy, "color": {"field": "configuration", "type": "nominal"},
            "shape": {"field": "frontier", "title": "on the Pareto frontier", "type": "nominal"},
            "tooltip": [{"field": "configuration", "type": "nominal"}, {"field": "quality", "type": "quantitative"},
                        {"field": "latency", "type": "quantitative"}, {"field": "frontier", "type": "nominal"}]}}]},
        width="stretch")
    on = points.loc[points["frontier"], "configuration"].tolist()
    st.caption("On the Pareto frontier (no other configuration is both better and faster): " + ", ".join(on))


def _unjudged(db, result) -> None:

    low = [c for c in result.cells if not c.skipped and c.judged < sweep.LOW_JUDGED]
    if not low:
        return
    st.subheader("Unjudged text")
    st.warning(f"{len(low)} configurations have less than {sweep.LOW_JUDGED:.0%} of their top 10 judged: their "
               "scores count unjudged chunks as not relevant. Pool them and judge the new pairs.")
    rows = [{"configuration": f"{c.chunking} × {c.retriever}", "judged@10": _num(c.judged),
             "unjudged pairs": len(c.unjudged)} for c in low]
    context.table(rows, key="experiments-unjudged")
    name = st.text_input("Pool name", "sweep-new")
    if st.button("Add their top 10 to a pool"):
        try:
            added = sweep.pool_unjudged(db, name, low, sweep.JUDGED_K)
        except WorkbenchError as exc:
            context.error(exc)
            return
        st.success(context.plain("Added to " + ", ".join(f"{p} ({len(r)} runs)" for p, r in added.items())
                                 + ": judge them on the Judge page." if added else "Nothing new to add."))


def _slices(db, result) -> None:

    cells = [c for c in result.cells if not c.skipped]
    tags = query_tags(db)
    st.subheader("Slices by query tag")
    if len(cells) < 2:
        st.info("Run at least two configurations to compare them slice by slice.")
        return
    if tags.empty:
        st.info("The queries carry no tags; import queries with a tags field to see slices.")
        return
    names = [f"{c.chunking} × {c.retriever}" for c in cells]
    left, right = st.columns(2)
    base = left.selectbox("Baseline", names, index=0)
    other = right.selectbox("Compared configuration", names, index=len(names) - 1)
    measure = st.selectbox("Measure for slices", result.measures)
    if base == other:
        st.info("Choose two different configurations.")
        return
    table = sweep.slice_lift(cells[names.index(base)], cells[names.index(other)], measure, tags)
    context.table([{"tag": r.tag, "queries": r.queries, "baseline": _num(r.base), "compared": _num(r.other),
                    "lift": f"{r.lift:+.3f}", "p-value": _num(r.p_value)} for r in table.itertuples()],
                  key="experiments-slices")
    st.caption("Paired randomization test over the queries of each slice (seed 0); small slices have little power.")


def _lift_text(lift: float) -> str:
    return "–" if lift is None or math.isnan(lift) else f"{lift:+.3f}"


def hybrid_slice_rows(result, chunking: str, measure: str, tags: pd.DataFrame) -> list[dict]:
    """One row per query tag (and ``(all)``): how far hybrid moves ``measure`` over dense and over
    BM25 on ``chunking``, each with its paired randomization test (seed 0) over the slice's queries.

    Uses the grid's own cells (:func:`workbench.services.evaluation.sweep.slice_lift`), so a comparison is
    shown only for the retrievers the grid ran; the missing one reads "–".
    """

    cells = {(c.chunking, c.retriever): c for c in result.cells if not c.skipped}
    hybrid = cells[(chunking, "hybrid")]
    parts = {}
    for retriever in ("dense", "bm25"):
        if (chunking, retriever) in cells:
            parts[retriever] = sweep.slice_lift(cells[(chunking, retriever)], hybrid, measure, tags).set_index("tag")
    first = next(iter(parts.values()))
    rows = []
    for tag in first.index:
        row = {"slice": tag, "queries": int(first.loc[tag, "queries"]), "hybrid": _num(first.loc[tag, "other"])}
        for retriever, label in (("dense", "dense"), ("bm25", "BM25")):
            frame = parts.get(retriever)
            hit = frame is not None and tag in frame.index
            row[f"lift over {label}"] = _lift_text(frame.loc[tag, "lift"]) if hit else "–"
            row[f"p over {label}"] = _num(frame.loc[tag, "p_value"]) if hit else "–"
        rows.append(row)
    return rows


def _hybrid_slices(db, result) -> None:
    """Hybrid against its own parts, slice by slice: the slices it moves next to how little the
    mean moves (the point of breaking results down by query tag)."""

    cells = {(c.chunking, c.retriever) for c in result.cells if not c.skipped}
    chunkings = [c for c in dict.fromkeys(c.chunking for c in result.cells)
                 if (c, "hybrid") in cells and ((c, "dense") in cells or (c, "bm25") in cells)]
    st.subheader("What hybrid search changes, slice by slice")
    if not chunkings:
        st.info("Run Hybrid together with Dense or BM25 on the same chunking to see which query slices "
                "hybrid search moves.")
        return
    tags = query_tags(db)
    if tags.empty:
        st.info("The queries carry no tags; import queries with a tags field to see slices.")
        return
    left, right = st.columns(2)
    chunking = left.selectbox("Chunking for the hybrid comparison", chunkings, index=0)
    measure = right.selectbox("Measure for the hybrid comparison", result.measures, index=0)
    rows = hybrid_slice_rows(result, chunking, measure, tags)
    context.table(rows, key="experiments-hybrid-slices")
    part = "dense" if (chunking, "dense") in cells else "BM25"
    column, p_column = f"lift over {part}", f"p over {part}"
    mean = next((r for r in rows if r["slice"] == "(all)"), None)
    moved = sorted((r for r in rows if r["slice"] != "(all)" and r[column] != "–"),
                   key=lambda r: abs(float(r[column])), reverse=True)[:3]
    if mean is not None and moved:
        st.caption(context.plain(
            f"Hybrid {column}: the mean over {mean['queries']} queries moves {mean[column]} "
            f"(p = {mean[p_column]}); the slices it moves most: "
            + "; ".join(f"{r['slice']} {r[column]} over {r['queries']} queries (p = {r[p_column]})"
                        for r in moved)
            + ". Paired randomization test per slice (seed 0); a slice of a few queries cannot reach "
              "a small p-value."))
    _lift_chart(rows, column)


def _lift_chart(rows: list[dict], column: str) -> None:
    data = pd.DataFrame([{"slice": r["slice"], "lift": float(r[column])} for r in rows if r[column] != "–"])
    if data.empty:
        return
    mean = data.loc[data["slice"] == "(all)", "lift"]
    bars = lazylibs.altair.Chart(data[data["slice"] != "(all)"]).mark_bar().encode(
        x=lazylibs.altair.X("lift:Q", title=column), y=lazylibs.altair.Y("slice:N", sort="-x", title=None), tooltip=["slice", "lift"])
    layers = bars
    if not mean.empty:
        layers = bars + lazylibs.altair.Chart(pd.DataFrame({"lift": [float(mean.iloc[0])]})).mark_rule(
            color="gray", strokeDash=[4, 3]).encode(x="lift:Q")
    st.altair_chart(layers, width="stretch")
    st.caption("Bars: the lift in each slice; dashed line: the lift of the mean over all queries.")


@context.page_run
def render() -> None:
    st.title("Experiments")
    st.caption("Compare chunkings and retrievers on the same labels, at the same context budget.")

    with context.project() as db:
        missing = sweep.missing_inputs(db)
        if missing:
            st.info(missing)
            return
        context.show_flash("experiments")
        choice = _form()
        if choice is not None:
            _run(db, choice)
        if PENDING in st.session_state:
            _run(db, {**st.session_state.pop(PENDING), "from_job": True})
        jobs_panel.panel(("sweep",), title="Grids in the background", fields=JOB_FIELDS, ended=_show_job,
                         finished_action=("Show the results", _show_job))
        result = st.session_state.get(KEY)
        if result is None:
            st.info("Choose chunkings and retrievers above and run the grid to compare them.")
            return
        for c in result.cells:
            if c.skipped:
                st.warning(context.plain(f"{c.chunking} × {c.retriever}: {c.skipped}"))
        frame = _cells_frame(result)
        if frame.empty:
            st.info("No configuration could run; see the reasons above.")
            return
        shown = frame.drop(columns=["chunking", "retriever"])
        context.table([{k: (v if isinstance(v, str) else _num(v, 2 if "ms" in k else 3)) for k, v in row.items()}
                       for row in shown.to_dict("records")], key="experiments-cells")
        winners = result.winners()
        context.table([{"budget (tokens)": b, "winner": f"{c.chunking} × {c.retriever}",
                        "coverage": _num(c.coverage[b])} for b, c in winners.items()], key="experiments-winners")
        _charts(result, frame)
        _unjudged(db, result)
        _slices(db, result)
        _hybrid_slices(db, result)
