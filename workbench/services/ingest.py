"""Importing corpora, queries, qrels and runs into a project: one service for the CLI and the app.

Kinds and formats (``format=None`` guesses from the name and first bytes and says which it chose):

``corpus``
    ``jsonl`` (alias ``beir``): BEIR ``corpus.jsonl`` (``_id``, ``title``, ``text``) or any JSONL
    whose id/text/title fields are among the usual names (``_id``/``doc_id``/``docid``/``id``;
    ``text``/``doc``/``contents``/``body``; ``title``) or named with ``id_field`` etc.
    ``folder``: a directory of ``.txt``/``.md`` files, read recursively; doc_id = relative path
    without extension, title = first markdown heading or the file name.
    ``smart`` (alias ``cranfield``): SMART ``.I``/``.T``/``.A``/``.B``/``.W`` records.
``queries``
    ``jsonl`` (alias ``beir``): ``query_id``/``_id``/``qid``/``id`` and ``text``/``query``, optional
    ``description`` and ``tags``. ``tsv``: ``query_id<TAB>text``. ``smart``: ``.I``/``.W`` records,
    ids as written. ``cranfield``: ``cran.qry``, ids = position 1..225 (what ``cranqrel`` uses).
``qrels``
    ``trec`` (``qid iter doc_id grade``), ``beir`` (``query-id<TAB>corpus-id<TAB>score``),
    ``jsonl`` rows (``{"query_id", "query", "relevant": {doc_id: grade}, "tags"}``; a row's
    ``query`` text registers the query when the project lacks it), ``spans``
    (``{"query_id", "doc_id", "start", "end", "grade", "assessor"}``) and ``cranfield``
    (``cranqrel``; codes 1->3, 2->2, 3->1, 4->1, 5->0, ``-1`` rows excluded and counted).
    Document-level qrels become whole-document spans ``[0, len(text))``. Judgments are stored
    with ``source='imported'``, ``status='ok'`` and assessor = ``assessor`` or ``name`` or the
    file stem (span rows may name their own assessor). Grades must be integers 0-3.
``run``
    ``trec`` run files (``qid Q0 id rank score tag``). The level is detected: every id a stored
    doc_id -> a document-level run; every id a chunk_id of one chunking -> a chunk-level run of
    that chunking; a mix -> error. Ranks are recomputed from the scores (score descending, ties
    by id descending, as trec_eval orders them); the run is named ``name`` or the file stem.

Rules shared by every import:

* All or nothing: parsing and checks happen first, then one transaction writes the rows and the
  ledger entry; any error rolls everything back.
* Errors are :class:`~workbench.errors.InputError` with ``file:line: what, expected, fix``.
* Ids that the project does not know (doc ids or query ids in qrels and runs, chunk ids in runs)
  are an error that gives their count and first examples, unless ``skip_unknown`` drops those rows
  and reports how many. Queries must be imported before qrels and runs (except for JSONL qrels
  rows that carry the query text). Unknown docs are never registered on the fly: a run that
  names passages without text (DL19's runs do) cannot be judged or chunked there anyway.
* Duplicates within the file are errors. Rows equal to stored rows are counted as "already
  stored" and not written again; rows with a stored id but different content are a conflict:
  the error counts them, shows the first examples and nothing is stored.
* The same bytes imported twice as the same kind is a no-op ("already imported"), by the sha256
  ledger in the ``imports`` table.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from workbench.core.formats import IMPORT_FORMATS, IMPORT_KINDS
from workbench.core.formats import corpus as corpus_formats
from workbench.core.formats import labels as label_formats
from workbench.core.formats.lines import decode_utf8, split_lines
from workbench.core.readers import read_beir_qrels, read_jsonl_qrels, read_trec_qrels, read_trec_run
from workbench.errors import InputError
from workbench.services.progress import ProgressFactory, no_progress
from workbench.store import imports as store_imports
from workbench.store.corpus import DOCUMENT_COLUMNS, QUERY_COLUMNS, write_documents, write_queries
from workbench.store.database import Database
from workbench.store.judgments import write_judgments
from workbench.store.retrieval import set_run_scope
from workbench.store.runs import write_run

KINDS = IMPORT_KINDS
FORMATS = IMPORT_FORMATS
# Names accepted on input that mean the same parser.
_ALIASES = {
    ("corpus", "beir"): "jsonl", ("corpus", "cranfield"): "smart",
    ("queries", "beir"): "jsonl", ("qrels", "cranqrel"): "cranfield",
}
_JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
_EXAMPLES = 3


# --- results ----------------------------------------------------------------------------------
@dataclass
class ImportResult:
    """What an import did. ``rows`` were written; the other counts say what was not and why."""

    kind: str
    path: str
    format: str
    name: str | None = None
    rows: int = 0
    present: int = 0  # rows equal to stored rows, not written again
    excluded: int = 0  # rows the format says to leave out (Cranfield -1)
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> rows dropped (skip_unknown)
    already_imported: dict | None = None  # the earlier ledger row when the bytes were seen before
    level: str | None = None
    chunking: str | None = None
    queries_added: int = 0
    seconds: float = 0.0

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    def summary(self) -> str:
        """One human-readable paragraph (the CLI prints it; the app shows it)."""
        noun = {"corpus": "documents", "queries": "queries", "qrels": "judgments", "run": "run rows"}[self.kind]
        if self.already_imported is not None:
            earlier = self.already_imported
            return (f"{self.path}: already imported on {earlier['imported_at']:%Y-%m-%d %H:%M} as "
                    f"{self.kind} {earlier['name']!r} ({earlier['rows']:,} {noun}); nothing to do")
        what = f"run {self.name!r} ({self.level} level" + (f", chunking {self.chunking!r})" if self.chunking else ")") \
            if self.kind == "run" else ""
        parts = [f"imported {self.rows:,} {noun}{' into ' + what if what else ''} from {self.path} "
                 f"(format {self.format})"]
        if self.queries_added:
            parts.append(f"registered {self.queries_added:,} queries from the rows")
        if self.present:
            parts.append(f"{self.present:,} rows were already stored")
        if self.excluded:
            parts.append(f"excluded {self.excluded:,} rows with Cranfield code -1 (no grade)")
        for reason, n in self.skipped.items():
            parts.append(f"skipped {n:,} rows with {reason} (--skip-unknown)")
        return "; ".join(parts)


# --- source files ----------------------------------------------------------------------------
@dataclass
class _Source:
    path: Path
    label: str  # what messages and the ledger call the file
    data: bytes | None  # None for folders
    sha256: str
    files: list[tuple[str, bytes]] | None = None

    def text(self) -> str:
        return decode_utf8(self.data, self.label)


def _read_source(path: Path, label: str) -> _Source:
    if path.is_dir():
        files = []
        digest = hashlib.sha256()
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            rel = file.relative_to(path).as_posix()
            if file.suffix.lower() not in corpus_formats.TEXT_SUFFIXES or any(
                    part.startswith(".") for part in rel.split("/")):
                continue
            data = file.read_bytes()
            digest.update(rel.encode() + b"\0" + data + b"\0")
            files.append((rel, data))
        return _Source(path, label, None, digest.hexdigest(), files)
    if not path.exists():
        raise InputError("file not found; check the path (relative paths start at the current directory)",
                         path=label)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path=label) from None
    if not data.strip():
        raise InputError("is empty", path=label)
    return _Source(path, label, data, hashlib.sha256(data).hexdigest())


@contextmanager
def _named_as_label(source: _Source) -> Iterator[None]:
    """Errors of the file readers name the path they were given; for an upload that is a
    temporary copy, so the message is rewritten to name the file as the user knows it."""
    try:
        yield
    except InputError as exc:
        if source.label != str(source.path) and str(source.path) in str(exc):
            raise InputError(str(exc).replace(str(source.path), source.label)) from None
        raise


def _first_line(data: bytes) -> str:
    head = data[:8192].decode("utf-8", errors="replace")
    return next((line for line in split_lines(head) if line.strip()), "")


def detect_format(kind: str, path: Path, data: bytes | None) -> str:
    """Guess the format of ``path`` for ``kind`` from its name and first line; error if unsure."""
    name = path.name.lower()
    if kind == "corpus" and data is None:
        return "folder"
    if data is None:
        raise InputError("is a directory; only a corpus can be imported from a folder", path=str(path))
    first = _first_line(data)
    stripped = first.lstrip()
    looks_json = path.suffix.lower() in _JSONL_SUFFIXES or stripped.startswith("{")
    smart = stripped.startswith(".I ")
    if kind == "run":
        return "trec"
    if kind == "corpus":
        if looks_json:
            return "jsonl"
        if smart:
            return "smart"
    elif kind == "queries":
        if looks_json:
            return "jsonl"
        if smart:
            return "cranfield" if name.startswith("cran") else "smart"
        if "\t" in first:
            return "tsv"
    elif kind == "qrels":
        if looks_json:
            return "spans" if '"start"' in first else "jsonl"
        if name.startswith("cranqrel"):
            return "cranfield"
        if first.lower().startswith("query-id") or ("\t" in first and len(first.split("\t")) == 3):
            return "beir"
        if len(first.split()) == 4:
            return "trec"
    raise InputError(
        f"cannot tell the {kind} format from the file; pass --format (one of {', '.join(FORMATS[kind])})",
        path=str(path),
    )


def _resolve_format(kind: str, fmt: str | None, source: _Source) -> str:
    if kind not in KINDS:
        raise InputError(f"unknown import kind {kind!r}; expected one of {', '.join(KINDS)}")
    if fmt is None:
        return detect_format(kind, source.path, source.data)
    fmt = _ALIASES.get((kind, fmt), fmt)
    if fmt not in FORMATS[kind]:
        raise InputError(f"unknown {kind} format {fmt!r}; expected one of {', '.join(FORMATS[kind])}")
    if (fmt == "folder") != (source.data is None):
        raise InputError("the folder format needs a directory" if fmt == "folder" else
                         f"is a directory; pass a file for format {fmt!r}", path=source.label)
    return fmt


# --- checks ----------------------------------------------------------------------------------
def _where(row) -> str:
    line = int(row["line"]) if "line" in row and pd.notna(row["line"]) else 0
    return f" (line {line})" if line else ""


def _locations(group: pd.DataFrame) -> str:
    if not group["line"].gt(0).any() and "metadata" in group:  # a folder has files, not lines
        return "files " + ", ".join(str(m.get("file")) for m in group["metadata"].head(3))
    return "lines " + ", ".join(str(int(x)) for x in group["line"].head(3))


def _reject_duplicates(frame: pd.DataFrame, key: list[str], what: str, path: str) -> None:
    """Any key twice in one file is an error naming the first repeats and where they are."""
    dup = frame[frame.duplicated(key, keep=False)]
    if dup.empty:
        return
    groups = dup.groupby(key, sort=False)
    examples = []
    for values, group in list(groups)[:_EXAMPLES]:
        values = values if isinstance(values, tuple) else (values,)
        examples.append(f"{'/'.join(map(str, values))} at {_locations(group)}")
    second = int(dup[dup.duplicated(key)]["line"].iloc[0])
    raise InputError(
        f"{groups.ngroups:,} duplicate {what} (first: {'; '.join(examples)}); each must appear once in the "
        f"file; remove the repeats",
        path=path, line=second or None,
    )


def _drop_unknown(frame: pd.DataFrame, unknown: pd.Series, column: str, what: str, hint: str,
                  path: str, skip: bool, result: ImportResult) -> pd.DataFrame:
    """Rows naming ids the project lacks: an error (count + examples), or dropped with ``skip``."""
    if not unknown.any():
        return frame
    bad = frame[unknown]
    if skip:
        result.skipped[f"unknown {what}"] = result.skipped.get(f"unknown {what}", 0) + len(bad)
        return frame[~unknown]
    distinct = bad.drop_duplicates(column)
    examples = ", ".join(f"{r[column]!r}{_where(r)}" for _, r in distinct.head(_EXAMPLES).iterrows())
    raise InputError(
        f"{len(bad):,} rows name {len(distinct):,} {what} that are not in the project (first: {examples}); "
        f"{hint}, or pass --skip-unknown to drop these rows",
        path=path, line=int(bad["line"].iloc[0]) or None,
    )


def _conflict(rows: pd.DataFrame, key: str, describe: Callable[[pd.Series], str], what: str, path: str,
              fix: str) -> None:
    if rows.empty:
        return
    examples = "; ".join(f"{r[key]!r}{_where(r)}: {describe(r)}" for _, r in rows.head(_EXAMPLES).iterrows())
    raise InputError(
        f"conflicts with the stored {what}: {len(rows):,} have the same id but different content "
        f"(first: {examples}); nothing was imported. {fix}",
        path=path, line=int(rows["line"].iloc[0]) or None,
    )


def _differs(a: pd.Series, b: pd.Series) -> pd.Series:
    """Element-wise ``a != b`` where two missing values are equal (never NA)."""
    a_missing, b_missing = a.isna().to_numpy(), b.isna().to_numpy()
    unequal = a.astype(object).to_numpy() != b.astype(object).to_numpy()
    return pd.Series((a_missing != b_missing) | (~a_missing & ~b_missing & unequal), index=a.index)


def _short(text, n: int = 40) -> str:
    text = "" if text is None else str(text)
    return repr(text if len(text) <= n else text[:n] + "…")


# --- the service -------------------------------------------------------------------------------
def import_file(
    db: Database,
    kind: str,
    path: str | Path,
    *,
    format: str | None = None,
    name: str | None = None,
    assessor: str | None = None,
    skip_unknown: bool = False,
    id_field: str | None = None,
    text_field: str | None = None,
    title_field: str | None = None,
    label: str | None = None,
    progress: ProgressFactory | None = None,
) -> ImportResult:
    """Import one file (or folder) of ``kind`` into the project; see the module docstring.

    ``label`` names the file in messages and the ledger when ``path`` is a temporary copy (an
    upload in the app). ``progress`` is a :mod:`workbench.services.progress` factory (the CLI's
    tqdm bar); parsing large files advances it by lines.
    Returns an :class:`ImportResult`; raises :class:`InputError` and leaves the project unchanged
    when anything is wrong.
    """
    started = time.perf_counter()
    path = Path(path)
    source = _read_source(path, label or str(path))
    fmt = _resolve_format(kind, format, source)
    result = ImportResult(kind=kind, path=source.label, format=fmt, name=name)
    cur = db.cursor()
    try:
        earlier = store_imports.find_import(cur, kind, source.sha256)
    finally:
        cur.close()
    if earlier is not None:
        result.already_imported = earlier
        result.name = earlier["name"]
        return result
    progress = progress or no_progress
    importer = {"corpus": _import_corpus, "queries": _import_queries, "qrels": _import_qrels,
                "run": _import_run}[kind]
    importer(db, source, result, progress=progress, assessor=assessor, skip=skip_unknown,
             fields={"id_field": id_field, "text_field": text_field, "title_field": title_field})
    result.seconds = time.perf_counter() - started
    return result


def _parse_with_bar(progress: ProgressFactory, source: _Source, parse: Callable) -> pd.DataFrame:
    text = source.text()
    with progress(f"reading {source.path.name}", text.count("\n") + 1, "lines") as advance:
        return parse(text, advance)


def _finish(cur, source: _Source, result: ImportResult) -> None:
    store_imports.record_import(
        cur, kind=result.kind, name=result.name, path=source.label, format=result.format,
        sha256=source.sha256, rows=result.rows, skipped=result.skipped_total + result.excluded,
    )


# corpus ------------------------------------------------------------------------------------------
def _parse_documents(source: _Source, fmt: str, progress: ProgressFactory, fields: dict) -> pd.DataFrame:
    if fmt == "folder":
        files = [(rel, decode_utf8(data, str(source.path / rel))) for rel, data in source.files]
        if not files:
            raise InputError(f"holds no {'/'.join(corpus_formats.TEXT_SUFFIXES)} files", path=source.label)
        return corpus_formats.documents_from_files(files)
    if fmt == "jsonl":
        return _parse_with_bar(progress, source, lambda text, tick: corpus_formats.documents_from_jsonl(
            text, source.label, tick=tick, **fields))
    return _parse_with_bar(progress, source, lambda text, tick: corpus_formats.documents_from_smart(
        text, source.label, tick=tick))


def _import_corpus(db, source, result, *, progress, fields, **_):
    docs = _parse_documents(source, result.format, progress, fields)
    _reject_duplicates(docs, ["doc_id"], "doc ids", source.label)
    result.name = result.name or source.path.stem
    with db.transaction() as cur:
        stored = store_imports.stored_documents(cur, docs["doc_id"])
        merged = docs.merge(stored, on="doc_id", how="left", suffixes=("", "_stored"), indicator=True)
        exists = (merged["_merge"] == "both").to_numpy()
        text_diff = _differs(merged["text"], merged["text_stored"]).to_numpy() & exists
        title_diff = _differs(merged["title"], merged["title_stored"]).to_numpy() & exists
        clash = merged[text_diff | title_diff].copy()
        clash["what"] = ["text differs" if t else "title differs" for t in text_diff[text_diff | title_diff]]
        _conflict(
            clash, "doc_id",
            lambda r: (f"text {_short(r['text_stored'])} stored vs {_short(r['text'])} in the file"
                       if r["what"] == "text differs"
                       else f"title {_short(r['title_stored'])} stored vs {_short(r['title'])} in the file"),
            "documents", source.label,
            "Documents are immutable because judgments point at their character offsets; "
            "give changed documents new ids or start a new project",
        )
        new = merged.loc[~exists, DOCUMENT_COLUMNS]
        result.present = int(exists.sum())
        result.rows = write_documents(cur, new)
        _finish(cur, source, result)


# queries -----------------------------------------------------------------------------------------
def _parse_queries(source: _Source, fmt: str, progress: ProgressFactory, fields: dict) -> pd.DataFrame:
    if fmt == "jsonl":
        return _parse_with_bar(progress, source, lambda text, tick: corpus_formats.queries_from_jsonl(
            text, source.label, tick=tick, id_field=fields["id_field"], text_field=fields["text_field"]))
    text = source.text()
    if fmt == "tsv":
        return corpus_formats.queries_from_tsv(text, source.label)
    return corpus_formats.queries_from_smart(text, source.label, by_position=(fmt == "cranfield"))


def _store_queries(cur, queries: pd.DataFrame, path: str) -> tuple[int, int]:
    """Write the queries the project lacks; (written, already stored). Conflicts raise."""
    stored = store_imports.stored_queries(cur, queries["query_id"])
    merged = queries.merge(stored, on="query_id", how="left", suffixes=("", "_stored"), indicator=True)
    exists = (merged["_merge"] == "both").to_numpy()
    text_diff = _differs(merged["text"], merged["text_stored"]).to_numpy() & exists
    desc_diff = _differs(merged["description"], merged["description_stored"]).to_numpy() & exists
    # A query without a description in the file does not contradict a stored description.
    desc_diff &= merged["description"].notna().to_numpy()
    _conflict(
        merged[text_diff | desc_diff], "query_id",
        lambda r: f"text {_short(r['text_stored'])} stored vs {_short(r['text'])} in the file"
        if r["text"] != r["text_stored"] else "description differs",
        "queries", path,
        "Queries are immutable because judgments and runs refer to them; give changed queries new ids",
    )
    return write_queries(cur, merged.loc[~exists, QUERY_COLUMNS]), int(exists.sum())


def _import_queries(db, source, result, *, progress, fields, **_):
    queries = _parse_queries(source, result.format, progress, fields)
    _reject_duplicates(queries, ["query_id"], "query ids", source.label)
    result.name = result.name or source.path.stem
    with db.transaction() as cur:
        result.rows, result.present = _store_queries(cur, queries, source.label)
        _finish(cur, source, result)


# qrels ---------------------------------------------------------------------------------------------
def _parse_qrels(source: _Source, fmt: str) -> tuple[pd.DataFrame, pd.DataFrame | None, int]:
    """(judgments, queries carried by the rows or None, excluded rows)."""
    text = source.text()  # checks UTF-8 with a byte offset before the readers see the file
    if fmt == "trec":
        return label_formats.qrels_frame(read_trec_qrels(source.path, careful=True)), None, 0
    if fmt == "beir":
        return label_formats.qrels_frame(read_beir_qrels(source.path)), None, 0
    if fmt == "jsonl":
        frame = label_formats.qrels_frame(read_jsonl_qrels(source.path))
        return frame, label_formats.qrels_row_queries(text, source.label), 0
    if fmt == "spans":
        return label_formats.span_judgments(text, source.label), None, 0
    frame, excluded = label_formats.cranfield_qrels(text, source.label)
    return frame, None, excluded


def _import_qrels(db, source, result, *, assessor, skip, **_):
    path = source.label
    with _named_as_label(source):
        frame, row_queries, result.excluded = _parse_qrels(source, result.format)
    if frame.empty:
        raise InputError("holds no judgments", path=path)
    label_formats.check_grades(frame, path)
    default_assessor = assessor or result.name or source.path.stem
    result.name = default_assessor
    if "assessor" in frame:
        frame["assessor"] = frame["assessor"].astype(object).where(frame["assessor"].notna(), default_assessor)
        key = ["query_id", "doc_id", "start", "end", "assessor"]
    else:
        frame["assessor"] = default_assessor
        key = ["query_id", "doc_id"]
    _reject_duplicates(frame, key, "judgments (same query and document" + (" span" if "start" in frame else "")
                       + ")", path)

    with db.transaction() as cur:
        if row_queries is not None and not row_queries.empty:
            row_queries = row_queries.drop_duplicates(["query_id", "text"])
            _reject_duplicates(row_queries, ["query_id"], "query ids with different query texts", path)
            result.queries_added, _ = _store_queries(cur, row_queries, path)
        known = store_imports.stored_queries(cur, frame["query_id"])["query_id"]
        frame = _drop_unknown(frame, ~frame["query_id"].isin(known), "query_id", "query ids",
                              "import the queries first (workbench import queries FILE)", path, skip, result)
        lengths = store_imports.document_lengths(cur, frame["doc_id"])
        frame = _drop_unknown(frame, ~frame["doc_id"].isin(lengths["doc_id"]), "doc_id", "doc ids",
                              "import a corpus that holds them (workbench import corpus FILE)", path, skip, result)
        if frame.empty:
            raise InputError("no judgments left after dropping rows with unknown ids; nothing was imported",
                             path=path)
        frame = frame.merge(lengths, on="doc_id", how="left")
        if "start" in frame:
            outside = frame[frame["end"] > frame["length"]]
            if len(outside):
                r = outside.iloc[0]
                raise InputError(
                    f"{len(outside):,} spans end after the end of their document (first: doc {r['doc_id']!r} "
                    f"span [{r['start']}, {r['end']}) but the text has {r['length']} characters); offsets are "
                    f"character positions in the stored text, end exclusive",
                    path=path, line=int(r["line"]),
                )
        else:
            frame["start"] = 0
            frame["end"] = frame["length"]
        frame = frame.astype({"start": "int64", "end": "int64", "grade": "int64"})
        stored = store_imports.stored_span_grades(cur, frame, "imported")
        merged = frame.merge(stored, on=["query_id", "doc_id", "start", "end", "assessor"], how="left",
                             suffixes=("", "_stored"))
        exists = merged["grade_stored"].notna()
        clash = merged[exists & (merged["grade_stored"] != merged["grade"])].copy()
        clash["item"] = clash["query_id"] + "/" + clash["doc_id"]
        _conflict(clash, "item",
                  lambda r: f"grade {int(r['grade_stored'])} stored vs {int(r['grade'])} in the file",
                  f"judgments of assessor {default_assessor!r}", path,
                  "Import the new version under another assessor name (--assessor) to keep both")
        new = merged.loc[~exists, ["query_id", "doc_id", "start", "end", "grade", "assessor"]].copy()
        new["source"] = "imported"
        new["status"] = "ok"
        result.present = int(exists.sum())
        result.rows = write_judgments(cur, new)
        _finish(cur, source, result)


# runs ------------------------------------------------------------------------------------------------
def _import_run(db, source, result, *, skip, **_):
    path = source.label
    source.text()  # UTF-8 check with byte offset
    with _named_as_label(source):
        frame = label_formats.run_frame(read_trec_run(source.path, careful=True))
    if frame.empty:
        raise InputError("holds no run rows", path=path)
    _reject_duplicates(frame, ["query_id", "item_id"], "results (same query and id)", path)
    name = result.name or source.path.stem
    result.name = name
    if ":" in name:
        raise InputError(f"run name {name!r} may not contain ':'; pass --name", path=path)

    with db.transaction() as cur:
        docs = store_imports.document_lengths(cur, frame["item_id"])["doc_id"]
        chunks = store_imports.stored_chunks(cur, frame["item_id"])
        is_doc = frame["item_id"].isin(docs)
        is_chunk = frame["item_id"].isin(chunks["chunk_id"]) & ~is_doc
        if is_doc.any() and is_chunk.any():
            d, c = frame[is_doc].iloc[0], frame[is_chunk].iloc[0]
            raise InputError(
                f"mixes document ids ({int(is_doc.sum()):,} rows, e.g. {d['item_id']!r} line {d['line']}) and "
                f"chunk ids ({int(is_chunk.sum()):,} rows, e.g. {c['item_id']!r} line {c['line']}); a run ranks "
                f"either whole documents or the chunks of one chunking",
                path=path, line=int(c["line"]),
            )
        if is_chunk.any():
            used = chunks[chunks["chunk_id"].isin(frame.loc[is_chunk, "item_id"])]
            chunkings = sorted(used["chunking"].unique())
            if len(chunkings) > 1:
                raise InputError(f"ranks chunks of several chunkings ({', '.join(chunkings)}); a chunk-level "
                                 f"run ranks the chunks of one chunking", path=path)
            result.level, result.chunking = "chunk", chunkings[0]
            frame = _drop_unknown(frame, ~is_chunk, "item_id", "chunk ids",
                                  f"they are not chunks of {chunkings[0]!r}", path, skip, result)
        else:
            result.level = "doc"
            frame = _drop_unknown(frame, ~is_doc, "item_id", "doc ids",
                                  "import a corpus that holds them (workbench import corpus FILE)", path, skip, result)
        known_q = store_imports.stored_queries(cur, frame["query_id"])["query_id"]
        frame = _drop_unknown(frame, ~frame["query_id"].isin(known_q), "query_id", "query ids",
                              "import the queries first (workbench import queries FILE)", path, skip, result)
        if frame.empty:
            raise InputError("no run rows left after dropping rows with unknown ids; nothing was imported",
                             path=path)

        existing = store_imports.run_info(cur, name)
        if existing is not None:
            stored = store_imports.run_rows_for(cur, name)
            both = frame.merge(stored, on=["query_id", "item_id"], how="outer", suffixes=("", "_stored"),
                               indicator=True)
            differ = both[(both["_merge"] != "both") | (both["score"] != both["score_stored"])]
            if differ.empty:
                result.present = len(frame)
                _finish(cur, source, result)
                return
            r = differ.iloc[0]
            raise InputError(
                f"run {name!r} already exists ({existing['level']} level, {len(stored):,} rows) and "
                f"{len(differ):,} of its (query, id) results differ from this file (first: query "
                f"{r['query_id']!r} id {r['item_id']!r}: score {r['score_stored']} stored vs {r['score']} in "
                f"the file); nothing was imported; pass --name to import it as a new run",
                path=path, line=int(r["line"]) if pd.notna(r["line"]) else None,
            )

        frame["rank"] = label_formats.rank_by_score(frame)
        if result.level == "chunk":
            owner = chunks.drop_duplicates("chunk_id").set_index("chunk_id")["doc_id"]
            rows = pd.DataFrame({"query_id": frame["query_id"], "doc_id": frame["item_id"].map(owner),
                                 "chunk_id": frame["item_id"]})
        else:
            rows = pd.DataFrame({"query_id": frame["query_id"], "doc_id": frame["item_id"],
                                 "chunk_id": pd.Series([None] * len(frame), index=frame.index, dtype=object)})
        rows["rank"] = frame["rank"].astype("int64")
        rows["score"] = frame["score"].astype("float64")
        rows = rows.sort_values(["query_id", "rank"], kind="stable")
        result.rows = write_run(cur, name, "imported", rows,
                                params={"file": source.label, "format": result.format, "sha256": source.sha256})
        set_run_scope(cur, name, result.level, result.chunking)
        _finish(cur, source, result)


def recent_imports(db: Database, limit: int = 20) -> pd.DataFrame:
    """The ledger, newest first (for status pages)."""
    return store_imports.read_imports(db, limit)


def preview_documents(db: Database, limit: int = 5) -> pd.DataFrame:
    """A few stored documents (``doc_id, title, text``) to eyeball an import."""
    return store_imports.sample_documents(db, limit)
