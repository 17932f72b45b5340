"""``workbench citations``: check the citations of generated answers against their context
(:func:`workbench.core.rag.citations.evaluate_batch`).

Input: JSONL, one object a line with ``answer`` (str), ``context_ids`` (list) and optionally
``query_id`` and ``relevant_ids``. ``--format json`` prints ``{"aggregate": {...}, "answers":
[{per-answer report}]}``; the aggregate carries the conventions used, ``resolve`` (``id`` or
``position``) and ``uncited`` (``one`` or ``skip``).

Defaults follow the specification: every citation, ``[n]`` included, is compared with the context
ids (``--resolve position`` reads ``[n]`` as the n-th context document), and an answer without any
citation has faithfulness 1.0 and counts in the mean (``--uncited skip`` leaves it out).
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from workbench.cli import lazy
from workbench.cli.common import (
    add_format_option,
    exit_codes_epilog,
    number,
    print_json,
    wrapped,
)


def _read_jsonl(path: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file, one per non-blank line (errors name file and line)."""

    file = lazy.core_metrics_readers.check_regular_file(path)
    return [record for _, record in lazy.core_formats_lines.read_json_objects(lazy.core_formats_lines.decode_utf8(file.read_bytes(), path), path)]


def _citations(args: argparse.Namespace) -> int:
    batch = lazy.core_rag_citations.evaluate_batch(_read_jsonl(args.answers), args.pattern, resolve=args.resolve,
                                                   uncited=args.uncited)
    if args.format == "json":
        print_json({"aggregate": batch.aggregate, "answers": batch.per_answer.to_dict(orient="records")})
        return 0
    agg = batch.aggregate
    print(f"answers: {agg['n_answers']}   pattern: {agg['pattern']} (resolve by {agg['resolve']})   "
          f"uncited: {agg['uncited']}")
    if agg["resolve"] == "position":
        print("  [n] is read as the n-th context document (1-based), not as the id 'n' "
              "(--resolve id compares it with the context ids, as the specification does)")
    elif args.pattern == "numeric":
        print("  [n] is compared with the context ids, as the specification does "
              "(--resolve position reads it as the n-th context document)")
    uncited = ("an answer without citations counts as 1.0, as in the specification; "
               "--uncited skip leaves it out" if agg["uncited"] == "one"
               else "answers with citations only; --uncited one counts the others as 1.0")
    print(f"  without citations    {agg['n_no_citations']:>8}")
    print(f"  with invalid refs    {agg['n_with_invalid']:>8}")
    print(f"  citations            {agg['total_citations']:>8}  ({agg['invalid_citations']} invalid)")
    print(f"  faithfulness (mean)  {number(agg['mean_faithfulness']):>8}  ({uncited})")
    print(f"  faithfulness (micro) {number(agg['micro_faithfulness']):>8}")
    print(f"  coverage (mean)      {number(agg['mean_coverage']):>8}")
    if not math.isnan(agg["mean_relevant_coverage"]):
        print(f"  relevant coverage    {number(agg['mean_relevant_coverage']):>8}")
    if agg["n_answers"] and agg["total_citations"] == 0:
        print("note: no citation matched; check the pattern against a sample answer")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    # core.citations is a light module at import (re and dataclasses; pandas only when it runs)

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
                   help=f"how citations are written: a preset ({', '.join(lazy.core_rag_citations.PRESETS)}) or a regular "
                        "expression with one capturing group (default: doc_id)")
    c.add_argument("--resolve", choices=("id", "position"), default=None,
                   help="id: compare each citation with the context ids, as the specification does "
                        "([3] cites the document with id 3); position: read [n] as the n-th context "
                        "document, 1-based (default: id for the presets and custom regexes)")
    c.add_argument("--uncited", choices=lazy.core_rag_citations.UNCITED, default="one",
                   help="an answer with no citation: one = faithfulness 1.0, counted in the mean, as in "
                        "the specification's harness; skip = faithfulness undefined, left out of the "
                        "mean (still counted as 'without citations') (default: one)")
    add_format_option(c)
    c.set_defaults(handler=_citations)
