"""Two label files paired item by item, for ``workbench agree``.

Formats (chosen per file by its first non-blank character):

- **TREC qrels**: ``query_id iteration item_id grade`` (whitespace separated; ``#`` comment
  lines and blank lines skipped). The key is ``(query_id, item_id)``.
- **JSONL**, one object a line, either
  - a judgment or span row ``{"query_id", "doc_id" | "chunk_id", "grade", ["start", "end"],
    ["status"]}``: the key is ``(query_id, chunk_id or doc_id)``, plus ``@start-end`` when the
    row has a span. A row whose ``status`` is not ``ok`` or whose grade is null (a failed LLM
    call) is not a label: it is left out and counted, never turned into a grade;
  - or a dataset row ``{"query_id", "relevant": {item_id: grade}}``.

A key given twice in one file is an error naming both lines. Grades must be integers on the
scale (0–3 unless ``scale_max`` says otherwise); a grade above the scale is an error naming the
file and line unless ``clip`` is set, which lowers it to the top grade and counts it. Negative
grades ("pooled, not judged" in TREC files) are always refused: they are not labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.core.formats.lines import load_json_line
from workbench.errors import InputError


@dataclass(frozen=True)
class LabelFile:
    """One file's labels: ``keys[i]`` → ``grades[i]`` from ``lines[i]``."""

    path: str
    keys: list[tuple[str, str]]
    grades: np.ndarray
    lines: np.ndarray
    query_ids: list[str]
    clipped: int = 0
    not_labels: int = 0  # JSONL rows with a failed status / null grade, left out


@dataclass(frozen=True)
class PairedLabels:
    reference: np.ndarray
    candidate: np.ndarray
    query_ids: list[str]
    keys: list[tuple[str, str]]
    only_reference: int
    only_candidate: int


def _check_grade(value, path: str, line: int, scale_max: int, clip: bool) -> tuple[int, bool]:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"grade must be an integer, got {value!r}", path=path, line=line)
    if value < 0:
        raise InputError(
            f"grade {value} is negative (in TREC files: pooled but not judged), not a label; "
            f"remove such lines before comparing", path=path, line=line)
    if value > scale_max:
        if clip:
            return scale_max, True
        hint = (f"use {{field:scale 0-4}} if the file uses a 0-4 scale (as UMBRELA's does) or {{field:clip}} to "
                f"lower grades above {scale_max} to {scale_max}" if scale_max < 4
                else f"use {{field:clip}} to lower grades above {scale_max} to {scale_max}")
        raise InputError(
            f"grade {value} is outside the scale 0-{scale_max}; {hint}, or fix the file",
            path=path, line=line)
    return value, False


def parse_label_file(text: str, path: str, *, scale_max: int = 3, clip: bool = False) -> LabelFile:
    """Parse one label file (see the module docstring)."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        rows, not_labels = _jsonl_rows(text, path)
    else:
        rows, not_labels = _trec_rows(text, path), 0
    keys, grades, lines, qids = [], [], [], []
    seen: dict[tuple[str, str], int] = {}
    clipped = 0
    for line, query_id, item, grade in rows:
        key = (query_id, item)
        if key in seen:
            raise InputError(
                f"query {query_id!r} item {item!r} is labelled twice (first at line {seen[key]}); "
                f"keep one label per item (one assessor per file)", path=path, line=line)
        seen[key] = line
        grade, was_clipped = _check_grade(grade, path, line, scale_max, clip)
        clipped += was_clipped
        keys.append(key)
        grades.append(grade)
        lines.append(line)
        qids.append(query_id)
    if not keys:
        raise InputError("holds no labels; expected TREC qrels lines or JSONL judgment rows", path=path)
    return LabelFile(path, keys, np.asarray(grades, dtype=np.int64), np.asarray(lines, dtype=np.int64),
                     qids, clipped, not_labels)


def _trec_rows(text: str, path: str) -> list[tuple[int, str, str, object]]:
    rows: list[tuple[int, str, str, object]] = []
    for line, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 4:
            raise InputError(
                f"expected 4 fields 'query_id iteration item_id grade', got {len(fields)}", path=path, line=line)
        try:
            grade = int(fields[3])
        except ValueError:
            raise InputError(f"grade must be an integer, got {fields[3]!r}", path=path, line=line) from None
        rows.append((line, fields[0], fields[2], grade))
    return rows


def _id(value, field: str, path: str, line: int) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise InputError(f"field {field!r} must be a non-empty string, got {value!r}", path=path, line=line)
    return str(value)


def _jsonl_rows(text: str, path: str) -> tuple[list[tuple[int, str, str, object]], int]:
    rows, not_labels = [], 0
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        record = load_json_line(raw, path, line, invalid="invalid JSON: {msg}")
        if not isinstance(record, dict) or "query_id" not in record:
            raise InputError('expected an object with "query_id"', path=path, line=line)
        query_id = _id(record["query_id"], "query_id", path, line)
        if isinstance(record.get("relevant"), dict):
            for item, grade in record["relevant"].items():
                rows.append((line, query_id, str(item), grade))
            continue
        item = record.get("chunk_id") or record.get("doc_id")
        if item is None:
            raise InputError('expected "doc_id" or "chunk_id" (or "relevant": {item_id: grade})',
                             path=path, line=line)
        item = _id(item, "chunk_id" if record.get("chunk_id") else "doc_id", path, line)
        if "start" in record and "end" in record:
            item = f"{item}@{record['start']}-{record['end']}"
        status = record.get("status", "ok")
        if status != "ok" or record.get("grade") is None:
            if "grade" not in record and status == "ok":
                raise InputError('lacks "grade"', path=path, line=line)
            not_labels += 1
            continue
        rows.append((line, query_id, item, record["grade"]))
    return rows, not_labels


def pair_files(reference: LabelFile, candidate: LabelFile) -> PairedLabels:
    """The items both files label (in the reference file's order) and how many each has alone."""
    where = {key: i for i, key in enumerate(candidate.keys)}
    ref_idx, cand_idx = [], []
    for i, key in enumerate(reference.keys):
        j = where.get(key)
        if j is not None:
            ref_idx.append(i)
            cand_idx.append(j)
    ref_idx_a = np.asarray(ref_idx, dtype=np.int64)
    cand_idx_a = np.asarray(cand_idx, dtype=np.int64)
    return PairedLabels(
        reference=reference.grades[ref_idx_a] if len(ref_idx) else np.zeros(0, dtype=np.int64),
        candidate=candidate.grades[cand_idx_a] if len(cand_idx) else np.zeros(0, dtype=np.int64),
        query_ids=[reference.query_ids[i] for i in ref_idx],
        keys=[reference.keys[i] for i in ref_idx],
        only_reference=len(reference.keys) - len(ref_idx),
        only_candidate=len(candidate.keys) - len(cand_idx),
    )
