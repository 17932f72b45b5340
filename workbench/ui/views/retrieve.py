"""Retrieve & Pool: chunk the corpus, run retrievers, build pools and read their statistics.

Every action is one unit of work on the project (``with context.project() as db``); expected
failures are shown with ``st.error``. Corpus text is shown through ``context.escaped``.
"""

from __future__ import annotations

import streamlit as st

from workbench.config import load_settings
from workbench.core.chunking import STRATEGIES as CORE_STRATEGIES
from workbench.errors import WorkbenchError
from workbench.ui import context

# The core's strategies, with the one most corpora want first (the form's default).
STRATEGIES = ("section", *(s for s in CORE_STRATEGIES if s != "section"))


def _state() -> dict:
    """Chunkings, runs and pools (one read of the project)."""
    from workbench.services.chunking import list_chunkings
    from workbench.services.pooling import list_pools
    from workbench.services.retrieval import list_runs

    with context.project() as db:
        return {"chunkings": list_chunkings(db), "runs": list_runs(db), "pools": list_pools(db)}


def _attempt(action, success) -> None:
    """Run ``action(db)`` in one unit of work; show success or the error."""
    try:
        with context.project() as db:
            result = action(db)
    except WorkbenchError as exc:
        st.error(context.plain(str(exc)))
        return
    st.session_state["retrieve_message"] = success(result)
    st.rerun()


def _chunk_section(state: dict) -> None:
    from workbench.services.chunking import DEFAULT_SIZE, create_chunking

    st.subheader("1. Chunk")
    frame = state["chunkings"]
    if len(frame):
        st.dataframe(frame.assign(params=frame["params"].astype(str)), hide_index=True, width="stretch")
    else:
        st.info("No chunking yet. Chunk the corpus before retrieving.")
    with st.form("chunk_form"):
        cols = st.columns(4)
        name = cols[0].text_input("Name", key="chunk_name", placeholder="sections")
        strategy = cols[1].selectbox("Strategy", STRATEGIES, key="chunk_strategy")
        size = cols[2].number_input("Size (0 = default)", min_value=0, value=0, step=100, key="chunk_size",
                                    help="fixed: characters (default %(fixed)d); section: max characters "
                                         "(default %(section)d); sentences: sentences (default %(sentences)d)"
                                         % DEFAULT_SIZE)
        overlap = cols[3].number_input("Overlap", min_value=0, value=0, step=10, key="chunk_overlap")
        if st.form_submit_button("Create chunking"):
            doc = strategy == "document"
            _attempt(
                lambda db: create_chunking(db, name.strip(), strategy,
                                           size=None if doc or not size else int(size),
                                           overlap=None if doc else int(overlap)),
                lambda s: f"Chunking {context.plain(s.name)}: {s.chunks:,} chunks from {s.documents:,} documents.",
            )


def _retrieve_section(state: dict) -> None:
    from workbench.retrieval.bm25 import Bm25Params, parse_stemmer, parse_stopwords
    from workbench.retrieval.dense import DEFAULT_MODEL
    from workbench.retrieval.hybrid import parse_weights
    from workbench.services.retrieval import run_bm25, run_dense, run_hybrid

    st.subheader("2. Retrieve")
    runs = state["runs"]
    if len(runs):
        st.dataframe(runs.assign(params=runs["params"].astype(str)), hide_index=True, width="stretch")
    chunkings = state["chunkings"]["name"].tolist()
    done = lambda s: f"Run {context.plain(s.name)} ({s.retriever}): {s.rows:,} rows for {s.queries:,} queries in {s.seconds:.1f}s."
    bm25_tab, dense_tab, hybrid_tab = st.tabs(["BM25", "Dense", "Hybrid (RRF)"])
    with bm25_tab, st.form("bm25_form"):
        cols = st.columns(4)
        chunking = cols[0].selectbox("Chunking", chunkings, key="bm25_chunking")
        name = cols[1].text_input("Run name", value="bm25", key="bm25_name")
        k = cols[2].number_input("Results per query", min_value=1, value=100, key="bm25_k")
        stemmer = cols[3].text_input("Stemmer language ('none' to disable)", value="english", key="bm25_stemmer")
        stopwords = st.text_input("Stopwords (language, 'none', or comma-separated words)", value="english",
                                  key="bm25_stopwords")
        if st.form_submit_button("Run BM25"):
            params = Bm25Params(stemmer=parse_stemmer(stemmer), stopwords=parse_stopwords(stopwords))
            if chunking is None:
                st.error("Create a chunking first.")
            else:
                _attempt(lambda db: run_bm25(db, chunking, name.strip(), k=int(k), params=params), done)
    with dense_tab, st.form("dense_form"):
        cols = st.columns(4)
        chunking = cols[0].selectbox("Chunking", chunkings, key="dense_chunking")
        name = cols[1].text_input("Run name", value="dense", key="dense_name")
        k = cols[2].number_input("Results per query", min_value=1, value=100, key="dense_k")
        model = cols[3].text_input("Model (name or local path)", value=DEFAULT_MODEL, key="dense_model")
        st.caption("Chunk embeddings are cached per chunking and model: re-running only encodes the queries.")
        if st.form_submit_button("Run dense"):
            if chunking is None:
                st.error("Create a chunking first.")
            else:
                with st.spinner("Encoding the chunks not cached yet (measured ~13 chunks/s on 2 CPU cores)..."):
                    _attempt(lambda db: run_dense(db, chunking, name.strip(), k=int(k), model=model.strip()), done)
    with hybrid_tab, st.form("hybrid_form"):
        cols = st.columns(4)
        chosen = cols[0].multiselect("Runs to fuse", runs["name"].tolist() if len(runs) else [], key="hybrid_runs")
        name = cols[1].text_input("Run name", value="hybrid", key="hybrid_name")
        k = cols[2].number_input("Results per query", min_value=1, value=100, key="hybrid_k")
        rrf_k = cols[3].number_input("RRF k", min_value=0.0, value=60.0, key="hybrid_rrf_k")
        weights = st.text_input("Weights (optional: 1,0.5 in run order, or bm25=1,dense=0.5)", key="hybrid_weights")
        if st.form_submit_button("Fuse runs"):
            def action(db):
                return run_hybrid(db, name.strip(), list(chosen), k=int(k), rrf_k=float(rrf_k),
                                  weights=parse_weights(weights, list(chosen)))
            _attempt(action, done)


