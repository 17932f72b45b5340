"""The page's words: service messages and stored values as an app user should read them.

An error is data (:class:`workbench.errors.WorkbenchError`): it names the fields it concerns
and the CLI commands it suggests as placeholders, and each front end renders them in its own words.
A page calls :func:`page_message` with the fields it shows, so the same error names the field or
button the user can act on, with no rewriting of text:

* ``{set_field}`` on the field ``skip_unknown`` → ``tick “Skip rows with unknown ids”`` (a
  checkbox), on ``name`` → ``fill in “Run name”`` (a text field), ``{field}`` → ``“Run name”``;
* a CLI command (``{command:import corpus FILE}``) → the page that does the same ("on the Data page");
* the server-side path of an uploaded file → the name of the file the user uploaded.

Pages also check their fields before calling a service (empty or taken names, nothing chosen),
so the most common mistakes never reach this translation; it is the safety net for the rest.

:func:`cell` and :func:`params_text` keep ``None``, ``nan`` and Python dict text out of tables.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from workbench.config import load_settings
from workbench.errors import WorkbenchError, placeholders

#: The "Labels" choice of the pages that read qrels (Qrels, Evaluate, Experiments): the page's words
#: for each label source (:data:`workbench.core.formats.LABEL_SOURCES`), the policy first.
LABEL_SOURCE_WORDS: dict[str, str] = {"Merged (the policy)": "merged", "People only": "human",
                                      "LLM judge only": "llm"}


@dataclass(frozen=True)
class Field:
    """A control on a page: its label and kind (``text``, ``check``, ``choice``, ``number``, ``file``)."""

    label: str
    kind: str = "text"

    @property
    def verb(self) -> str:
        return {"check": "tick", "choice": "choose", "number": "set", "file": "choose"}.get(self.kind, "fill in")

    @property
    def quoted(self) -> str:
        return f"“{self.label}”"


# The fields errors concern (:attr:`workbench.errors.WorkbenchError.field`, the CLI's flags without
# ``--``), with the words most pages use for them: the one table of field labels; a page passes its own.
COMMON_FIELDS: dict[str, Field] = {
    "name": Field("Name"),
    "format": Field("Format", "choice"),
    "skip_unknown": Field("Skip rows with unknown ids", "check"),
    "assessor": Field("Assessor"),
    "chunking": Field("Chunking", "choice"),
    "runs": Field("Runs", "choice"),
    "k": Field("Results per query", "number"),
    "depth": Field("Depth", "number"),
    "size": Field("Size", "number"),
    "overlap": Field("Overlap", "number"),
    "unit": Field("Unit", "choice"),
    "model": Field("Model"),
    "weights": Field("Weights"),
    "rrf_k": Field("RRF k", "number"),
    "source": Field("Source run", "choice"),
    "level": Field("Level", "choice"),
    "out": Field("File name"),
    "force": Field("Replace the existing file", "check"),
    "id_field": Field("Id field"),
    "text_field": Field("Text field"),
    "title_field": Field("Title field"),
}

# CLI commands and the page that does the same thing.
COMMAND_PAGES = {
    "import": "Data", "export": "Data", "init": "Overview", "status": "Overview",
    "chunk": "Retrieve & Pool", "retrieve": "Retrieve & Pool", "pool": "Retrieve & Pool",
    "pool-stats": "Retrieve & Pool",
}

def _field_key(name: str) -> str:
    """A field key from a key or a flag (pages still pass their fields by flag): ``--base-url`` ->
    ``base_url``."""
    return name[2:].replace("-", "_") if name.startswith("--") else name


def is_metavariable(value: str) -> bool:
    """Whether a value in a message is a CLI metavariable (``NAME``, ``A,B``, ``N``), which a page
    does not show: the field itself is where the user types it."""
    return value.upper() == value and any(ch.isalpha() for ch in value)


def command_page(words: str) -> str:
    """Where a page does what the CLI command ``workbench WORDS`` does: "on the Data page", or
    "on the command line" for a command no page offers."""
    parts = words.split()
    while parts and parts[0].startswith("--"):
        parts = parts[2:] if parts[0] in ("--db", "--config") else parts[1:]
    page = COMMAND_PAGES.get(parts[0]) if parts else None
    return f"on the {page} page" if page else "on the command line"


def page_message(message: str | Exception, fields: Mapping[str, Field] | None = None, *,
                 uploaded: Mapping[str, str] | None = None, project: str | None = None,
                 command: Callable[[str], str] | None = None) -> str:
    """``message`` in the page's words (see the module doc); one line.

    ``fields`` maps the fields an error may concern (keys, or flags as pages used to pass them) to
    the page's controls (merged over :data:`COMMON_FIELDS`); ``uploaded`` maps server paths of
    uploaded files to the names the user gave them; ``project`` is the project database path, which
    the page calls "this project"; ``command`` words a CLI command the page does itself (its
    button; default :func:`command_page`). A :class:`~workbench.errors.WorkbenchError` is rendered from its
    data (fields, hint, command), and so is text with placeholders (a summary asked for with its
    fields as data); any other text is shown as it is: nothing is rewritten.
    """
    known = {_field_key(k): v for k, v in {**COMMON_FIELDS, **(fields or {})}.items()}

    def field_of(key: str) -> Field:
        return known.get(key) or Field(key.replace("_", " ").capitalize())

    def valued(kind: str, key: str, value: str) -> str:
        field = field_of(key)
        if is_metavariable(value):
            return f"{field.verb} {field.quoted}" if kind == "set_field" else field.quoted
        return f"set {field.quoted} to {value}" if kind == "set_field" else f"{field.quoted} = {value}"

    if isinstance(message, str) and placeholders(message):
        message = WorkbenchError(message)  # a summary or note with fields as data (not an error)
    if isinstance(message, WorkbenchError):
        text = message.render(lambda key: field_of(key).quoted,
                              lambda key: f"{field_of(key).verb} {field_of(key).quoted}",
                              command or command_page, valued)
    else:
        text = str(message)
    for server_path, name in (uploaded or {}).items():
        text = text.replace(str(server_path), name)
    if project:
        text = text.replace(f" in {project}", " in this project").replace(str(project), "this project")
    return " ".join(text.split())


def cell(value) -> str | int | float:
    """A table cell without ``None``/``nan`` (shown empty) or dict text (shown as key = value)."""
    if value is None:
        return ""
    if isinstance(value, float) and math.isnan(value):
        return ""
    pd = sys.modules.get("pandas")  # a pandas NA exists only once pandas is loaded
    if pd is not None and (value is pd.NA or value is pd.NaT):
        return ""
    if isinstance(value, Mapping):
        return params_text(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(str(cell(v)) for v in value)
    return value


def params_text(params, *, skip: tuple[str, ...] = ()) -> str:
    """Parameters as readable ``key = value`` pairs (a dict, or its JSON text); empty when none."""
    if params is None or (isinstance(params, float) and math.isnan(params)):
        return ""
    if isinstance(params, str):
        try:
            params = json.loads(params)
        except ValueError:
            return params
    if not isinstance(params, Mapping):
        return str(cell(params))
    return ", ".join(f"{key} = {cell(value)}" for key, value in params.items()
                     if key not in skip and cell(value) != "")


def clean_rows(frame, *, params: tuple[str, ...] = ("params",), skip_params: tuple[str, ...] = ()) -> list[dict]:
    """A DataFrame as rows for ``st.dataframe`` with :func:`cell` applied and params as key = value."""
    rows = []
    for record in frame.to_dict("records"):
        row = {}
        for key, value in record.items():
            row[key] = params_text(value, skip=skip_params) if key in params else cell(value)
        rows.append(row)
    return rows


def excerpt(text, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, with "…" when cut."""
    text = "" if cell(text) == "" else str(text)
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip() + " …"


