"""Retrieve & Pool: chunk the corpus, run retrievers, build pools and read their statistics.

Every action is one unit of work on the project (``with context.project() as db``). The page
checks its own fields first (a name typed and free, something chosen) and shows any service
error in its own words (:mod:`workbench.ui.words`). After a success the form is cleared and the
selectors further down follow the item just built (a new chunking is chosen for retrieval, a
new run for pooling, a new pool for the statistics). Long work shows ``st.progress`` with the
rate measured as it runs. Corpus text is shown through escaped HTML only.

The runs table shows each run's per-query latency (p50/p95, as stored by the retrieval service
and the harness). "Run your own retriever" sends the queries to the team's retriever at an HTTP
address on this machine (:mod:`workbench.services.retrieval.harness`) and shows what was answered, what
failed (with the error) and the latency. It offers an address only, never a command to run: a
command typed into a web page would run any program on the server under the app's account, and
with the default sign-in (none, on this machine) every visitor is a lead, so a role check could
not keep it safe. Commands stay with the command line, where whoever types them already has the
server's shell.
"""

from __future__ import annotations

import html
import importlib.util
import json
import math
import tempfile
from pathlib import Path

import streamlit as st

from workbench.config import load_settings
from workbench.core.documents.chunking import STRATEGIES as CORE_STRATEGIES
from workbench.errors import WorkbenchError, render_text
from workbench.retrieval.bm25 import parse_stemmer, parse_stopwords
from workbench.retrieval.dense import DEFAULT_MODEL
from workbench.retrieval.hybrid import parse_weights
from workbench.services.browse import peek_pool
from workbench.services.chunking import DEFAULT_SIZE, create_chunking
from workbench.services.jobs import ChunkRequest, DenseRequest, HybridRequest, PoolRequest, documents
from workbench.services.pooling.pools import list_pools, pool_stats
from workbench.services.project.deletion import delete, plan_deletion
from workbench.services.project.status import chunking_coverage, run_coverage
from workbench.services.qrels.export import export_run
from workbench.services.retrieval.harness import (
    DEFAULT_TIMEOUT,
    collect_answers,
    plan_harness,
    query_choices,
    store_harness,
)
from workbench.services.retrieval.latency import latency_summary
from workbench.services.retrieval.registry import RETRIEVERS, make_options, run_retriever
from workbench.ui import context, jobs_panel
from workbench.ui.words import Field, cell, clean_rows, page_message, params_text, policy_words

# The core's strategies, with the one most corpora want first (the form's default).
STRATEGIES = ("section", *(s for s in CORE_STRATEGIES if s != "section"))
NEW_NAME = "required: a new name"
_SELECT = "_retrieve_select"

CHUNK_FIELDS = {"--name": Field("Name"), "--size": Field("Size", "number"),
                "--overlap": Field("Overlap", "number"), "--strategy": Field("Strategy", "choice")}
RUN_FIELDS = {"--name": Field("Run name"), "--chunking": Field("Chunking", "choice"),
              "--k": Field("Results per query", "number"), "--runs": Field("Runs to fuse", "choice"),
              "--model": Field("Model"), "--weights": Field("Weights"), "--rrf-k": Field("RRF k", "number"),
              "--stemmer": Field("Stemmer language"), "--stopwords": Field("Stopwords")}
HARNESS_FIELDS = {"--url": Field("Address of your retriever"), "--name": Field("Run name"),
                  "--queries": Field("Queries", "choice"),
                  "--chunking": Field("Chunking for span answers", "choice"),
                  "--timeout": Field("Seconds per query", "number")}
POOL_FIELDS = {"--name": Field("Pool name"), "--runs": Field("Runs", "choice"), "--depth": Field("Depth", "number"),
               "--add": Field("Add runs", "choice")}
ADD_FIELDS = {**POOL_FIELDS, "--name": Field("Pool", "choice"), "--runs": Field("Runs to add", "choice")}


def dense_available() -> bool:
    """Whether the optional ``dense`` extra (sentence-transformers) is installed."""
    return importlib.util.find_spec("sentence_transformers") is not None


def _state() -> dict:
    """Chunkings and runs with the documents they cover, pools, and the queries "Run your own
    retriever" offers (or the error reading them) (one read of the project)."""

    with context.project() as db:
        runs = run_coverage(db)
        latency = latency_summary(db, None).set_index("run")
        try:
            harness_queries = query_choices(db)
        except WorkbenchError as exc:
            harness_queries = exc
        return {"chunkings": chunking_coverage(db), "runs": runs, "pools": list_pools(db), "latency": latency,
                "harness_queries": harness_queries, "documents": documents(db)}


def _follow(**selections) -> None:
    """Choose these values in the named selectors on the next run (after ``st.rerun``)."""
    st.session_state.setdefault(_SELECT, {}).update(selections)


def _apply_selections() -> None:
    for key, value in st.session_state.pop(_SELECT, {}).items():
        st.session_state[key] = value


