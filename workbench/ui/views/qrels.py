"""Qrels: the labels the project evaluates with, under its one merge policy.

The policy statement comes first (which labels win, how several SMEs are combined, whether the
judge's labels count), then the qrels per grade and per source, the coverage of each pool
(share of its pairs labelled, by people and by the judge) and a download in every export format,
written by the same service as the command-line export.
"""

from __future__ import annotations

from functools import partial

import pandas as pd
import streamlit as st

from workbench.errors import WorkbenchError
from workbench.services import access, visibility
from workbench.services.chunking import list_chunkings
from workbench.services.evaluation import views as ev
from workbench.services.project.lifecycle import open_project
from workbench.ui import context
from workbench.ui.words import LABEL_SOURCE_WORDS, Field, binarising_note, qrels_note

FORMATS = {"TREC qrels": "trec", "BEIR (TSV)": "beir", "JSON lines (one query a line)": "jsonl",
           "Span judgments (JSON lines)": "spans"}
SOURCES = LABEL_SOURCE_WORDS
FIELDS = {"--chunking": Field("Chunking", "choice"), "--level": Field("Level", "choice"),
          "--source": Field("Labels", "choice"), "--format": Field("Format", "choice")}
TIER_WORDS = {"adjudicated": "Resolved by a lead", "sme": "SME labels", "imported": "Imported qrels",
              "llm": "LLM judge", "propagated": "Copied to near-duplicates"}


@context.page_run
def render() -> None:

    st.title("Qrels")
    st.caption("The labels the project evaluates with: one rule decides which label wins for each pair.")
    with context.project() as db:
        chunkings = list_chunkings(db)
        names = chunkings["name"].tolist() if "name" in getattr(chunkings, "columns", []) else []
        cols = st.columns(3)
        level_word = cols[0].radio("Level", ["Documents", "Chunks"], horizontal=True, key="qrels_level",
                                   disabled=not names)
        level = "chunk" if level_word == "Chunks" and names else "doc"
        chunking = cols[1].selectbox("Chunking", names, key="qrels_chunking") if level == "chunk" else None
        source = SOURCES[cols[2].selectbox("Labels", _sources(), key="qrels_source")]
        try:
            overview = ev.qrels_overview(db, level=level, chunking=chunking, source=source)
        except WorkbenchError as exc:
            context.error(exc, FIELDS)
            return
        st.subheader("Merge policy")
        context.escaped(overview.statement[0].upper() + overview.statement[1:] + ".")
        for note in overview.notes:
            st.warning(context.plain(qrels_note(note)))
        if not overview.rows:
            st.info("No labels yet: judge a pool on the Judge page, or label pairs on the Label page.")
            context.page_link("judge", "Go to Judge", ":material/gavel:")
        else:
            _counts(overview)
        _coverage(overview.coverage)
    if overview.rows:
        # A fragment: choosing a format reruns the download alone, not the counts above it.
        st.fragment(_download)(level, chunking, source)


def _sources() -> list[str]:
    """The Labels choices the signed-in user may read (an annotator: not the judge's alone)."""

    return [word for word, value in SOURCES.items() if value != "llm" or visibility.can_read("judge_output")]


def _counts(overview) -> None:
    st.subheader("Counts")
    a, b, c = st.columns(3)
    a.metric("Qrels", f"{overview.rows:,}")
    b.metric("Queries", f"{overview.queries:,}")
    c.metric("Relevant (grade ≥ 1)", f"{sum(n for g, n in overview.by_grade.items() if g >= 1):,}")
    st.caption(binarising_note("qrels"))
    left, right = st.columns(2)
    with left:
        st.caption("Per grade")
        context.table([{"grade": g, "qrels": f"{n:,}"} for g, n in sorted(overview.by_grade.items())],
                      key="qrels-grades")
    with right:
        st.caption("Per source (the label that won)")
        context.table([{"source": TIER_WORDS.get(t, t), "qrels": f"{n:,}"} for t, n in overview.by_tier.items()],
                      key="qrels-sources")


def _coverage(coverage: pd.DataFrame) -> None:
    st.subheader("Coverage of the pools")
    if coverage.empty:
        st.info("No pool yet: build one on Retrieve & Pool.")
        context.page_link("retrieve", "Go to Retrieve & Pool", ":material/manage_search:")
        return
    context.table([{"pool": r.pool, "pairs": f"{r.pairs:,}", "labelled": f"{r.labelled:,}",
                    "share labelled": f"{r.share:.0%}", "by people": f"{r.by_people:,}",
                    "graded by the LLM judge": f"{r.by_llm:,}"} for r in coverage.itertuples(index=False)],
                  key="qrels-coverage")
    st.caption("Labelled: the pairs with a label under the merge policy. Graded by the LLM judge counts every "
               "judge grade, also those the policy leaves out until the judge passes calibration.")


def _download(level: str, chunking: str | None, source: str) -> None:
    """The qrels file in the chosen format (the fragment of :func:`render`; one unit of work).

    The file is written when the button is pressed, not when the page opens: Streamlit calls
    :func:`_file` then, on a thread of its own (on a million-label project the export takes
    seconds and a file's worth of memory that most visits never ask for)."""

    st.subheader("Download")
    if not visibility.can_read("label_files"):  # the files carry everyone's labels: annotators label blind
        st.caption("Qrels files carry other people's labels and the judge's, so leads and viewers download them.")
        return
    format_word = st.selectbox("Format", list(FORMATS), key="qrels_format")
    fmt = FORMATS[format_word]
    suffix = {"trec": "txt", "beir": "tsv", "jsonl": "jsonl", "spans": "jsonl"}[fmt]
    build = partial(_file, context.db_path(), fmt, "doc" if fmt == "spans" else level,
                    None if fmt == "spans" else chunking, source, access.current_actor())
    # on_click="ignore": the file goes to the browser; pressing the button reruns nothing.
    st.download_button(f"Download {format_word}", build, file_name=f"qrels-{fmt}.{suffix}", on_click="ignore",
                       mime="text/plain", key="qrels_download", icon=":material/download:")
    st.caption("Written when you press the button, by the same code as the command-line qrels export.")


def _file(path, fmt: str, level: str, chunking: str | None, source: str, actor=None) -> bytes:
    """The export file's bytes (:func:`workbench.services.evaluation.views.qrels_download`),
    opened and closed here: it runs on Streamlit's download thread, outside the page run, where
    the services see no signed-in person; so the page's ``actor`` is checked here: one who may
    read label files and every label (a lead or viewer), whose file is the unrestricted one."""

    if actor is not None:  # label-file readers read every label (services.visibility.READS)
        visibility.require_read("label_files", actor)
    db = open_project(path)
    try:
        return ev.qrels_download(db, format=fmt, level=level, chunking=chunking, source=source)[0]
    finally:
        db.close()
