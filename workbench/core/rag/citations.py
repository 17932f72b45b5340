"""Citation evaluator: do generated answers cite the documents they were given?

Per answer, with context documents ``C`` (distinct ids, in the order given to the generator)
and citation matches ``m_1 .. m_T`` parsed from the answer:

* ``total_citations = T`` (every match, repeats included);
* ``valid_citations`` = matches that resolve to a document in ``C``; the rest are
  ``invalid_refs`` (their raw text, in order, repeats included);
* ``cited_docs`` = distinct documents of ``C`` validly cited;
* ``coverage = |cited_docs| / |C|``: the share of the context that was cited;
* ``faithfulness = valid_citations / T``: the share of citations pointing at real context;
* ``uncited_docs`` = ``C`` minus ``cited_docs``, in context order;
* with ``relevant_ids`` R given, ``relevant_coverage = |cited_docs ∩ R| / |R|``.

Edge cases: an answer with no citation has ``no_citations = True``; its faithfulness
follows the ``uncited`` convention. ``"one"`` (the default, the specification's harness:
``valid / total if total > 0 else 1.0``) scores it 1.0, and batch means of faithfulness
include it; ``"skip"`` scores it NaN, and batch means skip it (it is still counted in
``n_no_citations``), so an answer that cites nothing never looks perfectly faithful. Its
coverage is a true 0 either way. An empty context makes ``coverage`` NaN (nothing could be
covered), an empty ``R`` makes ``relevant_coverage`` NaN. Duplicate context ids count once in
``|C|``. The specification's harness also leaves out of both means an answer whose text or
context is empty; here such an answer is scored like any other (empty text: no citation).

Patterns: a preset name from :data:`PRESETS` or a custom regex with exactly one capturing
group (the citation token). A pattern resolves tokens either by ``"id"`` (the token is the
document id) or by ``"position"`` (the token is N, the N-th context document, 1-based).
Every preset resolves by id, as the specification compares each match with the context ids
(its ``bracket_number`` pattern ``\\[(\\d+)\\]`` included): with context ``1 3 5 7 10``, the
answer ``[3] [7] [99]`` has faithfulness 2/3 and coverage 2/5 by id, but 1/3 and 1/5 by
position (``[3]`` is then the document ``5``; ``[7]`` and ``[99]`` point past the 5 documents).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from workbench import lazylibs
from workbench.errors import ConfigError, InputError

if TYPE_CHECKING:
    import pandas as pd

Resolve = Literal["id", "position"]
Uncited = Literal["one", "skip"]

#: how an answer without any citation is scored (see the module docstring)
UNCITED: tuple[Uncited, ...] = ("one", "skip")


class CitationPatternError(ConfigError, ValueError):
    """A citation pattern is unknown, not a valid regex or lacks exactly one group."""


class CitationInputError(InputError, ValueError):
    """An answer record cannot be evaluated (missing answer text or context ids)."""


@dataclass(frozen=True)
class CitationPattern:
    name: str
    regex: re.Pattern[str]
    resolve: Resolve


# Ids in doc_id/ref citations allow any non-space, non-bracket characters (the spec's \w+
# would miss ids such as "it-handbook" or "doc_7.2"). `numeric` (the spec's bracket_number)
# and `footnote` keep the spec's id comparison; pass resolve="position" to treat [N] or
# [fn:N] as the N-th context document.
PRESETS: dict[str, tuple[str, Resolve]] = {
    "doc_id": (r"\[doc_id\s+([^\]\s]+)\]", "id"),
    "numeric": (r"\[(\d+)\]", "id"),
    "ref": (r"\[\[ref:([^\]\s]+)\]\]", "id"),
    "footnote": (r"\[fn:(\d+)\]", "id"),
}


def make_pattern(pattern: str | CitationPattern, resolve: Resolve | None = None) -> CitationPattern:
    """A preset name or custom regex (exactly one capturing group) as a pattern.

    ``resolve`` overrides the preset's resolution; custom regexes default to ``"id"``.
    """
    if isinstance(pattern, CitationPattern):
        return pattern if resolve is None else CitationPattern(pattern.name, pattern.regex, resolve)
    if resolve not in (None, "id", "position"):
        raise CitationPatternError(f"resolve must be 'id' or 'position', got {resolve!r}")
    if pattern in PRESETS:
        source, default = PRESETS[pattern]
        return CitationPattern(pattern, re.compile(source), resolve or default)
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise CitationPatternError(
            f"citation pattern {pattern} is neither a preset ({', '.join(PRESETS)}) "
            f"nor a valid regex: {exc}"
        ) from None
    if regex.groups != 1:
        raise CitationPatternError(
            f"citation pattern {pattern} has {regex.groups} capturing groups; it needs exactly "
            "one, around the cited id or number (use (?:...) for other groups)"
        )
    return CitationPattern("custom", regex, resolve or "id")


def parse_citations(answer: str, pattern: str | CitationPattern = "doc_id") -> list[str]:
    """Citation tokens in order of appearance (whitespace-stripped; repeats kept)."""
    pat = make_pattern(pattern)
    # A group that did not take part in a match (optional group) is not a citation.
    return [m.group(1).strip() for m in pat.regex.finditer(answer) if m.group(1) is not None]


@dataclass(frozen=True)
class CitationReport:
    """One answer's citation scores; see the module docstring for definitions."""

    total_citations: int
    valid_citations: int
    invalid_citations: int
    context_docs: int
    cited_docs: list[str]
    uncited_docs: list[str]
    invalid_refs: list[str]
    coverage: float
    faithfulness: float
    no_citations: bool
    relevant_coverage: float = math.nan

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _resolve(token: str, context: Sequence[str], context_set: set[str], how: Resolve) -> str | None:
    if how == "id":
        return token if token in context_set else None
    if token.isdigit() and 1 <= int(token) <= len(context):
        return context[int(token) - 1]
    return None