def _attempt(action, success, *, fields: dict, clear: tuple[str, ...] = (), follow: dict | None = None) -> None:
    """Run ``action(db)`` in one unit of work; on success clear ``clear``, select ``follow``
    (values may be callables of the result) and rerun; on failure show the error in page words."""
    try:
        with context.project() as db:
            result = action(db)
    except WorkbenchError as exc:
        context.error(exc, fields)
        return
    context.flash("retrieve", success(result))
    for key in clear:
        st.session_state.pop(key, None)
    _follow(**{k: (v(result) if callable(v) else v) for k, v in (follow or {}).items()})
    st.rerun()


def _background(kind: str, size: int | None, request, *, fields: dict, clear: tuple[str, ...] = ()) -> bool:
    """Start ``request`` as a background job when its size asks for one (:func:`jobs_panel.in_background`);
    True when the page handed the work to a job (started, or refused with the error shown)."""
    if not jobs_panel.in_background(kind, size):
        return False
    if jobs_panel.launch(request, flash_key="retrieve", fields=fields):
        for key in clear:
            st.session_state.pop(key, None)
        st.rerun()
    return True


def _run_rows(state: dict, runs) -> int:
    """Rows of the chosen runs: the size of a pooling or fusion job."""
    frame = state["runs"]
    if not len(frame):
        return 0
    return int(frame.loc[frame["name"].isin(list(runs)), "rows"].fillna(0).sum())


def _names(frame) -> list[str]:
    return frame["name"].tolist() if len(frame) else []


def _refuse_name(name: str, taken: list[str], what: str, label: str) -> bool:
    """Show the page's own error for an empty or taken name; True when refused."""
    if not name:
        st.error(f"Type a “{label}” for the new {what}.")
        return True
    if name in taken:
        st.error(context.plain(f"A {what} named {name} already exists; type another “{label}”."))
        return True
    return False


def _chunk_section(state: dict) -> None:

    st.subheader("1. Chunk")
    frame = state["chunkings"]
    if len(frame):
        context.table(
            [{"chunking": c.name, "strategy": c.strategy, "parameters": params_text(c.params),
              "chunks": f"{int(c.chunks):,}", "documents": f"{int(c.documents):,} of {int(c.total_documents):,}"}
             for c in frame.itertuples(index=False)], key="chunkings")
        for c in frame.itertuples(index=False):
            if not c.complete:
                st.warning(context.plain(f"Chunking {c.name} covers {int(c.documents):,} of "
                                         f"{int(c.total_documents):,} documents; create a new chunking to cover them all."))
    else:
        st.info("No chunking yet. Create one below before retrieving.")
    with st.form("chunk_form"):
        cols = st.columns(4)
        name = cols[0].text_input("Name", key="chunk_name", placeholder=NEW_NAME)
        strategy = cols[1].selectbox("Strategy", STRATEGIES, key="chunk_strategy")
        size = cols[2].number_input("Size (0 = default)", min_value=0, value=0, step=100, key="chunk_size",
                                    help="fixed: characters (default %(fixed)d); section: max characters "
                                         "(default %(section)d); sentences: sentences (default %(sentences)d). "
                                         "The document strategy ignores it." % DEFAULT_SIZE)
        overlap = cols[3].number_input("Overlap", min_value=0, value=0, step=10, key="chunk_overlap",
                                       help="The document strategy ignores it.")
        if st.form_submit_button("Create chunking"):
            name = name.strip()
            if _refuse_name(name, _names(frame), "chunking", "Name"):
                return
            doc = strategy == "document"

            request = ChunkRequest(name, strategy, size=None if doc or not size else int(size),
                                   overlap=None if doc else int(overlap))
            if _background("chunk", state["documents"], request, fields=CHUNK_FIELDS,
                           clear=("chunk_name", "chunk_size", "chunk_overlap")):
                return
            with st.spinner("Chunking every document…"):
                _attempt(
                    lambda db: create_chunking(db, name, strategy, size=None if doc or not size else int(size),
                                               overlap=None if doc else int(overlap), progress=context.progress),
                    lambda s: context.plain(f"Chunking {s.name}: {s.chunks:,} chunks from {s.documents:,} documents."),
                    fields=CHUNK_FIELDS, clear=("chunk_name", "chunk_size", "chunk_overlap"),
                    follow={"bm25_chunking": name, "dense_chunking": name},
                )
    jobs_panel.panel(("chunk",), title="Chunkings in the background", fields=CHUNK_FIELDS)


def _ms(value) -> str:
    """Milliseconds as the page shows them; None or NaN (no latency stored) in words."""
    return "not recorded" if value is None or math.isnan(value) else f"{value:,.1f} ms"


def _run_done(s) -> str:
    latency = (f" Latency per query: p50 {_ms(s.latency_p50_ms)}, p95 {_ms(s.latency_p95_ms)}."
               if not math.isnan(s.latency_p95_ms) else "")
    return context.plain(f"Run {s.name} ({s.retriever}): {s.rows:,} rows for {s.queries:,} queries "
                         f"in {s.seconds:.1f} s.{latency}")


# Run parameters that the latency columns already show (or that only explain them).
LATENCY_PARAMS = ("latency", "latency_ms", "latency_p50_ms", "latency_p95_ms")


def _shown_params(params):
    """A harness run's chosen query ids as their count (the ids stay in the stored parameters)."""
    if isinstance(params, dict) and isinstance(params.get("queries"), list):
        n = len(params["queries"])
        return {**params, "queries": f"{n:,} chosen"}
    return params