def qrels_note(note: str) -> str:
    """A qrels-policy note (:mod:`workbench.services.qrels.rule`) in the page's words: the service's
    note names a command and a setting; the page names its pages and the Labels field."""
    if "calibration gate" in note:
        return (note.split(":")[0] + ": their judge configuration has not passed the calibration gate yet. "
                "Label a calibration sample on the Label page and read the verdict on the Calibration page; "
                "or look at the judge's labels alone with Labels = LLM judge only.")
    return note


def binarising_note(page: str, *, calibration: int | None = None) -> str:
    """Where "relevant" starts on the Qrels page (grade 1, as evaluation counts it by default) and
    on the Calibration page (the gate's ``[calibration] relevant_min_grade``, 2 by default), said
    on both pages so that a grade-1 label is not read the same way on each."""

    settings = load_settings()
    evaluation = int(settings.get("evaluation", "relevance_threshold"))
    gate = int(settings.get("calibration", "relevant_min_grade")) if calibration is None else int(calibration)
    if page == "qrels":
        return (f"Relevant here means grade 1 or higher; evaluation counts grade {evaluation} or higher as "
                f"relevant. The Calibration page checks the judge at grade {gate} or higher, so there a "
                f"grade-{gate - 1} label counts as not relevant.")
    return (f"Relevant here means grade {gate} or higher (SME and judge alike), so a grade-{gate - 1} label "
            f"counts as not relevant. The Qrels page counts grade 1 or higher as relevant, and evaluation "
            f"grade {evaluation} or higher.")


def policy_words(text: str) -> str:
    """A qrels policy line with its notes (joined by ``"; "``, as pool statistics and the pool
    peek return it) with every note in the page's words (:func:`qrels_note`)."""
    return "; ".join(qrels_note(part) for part in str(text).split("; ") if part)
