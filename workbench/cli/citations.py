"""``workbench citations``: check the citations of generated answers against their context
(:func:`workbench.core.rag.citations.evaluate_batch`).

Input: JSONL, one object a line with ``answer`` (str), ``context_ids`` (list) and optionally
``query_id`` and ``relevant_ids``. ``--format json`` prints ``{"aggregate": {...}, "answers":
[{per-answer report}]}``.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from workbench.cli.common import (
    add_format_option,
    exit_codes_epilog,
    number,
    print_json,
    wrapped,
)


def _read_jsonl(path: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, one per non-blank line (errors name file and line)."""
    from workbench.core.formats.lines import decode_utf8, read_json_objects
    from workbench.core.metrics.readers import check_regular_file

    file = check_regular_file(path)
    return [record for _, record in read_json_objects(decode_utf8(file.read_bytes(), path), path)]


def _citations(args: argparse.Namespace) -> int:
    from workbench.core.rag.citations import evaluate_batch

    batch = evaluate_batch(_read_jsonl(args.answers), args.pattern, resolve=args.resolve)
    if args.format == "json":
        print_json({"aggregate": batch.aggregate, "answers": batch.per_answer.to_dict(orient="records")})
        return 0
    agg = batch.aggregate
    print(f"answers: {agg['n_answers']}   pattern: {agg['pattern']} (resolve by {agg['resolve']})")
    if agg["resolve"] == "position" and args.resolve is None:
        # The spec's bracket_number pattern compares the number with the context ids instead.
        print("  [n] is read as the n-th context document (1-based), not as the id 'n'; "
              "--resolve id compares it with the context ids, as the spec's bracket_number pattern does")
    print(f"  without citations    {agg['n_no_citations']:>8}")
    print(f"  with invalid refs    {agg['n_with_invalid']:>8}")
    print(f"  citations            {agg['total_citations']:>8}  ({agg['invalid_citations']} invalid)")
    print(f"  faithfulness (mean)  {number(agg['mean_faithfulness']):>8}  (answers with citations)")
    print(f"  faithfulness (micro) {number(agg['micro_faithfulness']):>8}")
    print(f"  coverage (mean)      {number(agg['mean_coverage']):>8}")
    if not math.isnan(agg["mean_relevant_coverage"]):
        print(f"  relevant coverage    {number(agg['mean_relevant_coverage']):>8}")
    if agg["n_answers"] and agg["total_citations"] == 0:
        print("note: no citation matched; check the pattern against a sample answer")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    # core.citations is a light module at import (re and dataclasses; pandas only when it runs)
    from workbench.core.rag.citations import PRESETS

    c = sub.add_parser(
        "citations",
        help="check the citations of generated answers against their context",
        description=wrapped("Per answer: citations that point into the context (faithfulness) and the "
                    "share of the context cited (coverage). Input: JSONL with answer, "
                    "context_ids and optionally query_id, relevant_ids."),
        epilog=exit_codes_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("answers", metavar="ANSWERS.jsonl", help="one JSON object per line")
    c.add_argument("--pattern", default="doc_id", metavar="NAME|REGEX",
                   help=f"how citations are written: a preset ({', '.join(PRESETS)}) or a regular "
                        "expression with one capturing group (default: doc_id)")
    c.add_argument("--resolve", choices=("id", "position"), default=None,
                   help="match citations to context ids, or read them as 1-based positions "
                        "(default: position for numeric citations, id otherwise)")
    add_format_option(c)
    c.set_defaults(handler=_citations)