def _runs_table(runs, latency) -> None:
    def at(run: str, column: str) -> str:
        return _ms(float(latency.at[run, column])) if run in latency.index else "not recorded"

    context.table(
        [{"run": r.name, "retriever": r.retriever, "chunking": cell(r.chunking),
          "parameters": params_text(_shown_params(r.params),
                                    skip=("retriever", "chunking", "failures", *LATENCY_PARAMS)),
          "queries": f"{int(r.queries):,}", "rows": f"{int(r.rows):,}",
          "documents": (f"{int(r.documents):,} of {int(r.total_documents):,}" if r.known
                        else "not recorded"),
          "latency p50": at(r.name, "p50_ms"), "latency p95": at(r.name, "p95_ms")}
         for r in runs.itertuples(index=False)], key="runs")
    for r in runs.itertuples(index=False):
        if not r.complete:
            st.warning(context.plain(
                f"Run {r.name} covers {int(r.documents):,} of {int(r.total_documents):,} documents: documents "
                f"imported after it was made are not in it. Run the retriever again to include them."))


def _retrieve(kind: str, name: str, chunking: str | None, k: int, clear: tuple[str, ...], **options) -> None:
    """Run retriever ``kind`` of the registry into run ``name``; on success the new run is chosen
    for pooling."""

    def action(db):
        return run_retriever(db, kind, name=name, chunking=chunking, k=k, options=make_options(kind, options),
                             progress=context.progress)

    _attempt(action, _run_done, fields=RUN_FIELDS, clear=clear, follow={"pool_runs": [name], "pool_add_runs": [name]})


def _bm25_form(spec, chunkings: list[str], taken: list[str]) -> None:

    with st.form("bm25_form"):
        cols = st.columns(4)
        chunking = cols[0].selectbox("Chunking", chunkings, key="bm25_chunking")
        name = cols[1].text_input("Run name", key="bm25_name", placeholder=NEW_NAME)
        k = cols[2].number_input("Results per query", min_value=1, value=100, key="bm25_k")
        stemmer = cols[3].text_input("Stemmer language", value="english", key="bm25_stemmer",
                                     help="A Snowball language, or none to disable stemming.")
        stopwords = st.text_input("Stopwords", value="english", key="bm25_stopwords",
                                  help="A language, none, or your own comma-separated words.")
        if st.form_submit_button("Run BM25"):
            name = name.strip()
            if chunking is None:
                st.error("Create a chunking first (section 1, Chunk).")
                return
            if _refuse_name(name, taken, "run", "Run name"):
                return
            try:  # checked before the project is opened
                parse_stemmer(stemmer), parse_stopwords(stopwords)
            except WorkbenchError as exc:
                context.error(exc, RUN_FIELDS)
                return
            _retrieve(spec.name, name, chunking, int(k), ("bm25_name",), stemmer=stemmer, stopwords=stopwords)


#: A dense run is a background job (:mod:`workbench.services.jobs`).
DENSE_IN_BACKGROUND = ("A dense run works in the background: you may go to another page or reload this one, "
                       "its progress stays below. Stop keeps the chunk embeddings already written; Resume "
                       "continues from them.")


def _dense_form(spec, chunkings: list[str], taken: list[str]) -> None:

    if not dense_available():
        st.info("Dense retrieval needs the optional dense extra (sentence-transformers and PyTorch), "
                "which this installation lacks. Whoever runs the app installs it with "
                "pip install 'relevance-workbench[dense]' (make run does this) and restarts the app.")
        return
    with st.form("dense_form"):
        cols = st.columns(4)
        chunking = cols[0].selectbox("Chunking", chunkings, key="dense_chunking")
        name = cols[1].text_input("Run name", key="dense_name", placeholder=NEW_NAME)
        k = cols[2].number_input("Results per query", min_value=1, value=100, key="dense_k")
        model = cols[3].text_input("Model (name or local path)", value=DEFAULT_MODEL, key="dense_model")
        st.caption("Chunk embeddings are cached per chunking and model: running again only encodes the queries.")
        st.caption(DENSE_IN_BACKGROUND)
        if st.form_submit_button("Run dense"):
            name = name.strip()
            if chunking is None:
                st.error("Create a chunking first (section 1, Chunk).")
                return
            if _refuse_name(name, taken, "run", "Run name"):
                return

            request = DenseRequest(chunking, name, k=int(k), model=model.strip() or None)
            if _background("dense", None, request, fields=RUN_FIELDS, clear=("dense_name",)):
                return
            _retrieve(spec.name, name, chunking, int(k), ("dense_name",), model=model.strip())


