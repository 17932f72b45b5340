"""Data: import a corpus, queries, qrels or a run; see what the project holds and what came in.

Thin over :mod:`workbench.services.ingest`: the page collects a file (uploaded, or a path on the
server, which is also how a folder of text files is imported), the kind, format and options,
checks what it can itself (a file chosen, a run name free), calls ``import_file`` and shows the
result or the error in the page's words (:mod:`workbench.ui.words`). After a successful import
the form is cleared and the page says how many documents each chunking now covers.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import streamlit as st

from workbench.config import load_settings
from workbench.errors import WorkbenchError
from workbench.services import visibility
from workbench.services.access import check_data_path, data_folders
from workbench.services.ingest import FORMATS, KINDS, import_file, preview_documents, recent_imports
from workbench.services.jobs import ImportRequest, kilobytes, upload_folder
from workbench.services.project.lifecycle import project_status
from workbench.services.qrels.export import export_qrels
from workbench.services.retrieval.runs import list_runs
from workbench.ui import context, jobs_panel
from workbench.ui.words import Field, cell, clean_rows, excerpt, page_message

AUTO = "auto-detect"
UPLOAD, SERVER = "Upload a file", "Path on the server"
KIND_LABELS = {"corpus": "Corpus (documents)", "queries": "Queries", "qrels": "Qrels (judgments)", "run": "Run"}
FIELDS = {
    "--name": Field("Run name"),
    "--assessor": Field("Assessor"),
    "--format": Field("Format", "choice"),
    "--skip-unknown": Field("Skip rows with unknown ids", "check"),
    "--id-field": Field("Id field"),
    "--text-field": Field("Text field"),
    "--title-field": Field("Title field"),
}
# Widgets cleared after a successful import (the uploader is renewed through its key).
CLEARED = ("data_name", "data_assessor", "data_path", "data_id_field", "data_text_field",
           "data_title_field", "data_skip_unknown")


def _uploader_key() -> str:
    return f"data_upload_{st.session_state.get('data_upload_round', 0)}"


def _clear_form() -> None:
    for key in CLEARED:
        st.session_state.pop(key, None)
    st.session_state["data_upload_round"] = st.session_state.get("data_upload_round", 0) + 1


def _existing_runs() -> set[str]:

    with context.project() as db:
        runs = list_runs(db)
    return set(runs["name"]) if len(runs) else set()


def _coverage_note() -> str:
    """After a corpus import: how many documents each chunking covers now."""
    with context.project() as db:
        chunkings = project_status(db).chunkings
    notes = [f"chunking {c.name} covers {int(c.documents):,} of {int(c.total_documents):,} documents"
             for c in chunkings.itertuples(index=False)]
    return (" " + "; ".join(notes).capitalize() + ".") if notes else ""


def _import_form() -> None:
    st.subheader("Import")
    kind = st.selectbox("What", KINDS, format_func=KIND_LABELS.get, key="data_kind")
    left, right = st.columns(2)
    fmt = left.selectbox("Format", [AUTO, *FORMATS[kind]], key=f"data_format_{kind}",
                         help="Auto-detect looks at the file name and first line.")
    name = assessor = ""
    if kind == "run":
        name = right.text_input("Run name", key="data_name", placeholder="optional: the file name without extension",
                                help="The name the run gets in this project; it must be new.")
    elif kind == "qrels":
        assessor = right.text_input("Assessor", key="data_assessor", placeholder="optional: the file name",
                                    help="Recorded on every imported label.")
    options: dict = {}
    if kind in ("qrels", "run"):
        options["skip_unknown"] = st.checkbox(
            "Skip rows with unknown ids", key="data_skip_unknown",
            help="Drop (and count) rows whose document, chunk or query id the project lacks, instead of refusing the file.",
        )
    if kind in ("corpus", "queries"):
        with st.expander("JSONL field names (optional)"):
            options["id_field"] = st.text_input("Id field", key="data_id_field", placeholder="auto-detected") or None
            options["text_field"] = st.text_input("Text field", key="data_text_field", placeholder="auto-detected") or None
            if kind == "corpus":
                options["title_field"] = st.text_input("Title field", key="data_title_field",
                                                       placeholder="auto-detected") or None

    where = st.radio("Source", [UPLOAD, SERVER], horizontal=True, key="data_source")
    upload = server_path = None
    if where == UPLOAD:
        upload = st.file_uploader("File", key=_uploader_key())
    else:
        server_path = st.text_input("Path on the server (a file, or a folder for a corpus)", key="data_path",
                                    placeholder="a path the app's server can read").strip()

    if not st.button("Import", type="primary", key="data_import"):
        return
    if where == UPLOAD and upload is None:
        st.warning("Choose a file to upload, then press Import.")
        return
    if where == SERVER and not server_path:
        st.warning("Type the path of a file or folder on the server, then press Import.")
        return
    run_name = name.strip()
    if kind == "run" and run_name and run_name in _existing_runs():
        st.error(context.plain(f"A run named {run_name} already exists; type another “Run name”."))
        return
    arguments = dict(format=None if fmt == AUTO else fmt, name=run_name or None,
                     assessor=assessor.strip() or None, **options)
    if _in_background(kind, upload, server_path, arguments):
        return
    uploaded: dict[str, str] = {}
    try:
        with context.project() as db, tempfile.TemporaryDirectory() as tmp:
            if upload is not None:
                # Keep the uploaded name: it picks the format and the default name, and labels errors.
                path = Path(tmp) / Path(upload.name).name
                uploaded = {str(path): upload.name, str(tmp): "(upload)"}
                path.write_bytes(upload.getvalue())
                result = import_file(db, kind, path, label=upload.name, progress=context.progress, **arguments)
            else:
                # Only files inside [app] data_dirs (symlinks resolved, every file of a folder too):
                # no page serves other server files.
                data_dirs = load_settings().get("app", "data_dirs")
                allowed = check_data_path(server_path, data_dirs)
                result = import_file(db, kind, allowed, label=server_path, progress=context.progress,
                                     allowed_folders=data_folders(data_dirs), **arguments)
    except WorkbenchError as exc:
        context.error(exc, FIELDS, uploaded=uploaded)
        return

    if result.already_imported is not None:
        earlier = result.already_imported
        when = earlier["imported_at"]
        when = when.strftime("%Y-%m-%d %H:%M") if hasattr(when, "strftime") else str(when)
        context.flash("data", context.plain(
            f"{result.path} was already imported on {when} ({earlier['rows']:,} rows); nothing to do."), "info")
    else:
        note = _coverage_note() if kind == "corpus" else ""
        summary = page_message(result.summary(data=True), FIELDS, uploaded=uploaded)
        context.flash("data", context.plain(summary[:1].upper() + summary[1:] + "." + note))
    if kind == "run" and result.already_imported is None and result.name:
        # The Retrieve & Pool page's selectors follow the run just imported.
        st.session_state.setdefault("_retrieve_select", {}).update(
            {"pool_runs": [result.name], "pool_add_runs": [result.name], "export_run_name": result.name})
    _clear_form()
    st.rerun()


def _in_background(kind: str, upload, server_path: str | None, arguments: dict) -> bool:
    """Import a large file or folder as a background job (``[jobs] background_from`` kilobytes,
    :mod:`workbench.services.jobs`); True when the page handed the import to a job (started, or
    refused with the error shown). A path the page may not read stays with the page's own check."""

    if upload is not None:
        size = int(upload.size) // 1000
    else:
        try:
            size = kilobytes(check_data_path(server_path, load_settings().get("app", "data_dirs")))
        except WorkbenchError:
            return False  # the import below says why, in the page's words
    if not jobs_panel.in_background("import", size):
        return False
    folder = None
    if upload is not None:
        folder = upload_folder()
        path = folder / Path(upload.name).name  # the uploaded name picks the format and the default name
        path.write_bytes(upload.getvalue())
        request = ImportRequest(kind, str(path), upload.name, upload=True, **arguments)
    else:
        request = ImportRequest(kind, server_path, server_path, **arguments)
    if jobs_panel.launch(request, flash_key="data", fields=FIELDS):
        _clear_form()
        st.rerun()
    elif folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
    return True