def _pool_section(state: dict) -> None:
    from workbench.services.pooling import add_runs, build_pool

    st.subheader("3. Pool")
    pools = state["pools"]
    if len(pools):
        st.dataframe(pools, hide_index=True, width="stretch")
    run_names = state["runs"]["name"].tolist() if len(state["runs"]) else []
    default_depth = int(load_settings().get("pool", "depth"))
    new_tab, add_tab = st.tabs(["New pool", "Add runs to a pool"])
    with new_tab, st.form("pool_form"):
        cols = st.columns(3)
        name = cols[0].text_input("Pool name", key="pool_name", placeholder="main")
        chosen = cols[1].multiselect("Runs", run_names, key="pool_runs")
        depth = cols[2].number_input("Depth", min_value=1, value=default_depth, key="pool_depth")
        if st.form_submit_button("Build pool"):
            _attempt(lambda db: build_pool(db, name.strip(), list(chosen), int(depth)),
                     lambda s: f"Pool {context.plain(s.name)}: {s.pairs_total:,} pairs over {s.queries:,} queries.")
    with add_tab, st.form("pool_add_form"):
        cols = st.columns(2)
        pool = cols[0].selectbox("Pool", pools["name"].tolist() if len(pools) else [], key="pool_add_name")
        chosen = cols[1].multiselect("Runs to add", run_names, key="pool_add_runs")
        if st.form_submit_button("Add runs"):
            _attempt(lambda db: add_runs(db, pool, list(chosen)),
                     lambda s: f"Pool {context.plain(s.name)}: {s.pairs_added:,} new pairs; {s.pairs_total:,} in total.")


def _stats_section(state: dict) -> None:
    from workbench.services.pooling import pool_preview, pool_stats

    st.subheader("4. Pool statistics")
    pools = state["pools"]
    if not len(pools):
        st.info("No pool yet.")
        return
    cols = st.columns(2)
    pool = cols[0].selectbox("Pool", pools["name"].tolist(), key="stats_pool")
    k = cols[1].number_input("Cutoff k (judged@k, leave-one-out)", min_value=1, value=10, key="stats_k")
    settings = load_settings()
    try:
        with context.project() as db:
            stats = pool_stats(db, pool, k=int(k), min_overlap=settings.get("evaluation", "min_overlap"),
                               relevance_threshold=settings.get("evaluation", "relevance_threshold"))
    except WorkbenchError as exc:
        st.error(context.plain(str(exc)))
        return
    s = stats.summary
    metrics = st.columns(4)
    metrics[0].metric("Pairs", f"{s['pairs']:,}")
    metrics[1].metric("Queries", f"{s['queries']:,}")
    metrics[2].metric("Judged pairs", f"{s['judged_pairs']:,}")
    metrics[3].metric("Mean pool size", f"{s['mean_pool_size']:.1f}")

    st.markdown("**Pool size per query**")
    st.bar_chart(stats.sizes.set_index("query_id")["pool_size"])
    left, right = st.columns(2)
    with left:
        st.markdown("**Contributions per run** (pooled, and found by this run only)")
        st.bar_chart(stats.contributions.set_index("run_id")[["pooled", "unique"]], stack=False)
        st.dataframe(stats.contributions, hide_index=True, width="stretch")
    with right:
        st.markdown(f"**judged@{stats.k} per run** (share of the top {stats.k} with a label)")
        st.bar_chart(stats.judged.set_index("run_id")["judged_at_k"])
        st.dataframe(stats.judged, hide_index=True, width="stretch")
    st.markdown("**Pairwise overlap of pooled pairs**")
    if len(stats.overlap):
        st.dataframe(stats.overlap, hide_index=True, width="stretch")
    else:
        st.caption("One run only: no overlap to show.")
    st.markdown(f"**Leave-one-run-out** (P@{stats.k} with and without the run's unique pairs judged)")
    st.dataframe(stats.leave_one_out, hide_index=True, width="stretch")

    with st.expander("Peek at a query's pool (judging order)"):
        query = st.selectbox("Query", stats.sizes["query_id"].tolist(), key="peek_query")
        if query is not None:
            with context.project() as db:
                preview = pool_preview(db, pool, query, limit=5)
            for row in preview.itertuples():
                item = row.chunk_id if isinstance(row.chunk_id, str) else row.doc_id
                context.escaped(f"priority {row.priority} · {item} · RRF {row.rrf_score:.4f}",
                                css="color: rgba(49, 51, 63, 0.6); font-size: 0.875em;")
                context.escaped(str(row.text)[:600], css="white-space: pre-wrap; font-size: 0.9em;")


def render() -> None:
    st.title("Retrieve & Pool")
    message = st.session_state.pop("retrieve_message", None)
    if message:
        st.success(message)  # built with context.plain around every name
    state = _state()
    _chunk_section(state)
    _retrieve_section(state)
    _pool_section(state)
    _stats_section(state)