def _hybrid_form(spec, chunkings: list[str], taken: list[str], state: dict | None = None) -> None:

    run_names = taken  # it fuses stored runs
    with st.form("hybrid_form"):
        cols = st.columns(4)
        chosen = cols[0].multiselect("Runs to fuse", run_names, key="hybrid_runs", placeholder="choose two or more")
        name = cols[1].text_input("Run name", key="hybrid_name", placeholder=NEW_NAME)
        k = cols[2].number_input("Results per query", min_value=1, value=100, key="hybrid_k")
        rrf_k = cols[3].number_input("RRF k", min_value=0.0, value=60.0, key="hybrid_rrf_k")
        weights = st.text_input("Weights", key="hybrid_weights", placeholder="optional: equal weights",
                                help="1,0.5 in the order of the runs chosen, or bm25=1,dense=0.5.")
        if st.form_submit_button("Fuse runs"):
            name = name.strip()
            if len(chosen) < 2:
                st.error("Choose at least two “Runs to fuse”.")
                return
            if _refuse_name(name, taken, "run", "Run name"):
                return
            try:
                parsed = parse_weights(weights, list(chosen))
            except WorkbenchError as exc:
                context.error(exc, RUN_FIELDS)
                return

            request = HybridRequest(name, tuple(chosen), k=int(k), rrf_k=float(rrf_k), weights=parsed)
            if _background("hybrid", _run_rows(state, chosen) if state else 0, request, fields=RUN_FIELDS,
                           clear=("hybrid_name", "hybrid_runs", "hybrid_weights")):
                return
            _retrieve(spec.name, name, None, int(k), ("hybrid_name", "hybrid_runs", "hybrid_weights"),
                      runs=tuple(chosen), rrf_k=float(rrf_k), weights=weights)


def _retrieve_section(state: dict) -> None:
    st.subheader("2. Retrieve")
    runs = state["runs"]
    if len(runs):
        _runs_table(runs, state["latency"])
        st.caption("Latency is per query: p50 is the median, p95 the time 95% of queries stay under.")
    else:
        st.info("No run yet. Run a retriever below on a chunking.")
    chunkings, taken = _names(state["chunkings"]), _names(runs)

    # One tab per retriever of the registry the page offers (its own form, or one generated from
    # its parameters), then the team's own retriever.
    specs = [spec for spec in RETRIEVERS.values() if spec.page]
    *tabs, own_tab = st.tabs([spec.title for spec in specs] + ["Run your own retriever"])
    for spec, tab in zip(specs, tabs):
        with tab:
            if spec.name == "hybrid":  # its background threshold counts the fused runs' rows
                _hybrid_form(spec, chunkings, taken, state)
            else:
                FORMS.get(spec.name, _generic_form)(spec, chunkings, taken)
    jobs_panel.panel(("dense", "hybrid"), title="Runs in the background", fields=RUN_FIELDS)
    with own_tab:
        _harness_form(chunkings, taken, state["harness_queries"])


def _label(parameter) -> str:
    return parameter.name.replace("_", " ").capitalize()


def _generic_form(spec, chunkings: list[str], taken: list[str]) -> None:
    """The form of a retriever without a form of its own, from its registry parameters: a
    chunking (when it takes one), the run name, results per query, then one input per parameter
    (a list of names: the stored runs to choose from)."""

    prefix = spec.name.replace("-", "_")
    with st.form(f"{prefix}_form"):
        cols = st.columns(3)
        chunking = (cols[0].selectbox("Chunking", chunkings, key=f"{prefix}_chunking")
                    if spec.chunking == "required" else None)
        name = cols[1].text_input("Run name", key=f"{prefix}_name", placeholder=NEW_NAME)
        k = cols[2].number_input("Results per query", min_value=1, value=100, key=f"{prefix}_k")
        values = {}
        for p in spec.parameters:
            key, label = f"{prefix}_{p.name}", _label(p)
            words = render_text(p.help, name=lambda field: f"“{field.replace('_', ' ').capitalize()}”")
            if p.type is tuple:
                values[p.name] = tuple(st.multiselect(label, taken, key=key, help=words))
            elif p.choices:
                choices = list(p.choices)
                values[p.name] = st.selectbox(label, choices, key=key, help=words,
                                              index=choices.index(p.default) if p.default in choices else None)
            elif p.type is bool:
                values[p.name] = st.checkbox(label, value=bool(p.default), key=key, help=words)
            elif p.type in (int, float):
                values[p.name] = st.number_input(label, value=p.type(p.default or 0), key=key, help=words)
            else:
                values[p.name] = st.text_input(label, value=p.default or "", key=key, help=words).strip() or None
        if st.form_submit_button(f"Run {spec.title}"):
            name = name.strip()
            if spec.chunking == "required" and chunking is None:
                st.error("Create a chunking first (section 1, Chunk).")
                return
            if _refuse_name(name, taken, "run", "Run name"):
                return
            missing = [_label(p) for p in spec.parameters if p.required and not values[p.name]]
            if missing:
                st.error(f"Give “{missing[0]}”.")
                return
            _retrieve(spec.name, name, chunking, int(k), (f"{prefix}_name",), **values)


#: Retrievers whose form the page lays out itself; any other retriever the registry offers on the
#: page gets :func:`_generic_form`.
FORMS = {"bm25": _bm25_form, "dense": _dense_form, "hybrid": _hybrid_form}


ALL_QUERIES = "all"
_HARNESS_RESULT = "_harness_result"


