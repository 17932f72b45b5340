#!/usr/bin/env python3
"""Build ``labels.jsonl`` (character-offset span labels) from ``labels_spec.jsonl``.

The spec is the human-maintained source of truth for the demo's reference
judgments. Each spec line names a span by *anchors* instead of offsets, so the
documents can be edited and the offsets regenerated:

* ``{"section": "Refresh cycle"}`` selects a whole markdown section: from the
  start of its heading line (``## Refresh cycle``) up to the next heading of
  the same or a higher level, with trailing whitespace removed.
* ``{"start_quote": "...", "end_quote": "..."}`` selects the text that starts
  with ``start_quote`` and ends with the first following occurrence of
  ``end_quote`` (inclusive). ``start_quote`` must occur exactly once in the
  search region.
* Both can be combined: the quotes are then searched inside that section only.

Every spec line also carries ``query_id``, ``doc_id``, ``grade`` (0-3) and a
free-text ``note`` explaining the grade. The note is not copied to
``labels.jsonl``.

Usage (from the repository root)::

    python data/demo/build_labels.py            # rewrite data/demo/labels.jsonl
    python data/demo/build_labels.py --check    # exit 1 if labels.jsonl is stale

Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ASSESSOR = "demo-sme"
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*$", re.MULTILINE)


class SpecError(ValueError):
    """A spec line cannot be resolved against the documents."""


def read_jsonl(path: Path) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise SpecError(f"{path.name}:{lineno}: invalid JSON: {exc}") from exc
    return rows


def section_bounds(text: str, heading: str) -> tuple[int, int]:
    """Return (start, end) of the section whose heading text equals ``heading``."""
    headings = list(_HEADING.finditer(text))
    matches = [i for i, m in enumerate(headings) if m.group(2) == heading]
    if len(matches) != 1:
        raise SpecError(f"heading {heading!r} found {len(matches)} times (need exactly 1)")
    idx = matches[0]
    level = len(headings[idx].group(1))
    start = headings[idx].start()
    end = len(text)
    for m in headings[idx + 1 :]:
        if len(m.group(1)) <= level:
            end = m.start()
            break
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def resolve_span(text: str, spec: dict) -> tuple[int, int]:
    lo, hi = 0, len(text)
    if spec.get("section"):
        lo, hi = section_bounds(text, spec["section"])
    start_quote = spec.get("start_quote")
    end_quote = spec.get("end_quote")
    if not start_quote and not end_quote:
        if not spec.get("section"):
            raise SpecError("needs 'section' or 'start_quote'/'end_quote'")
        return lo, hi
    if not (start_quote and end_quote):
        raise SpecError("'start_quote' and 'end_quote' must be given together")
    region = text[lo:hi]
    count = region.count(start_quote)
    if count != 1:
        raise SpecError(f"start_quote {start_quote!r} found {count} times (need exactly 1)")
    start = lo + region.index(start_quote)
    # The span ends at the first end_quote occurrence that ends no earlier than
    # the start quote does (so the span always contains the whole start quote).
    pos = start
    while True:
        end_at = text.find(end_quote, pos, hi)
        if end_at < 0:
            raise SpecError(f"end_quote {end_quote!r} not found after start_quote")
        if end_at + len(end_quote) >= start + len(start_quote):
            return start, end_at + len(end_quote)
        pos = end_at + 1


def build_labels(documents_path: Path, spec_path: Path) -> list[dict]:
    docs = {d["doc_id"]: d for d in read_jsonl(documents_path)}
    labels = []
    errors = []
    for n, spec in enumerate(read_jsonl(spec_path), 1):
        where = f"{spec_path.name}:{n} ({spec.get('query_id')}, {spec.get('doc_id')})"
        doc = docs.get(spec.get("doc_id"))
        if doc is None:
            errors.append(f"{where}: unknown doc_id")
            continue
        grade = spec.get("grade")
        if not isinstance(grade, int) or isinstance(grade, bool) or not 0 <= grade <= 3:
            errors.append(f"{where}: grade must be an integer 0-3, got {grade!r}")
            continue
        try:
            start, end = resolve_span(doc["text"], spec)
        except SpecError as exc:
            errors.append(f"{where}: {exc}")
            continue
        labels.append(
            {
                "query_id": spec["query_id"],
                "doc_id": spec["doc_id"],
                "start": start,
                "end": end,
                "grade": grade,
                "assessor": ASSESSOR,
            }
        )
    if errors:
        raise SpecError("cannot build labels:\n  " + "\n  ".join(errors))
    return labels


def dumps_labels(labels: list[dict]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in labels)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--documents", type=Path, default=HERE / "documents.jsonl")
    ap.add_argument("--spec", type=Path, default=HERE / "labels_spec.jsonl")
    ap.add_argument("--out", type=Path, default=HERE / "labels.jsonl")
    ap.add_argument("--check", action="store_true", help="do not write; fail if --out differs")
    args = ap.parse_args(argv)
    try:
        content = dumps_labels(build_labels(args.documents, args.spec))
    except SpecError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else None
        if current != content:
            print(f"{args.out} is out of date; run {Path(__file__).name}", file=sys.stderr)
            return 1
        print(f"{args.out} is up to date")
        return 0
    args.out.write_text(content, encoding="utf-8")
    print(f"wrote {content.count(chr(10))} labels to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
