"""Small TREC files written by tests."""

from __future__ import annotations

from pathlib import Path


def write_run(path: Path, tops: dict[str, list[str]], tag: str) -> Path:
    """A TREC run from ranked doc lists per query; scores fall with rank (10 - rank)."""
    lines = [
        f"{qid} Q0 {doc} {rank} {10 - rank} {tag}"
        for qid, docs in tops.items()
        for rank, doc in enumerate(docs, start=1)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path