def _harness_form(chunkings: list[str], taken: list[str], queries) -> None:
    """Send the queries to the team's retriever at a local HTTP address; store its run.
    ``queries``: the query ids and the ids per tag it offers, or the error reading them."""

    st.markdown("**Run your own retriever**: the workbench sends each query to your retriever's address "
                "on this machine and stores its ranked answers as a run, with each query's latency. "
                "Queries that fail are listed with their error; they are never stored as empty answers.")
    with st.expander("What your retriever receives and answers"):
        st.markdown(
            "Each query arrives as an HTTP POST with the JSON body `{\"query_id\": ..., \"query\": ...}`. "
            "Answer with a JSON list of results, each with a score (higher is better; equal scores keep "
            "your order), all of one kind:\n\n"
            "- a chunk of a chunking here: `{\"chunk_id\": ..., \"score\": ...}`\n"
            "- a passage of a document: `{\"doc_id\": ..., \"start\": ..., \"end\": ..., \"score\": ...}` "
            "(choose the “Chunking for span answers” it is placed on)\n"
            "- a whole document: `{\"doc_id\": ..., \"score\": ...}`\n\n"
            "Only addresses on this machine are accepted (127.0.0.1 or localhost).")
    if isinstance(queries, WorkbenchError):
        context.error(queries, HARNESS_FIELDS)
        return
    ids, by_tag = queries
    if not ids:
        st.info("No queries yet. Import queries on the Data page first.")
        return
    options = [ALL_QUERIES, *by_tag]
    with st.form("harness_form"):
        cols = st.columns([2, 1])
        url = cols[0].text_input("Address of your retriever", key="harness_url",
                                 placeholder="http://127.0.0.1:8000/search")
        name = cols[1].text_input("Run name", key="harness_name", placeholder=NEW_NAME)
        cols = st.columns([1, 2])
        which = cols[0].selectbox(
            "Queries", options, key="harness_queries",
            format_func=lambda o: f"All queries ({len(ids):,})" if o == ALL_QUERIES
            else f"Tagged {o} ({len(by_tag[o]):,})")
        picked = cols[1].multiselect("Or only these queries", ids, key="harness_ids",
                                     placeholder="optional: overrides “Queries”")
        cols = st.columns(2)
        chunking = cols[0].selectbox("Chunking for span answers", [None, *chunkings], key="harness_chunking",
                                     format_func=lambda c: "none: answers name chunks or documents" if c is None else c)
        timeout = cols[1].number_input("Seconds per query", min_value=1.0, value=float(DEFAULT_TIMEOUT), step=5.0,
                                       key="harness_timeout",
                                       help="A query not answered in this time counts as failed.")
        if st.form_submit_button("Start"):
            url, name = url.strip(), name.strip()
            if not url:
                st.error("Type the “Address of your retriever”, like http://127.0.0.1:8000/search.")
                return
            if _refuse_name(name, taken, "run", "Run name"):
                return
            chosen = list(picked) if picked else (ALL_QUERIES if which == ALL_QUERIES else by_tag[which])

            def progress(_description, total, unit):
                return context.progress("Sending the queries to your retriever", total, unit)

            try:
                # The project is open only to check and to store: while the queries are out (up
                # to "Seconds per query" each) other pages and the judge can use it.
                with context.project() as db:
                    plan = plan_harness(db, name, queries=chosen, url=url, timeout=float(timeout),
                                        chunking=chunking)
                collected = collect_answers(plan, progress)
                with context.project() as db:
                    summary = store_harness(db, plan, collected)
            except WorkbenchError as exc:
                context.error(exc, HARNESS_FIELDS)
                return
            st.session_state[_HARNESS_RESULT] = summary
            for key in ("harness_name", "harness_ids"):
                st.session_state.pop(key, None)
            _follow(pool_runs=[name], pool_add_runs=[name])
            st.rerun()
    _harness_result()


def _harness_result() -> None:
    """The last harness run of this session: answered and failed queries, latency."""
    s = st.session_state.get(_HARNESS_RESULT)
    if s is None:
        return
    where = f", chunks of {s.chunking}" if s.chunking else (", documents" if s.level == "doc" else "")
    text = (f"Run {s.name}: {s.answered:,} of {s.queries:,} queries answered, {s.rows:,} results stored{where}. "
            f"Latency per answered query: p50 {_ms(s.latency_ms_p50)}, p95 {_ms(s.latency_ms_p95)}.")
    (st.warning if s.failed else st.success)(context.plain(text))
    if s.failed:
        st.markdown(f"**{len(s.failed):,} failed {'query' if len(s.failed) == 1 else 'queries'}** "
                    "(stored with the run, without results)")
        context.table([{"query": f["query_id"], "error": f["error"],
                        "time to fail": _ms(f.get("latency_ms"))}
                       for f in s.failed], key="harness_failures")


