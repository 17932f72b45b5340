"""The metric engine's inputs as value types: :class:`Qrels` (judgments) and :class:`Run`
(one system's scored results), both as parallel columns, and their construction from nested
dicts ``{query_id: {doc_id: value}}``.

The file readers that build them live in :mod:`workbench.core.metrics.readers`.

Rules every constructor here enforces
    * query and doc ids are strings;
    * grades are integers (a grade below 0 means "in the pool but not judged");
    * scores are finite float64 numbers (NaN and +-inf have no rank).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from workbench.errors import InputError, clip


@dataclass(frozen=True, eq=False)
class Qrels:
    """Judgments as parallel columns. ``lines`` holds 1-based source lines (None for dicts)."""

    query_ids: pa.Array
    doc_ids: pa.Array
    grades: np.ndarray  # int64
    lines: np.ndarray | None = None
    source: str | None = None

    def __len__(self) -> int:
        return len(self.grades)

    def to_dict(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for q, d, g in zip(self.query_ids.to_pylist(), self.doc_ids.to_pylist(), self.grades.tolist()):
            out.setdefault(q, {})[d] = g
        return out


@dataclass(frozen=True, eq=False)
class Run:
    """One system's ranked results as parallel columns (rank is not kept: scores decide)."""

    query_ids: pa.Array
    doc_ids: pa.Array
    scores: np.ndarray  # float64
    lines: np.ndarray | None = None
    source: str | None = None
    name: str | None = None
    #: True for a part of a larger run (some of its queries, whole): its rows are not the
    #: file's rows, so a duplicate is located by searching the file for it
    partial: bool = False

    def __len__(self) -> int:
        return len(self.scores)

    @property
    def first_doc_id(self) -> str | None:
        return str(self.doc_ids[0].as_py()) if len(self.doc_ids) else None

    def to_dict(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for q, d, s in zip(self.query_ids.to_pylist(), self.doc_ids.to_pylist(), self.scores.tolist()):
            out.setdefault(q, {}).setdefault(d, s)  # first occurrence wins, as in the engine
        return out



# --- dicts --------------------------------------------------------------------------------
def check_grades(grades: np.ndarray) -> None:
    """Grades given as float64: integers within int64 (NaN, 1.5 and 1e30 are refused)."""
    if grades.size and not (np.isfinite(grades).all() and (grades == np.round(grades)).all()
                            and (np.abs(grades) < 2.0**63).all()):
        raise InputError("qrels grades must be integers (e.g. 0, 1, 2, 3; -1 for unjudged)")


def check_scores(scores: np.ndarray) -> None:
    """Scores as float64: finite (NaN and +-inf cannot be ranked)."""
    if not np.isfinite(scores).all():
        bad = scores[~np.isfinite(scores)][0]
        raise InputError(f"run scores must be finite numbers, found {bad}")


def _flatten(nested: Mapping, what: str) -> tuple[list, list, list]:
    qids: list = []
    docs: list = []
    values: list = []
    for qid, inner in nested.items():
        if not isinstance(inner, Mapping):
            raise InputError(f"{what}[{clip(qid)}] must be a dict of doc_id -> value, got {type(inner).__name__}")
        docs.extend(inner.keys())
        values.extend(inner.values())
        qids.extend([qid] * len(inner))
    return qids, docs, values


def _string_array(values: list, what: str) -> pa.Array:
    try:
        return pa.array(values, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        bad = next((v for v in values if not isinstance(v, str)), None)
        raise InputError(f"{what} must be strings, got {clip(bad)} ({type(bad).__name__})") from None


def qrels_from_dict(qrels: Mapping[str, Mapping[str, int]]) -> Qrels:
    """``{query_id: {doc_id: grade}}`` -> :class:`Qrels`. Grades must be integers."""
    qids, docs, grades = _flatten(qrels, "qrels")
    try:
        arr = np.array(grades, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise InputError("qrels grades must be integers") from None
    check_grades(arr)
    return Qrels(_string_array(qids, "query ids"), _string_array(docs, "doc ids"), arr.astype(np.int64))


def run_from_dict(run: Mapping[str, Mapping[str, float]], *, name: str | None = None) -> Run:
    """``{query_id: {doc_id: score}}`` -> :class:`Run`."""
    qids, docs, scores = _flatten(run, "run")
    try:
        arr = np.array(scores, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise InputError("run scores must be numbers") from None
    check_scores(arr)
    return Run(_string_array(qids, "query ids"), _string_array(docs, "doc ids"), arr, name=name)