EXPORT_FORMATS = {"trec": "TREC qrels (.txt)", "beir": "BEIR qrels (.tsv)", "jsonl": "JSONL, one row per query",
                  "spans": "Span labels (.jsonl, re-importable)"}
EXPORT_SOURCES = {"merged": "People's, else the judge's", "human": "People's only",
                  "llm": "The LLM judge's only"}
EXPORT_EXTENSIONS = {"trec": "txt", "beir": "tsv", "jsonl": "jsonl", "spans": "jsonl"}


def _export_section(chunkings: list[str]) -> None:


    st.subheader("Export qrels")
    if not visibility.can_read("label_files"):  # the files carry everyone's labels: annotators label blind
        st.caption("Qrels files carry other people's labels and the judge's, so leads and viewers export them.")
        return
    cols = st.columns(4)
    fmt = cols[0].selectbox("Format", list(EXPORT_FORMATS), format_func=EXPORT_FORMATS.get, key="export_format")
    by_chunk = cols[1].selectbox("Level", ["doc", "chunk"], key="export_level", disabled=fmt == "spans",
                                 format_func={"doc": "Documents", "chunk": "Chunks of a chunking"}.get) == "chunk"
    chunking = cols[2].selectbox("Chunking", chunkings, key="export_chunking",
                                 disabled=fmt == "spans" or not by_chunk, placeholder="no chunking yet")
    source = cols[3].selectbox("Labels", list(EXPORT_SOURCES), format_func=EXPORT_SOURCES.get, key="export_source",
                               help="People's labels are SME labels and imported qrels. With “People's, else the "
                                    "judge's”, the project's merge policy decides (stated with the file): a person's "
                                    "label wins where both labelled the same item, and the judge's labels count once "
                                    "the judge passed calibration.")
    level = "chunk" if by_chunk and fmt != "spans" else "doc"
    if st.button("Prepare the file", key="export_prepare"):
        if level == "chunk" and not chunking:
            st.error("Choose a “Chunking” for chunk-level qrels, or choose the Documents level.")
            return
        name = f"qrels-{level}{'-' + chunking if level == 'chunk' else ''}-{source}.{EXPORT_EXTENSIONS[fmt]}"
        try:
            with context.project() as db, tempfile.TemporaryDirectory() as tmp:
                result = export_qrels(db, Path(tmp) / name, format=fmt, level=level,
                                      chunking=chunking if level == "chunk" else None, source=source)
                data = result.path.read_bytes()
        except WorkbenchError as exc:
            context.error(exc, {"--format": Field("Format", "choice"), "--level": Field("Level", "choice"),
                                "--chunking": Field("Chunking", "choice"), "--source": Field("Labels", "choice")})
            return
        st.session_state["export_file"] = (name, data, result.rows, result.queries)
        st.session_state["export_policy"] = (result.policy, len(result.notes))
    prepared = st.session_state.get("export_file")
    if prepared:
        name, data, rows, queries = prepared
        st.download_button(f"Download {name} ({rows:,} rows, {queries:,} queries)", data, file_name=name,
                           key="export_download", icon=":material/download:")
        policy, notes = st.session_state.get("export_policy") or ("", 0)
        if policy:  # the merge policy the file was written under (services.qrels)
            context.escaped(policy[0].upper() + policy[1:] + "." + (
                " Some LLM labels are left out until their judge passes calibration (see the Calibration page)."
                if notes else ""), css="font-size: 0.85em; color: rgba(49, 51, 63, 0.7);")