def _pool_section(state: dict) -> None:
    from workbench.services.pooling.request import PoolRequest

    st.subheader("3. Pool")
    pools = state["pools"]
    if len(pools):
        context.table(
            [{"pool": p.name, "level": p.level, "chunking": cell(p.chunking), "depth": int(p.depth),
              "runs": ", ".join(_json_list(p.runs)), "pairs": f"{int(p.pairs):,}", "queries": f"{int(p.queries):,}"}
             for p in pools.itertuples(index=False)], key="pools")
    else:
        st.info("No pool yet. Build one below from one or more runs.")
    run_names = _names(state["runs"])
    default_depth = int(load_settings().get("pool", "depth"))
    new_tab, add_tab = st.tabs(["New pool", "Add runs to a pool"])
    with new_tab, st.form("pool_form"):
        cols = st.columns(3)
        name = cols[0].text_input("Pool name", key="pool_name", placeholder=NEW_NAME)
        chosen = cols[1].multiselect("Runs", run_names, key="pool_runs", placeholder="choose one or more")
        depth = cols[2].number_input("Depth", min_value=1, value=default_depth, key="pool_depth",
                                     help="Each run's top results per query that enter the pool.")
        if st.form_submit_button("Build pool"):
            name = name.strip()
            request = _checked(PoolRequest(name, tuple(chosen), int(depth)), POOL_FIELDS)
            if request is not None and not _background("pool", _run_rows(state, chosen), _pool_request(request),
                                                       fields=POOL_FIELDS, clear=("pool_name", "pool_runs")):
                _attempt(lambda db: request.run(db, progress=context.progress),
                         lambda s: context.plain(f"Pool {s.name}: {s.pairs_total:,} pairs over {s.queries:,} queries."
                                                 + _notes(s)),
                         fields=POOL_FIELDS, clear=("pool_name", "pool_runs"),
                         follow={"stats_pool": name, "pool_add_name": name})
    with add_tab, st.form("pool_add_form"):
        cols = st.columns(2)
        pool = cols[0].selectbox("Pool", _names(pools), key="pool_add_name")
        chosen = cols[1].multiselect("Runs to add", run_names, key="pool_add_runs", placeholder="choose one or more")
        if st.form_submit_button("Add runs"):
            if pool is None:
                st.error("Build a pool first (New pool).")
            elif ((request := _checked(PoolRequest(pool, tuple(chosen), add=True), ADD_FIELDS)) is not None
                  and not _background("pool", _run_rows(state, chosen), _pool_request(request), fields=ADD_FIELDS,
                                      clear=("pool_add_runs",))):
                _attempt(lambda db: request.run(db),
                         lambda s: context.plain(f"Pool {s.name}: {s.pairs_added:,} new pairs; {s.pairs_total:,} in total."
                                                 + _notes(s)),
                         fields=ADD_FIELDS, clear=("pool_add_runs",),
                         follow={"stats_pool": pool})
    jobs_panel.panel(("pool",), title="Pools in the background", fields=POOL_FIELDS)


def _pool_request(request):
    """The background job of a checked pooling request (the same fields)."""

    return PoolRequest(request.name, request.runs, request.depth, add=request.add)


def _sentence(text: str) -> str:

    text = page_message(text)
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _notes(summary) -> str:
    """The pool service's coverage notes (runs that miss documents), as sentences in page words."""

    notes = [page_message(n) for n in getattr(summary, "notes", ()) or ()]
    return "".join(f" Note: {n[0].upper() + n[1:]}." for n in notes)


def _checked(request, fields: dict):
    """``request.check()``, or None with its refusal shown as a sentence in the page's words."""

    try:
        return request.check()
    except WorkbenchError as exc:
        st.error(context.plain(_sentence(page_message(exc, fields))))
        return None


def _json_list(value) -> list[str]:

    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError):
        return [str(value)]
    return [str(v) for v in parsed] if isinstance(parsed, list) else [str(parsed)]


def _stats_section(state: dict) -> None:

    st.subheader("4. Pool statistics")
    pools = state["pools"]
    if not len(pools):
        st.info("No pool yet: build one in section 3, Pool.")
        return
    cols = st.columns(2)
    pool = cols[0].selectbox("Pool", _names(pools), key="stats_pool")
    k = cols[1].number_input("Cutoff k (judged@k, leave-one-out)", min_value=1, value=10, key="stats_k")
    settings = load_settings()
    try:
        with context.project() as db:
            stats = pool_stats(db, pool, k=int(k), min_overlap=settings.get("evaluation", "min_overlap"),
                               relevance_threshold=settings.get("evaluation", "relevance_threshold"))
    except WorkbenchError as exc:
        context.error(exc)
        return
    s = stats.summary
    for note in s.get("coverage_notes", ()) or ():
        st.warning(context.plain(_sentence(note)))
    metrics = st.columns(4)
    metrics[0].metric("Pairs", f"{s['pairs']:,}")
    metrics[1].metric("Queries", f"{s['queries']:,}")
    metrics[2].metric("Judged pairs", f"{s['judged_pairs']:,}")
    metrics[3].metric("Mean pool size", f"{s['mean_pool_size']:.1f}")
    if s.get("qrels_policy"):  # which labels count as "judged": the one rule, stated
        st.caption(context.plain("Judged by the " + policy_words(s["qrels_policy"])))

    st.markdown("**Pool size per query**")
    _bar_chart(stats.sizes, "query_id", ["pool_size"], whole=True)
    left, right = st.columns(2)
    with left:
        st.markdown("**Contributions per run** (pooled, and found by this run only)")
        _bar_chart(stats.contributions, "run_id", ["pooled", "unique"], whole=True)
        st.dataframe(_clean(stats.contributions, stats.k), hide_index=True, width="stretch")
    with right:
        st.markdown(f"**judged@{stats.k} per run** (share of the top {stats.k} with a label)")
        _bar_chart(stats.judged, "run_id", ["judged_at_k"])
        st.dataframe(_clean(stats.judged, stats.k), hide_index=True, width="stretch")
    st.markdown("**Pairwise overlap of pooled pairs**")
    if len(stats.overlap):
        st.dataframe(_clean(stats.overlap, stats.k), hide_index=True, width="stretch")
    else:
        st.caption("One run only: no overlap to show.")
    st.markdown(f"**Leave-one-run-out** (P@{stats.k} with and without the run's unique pairs judged)")
    st.dataframe(_clean(stats.leave_one_out, stats.k), hide_index=True, width="stretch")

    with st.expander("Peek at a query's pool (what a judge sees, in judging order)"):
        # A fragment: choosing a query reruns the peek alone, not the statistics above it.
        st.fragment(_peek)(pool, stats.sizes["query_id"].tolist())