def _check_uncited(uncited: str) -> None:
    if uncited not in UNCITED:
        raise CitationPatternError(f"uncited must be 'one' or 'skip', got {uncited!r}")


def evaluate_citations(
    answer: str,
    context_ids: Sequence[str],
    pattern: str | CitationPattern = "doc_id",
    *,
    relevant_ids: Iterable[str] | None = None,
    resolve: Resolve | None = None,
    uncited: Uncited = "one",
) -> CitationReport:
    """Score the citations of one answer against the ids of its context documents.

    ``context_ids`` must be in the order shown to the generator when the pattern is
    positional. Example (spec): answer citing ``[doc_id 3]``, ``[doc_id 7]``, ``[doc_id 99]``
    with context ``1 3 5 7 10`` -> faithfulness 2/3, coverage 2/5, invalid ``["99"]``.
    An answer without citations has faithfulness 1.0 (``uncited="one"``) or NaN
    (``uncited="skip"``).
    """
    _check_uncited(uncited)
    pat = make_pattern(pattern, resolve)
    context = [str(c) for c in context_ids]
    distinct = list(dict.fromkeys(context))
    context_set = set(distinct)
    tokens = parse_citations(answer, pat)
    cited: set[str] = set()
    invalid: list[str] = []
    for token in tokens:
        doc = _resolve(token, context, context_set, pat.resolve)
        if doc is None:
            invalid.append(token)
        else:
            cited.add(doc)
    total = len(tokens)
    valid = total - len(invalid)
    relevant_cov = math.nan
    if relevant_ids is not None:
        relevant = {str(r) for r in relevant_ids}
        relevant_cov = len(cited & relevant) / len(relevant) if relevant else math.nan
    return CitationReport(
        total_citations=total,
        valid_citations=valid,
        invalid_citations=len(invalid),
        context_docs=len(distinct),
        cited_docs=[d for d in distinct if d in cited],
        uncited_docs=[d for d in distinct if d not in cited],
        invalid_refs=invalid,
        coverage=len(cited) / len(distinct) if distinct else math.nan,
        faithfulness=valid / total if total else (1.0 if uncited == "one" else math.nan),
        no_citations=total == 0,
        relevant_coverage=relevant_cov,
    )


@dataclass(frozen=True)
class CitationBatch:
    """Per-answer reports (``per_answer``: one row per answer) and batch ``aggregate``.

    ``aggregate`` keys: ``n_answers``, ``n_no_citations`` (answers without any citation),
    ``n_with_invalid`` (answers with at least one invalid citation), ``total_citations``,
    ``valid_citations``, ``invalid_citations``, ``mean_faithfulness`` (macro: over every
    answer, an uncited one as 1.0, with ``uncited="one"``; over answers with citations only
    with ``uncited="skip"``), ``micro_faithfulness`` (sum valid / sum total, which uncited
    answers do not change),
    ``mean_coverage`` (macro, over answers with a non-empty context, uncited answers
    included as 0), ``mean_relevant_coverage`` (macro, where defined), ``pattern``,
    ``resolve`` (``"id"`` or ``"position"``), ``uncited`` (``"one"`` or ``"skip"``). A mean
    with nothing to average is NaN.
    """

    per_answer: pd.DataFrame
    aggregate: dict[str, Any] = field(default_factory=dict)


def _mean(series: pd.Series) -> float:
    values = series.dropna()
    return float(values.mean()) if len(values) else math.nan


def evaluate_batch(
    records: Iterable[Mapping[str, Any]],
    pattern: str | CitationPattern = "doc_id",
    *,
    resolve: Resolve | None = None,
    uncited: Uncited = "one",
) -> CitationBatch:
    """Evaluate many answers. Each record needs ``answer`` (str) and ``context_ids`` (list);
    ``query_id`` and ``relevant_ids`` are optional. Raises :class:`CitationInputError`
    naming the 1-based record number when a field is missing or has the wrong type.
    ``uncited`` is how an answer without citations is scored (module docstring)."""
    _check_uncited(uncited)
    pat = make_pattern(pattern, resolve)
    rows = []
    for number, record in enumerate(records, start=1):
        answer = record.get("answer")
        context = record.get("context_ids")
        if not isinstance(answer, str):
            raise CitationInputError(f"record {number}: 'answer' must be a string")
        if not isinstance(context, (list, tuple)):
            raise CitationInputError(f"record {number}: 'context_ids' must be a list of ids")
        relevant = record.get("relevant_ids")
        report = evaluate_citations(answer, context, pat, relevant_ids=relevant, uncited=uncited)
        rows.append({"query_id": str(record.get("query_id", number)), **report.as_dict()})

    frame = lazylibs.pandas.DataFrame(rows, columns=["query_id", *CitationReport.__dataclass_fields__])
    total = int(frame["total_citations"].sum())
    valid = int(frame["valid_citations"].sum())
    aggregate = {
        "n_answers": len(frame),
        "n_no_citations": int(frame["no_citations"].sum()),
        "n_with_invalid": int((frame["invalid_citations"] > 0).sum()),
        "total_citations": total,
        "valid_citations": valid,
        "invalid_citations": total - valid,
        "mean_faithfulness": _mean(frame["faithfulness"]),
        "micro_faithfulness": valid / total if total else math.nan,
        "mean_coverage": _mean(frame["coverage"]),
        "mean_relevant_coverage": _mean(frame["relevant_coverage"]),
        "pattern": pat.name if pat.name != "custom" else pat.regex.pattern,
        "resolve": pat.resolve,
        "uncited": uncited,
    }
    return CitationBatch(frame, aggregate)
