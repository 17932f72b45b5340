"""Where a pair stands in a query-design calibration sample: "query k of n · pair j of m of this query".

A query sample (:func:`workbench.core.calibration.sample.draw_query_sample`) has SMEs grade every
pool pair of a random subset of queries; its positions run query by query (the queries in their
drawn order, each query's pairs shuffled), so an SME works through one query at a time and wants
to know how far along they are. From the sample's ``(position, query_id)`` rows:

- ``query`` k (1-based) ranks the queries by their first position; ``queries`` n counts them;
- ``pair`` j (1-based) ranks the pair among its query's positions; ``pairs`` m counts them.

Nothing assumes the positions of one query are contiguous (a sample stored by another version
still gets consistent numbers); with contiguous positions, as drawn, ``pair`` is
``position - first position of the query + 1``. The sample-wide "Pair p of N" (``position + 1``)
stays the pair's number everywhere (CLI reports, saved messages); this only adds the query view.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class QueryPlace:
    """One pair's place: the ``query``-th of ``queries`` queries, its ``pair``-th of ``pairs`` pairs."""

    query_id: str
    query: int
    queries: int
    pair: int
    pairs: int

    def words(self) -> str:
        """``"query 3 of 12 · pair 5 of 40 of this query"``."""
        return f"query {self.query} of {self.queries} · pair {self.pair} of {self.pairs} of this query"


def query_places(rows: Iterable[tuple[int, str]]) -> dict[int, QueryPlace]:
    """``{position: QueryPlace}`` for a sample's ``(position, query_id)`` rows (see the module
    doc); empty rows give an empty dict. Duplicate positions are a caller's error (``ValueError``)."""
    by_query: dict[str, list[int]] = {}
    seen: set[int] = set()
    for position, query_id in rows:
        position = int(position)
        if position in seen:
            raise ValueError(f"position {position} appears twice")
        seen.add(position)
        by_query.setdefault(str(query_id), []).append(position)
    order = sorted(by_query, key=lambda q: min(by_query[q]))
    out: dict[int, QueryPlace] = {}
    for k, query_id in enumerate(order, 1):
        positions = sorted(by_query[query_id])
        for j, position in enumerate(positions, 1):
            out[position] = QueryPlace(query_id, k, len(order), j, len(positions))
    return out
