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


@dataclass(frozen=True)
class QueryAssignment:
    """:func:`assign_queries`' result: ``positions`` as in :class:`Assignment`; ``queries``:
    ``{annotator: sorted query indexes}`` (indexes into the ``groups`` given); ``covered`` /
    ``total``: pairs, ``queries_covered`` / ``queries_total``: whole queries with their ``overlap``
    annotators / in the sample."""

    positions: dict[str, list[int]]
    queries: dict[str, list[int]]
    overlap: int
    per_annotator: int | None
    covered: int
    total: int
    queries_covered: int
    queries_total: int


def assign_queries(groups: Sequence[Sequence[int]], annotators: Sequence[str], *, overlap: int = 1,
                   per_annotator: int | None = None, order: Sequence[int] | None = None) -> QueryAssignment:
    """Hand out a query-design sample by whole queries: every pair of a query goes to the same
    ``overlap`` annotators (an SME judges a query's pairs against each other, as the query design
    means them to be labelled), each annotator at most ``per_annotator`` *pairs*.

    ``groups``: the positions of each query's pairs; ``order``: the query indexes in the order
    they are handed out (default ascending; the service passes a seeded permutation). Greedy, one
    query at a time. For a query of ``s`` pairs, the candidates are the annotators with room for
    all ``s`` (uncapped: everyone); they are ranked by

    1. the fewest pairs handed to them so far (with one cap for all, the most room left), so the
       loads in pairs stay even although queries differ in size;
    2. then the rotation ``(index - c * overlap) mod m`` (``c`` queries handed out before,
       ``m`` annotators), as :func:`assign` rotates pairs;

    and the first ``overlap`` take the whole query. When fewer than ``overlap`` annotators have
    room for it, the query is assigned to nobody (never split, never given to fewer annotators)
    and handing out goes on with the next query: a smaller one may still fit.

    Worked example (tests/core/calibration/test_routing_assign.py): queries Q0 = pairs 0-2,
    Q1 = 3-4, Q2 = 5, Q3 = 6-9, Q4 = 10; annotators a, b, c; overlap 2; cap 5 pairs; order
    Q0..Q4. Q0 -> a, b (all at 0 pairs; rotation 0: a, b). Q1 -> c (0 pairs), then a (a and b
    at 3 pairs; rotation 2 puts a before b). Q2: a has no room (5 of 5) -> b, c. Q3 (4 pairs):
    b has 1 left, c 2 -> nobody. Q4 -> b, c. So a: 0-4, b: 0-2, 5, 10, c: 3-5, 10; 4 of 5
    queries and 7 of 11 pairs covered. Refusals as :func:`assign`, and a pair listed in two
    groups."""
    names = [str(a) for a in annotators]
    groups = [[int(p) for p in g] for g in groups]
    flat = [p for g in groups for p in g]
    if len(set(flat)) != len(flat):
        raise InputError("a pair is listed under two queries; each pair belongs to one query")
    check = assign(0, names, overlap=overlap, per_annotator=per_annotator)  # the same refusals
    k, m = check.overlap, len(names)
    order = list(range(len(groups))) if order is None else [int(q) for q in order]
    if sorted(order) != list(range(len(groups))):
        raise InputError(f"the order must list each of the {len(groups)} queries once")
    cap = check.per_annotator
    load = [0] * m
    pairs: dict[str, list[int]] = {a: [] for a in names}
    queries: dict[str, list[int]] = {a: [] for a in names}
    handed = covered = 0
    for q in order:
        size = len(groups[q])
        open_ = [j for j in range(m) if cap is None or cap - load[j] >= size]
        if len(open_) < k or size == 0:
            continue
        start = (handed * k) % m
        for j in sorted(open_, key=lambda j: (load[j], (j - start) % m))[:k]:
            pairs[names[j]].extend(groups[q])
            queries[names[j]].append(q)
            load[j] += size
        handed += 1
        covered += size
    return QueryAssignment({a: sorted(p) for a, p in pairs.items()}, {a: sorted(q) for a, q in queries.items()},
                           k, cap, covered, len(flat), handed, len(groups))