@context.page_run
def render() -> None:
    st.title("Data")
    st.caption("Import documents, queries, qrels and runs. Every import is all or nothing; "
               "importing the same file again does nothing.")
    context.show_flash("data")
    _import_form()
    jobs_panel.panel(("import",), title="Imports in the background", fields=FIELDS)

    with context.project() as db:
        status = project_status(db)
        imports = recent_imports(db, 20)
        preview = preview_documents(db, 5)

    st.subheader("In the project")
    counts = status.counts
    headline = [("Documents", counts.get("documents", 0)), ("Queries", counts.get("queries", 0)),
                ("Labels", status.labels), ("Runs", counts.get("runs", 0)),
                ("Chunkings", counts.get("chunkings", 0)), ("Imports", counts.get("imports", 0))]
    for column, (label, value) in zip(st.columns(len(headline)), headline):
        column.metric(label, f"{value:,}")
    if len(status.chunkings):
        st.markdown("**Chunkings** (documents each one covers)")
        context.table(
            [{"chunking": c.name, "strategy": c.strategy, "chunks": f"{int(c.chunks):,}",
              "documents": f"{int(c.documents):,} of {int(c.total_documents):,}"}
             for c in status.chunkings.itertuples(index=False)], key="chunkings")
    for warning in status.warnings:
        st.warning(context.plain(warning[0].upper() + warning[1:] + "."))

    _export_section(status.chunkings["name"].tolist() if len(status.chunkings) else [])

    st.subheader("Recent imports")
    if imports.empty:
        st.caption("Nothing imported yet: choose what to import above.")
    else:
        shown = imports.drop(columns=["sha256", "import_id"], errors="ignore")
        st.dataframe(clean_rows(shown), hide_index=True, width="stretch")

    if not preview.empty:
        with st.expander("Preview documents"):
            for row in preview.itertuples(index=False):
                title = cell(row.title)
                context.escaped(f"{row.doc_id} — {title}" if title else str(row.doc_id), tag="strong")
                context.escaped(excerpt(row.text, 600), css="white-space: pre-wrap; margin-bottom: 1em")
