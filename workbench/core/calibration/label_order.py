"""The order in which an annotator meets a calibration sample's open pairs (the Label queue).

A sample's positions are ``0 .. total - 1``. A pair is *open* to an annotator while their
current answer is none (never answered, or undone to ``clear``) or ``skip``; labelled and
can't-judge pairs are done. From a position ``after`` the queue runs:

1. open, not skipped pairs after ``after``, ascending; then those at or before it (wrapping
   around);
2. then the skipped pairs, in the same order (a skip sends the pair to the back).

``full``: pairs left out whatever the annotator did (with an overlap of ``k``, those ``k``
other annotators have answered already); ``besides``: one position never returned (the pair
on screen, when asking what comes after it). This is the order of
:func:`workbench.store.calibration.next_open_positions`, worked out from the annotator's
answers the Label page has read anyway, so a key press needs no query for it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

OPEN_ACTIONS = (None, "skip")


def open_in_order(total: int, actions: Mapping[int, str | None], *, after: int = -1, besides: int | None = None,
                  full: Collection[int] = (), limit: int = 1) -> list[int]:
    """Up to ``limit`` open positions in queue order (see the module docstring); ``actions``:
    ``{position: current action}`` of the annotator's answered pairs (absent: not answered).
    Empty when no pair is open. O(total)."""
    out: list[int] = []
    if limit < 1:
        return out
    after = int(after)
    for skipped in (False, True):
        for part in (range(max(after + 1, 0), total), range(0, min(after + 1, total))):
            for position in part:
                action = actions.get(position)
                if action not in OPEN_ACTIONS or (action == "skip") != skipped:
                    continue
                if position == besides or position in full:
                    continue
                out.append(position)
                if len(out) == limit:
                    return out
    return out
