"""Exporting qrels from the project's span-anchored judgments, and stored runs as TREC runs.

Formats (``format``):

``trec``   ``query_id Q0 item_id grade`` lines. The second column is ``iteration`` (``Q0`` by
           default, as in the TREC DL/Anserini qrels; trec_eval ignores it; pass ``"0"`` for the
           classic form).
``beir``   ``query-id<TAB>corpus-id<TAB>score`` with that header line.
``jsonl``  one row per query: ``{"query_id", "query", "relevant": {item_id: grade}, "tags"}``
           (``query``/``tags`` from the queries table, null when the query is not stored).
``spans``  one row per span judgment: ``{"query_id", "doc_id", "start", "end", "grade", "assessor",
           "tier"}``, the format ``workbench import qrels --format spans`` reads (it ignores
           ``tier``). Level-independent.

Level: ``doc`` qrels grade a document by the maximum grade of its judged spans; ``chunk`` qrels
(need ``chunking``) grade each chunk of that chunking by the maximum grade of the spans it matches
under the span rule of :func:`workbench.core.documents.spans.chunk_qrels` (overlap / shorter span >=
``min_overlap``). Only matched (judged) items appear: an absent item is unjudged.

Source: every format follows the project's one qrels rule, :mod:`workbench.services.qrels.rule`
(adjudicated > SME > imported > LLM from a judge configuration that passed the gate; several
assessors by majority; the ``[qrels]`` policy, stated with its notes and the qrels' fingerprint in
the result and its summary).
``human`` = that rule without the LLM tier; ``llm`` = the LLM judge's labels alone (asking for
them by name is the opt-in to ungated ones); ``merged`` = the whole rule. ``spans`` writes, per
query and document, the spans of the tier that decides the document under the rule
(:func:`workbench.core.qrels_policy.decisive_spans`), so importing the file elsewhere gives the
same document qrels; an LLM span's assessor is its judge configuration (``model|prompt_hash``).
Only judgments with status ``ok`` and a grade are used. Rows are sorted by query_id, then item
id (as strings).

Unanswerable queries (:mod:`workbench.services.evaluation.abstention`) are left out of the ``trec``, ``beir``
and ``jsonl`` qrels by default, as ``workbench eval --runs`` leaves them out of ranking measures,
so file-mode ``eval`` of the exported qrels and run gives the project's means and qrels
fingerprint; the summary names them. ``keep_unanswerable=True`` writes them. ``spans`` (the
labels themselves) always has them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from workbench.core.formats import EXPORT_FORMATS, EXPORT_LEVELS, LABEL_SOURCES
from workbench.errors import ConfigError, InputError, clip, render_text
from workbench.services import visibility
from workbench.services.output_file import check_output, write_lines
from workbench.services.qrels.rule import decisive_spans_of, default_policy, project_qrels, with_min_overlap
from workbench.store.corpus import query_texts
from workbench.store.database import Database
from workbench.store.runs import read_run_info, read_run_rows

FORMATS = EXPORT_FORMATS
LEVELS = EXPORT_LEVELS
SOURCES = LABEL_SOURCES


@dataclass
class ExportResult:
    path: Path
    format: str
    level: str
    source: str
    rows: int
    queries: int
    chunking: str | None = None
    replaced: bool = False
    policy: str = ""  # the qrels policy statement (services.qrels)
    notes: tuple[str, ...] = ()  # what the policy left out (e.g. LLM labels of an ungated judge)
    fingerprint: str = ""  # the qrels' fingerprint (services.qrels.ProjectQrels.fingerprint)
    unanswerable: tuple[str, ...] = ()  # unanswerable queries left out (module docstring)

    def summary(self, *, data: bool = False) -> str:
        """What was written, the policy and its notes; with ``data`` the option it names stays a
        placeholder (``{field:force}``, :mod:`workbench.errors`) for a page to word, else it is
        rendered as the CLI says it."""
        at = f"chunk level ({self.chunking})" if self.level == "chunk" else f"{self.level} level"
        unit = "judgments" if self.format == "spans" else "qrels"
        text = (f"wrote {self.rows:,} {unit} for {self.queries:,} queries to {self.path} "
                f"(format {self.format}, {at}, source {self.source})"
                + ("; replaced the file that was there ({field:force})" if self.replaced else "")
                + (f"\n{self.policy}" + (f" (qrels {self.fingerprint})" if self.fingerprint else "")
                   if self.policy else "")
                + "".join(f"\n{note}" for note in self.notes)
                + (f"\nleft out {len(self.unanswerable):,} unanswerable queries "
                   f"({', '.join(self.unanswerable[:5])}{', ...' if len(self.unanswerable) > 5 else ''}), as the "
                   f"project's evaluation leaves them out of ranking measures, so scoring this file gives the "
                   f"same means" if self.unanswerable else ""))
        return text if data else render_text(text)


def _check(format: str, level: str, source: str, chunking: str | None) -> None:
    for value, allowed, what in ((format, FORMATS, "format"), (level, LEVELS, "level"), (source, SOURCES, "source")):
        if value not in allowed:
            raise InputError(f"unknown {what} {value!r}; expected one of {', '.join(allowed)}")
    if level == "chunk" and not chunking:
        raise InputError("chunk-level qrels need a chunking; {set_field:chunking NAME} (see {command:status})")
    if format == "spans" and level == "chunk":
        raise InputError("span judgments do not depend on a chunking; export spans without {field:level chunk}")


def check_iteration(iteration: str) -> None:
    """Refuse an ``iteration`` that is not one printable token without whitespace: the TREC
    readers (ours and trec_eval) split a line at whitespace, so ``"a b"`` or ``""`` would write
    a qrels file of five or three columns that they refuse."""
    if not isinstance(iteration, str) or not iteration or not iteration.isprintable() \
            or any(c.isspace() for c in iteration):
        raise ConfigError(f"{{field}} must be one word of printable characters without spaces (the second "
                          f"column of a TREC qrels line), got {clip(iteration)}", field="iteration",
                          hint="pass Q0 (the default) or 0")


def qrels_table(db: Database, *, level: str = "doc", chunking: str | None = None, source: str = "merged",
                min_overlap: float = 0.5, policy=None) -> pd.DataFrame:
    """``query_id, item_id, grade`` for the chosen level and source, by the project's one qrels
    rule (:func:`workbench.services.qrels.rule.project_qrels`; ``policy`` defaults to ``[qrels]``)."""
    return _project_qrels(db, level, chunking, source, min_overlap, policy).table[["query_id", "item_id", "grade"]]


def _project_qrels(db: Database, level: str, chunking: str | None, source: str, min_overlap: float, policy):

    _check("trec", level, source, chunking)
    pol = with_min_overlap(policy if policy is not None else default_policy(), min_overlap)
    return project_qrels(db, level=level, chunking=chunking, source=source, policy=pol)


def span_table(db: Database, *, source: str = "merged", policy=None) -> pd.DataFrame:
    """``query_id, doc_id, start, end, grade, assessor, tier`` of the chosen source under the rule
    (module docstring), sorted; ``attrs``: ``qrels_policy`` (the statement), ``qrels_notes``,
    ``qrels_fingerprint`` (of the document qrels the spans decide)."""

    _check("spans", "doc", source, None)
    spans, qrels = decisive_spans_of(db, source=source, policy=policy if policy is not None else default_policy())
    # One row per assessor and span (an SME who labelled the same pair in two samples gave two
    # judgments): its highest grade, which is what the rule's per-assessor step takes anyway, and
    # the importer refuses a span listed twice.
    out = (spans.groupby(["query_id", "doc_id", "start", "end", "assessor", "tier"], as_index=False, sort=False)
           ["grade"].max())[["query_id", "doc_id", "start", "end", "grade", "assessor", "tier"]]
    out = out.sort_values(["query_id", "doc_id", "start", "end", "assessor"], kind="stable").reset_index(drop=True)
    out.attrs.update(qrels_policy=qrels.statement(), qrels_notes=tuple(qrels.notes),
                     qrels_fingerprint=qrels.fingerprint)
    return out


def export_qrels(db: Database, out: str | Path, *, format: str = "trec", level: str = "doc",
                 chunking: str | None = None, source: str = "merged", min_overlap: float = 0.5,
                 iteration: str = "Q0", force: bool = False, policy=None,
                 keep_unanswerable: bool = False) -> ExportResult:
    """Write qrels to ``out`` (see the module docstring); returns what was written.

    ``out`` follows :mod:`workbench.services.output_file`: never a database, link or device,
    an existing file only with ``force``. Refused to annotators (:mod:`workbench.services.visibility`).
    """
    visibility.require_read("label_files")
    _check(format, level, source, chunking)
    check_iteration(iteration)
    out = Path(out)
    check_output(out, force=force)
    if format == "spans":
        table = span_table(db, source=source, policy=policy)
        replaced = write_lines(out, (json.dumps({"query_id": q, "doc_id": d, "start": int(s), "end": int(e),
                                                 "grade": int(g), "assessor": a, "tier": t}, ensure_ascii=False)
                                     + "\n" for q, d, s, e, g, a, t in table.itertuples(index=False)), force=force)
        return ExportResult(out, format, "doc", source, len(table), table["query_id"].nunique(), replaced=replaced,
                            policy=table.attrs["qrels_policy"], notes=table.attrs["qrels_notes"],
                            fingerprint=table.attrs["qrels_fingerprint"])

    project = _project_qrels(db, level, chunking, source, min_overlap, policy)
    left_out: list[str] = []
    if not keep_unanswerable:
        from workbench.services.qrels.answerability import without_unanswerable

        project, left_out = without_unanswerable(db, project)
    table = project.table[["query_id", "item_id", "grade"]]
    if format == "trec":
        replaced = write_lines(out, (f"{q} {iteration} {i} {g}\n" for q, i, g in table.itertuples(index=False)),
                               force=force)
    elif format == "beir":
        replaced = write_lines(out, ["query-id\tcorpus-id\tscore\n"]
                               + [f"{q}\t{i}\t{g}\n" for q, i, g in table.itertuples(index=False)], force=force)
    else:
        queries = query_texts(db).set_index("query_id")
        lines = []
        for qid, group in table.groupby("query_id", sort=True):
            text = queries["text"].get(qid)
            tags = queries["tags"].get(qid)
            lines.append(json.dumps({
                "query_id": qid,
                "query": None if text is None or pd.isna(text) else text,
                "relevant": {i: int(g) for i, g in zip(group["item_id"], group["grade"])},
                "tags": None if tags is None or pd.isna(tags) else json.loads(tags),
            }, ensure_ascii=False) + "\n")
        replaced = write_lines(out, lines, force=force)
    return ExportResult(out, format, level, source, len(table), table["query_id"].nunique(),
                        chunking if level == "chunk" else None, replaced, project.statement(), tuple(project.notes),
                        project.fingerprint, tuple(left_out))


@dataclass
class RunExportResult:
    path: Path
    run: str
    level: str
    chunking: str | None
    rows: int
    queries: int
    replaced: bool = False

    def summary(self, *, data: bool = False) -> str:
        """What was written; ``data`` as for :meth:`ExportResult.summary`."""
        scope = f"chunks of {self.chunking!r}" if self.level == "chunk" else "documents"
        text = (f"wrote run {self.run!r} ({scope}): {self.rows:,} rows for {self.queries:,} queries to "
                f"{self.path} (TREC format)"
                + ("; replaced the file that was there ({field:force})" if self.replaced else ""))
        return text if data else render_text(text)


def export_run(db: Database, name: str, out: str | Path, *, force: bool = False) -> RunExportResult:
    """Write stored run ``name`` as a TREC run: ``query_id Q0 item_id rank score name``.

    ``item_id`` is the chunk id for a chunk-level run, else the doc id; scores are written with
    every digit Python needs to read the same float back, so ``workbench import run`` of the
    file gives the same rows. ``out`` follows :mod:`workbench.services.output_file`.
    """
    out = Path(out)
    info = _run_info(db, name)
    check_output(out, force=force)
    lines = run_trec_lines(db, name)
    replaced = write_lines(out, lines, force=force)
    chunking = info["chunking"].iloc[0]
    return RunExportResult(out, name, str(info["level"].iloc[0]), None if pd.isna(chunking) else str(chunking),
                           len(lines), len({line.split(" ", 1)[0] for line in lines}), replaced)


def _run_info(db: Database, name: str) -> pd.DataFrame:
    info = read_run_info(db, [name])
    if info.empty:
        known = ", ".join(read_run_info(db)["name"]) or "none yet"
        raise InputError(f"no run named {name!r} in the project; known runs: {known}")
    return info


def run_trec_lines(db: Database, name: str) -> list[str]:
    """Stored run ``name`` as TREC run lines (what :func:`export_run` writes; the app offers them
    as a download): ``query_id Q0 item_id rank score name``, ordered by query then rank."""
    level = str(_run_info(db, name)["level"].iloc[0])
    rows = read_run_rows(db, name)
    items = rows["chunk_id"].where(rows["chunk_id"].notna(), rows["doc_id"]) if level == "chunk" else rows["doc_id"]
    return [f"{q} Q0 {i} {int(r)} {float(s)!r} {name}\n"
            for q, i, r, s in zip(rows["query_id"], items, rows["rank"], rows["score"], strict=True)]
