"""Data: import a corpus, queries, qrels or a run; see what the project holds and what came in.

Thin over :mod:`workbench.services.ingest`: the page collects a file (uploaded, or a path on the
server, which is also how a folder of text files is imported), the kind, format and options,
calls ``import_file`` and shows its one-paragraph summary or its one-line error.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import streamlit as st

from workbench.errors import WorkbenchError
from workbench.services.ingest import FORMATS, KINDS, import_file, preview_documents, recent_imports
from workbench.services.project import project_status
from workbench.ui import context

AUTO = "auto-detect"
UPLOAD, SERVER = "Upload a file", "Path on the server"
KIND_LABELS = {"corpus": "Corpus (documents)", "queries": "Queries", "qrels": "Qrels (judgments)", "run": "Run"}
COUNTED = ("documents", "queries", "judgments", "runs", "run_rows", "chunks", "imports")


def _import_form() -> None:
    st.subheader("Import")
    kind = st.selectbox("What", KINDS, format_func=KIND_LABELS.get, key="data_kind")
    left, right = st.columns(2)
    fmt = left.selectbox("Format", [AUTO, *FORMATS[kind]], key=f"data_format_{kind}",
                         help="Auto-detect looks at the file name and first line.")
    name = right.text_input("Name", key="data_name",
                            help="Run name for a run, assessor for qrels; default: the file name without extension.")
    options: dict = {}
    if kind == "qrels":
        assessor = st.text_input("Assessor", key="data_assessor",
                                 help="Recorded on every judgment; default: the name or the file name.")
        options["assessor"] = assessor.strip() or None
    if kind in ("qrels", "run"):
        options["skip_unknown"] = st.checkbox(
            "Skip rows with unknown ids", key="data_skip_unknown",
            help="Drop (and count) rows whose doc, chunk or query id the project lacks, instead of failing.",
        )
    if kind in ("corpus", "queries"):
        with st.expander("JSONL field names (optional)"):
            options["id_field"] = st.text_input("Id field", key="data_id_field") or None
            options["text_field"] = st.text_input("Text field", key="data_text_field") or None
            if kind == "corpus":
                options["title_field"] = st.text_input("Title field", key="data_title_field") or None

    where = st.radio("Source", [UPLOAD, SERVER], horizontal=True, key="data_source")
    upload = server_path = None
    if where == UPLOAD:
        upload = st.file_uploader("File", key="data_upload")
    else:
        server_path = st.text_input("Path on the server (a file, or a folder for a corpus)", key="data_path").strip()

    if not st.button("Import", type="primary", key="data_import"):
        return
    if where == UPLOAD and upload is None or where == SERVER and not server_path:
        st.warning("Choose a file to import first.")
        return
    arguments = dict(format=None if fmt == AUTO else fmt, name=name.strip() or None, **options)
    try:
        with context.project() as db, tempfile.TemporaryDirectory() as tmp:
            if upload is not None:
                # Keep the uploaded name: it picks the format and the default name, and labels errors.
                path = Path(tmp) / Path(upload.name).name
                path.write_bytes(upload.getvalue())
                result = import_file(db, kind, path, label=upload.name, **arguments)
            else:
                result = import_file(db, kind, server_path, **arguments)
    except WorkbenchError as exc:
        st.error(context.plain(str(exc)))
        return
    if result.already_imported is not None:
        st.info(context.plain(result.summary()))
    else:
        st.success(context.plain(result.summary()))


def render() -> None:
    st.title("Data")
    st.caption("Import documents, queries, qrels and runs. Every import is all or nothing; "
               "importing the same file again does nothing.")
    _import_form()

    with context.project() as db:
        status = project_status(db)
        imports = recent_imports(db, 20)
        preview = preview_documents(db, 5)

    st.subheader("In the project")
    columns = st.columns(len(COUNTED))
    for column, table in zip(columns, COUNTED):
        column.metric(table.replace("_", " ").capitalize(), f"{status.counts.get(table, 0):,}")

    st.subheader("Recent imports")
    if imports.empty:
        st.caption("Nothing imported yet.")
    else:
        st.dataframe(imports.drop(columns=["sha256"]), hide_index=True, width="stretch")

    if not preview.empty:
        with st.expander("Preview documents"):
            for row in preview.itertuples(index=False):
                title = f" — {row.title}" if isinstance(row.title, str) and row.title else ""
                context.escaped(f"{row.doc_id}{title}", tag="strong")
                text = row.text if len(row.text) <= 600 else row.text[:600] + "…"
                context.escaped(text, css="white-space: pre-wrap; margin-bottom: 1em")