def _bar_chart(frame, x: str, columns: list[str], *, whole: bool = False) -> None:
    """The bar chart ``st.bar_chart`` draws (the same Vega-Lite spec: ordinal x, one bar per
    column side by side, tooltips, zoom by scales), given as a spec: ``st.bar_chart`` builds it
    through Altair and validates it against the Vega-Lite schema on every run (CPU per chart:
    docs/performance.md). ``whole``: counts (axis ticks at whole numbers)."""
    y_axis = {"grid": True, **({"tickMinStep": 1} if whole else {})}
    x_enc = {"axis": {"grid": False}, "field": x, "scale": {}, "title": "", "type": "ordinal"}
    if len(columns) == 1:
        data = frame[[x, columns[0]]]
        encoding = {"tooltip": [{"field": x, "type": "nominal"}, {"field": columns[0], "type": "quantitative"}],
                    "x": x_enc,
                    "y": {"axis": y_axis, "field": columns[0], "scale": {}, "title": "", "type": "quantitative"}}
    else:
        data = frame.melt(id_vars=[x], value_vars=columns, var_name="series", value_name="value")
        encoding = {
            "color": {"field": "series", "legend": {"titlePadding": 5, "offset": 5, "orient": "bottom"},
                      "title": " ", "type": "nominal"},
            "tooltip": [{"field": x, "type": "nominal"}, {"field": "value", "title": "value", "type": "quantitative"},
                        {"field": "series", "title": "color", "type": "nominal"}],
            "x": x_enc, "xOffset": {"field": "series"},
            "y": {"axis": y_axis, "field": "value", "scale": {}, "stack": False, "title": "", "type": "quantitative"}}
    st.vega_lite_chart(data, {"mark": {"type": "bar"}, "encoding": encoding,
                              "params": [{"name": "param_1", "select": {"type": "interval", "encodings": ["x", "y"]},
                                          "bind": "scales"}],
                              "width": 0, "height": 0,  # as st.bar_chart: the element sizes it
                              "autosize": {"type": "fit", "contains": "padding"}}, width="stretch")


COLUMN_WORDS = {"run_id": "run", "run_a": "run A", "run_b": "run B", "judged_at_k": "judged@k",
                "unique_pairs": "unique pairs", "unique_judged": "unique pairs labelled",
                "metric_with": "P@k with", "metric_without": "P@k without", "jaccard": "Jaccard"}


def _clean(frame, k: int | None = None) -> list[dict]:
    """Rows without NaN/None (empty cells) and with column names in words; numbers stay numbers."""

    words = {c: COLUMN_WORDS.get(c, c.replace("_", " ")).replace("@k", f"@{k}" if k else "@k") for c in frame.columns}
    return clean_rows(frame.rename(columns=words), params=())


def _peek(pool: str, query_ids: list[str]) -> None:

    query = st.selectbox("Query", query_ids, key="peek_query")
    if query is None:
        return
    settings = load_settings()
    with context.project() as db:
        peek = peek_pool(db, pool, query, limit=5, min_overlap=settings.get("evaluation", "min_overlap"))
    parts = [f'<div style="font-weight: 600">{html.escape(peek["query_id"])}: {html.escape(peek["query"])}</div>']
    if cell(peek["description"]) != "":
        parts.append(f'<div style="color: rgba(49, 51, 63, 0.7); font-size: 0.9em">'
                     f'{html.escape(str(peek["description"]))}</div>')
    st.html("".join(parts))
    if peek.get("policy"):
        st.caption(context.plain("Grades by the " + policy_words(peek["policy"])))
    for row in peek["pairs"].itertuples(index=False):
        title = cell(row.title)
        item = row.chunk_id if cell(row.chunk_id) != "" else row.doc_id
        grade = "no label yet" if cell(row.grade) == "" else f"grade {int(row.grade)}"
        head = (f"priority {row.priority} · {title or row.doc_id} · {item} · {grade} · RRF {row.rrf_score:.4f}")
        st.html(
            f'<div style="margin-top: 0.8em; color: rgba(49, 51, 63, 0.75); font-size: 0.875em">{html.escape(head)}</div>'
            f'<div style="white-space: pre-wrap; font-size: 0.9em; border-left: 3px solid #ddd; padding-left: 0.8em; '
            f'max-height: 24em; overflow-y: auto">{html.escape(str(cell(row.text)))}</div>'
        )


