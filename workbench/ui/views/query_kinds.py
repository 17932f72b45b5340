"""Query kinds: the queries one ranked list does not describe.

Three reports on the project, each with its own labels and measures:

* **Unanswerable queries**: which queries no passage answers (from their tags or an SME
  decision, recorded here), left out of recall@k, MRR and nDCG; how a run abstains on them at a
  score threshold (and over every threshold), and how generated answers abstain by their flag.
  Both rates are always shown together with balanced accuracy, so never abstaining cannot look good.
* **Access control**: restricted documents (allowed roles in their metadata) and every retrieved
  chunk a role may not see, per role and per query, for runs recorded as a role.
* **Multi-hop trajectories**: an agent's searches scored against evidence chains: per-hop
  recall@k, chain completeness and the hop where it completed, search decisions, steps.

Query texts, sub-queries, titles and ids are corpus data: tables and text go through
``html.escape`` (``context.table`` / ``context.escaped``), never markdown.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st

from workbench.core.rag.trajectories import flat_per_query
from workbench.errors import WorkbenchError
from workbench.services.evaluation import abstention, rbac, trajectories
from workbench.services.evaluation.query_kinds import DEMO_ROLE_RUNS, add_demo_role_runs, summary
from workbench.services.qrels import answerability
from workbench.ui import charts, context


def _pct(x) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _num(x, digits: int = 3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


@context.page_run
def render() -> None:

    st.title("Query kinds")
    st.caption("Queries that plain recall@k gets wrong: unanswerable questions, access-controlled "
               "content and multi-hop agents, each with its own labels and measures.")
    context.show_flash("query_kinds")
    with context.project() as db:
        info = summary(db)
    if not info["queries"]:
        st.info("No queries yet. Import queries on the Data page, then come back here.")
        context.page_link("data", "Go to Data", icon=":material/arrow_forward:")
        return
    _unanswerable(info)
    st.divider()
    _access(info)
    st.divider()
    _multihop(info)


# --- unanswerable -------------------------------------------------------------------------------
def _unanswerable(info: dict) -> None:

    st.header("Unanswerable queries")
    with context.project() as db:
        marks = answerability.query_answerability(db)
    marked = marks[marks["unanswerable"]]
    st.write(f"{len(marked)} of {len(marks)} queries are marked unanswerable. They are left out of "
             "recall@k, MRR and nDCG and scored here by whether the system declines to answer.")
    if marked.empty:
        st.info("No query is marked unanswerable. Tag a query “unanswerable” when importing queries, "
                "or record an SME decision below.")
    else:
        context.table([{"query": r.query_id, "text": r.text,
                        "marked by": "SME decision" if r.decided_by == "sme" else "query tag"}
                       for r in marked.itertuples(index=False)], key="unanswerable")
    _decision_form(marks)

    st.subheader("Runs: abstaining below a score threshold")
    st.caption("A run abstains on a query when its top score is below the threshold (or it returned "
               "nothing for the query).")
    if not info["runs"]:
        st.info("No runs yet. Run a retriever on Retrieve & Pool, then come back here.")
    else:
        cols = st.columns([2, 1, 1])
        run = cols[0].selectbox("Run", info["runs"], key="qk_run")
        tuned = cols[1].checkbox("Best threshold", value=True, key="qk_best",
                                 help="The threshold with the highest balanced accuracy on these same "
                                      "queries (optimistic: it is chosen on the data it is scored on).")
        threshold = None if tuned else cols[2].number_input("Threshold", value=1.0, key="qk_threshold")
        try:
            with context.project() as db:
                report = abstention.run_abstention(db, run, threshold)
        except WorkbenchError as exc:
            context.error(exc)
        else:
            _rates(report, key="qk_run_rates")
            _curve(report.curve)
            _per_query(report, marks, key="abstention_run")
            _answerable_ranking(run)

    st.subheader("Generated answers: the abstained flag")
    names = info["answer_sets"]
    if not names:
        st.info("No generated answers yet. Upload an answers file below (one line per query with "
                "query_id and abstained true/false, or the answer text).")
    else:
        name = st.selectbox("Answers", names, key="qk_answers")
        try:
            with context.project() as db:
                report = abstention.stored_answers_abstention(db, name)
        except WorkbenchError as exc:
            context.error(exc)
        else:
            _rates(report, key="qk_answer_rates")
            _per_query(report, marks, key="abstention_answers")
    with st.expander("Upload generated answers"):
        upload = st.file_uploader("Answers file (JSONL)", type=["jsonl", "json"], key="qk_answers_file")
        label = st.text_input("Name of these answers", key="qk_answers_name", placeholder="e.g. rag-v2")
        if st.button("Store the answers", key="qk_answers_store", disabled=upload is None or not label.strip()):
            try:
                frame = abstention.read_answers(upload.getvalue(), upload.name)
                with context.project() as db:
                    n = abstention.store_answers(db, label.strip(), frame)
            except WorkbenchError as exc:
                context.error(exc)
            else:
                context.flash("query_kinds", f"Stored {n} answers as {context.plain(label.strip())}.")
                st.rerun()


def _answerable_ranking(run: str) -> None:

    try:
        with context.project() as db:
            ranking = abstention.answerable_ranking(db, run)
    except WorkbenchError as exc:
        st.caption(f"Ranking measures over the answerable queries are not available: {context.plain(str(exc))}")
        return
    c = ranking.counts()
    st.caption(f"Ranking measures of this run over the answerable queries: {c['queries_evaluated']} scored, "
               f"{c['excluded_unanswerable']} unanswerable left out (nothing to recall), "
               f"{c['excluded_no_relevant']} without a relevant passage.")
    context.table([{"measure": m, "mean": _num(v)} for m, v in ranking.result.aggregate.items()],
                  key="answerable_ranking")


def _decision_form(marks: pd.DataFrame) -> None:

    with st.expander("Record an SME decision on a query"):
        st.caption("“No passage in the corpus answers this” makes a query unanswerable; the decision "
                   "wins over the query's tags. It is recorded with your annotator id.")
        qid = st.selectbox("Query", marks["query_id"].tolist(), key="qk_decide_query")
        text = marks.loc[marks["query_id"] == qid, "text"]
        if len(text):
            context.escaped(str(text.iloc[0]), css="margin-bottom: 0.5rem")
        verdict = st.radio("Decision", ["No passage in the corpus answers this", "The corpus answers this"],
                           key="qk_decide_verdict", horizontal=True)
        comment = st.text_input("Comment (optional)", key="qk_decide_comment")
        annotator = context.annotator()
        if not annotator:
            st.caption("Enter your annotator id in the sidebar to record a decision.")
        if st.button("Record the decision", key="qk_decide", disabled=not annotator):
            try:
                with context.project() as db:
                    answerability.mark_answerability(db, qid, answerable=verdict.startswith("The corpus"),
                                                     annotator=annotator, comment=comment or None)
            except WorkbenchError as exc:
                context.error(exc)
            else:
                context.flash("query_kinds", f"Recorded the decision on {context.plain(qid)}.")
                st.rerun()


def _rates(report, *, key: str) -> None:
    r = report.rates
    cols = st.columns(4)
    cols[0].metric("Abstains on unanswerable", _pct(r.abstention_rate),
                   help=f"{r.abstained_unanswerable} of {r.n_unanswerable} unanswerable queries (higher is better)")
    cols[1].metric("Abstains on answerable", _pct(r.false_abstention_rate),
                   help=f"{r.abstained_answerable} of {r.n_answerable} answerable queries (lower is better)")
    cols[2].metric("Balanced accuracy", _num(r.balanced_accuracy),
                   help="Mean of the two: 0.5 for a system that never (or always) abstains.")
    if report.kind == "run":
        cols[3].metric("Threshold", _num(report.threshold, 4),
                       help="best balanced accuracy on these queries" if report.threshold_source == "best"
                       else "as chosen")
    c = report.counts
    context.table([{"queries scored": c["queries"], "unanswerable": c["unanswerable"],
                    "answerable": c["answerable"],
                    ("without results" if report.kind == "run" else "without an answer"): c["missing_from_run"]}],
                  key=key)


def _curve(curve: pd.DataFrame) -> None:

    if len(curve) > 400:  # a readable chart (and a light page) whatever the number of queries
        curve = curve.iloc[np.unique(np.linspace(0, len(curve) - 1, 400).round().astype(int))]
    # Long form, one line per rate (what melt gives, built directly: melt is slow for this).
    rates = {"abstention_rate": "abstains on unanswerable", "false_abstention_rate": "abstains on answerable"}
    long = pd.DataFrame({"threshold": np.tile(curve["threshold"].to_numpy(), len(rates)),
                         "rate": [word for word in rates.values() for _ in range(len(curve))],
                         "share": np.concatenate([curve[column].to_numpy() for column in rates])})
    charts.vega_lite(long, {"mark": {"interpolate": "step-after", "point": True, "type": "line"}, "encoding": {
        "x": {"field": "threshold", "title": "Top-score threshold", "type": "quantitative"},
        "y": {"axis": {"format": "%"}, "field": "share", "title": "Share of queries", "type": "quantitative"},
        "color": {"field": "rate", "title": None, "type": "nominal"}}}, width="stretch")


def _per_query(report, marks: pd.DataFrame, *, key: str) -> None:
    texts = dict(zip(marks["query_id"], marks["text"]))
    frame = report.per_query.sort_values(["correct", "unanswerable"], ascending=[True, False])
    rows = []
    for r in frame.itertuples(index=False):
        row = {"query": r.query_id, "text": texts.get(r.query_id, ""),
               "kind": "unanswerable" if r.unanswerable else "answerable",
               "system": "abstained" if r.abstained else "answered", "right": "yes" if r.correct else "no"}
        if report.kind == "run":
            row["top score"] = _num(r.top_score, 4)
        rows.append(row)
    with st.expander(f"Per query, wrong ones first ({int((~frame['correct']).sum())} wrong)"):
        context.table(rows, key=key)


# --- access control -------------------------------------------------------------------------------
def _access(info: dict) -> None:

    st.header("Access control")
    restricted = info["restricted"]
    st.write("A document is restricted when its metadata lists the roles allowed to see it (field "
             "“roles”); every other document is public. A run recorded as a role must never return a "
             "restricted chunk that role may not see.")
    if restricted.empty:
        st.info("No restricted documents. Import documents whose metadata has a “roles” list on the "
                "Data page.")
        return
    context.table([{"document": r.doc_id, "title": r.title or "", "allowed roles": ", ".join(r.roles)}
                   for r in restricted.itertuples(index=False)], key="restricted")
    role_runs = dict(info["role_runs"])
    if not role_runs:
        demo_ready = "bm25" in info["runs"] and not any(n in info["runs"] for n, _ in DEMO_ROLE_RUNS.values())
        st.info("No run is recorded as a role yet. Check any run as a role below"
                + (", or add the demo's two role runs." if demo_ready else "."))
        if demo_ready and st.button("Add the demo's role runs", key="qk_demo_roles"):
            try:
                with context.project() as db:
                    made = add_demo_role_runs(db)
            except WorkbenchError as exc:
                context.error(exc)
            else:
                context.flash("query_kinds", f"Added {len(made)} role runs: {', '.join(made)}.")
                st.rerun()
    with st.expander("Check a run as a role"):
        cols = st.columns(2)
        run = cols[0].selectbox("Run", info["runs"], key="qk_rbac_run")
        role = cols[1].text_input("Role the run retrieved for", key="qk_rbac_role", placeholder="e.g. employee")
        if role.strip() and run:
            role_runs[role.strip()] = run
            if st.button("Record this run as the role", key="qk_rbac_record",
                         help="Remember the pair, so the check runs every time this page opens."):
                try:
                    with context.project() as db:
                        rbac.record_role_run(db, role, run)
                except WorkbenchError as exc:
                    context.error(exc)
                else:
                    context.flash("query_kinds", f"Recorded {context.plain(run)} as role {context.plain(role.strip())}.")
                    st.rerun()
    if not role_runs:
        return
    depth = st.number_input("Results looked at per query (0 = all)", min_value=0, value=0, step=1, key="qk_rbac_k")
    try:
        with context.project() as db:
            report = rbac.rbac_check(db, role_runs, k=int(depth) or None)
    except WorkbenchError as exc:
        context.error(exc)
        return
    total = sum(r.n_leaks for r in report.values())
    if total:
        st.error(f"{total} retrieved chunks reached a role that may not see them (zero expected).")
    else:
        st.success("No leak: no role received a chunk it may not see.")
    context.table([{"role": role, "run": r.run, "retrieved": r.retrieved, "leaks": r.n_leaks,
                    "leakage rate": _pct(r.rate),
                    "queries with a leak": int((r.per_query["leaks"] > 0).sum())}
                   for role, r in report.items()], key="rbac_roles")
    for role, r in report.items():
        if not r.n_leaks:
            continue
        with st.expander(f"Leaks of role {context.plain(role)} ({r.n_leaks})"):
            per_query = r.per_query[r.per_query["leaks"] > 0].sort_values("rate", ascending=False)
            context.table([{"query": q.query_id, "retrieved": q.retrieved, "leaks": q.leaks,
                            "leakage rate": _pct(q.rate)} for q in per_query.itertuples(index=False)],
                          key=f"rbac_queries_{role}")
            context.table([{"query": x.query_id, "rank": x.rank, "document": x.doc_id,
                            "chunk": x.chunk_id if isinstance(x.chunk_id, str) else ""}
                           for x in r.leaks.itertuples(index=False)], key=f"rbac_leaks_{role}")


# --- multi-hop ------------------------------------------------------------------------------------
def _multihop(info: dict) -> None:

    st.header("Multi-hop trajectories")
    st.write("An agent decides whether to search, what to search for and how many times. Each of its "
             "searches is scored against the query's evidence chain: the gold passages, each with the "
             "hop that should find it.")
    _multihop_uploads()
    if not info["chain_queries"]:
        st.info("No evidence chains yet. Upload an evidence chains file above (query_id, hop, doc_id, "
                "start, end per line).")
        return
    if not info["trajectory_sets"]:
        st.info(f"Evidence chains for {info['chain_queries']} queries, but no trajectories yet. Upload an "
                "agent's trajectories above.")
        return
    cols = st.columns([2, 1])
    name = cols[0].selectbox("Trajectories", info["trajectory_sets"], key="qk_traj")
    k = int(cols[1].number_input("Results looked at per hop (k)", min_value=1, value=5, step=1, key="qk_traj_k"))
    try:
        with context.project() as db:
            trajs = trajectories.stored_trajectories(db, name)
            report = trajectories.evaluate(trajs, trajectories.stored_chains(db), k=k)
    except WorkbenchError as exc:
        context.error(exc)
        return
    agg, c = report.aggregate, report.counts
    m = st.columns(4)
    m[0].metric("Chains complete", _pct(agg["completeness"]),
                help=f"{c['complete']} of {c['with_chain']} queries found every gold passage somewhere")
    m[1].metric("Completed at hop (mean)", _num(agg["completed_at_mean"], 2))
    m[2].metric("Search decisions right", _pct(agg["decision_accuracy"]),
                help=f"searched when evidence was needed: {_pct(agg['searched_when_needed'])}; "
                     f"skipped when not: {_pct(agg['skipped_when_not_needed'])}")
    m[3].metric("Steps used (mean)", _num(agg["steps_mean"], 2), help=f"searches: {_num(agg['searches_mean'], 2)}")
    context.table([{"hop": key.split("_")[0].removeprefix("hop"), f"recall@{k}": _num(v)}
                   for key, v in agg.items() if key.startswith("hop")], key="hop_recall")
    flat = flat_per_query(report)
    rows = []
    for r in flat.to_dict(orient="records"):
        row = {"query": r["query_id"], "steps": r["steps"], "searches": r["searches"],
               "chain": ("complete at hop " + str(r["completed_at"])) if r["complete"] is True
               else ("incomplete" if r["complete"] is False else "no chain"),
               "found": _pct(r["chain_found"]), "decision": "right" if r["decision_correct"] else "wrong"}
        row.update({key: _num(v, 2) for key, v in r.items() if key.startswith("hop")})
        rows.append(row)
    context.table(rows, key="trajectories")
    by_query = {t.query_id: t for t in trajs}
    chosen = st.selectbox("Show a trajectory", sorted(by_query), key="qk_traj_query")
    for i, hop in enumerate(by_query[chosen].hops, start=1):
        if not hop.searched:
            st.caption(f"Hop {i}: no search")
            continue
        context.escaped(f"Hop {i}: {hop.sub_query or ''}", css="font-weight: 600")
        context.table([{"rank": j, "document": x.doc_id, "chunk": x.chunk_id or "",
                        "span": "" if x.start is None else f"{x.start}–{x.end}"}
                       for j, x in enumerate(hop.results[:k], start=1)], key=f"hop_{i}")


def _multihop_uploads() -> None:

    with st.expander("Upload evidence chains or trajectories"):
        chains = st.file_uploader("Evidence chains (JSONL)", type=["jsonl", "json"], key="qk_chains_file")
        replace = st.checkbox("Replace the chains of queries that already have one", key="qk_chains_replace")
        if st.button("Store the chains", key="qk_chains_store", disabled=chains is None):
            try:
                with context.project() as db:
                    n = trajectories.import_chains(db, chains.getvalue(), chains.name, replace=replace)
            except WorkbenchError as exc:
                context.error(exc)
            else:
                context.flash("query_kinds", f"Stored {n} evidence passages.")
                st.rerun()
        upload = st.file_uploader("Trajectories (JSONL)", type=["jsonl", "json"], key="qk_traj_file")
        label = st.text_input("Name of these trajectories", key="qk_traj_name", placeholder="e.g. agent-v2")
        if st.button("Store the trajectories", key="qk_traj_store", disabled=upload is None or not label.strip()):
            try:
                with context.project() as db:
                    trajectories.import_trajectories(db, label, upload.getvalue(), upload.name)
            except WorkbenchError as exc:
                context.error(exc)
            else:
                context.flash("query_kinds", f"Stored the trajectories as {context.plain(label.strip())}.")
                st.rerun()
