"""Judgment and run tables: span JSONL, Cranfield ``cranqrel``, and frames from core.readers.

Judgments come out as ``line, query_id, doc_id, grade`` (document level) or
``line, query_id, doc_id, start, end, grade, assessor`` (spans); runs as
``line, query_id, item_id, score``. Grades stored by the workbench are integers 0-3.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.core.formats.lines import Tick, read_json_objects, split_lines, string_value
from workbench.core.metrics.qrels_and_runs import Qrels, Run
from workbench.errors import InputError

GRADES = (0, 3)

# Cranfield relevance codes (cranqrel.readme, Cleverdon): lower code = MORE relevant.
# 1 complete answer -> 3, 2 high relevance -> 2, 3 useful -> 1, 4 minimum interest -> 1
# (still "related", like DL19's grade 1), 5 no interest -> 0. The -1 rows (one per query,
# apparently the paper the question was drawn from) carry no grade: they are excluded and
# counted, never stored as "not relevant".
CRANFIELD_GRADES = {1: 3, 2: 2, 3: 1, 4: 1, 5: 0}
CRANFIELD_EXCLUDED = -1


def qrels_frame(qrels: Qrels) -> pd.DataFrame:
    """A :class:`~workbench.core.metrics.readers.Qrels` read with ``careful=True`` as a DataFrame."""
    lines = qrels.lines if qrels.lines is not None else np.zeros(len(qrels), dtype=np.int64)
    return pd.DataFrame({
        "line": lines.astype(np.int64),
        "query_id": qrels.query_ids.to_pandas(),
        "doc_id": qrels.doc_ids.to_pandas(),
        "grade": qrels.grades.astype(np.int64),
    })


def run_frame(run: Run) -> pd.DataFrame:
    """A :class:`~workbench.core.metrics.readers.Run` read with ``careful=True`` as a DataFrame."""
    lines = run.lines if run.lines is not None else np.zeros(len(run), dtype=np.int64)
    return pd.DataFrame({
        "line": lines.astype(np.int64),
        "query_id": run.query_ids.to_pandas(),
        "item_id": run.doc_ids.to_pandas(),
        "score": run.scores.astype(np.float64),
    })


def rank_by_score(run: pd.DataFrame) -> pd.Series:
    """1-based rank within each query: score descending, ties by id descending (trec_eval's order).

    The rank column of a TREC run is not trusted (trec_eval ignores it too); storing the rank
    the scores imply keeps pooling depth and evaluation consistent.
    """
    order = run.sort_values(["query_id", "score", "item_id"], ascending=[True, False, False], kind="stable")
    rank = order.groupby("query_id", sort=False).cumcount() + 1
    return rank.reindex(run.index).astype(np.int64)


def check_grades(frame: pd.DataFrame, path: str, *, what: str = "grade") -> None:
    """Every grade is an integer 0-3; else an error at the first offending line."""
    low, high = GRADES
    bad = frame[(frame["grade"] < low) | (frame["grade"] > high)]
    if len(bad):
        first = bad.iloc[0]
        raise InputError(
            f"{what} {int(first['grade'])} is outside 0-3 ({len(bad)} rows like this); the workbench "
            f"stores graded relevance 0 (not relevant) to 3 (perfectly relevant); map the scale first",
            path=path, line=int(first["line"]),
        )


def cranfield_qrels(text: str, path: str) -> tuple[pd.DataFrame, int]:
    """Cranfield ``cranqrel``: ``query_position doc_id code`` -> (qrels frame, excluded rows).

    Codes map to grades by :data:`CRANFIELD_GRADES`; ``-1`` rows are dropped and counted.
    Three whitespace-separated columns (trailing spaces are common); any other count, or a
    code that is not an integer in the table, is an error naming the line.
    """
    rows, excluded = [], 0
    for line, raw in enumerate(split_lines(text), start=1):
        fields = raw.split()
        if not fields:
            continue
        if len(fields) != 3:
            raise InputError(
                f"expected 3 columns 'query_number doc_id code', got {len(fields)}", path=path, line=line
            )
        try:
            code = int(fields[2])
        except ValueError:
            raise InputError(
                f"relevance code {fields[2]!r} is not an integer; expected 1-5 or -1", path=path, line=line
            ) from None
        if code == CRANFIELD_EXCLUDED:
            excluded += 1
            continue
        if code not in CRANFIELD_GRADES:
            raise InputError(f"relevance code {code} is unknown; expected 1-5 or -1", path=path, line=line)
        rows.append((line, fields[0], fields[1], CRANFIELD_GRADES[code]))
    if not rows:
        raise InputError("holds no judgments; expected 'query_number doc_id code' lines", path=path)
    return pd.DataFrame(rows, columns=["line", "query_id", "doc_id", "grade"]), excluded


def _int_value(value, *, field: str, path: str, line: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"field {field!r} must be an integer, got {value!r}", path=path, line=line)
    return value


def span_judgments(text: str, path: str, *, tick: Tick | None = None) -> pd.DataFrame:
    """Span judgments, one JSON object a line:
    ``{"query_id", "doc_id", "start", "end", "grade", "assessor"}``.

    ``start``/``end`` are character offsets into the document text (end exclusive,
    ``0 <= start <= end``; whether ``end`` fits the document is checked against the store).
    ``assessor`` is optional (the import's assessor name fills it); other fields are ignored.
    """
    rows = []
    for line, record in read_json_objects(text, path, tick=tick):
        missing = [k for k in ("query_id", "doc_id", "start", "end", "grade") if k not in record]
        if missing:
            raise InputError(
                f"lacks {missing}; expected {{\"query_id\", \"doc_id\", \"start\", \"end\", \"grade\"}}",
                path=path, line=line,
            )
        start = _int_value(record["start"], field="start", path=path, line=line)
        end = _int_value(record["end"], field="end", path=path, line=line)
        if start < 0 or end < start:
            raise InputError(
                f"span [{start}, {end}) is not a span; expected 0 <= start <= end (end exclusive)",
                path=path, line=line,
            )
        assessor = record.get("assessor")
        if assessor is not None:
            assessor = string_value(assessor, field="assessor", path=path, line=line, allow_empty=False)
        rows.append((
            line,
            string_value(record["query_id"], field="query_id", path=path, line=line, allow_empty=False,
                         allow_number=True),
            string_value(record["doc_id"], field="doc_id", path=path, line=line, allow_empty=False,
                         allow_number=True),
            start, end,
            _int_value(record["grade"], field="grade", path=path, line=line),
            assessor,
        ))
    return pd.DataFrame(rows, columns=["line", "query_id", "doc_id", "start", "end", "grade", "assessor"])


def qrels_row_queries(text: str, path: str) -> pd.DataFrame:
    """The queries carried by JSONL qrels rows (``query_id`` with optional ``query`` and ``tags``).

    Returns ``line, query_id, text, description, tags`` for rows that have a ``query`` text, so
    the import can register queries it has not seen.
    """
    rows = []
    for line, record in read_json_objects(text, path):
        query = record.get("query")
        if query is None or "query_id" not in record:
            continue
        tags = record.get("tags")
        if tags is not None and not isinstance(tags, dict):
            raise InputError(f"field 'tags' must be a JSON object, got {type(tags).__name__}", path=path, line=line)
        rows.append((
            line,
            string_value(record["query_id"], field="query_id", path=path, line=line, allow_number=True),
            string_value(query, field="query", path=path, line=line, allow_empty=False),
            None,
            tags or None,
        ))
    return pd.DataFrame(rows, columns=["line", "query_id", "text", "description", "tags"])
