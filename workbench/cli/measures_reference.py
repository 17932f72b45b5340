"""The measures table of ``docs/metrics.md``, written from the measure registry.

    python -m workbench.cli.measures_reference            # print the table
    python -m workbench.cli.measures_reference --write    # rewrite the table in docs/metrics.md
    python -m workbench.cli.measures_reference --check    # exit 1 when the page's table is stale

The table (:func:`workbench.core.metrics.measures.measures_table`) sits between two marker
lines of the page; only what is between them is rewritten, the rest of the page is prose.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.cli import lazy

#: The page holding the table, in a checkout.
METRICS_PATH = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
REGENERATE = "python -m workbench.cli.measures_reference --write"
BEGIN = f"<!-- measures table: generated from the measure registry by `{REGENERATE}`; do not edit -->"
END = "<!-- end of the measures table -->"


def render_table() -> str:
    return lazy.core_metrics_measures.measures_table()


def with_table(page: str, table: str | None = None) -> str:
    """``page`` with the text between its marker lines replaced by ``table`` (default: the
    registry's). A page without both markers, in order, raises ``ValueError``."""
    table = render_table() if table is None else table
    start, end = page.find(BEGIN), page.find(END)
    if start == -1 or end == -1 or end < start:
        raise ValueError(f"the page has no measures table markers ({BEGIN} ... {END})")
    # Blank lines around the table: Markdown reads it as a table, not as part of the comments.
    return page[:start + len(BEGIN)] + "\n\n" + table + "\n" + page[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.cli.measures_reference",
                                     description="Write or check the measures table of docs/metrics.md.")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"rewrite the table in {METRICS_PATH.name}")
    mode.add_argument("--check", action="store_true", help="exit 1 when the page's table differs from the registry")
    parser.add_argument("--path", type=Path, default=METRICS_PATH, help="the page (default docs/metrics.md)")
    args = parser.parse_args(argv)
    if not (args.write or args.check):
        sys.stdout.write(render_table())
        return 0
    try:
        current = args.path.read_text(encoding="utf-8")
        wanted = with_table(current)
    except (OSError, ValueError) as exc:
        print(f"{args.path}: {exc}", file=sys.stderr)
        return 2
    if args.write:
        if wanted != current:
            args.path.write_text(wanted, encoding="utf-8")
        print(f"wrote the measures table of {args.path}")
        return 0
    if wanted != current:
        print(f"the measures table of {args.path} differs from the registry; regenerate it with `{REGENERATE}`",
              file=sys.stderr)
        return 1
    print(f"the measures table of {args.path} matches the registry")
    return 0


if __name__ == "__main__":
    sys.exit(main())
