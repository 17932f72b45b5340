"""Who labels which pair of a calibration sample: the lead's assignment (pure, no I/O).

:func:`assign` hands the sample's pairs out to named annotators, ``overlap`` annotators per
pair, each annotator at most ``per_annotator`` pairs (no cap: as many as the overlap needs).
Pairs are handed out in ``order`` (the service passes a seeded permutation of the positions, so
the pairs a capped assignment covers are a random part of the sample, not its first queries).

Greedy, one pair at a time. For the ``i``-th pair handed out, the annotators with room left are
ranked by

1. the most room left first (an uncapped annotator always has room: all tie),
2. then the rotation ``(index - i * overlap) mod m`` (``m`` annotators, ``index`` their place in
   ``annotators``), so that without a cap pair ``i`` goes to annotators ``i*k, i*k + 1, ...,
   i*k + k - 1`` (mod m): every pair gets ``k`` different annotators and their loads differ by
   at most one,

and the first ``overlap`` of them take the pair. When fewer than ``overlap`` annotators have
room, handing out stops: a pair never gets fewer annotators than asked, so
``covered = min(total, floor(sum of caps / overlap))`` at most.

Worked example (tests/core/test_calibration_routing.py): 5 pairs, annotators a, b, c,
overlap 2, cap 2, order 0..4: pair 0 -> a, b (rotation 0); pair 1 -> c (most room), a (rotation
2: a before b); pair 2 -> b, c; pairs 3 and 4 stay unassigned (nobody has room).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workbench.errors import InputError


def annotator_identity(annotator: str) -> str:
    """The identity of an annotator id as typed: trimmed and case-folded, so ``"SME-Anna "``
    and ``"sme-anna"`` are one person ("" for anything not a string)."""
    return annotator.strip().casefold() if isinstance(annotator, str) else ""


@dataclass(frozen=True)
class Assignment:
    """``positions``: ``{annotator: sorted positions}`` (every annotator listed, possibly with
    none); ``covered``: pairs that got their ``overlap`` annotators; ``total``: the sample's pairs."""

    positions: dict[str, list[int]]
    overlap: int
    per_annotator: int | None
    covered: int
    total: int


def assign(total: int, annotators: Sequence[str], *, overlap: int = 1, per_annotator: int | None = None,
           order: Sequence[int] | None = None) -> Assignment:
    """The assignment described in the module docstring. ``order``: the positions ``0 ..
    total - 1`` in the order they are handed out (default ascending). Refuses no annotator, a
    repeated one, an overlap outside ``1 .. len(annotators)`` and a cap below 1."""
    names = [str(a) for a in annotators]
    if not names:
        raise InputError("an assignment needs at least one annotator id")
    repeated = sorted({a for a in names if names.count(a) > 1})
    if repeated:
        raise InputError(f"annotator {repeated[0]!r} is listed twice; list each annotator once")
    m = len(names)
    if isinstance(overlap, bool) or not 1 <= int(overlap) <= m:
        raise InputError(f"the overlap (annotators per pair) must be between 1 and {m}, the number of "
                         f"annotators, got {overlap}")
    k = int(overlap)
    if per_annotator is not None and int(per_annotator) < 1:
        raise InputError(f"labels per annotator must be at least 1, got {per_annotator}")
    order = list(range(int(total))) if order is None else [int(p) for p in order]
    if sorted(order) != list(range(int(total))):
        raise InputError(f"the order must list each of the {total} positions once")
    unlimited = per_annotator is None
    room = [0 if per_annotator is None else int(per_annotator)] * m  # labels each may still take
    out: dict[str, list[int]] = {a: [] for a in names}
    covered = 0
    for i, position in enumerate(order):
        start = (i * k) % m
        open_ = [j for j in range(m) if unlimited or room[j] > 0]
        if len(open_) < k:
            break
        ranked = sorted(open_, key=lambda j: (0 if unlimited else -room[j], (j - start) % m))
        for j in ranked[:k]:
            out[names[j]].append(position)
            if not unlimited:
                room[j] -= 1
        covered += 1
    return Assignment({a: sorted(p) for a, p in out.items()}, k,
                      None if per_annotator is None else int(per_annotator), covered, int(total))