KIND_WORDS = {"chunking": "chunking", "run": "run", "pool": "pool"}
# Selectors that may hold the name of something deleted: reset after a deletion.
SELECTOR_KEYS = ("bm25_chunking", "dense_chunking", "hybrid_runs", "pool_runs", "pool_add_name", "pool_add_runs",
                 "stats_pool", "peek_query", "harness_chunking", "export_run_name", "_export_run_file", "delete_name_chunking",
                 "delete_name_run", "delete_name_pool")


def _plan_words(plan) -> str:
    """A deletion plan (:class:`workbench.services.project.deletion.DeletionPlan`) in the page's words."""
    removed = []
    for what, names in (("chunking", plan.chunkings), ("run", plan.runs), ("pool", plan.pools)):
        if names:
            removed.append(f"the {what}{'s' if len(names) > 1 else ''} {', '.join(names)}")
    counts = [f"{n:,} {what}" for what, n in plan.rows.items() if n]
    text = f"Deleting the {plan.kind} {plan.name} removes " + "; ".join(removed)
    if counts:
        text += " (" + ", ".join(counts) + ")"
    return text + (f". All {plan.labels_kept:,} labels stay: labels are passages of documents, "
                   f"not of chunks, runs or pools.")


def _export_run(runs: list[str]) -> None:


    st.markdown("**Export a run** (TREC run file: query, Q0, item, rank, score, run name)")
    cols = st.columns([3, 1], vertical_alignment="bottom")
    name = cols[0].selectbox("Run", runs, key="export_run_name", placeholder="no run yet")
    if cols[1].button("Prepare the file", key="export_run_prepare", disabled=name is None):
        try:
            with context.project() as db, tempfile.TemporaryDirectory() as tmp:
                result = export_run(db, name, Path(tmp) / f"{name}.txt")
                st.session_state["_export_run_file"] = (f"{name}.txt", result.path.read_bytes(), result.rows,
                                                       result.queries)
        except WorkbenchError as exc:
            context.error(exc, RUN_FIELDS)
            return
    prepared = st.session_state.get("_export_run_file")
    if prepared and prepared[0] == f"{name}.txt":
        file_name, data, rows, queries = prepared
        st.download_button(f"Download {file_name} ({rows:,} rows, {queries:,} queries)", data,
                           file_name=file_name, key="export_run_download", icon=":material/download:",
                           on_click="ignore")  # the file is in the browser already: nothing to rerun


def _delete(state: dict) -> None:

    st.markdown("**Delete** a chunking, run or pool, with what depends on it")
    cols = st.columns([1, 2, 1], vertical_alignment="bottom")
    kind = cols[0].selectbox("What", list(KIND_WORDS), key="delete_kind",
                             format_func=lambda k: KIND_WORDS[k].capitalize())
    names = _names(state[{"chunking": "chunkings", "run": "runs", "pool": "pools"}[kind]])
    name = cols[1].selectbox("Name", names, key=f"delete_name_{kind}", placeholder=f"no {kind} yet")
    if cols[2].button("List what it removes", key="delete_plan", disabled=name is None):
        try:
            with context.project() as db:
                st.session_state["_delete_plan"] = plan_deletion(db, kind, name)
        except WorkbenchError as exc:
            context.error(exc)
            return
    plan = st.session_state.get("_delete_plan")
    if plan is None or (plan.kind, plan.name) != (kind, name):
        return
    st.warning(context.plain(_plan_words(plan)))
    confirm, cancel = st.columns([2, 1])
    if cancel.button("Keep it", key="delete_cancel"):
        st.session_state.pop("_delete_plan", None)
        st.rerun()
    if confirm.button(f"Delete the {kind} {name} and what depends on it", key="delete_confirm", type="primary"):
        try:
            with context.project() as db:
                done = delete(db, kind, name, expected=plan)
        except WorkbenchError as exc:
            st.session_state.pop("_delete_plan", None)
            context.error(exc)
            return
        st.session_state.pop("_delete_plan", None)
        for key in SELECTOR_KEYS:
            st.session_state.pop(key, None)
        gone = len(done.chunkings) + len(done.runs) + len(done.pools)
        context.flash("retrieve", context.plain(
            f"Deleted the {kind} {name}" + (f" and {gone - 1} item{'s' if gone > 2 else ''} that depended on it"
                                             if gone > 1 else "") + f"; all {done.labels_kept:,} labels kept."))
        st.rerun()


def _manage_section(state: dict) -> None:
    st.subheader("5. Export and delete")
    _export_run(_names(state["runs"]))
    _delete(state)


@context.page_run
def render() -> None:
    st.title("Retrieve & Pool")
    _apply_selections()
    context.show_flash("retrieve")
    state = _state()
    _chunk_section(state)
    _retrieve_section(state)
    _pool_section(state)
    _stats_section(state)  # the peek fragment shares the run's open project (context.page_run)
    _manage_section(state)
