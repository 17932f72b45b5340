"""Near-duplicate chunks and label propagation between them.

Why MinHash, and why ``datasketch``
    A label on one of two near-identical chunks is, almost always, the right label for the other
    (boilerplate paragraphs repeated across documents, MS MARCO passages copied between pages).
    Resemblance of word shingles (Broder 1997) is the measure that matches "near-identical
    text", and MinHash with locality-sensitive hashing (LSH banding) finds the pairs above a
    resemblance threshold without comparing every pair (``O(n)`` signatures, candidate pairs
    only within shared buckets). Candidates are drawn at a banding threshold 0.15 below the
    asked one, so pairs just above the threshold are rarely missed. SimHash targets Hamming distance of a weighted feature hash;
    it is cheaper per document but its threshold has no direct meaning in shared text, which is
    what users set here. ``datasketch`` (PyPI ``datasketch``, MIT, maintained since 2015, used by
    the BigCode/Dolma deduplication pipelines) provides MinHash, MinHash-LSH with an automatic
    band/row choice for a threshold, and nothing else we do not need. LSH only proposes
    candidates: every candidate is verified with the **exact** Jaccard of its shingle sets, so a
    stored similarity is never a sketch estimate, and a false positive of the sketch can never
    create a pair (the sketch can still miss a pair, with a probability that shrinks as
    ``num_perm`` grows). ``benchmarks/near_duplicates_bench.py`` measures the recall against an
    exact all-pairs search (recall 1.000 on DL19 passages at Jaccard 0.7-0.9). An inverted index
    of shingles is exact and, on ten thousand short passages, faster; but it compares every pair
    of chunks sharing a shingle, which is quadratic in a boilerplate shingle's chunk count, while
    LSH work stays bounded by the bucket sizes of near-identical texts.

Definitions
    ``tokens(text)``: lower-cased ``\\w+`` runs. ``shingles(text, w)``: the set of w-word
    windows (w = 5 by default); a text with fewer than w tokens has one shingle, all its tokens;
    an empty text has none (and is never anyone's near duplicate).
    ``J(A, B) = |A ∩ B| / |A ∪ B|`` (0 when both are empty).
    Two chunks are near duplicates when ``J >= threshold`` (0.8 by default).
    Clusters are the connected components of the near-duplicate graph (union-find); a cluster
    id is its smallest member id.

Propagation (:func:`propagate`)
    For every query, a label on chunk ``s`` is copied to each near duplicate ``t`` of ``s`` that
    has no label of its own for that query. When several labelled near duplicates reach ``t``,
    the most similar one wins; ties go to the higher grade (the rule qrels use for several
    labels of one item). Only direct pairs propagate (no chains through a cluster), so every
    propagated label states the similarity between its item and its source. A propagated label
    never replaces a direct label and is never propagated again.

Agreement (:func:`propagation_agreement`)
    The error of propagation, measured where it can be: every directly labelled ``(query, t)``
    that has at least one directly labelled near duplicate for the same query gets the grade
    propagation *would* give it from the others (leave-one-out, same rule as above); that grade
    is compared with its direct grade: exact agreement, agreement at the binary threshold, the
    4x4 confusion matrix (rows = direct grade) and Cohen's kappa (scikit-learn).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from workbench import lazylibs
from workbench.errors import InputError

_TOKEN = re.compile(r"\w+")

DEFAULT_THRESHOLD = 0.8
DEFAULT_SHINGLE = 5
DEFAULT_NUM_PERM = 128

MISSING_LIBRARY = ("near-duplicate detection needs the datasketch package (MinHash LSH); install it with "
                   "`pip install datasketch` (or reinstall the workbench, which depends on it)")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def shingles(text: str, width: int = DEFAULT_SHINGLE) -> frozenset[str]:
    """The set of ``width``-word windows of ``text`` (see the module docstring)."""
    words = tokens(text)
    if not words:
        return frozenset()
    if len(words) < width:
        return frozenset([" ".join(words)])
    return frozenset(" ".join(words[i:i + width]) for i in range(len(words) - width + 1))


def jaccard(a: frozenset | set, b: frozenset | set) -> float:
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def candidate_threshold(threshold: float) -> float:
    """The LSH banding threshold used to find candidates for a Jaccard ``threshold``."""
    return max(0.1, float(threshold) - 0.15)


def _check(threshold: float, width: int, num_perm: int) -> None:
    if not (0.0 < float(threshold) <= 1.0):
        raise InputError(f"the near-duplicate threshold must lie in (0, 1], got {threshold}")
    if int(width) < 1:
        raise InputError(f"the shingle width must be at least 1 word, got {width}")
    if int(num_perm) < 16:
        raise InputError(f"MinHash needs at least 16 permutations, got {num_perm}")


def near_duplicate_pairs(ids: Sequence[str], texts: Sequence[str], *, threshold: float = DEFAULT_THRESHOLD,
                         width: int = DEFAULT_SHINGLE, num_perm: int = DEFAULT_NUM_PERM,
                         seed: int = 1) -> pd.DataFrame:
    """Pairs of items whose shingle sets have Jaccard >= ``threshold``.

    Returns ``item_a, item_b, similarity`` with ``item_a < item_b`` (as strings), sorted; the
    similarity is the exact Jaccard. Candidates come from MinHash LSH (``num_perm``
    permutations, hash ``seed``), then are verified exactly. Identical shingle sets are grouped
    before hashing, so a corpus of many copies costs one signature per distinct text.
    """
    _check(threshold, width, num_perm)
    if len(ids) != len(texts):
        raise InputError(f"{len(ids)} ids but {len(texts)} texts")
    try:
        datasketch = lazylibs.datasketch  # the first read imports it
    except ImportError:  # pragma: no cover - the dependency is declared; this is the fallback message
        raise InputError(MISSING_LIBRARY) from None

    ids = [str(i) for i in ids]
    if len(set(ids)) != len(ids):
        raise InputError("item ids must be unique for near-duplicate detection")
    sets = [shingles(t, width) for t in texts]
    # Group exact copies: they are near duplicates of each other (J = 1) without any sketch.
    groups: dict[frozenset, list[int]] = {}
    for i, s in enumerate(sets):
        if s:
            groups.setdefault(s, []).append(i)
    distinct = list(groups)
    rows: list[tuple[str, str, float]] = []
    for members in groups.values():
        for x in range(len(members)):
            for y in range(x + 1, len(members)):
                a, b = sorted((ids[members[x]], ids[members[y]]))
                rows.append((a, b, 1.0))
    if len(distinct) > 1:
        sketches = datasketch.MinHash.bulk([[s.encode("utf-8") for s in d] for d in distinct], num_perm=int(num_perm),
                                           seed=int(seed))
        # Candidates are drawn liberally (a lower banding threshold, false negatives weighted 9:1
        # over false positives): the exact check removes the extra candidates, while a pair LSH
        # misses is lost for good.
        lsh = datasketch.MinHashLSH(threshold=candidate_threshold(threshold), num_perm=int(num_perm), weights=(0.1, 0.9))
        for k, sketch in enumerate(sketches):
            lsh.insert(k, sketch)
        for k, sketch in enumerate(sketches):
            for other in lsh.query(sketch):
                if other <= k:
                    continue
                sim = jaccard(distinct[k], distinct[other])
                if sim < threshold:
                    continue  # a sketch false positive: the exact check refuses it
                for i in groups[distinct[k]]:
                    for j in groups[distinct[other]]:
                        a, b = sorted((ids[i], ids[j]))
                        rows.append((a, b, sim))
    out = pd.DataFrame(rows, columns=["item_a", "item_b", "similarity"])
    out = out.astype({"item_a": str, "item_b": str, "similarity": float})
    return out.sort_values(["item_a", "item_b"], kind="stable").reset_index(drop=True)


def brute_force_pairs(ids: Sequence[str], texts: Sequence[str], *, threshold: float = DEFAULT_THRESHOLD,
                      width: int = DEFAULT_SHINGLE) -> pd.DataFrame:
    """Every pair with exact Jaccard >= ``threshold`` by comparing all pairs (``O(n²)``): the
    reference :func:`near_duplicate_pairs` is checked against, and usable for small corpora."""
    sets = [shingles(t, width) for t in texts]
    rows = []
    for i in range(len(ids)):
        for j in range(i + 1, len(ids)):
            if sets[i] and sets[j]:
                sim = jaccard(sets[i], sets[j])
                if sim >= threshold:
                    a, b = sorted((str(ids[i]), str(ids[j])))
                    rows.append((a, b, sim))
    out = pd.DataFrame(rows, columns=["item_a", "item_b", "similarity"]).astype(
        {"item_a": str, "item_b": str, "similarity": float})
    return out.sort_values(["item_a", "item_b"], kind="stable").reset_index(drop=True)


def clusters(pairs: pd.DataFrame) -> dict[str, str]:
    """``item -> cluster id`` (the smallest member id) for every item in a pair (union-find)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:  # path compression
            parent[x], x = root, parent[x]
        return root

    for a, b in zip(pairs["item_a"], pairs["item_b"]):
        for x in (a, b):
            parent.setdefault(x, x)
        ra, rb = find(a), find(b)
        if ra != rb:
            lo, hi = sorted((ra, rb))
            parent[hi] = lo
    return {x: find(x) for x in parent}


def _neighbours(pairs: pd.DataFrame) -> dict[str, list[tuple[str, float]]]:
    out: dict[str, list[tuple[str, float]]] = {}
    for a, b, s in zip(pairs["item_a"], pairs["item_b"], pairs["similarity"]):
        out.setdefault(a, []).append((b, float(s)))
        out.setdefault(b, []).append((a, float(s)))
    return out


def _best(candidates: Iterable[tuple[str, float, int]]) -> tuple[str, float, int]:
    """The winning (source, similarity, grade) of at least one candidate: highest similarity,
    then highest grade, then smallest source id (so the choice never depends on input order)."""
    best = None
    for source, sim, grade in candidates:
        key = (sim, grade, _neg(source))
        if best is None or key > best[0]:
            best = (key, (source, sim, grade))
    if best is None:
        raise ValueError("no candidates to choose from")
    return best[1]


def _neg(text: str) -> tuple:
    # Orders strings descending inside a max(): the smallest id wins a full tie.
    return tuple(-ord(c) for c in text) + (1,)


def _labels_by_query(labels: pd.DataFrame) -> dict[str, dict[str, int]]:
    missing = {"query_id", "item_id", "grade"} - set(labels.columns)
    if missing:
        raise InputError(f"labels need the columns query_id, item_id, grade (missing {sorted(missing)})")
    out: dict[str, dict[str, int]] = {}
    for q, item, g in zip(labels["query_id"].astype(str), labels["item_id"].astype(str), labels["grade"]):
        current = out.setdefault(q, {})
        current[item] = max(int(g), current.get(item, -1))
    return out


def propagate(labels: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """Propagated labels: ``query_id, item_id, grade, similarity, source_item_id`` (rules in the
    module docstring). ``labels`` has ``query_id, item_id, grade`` (direct labels; several rows
    for one item take the highest grade)."""
    neighbours = _neighbours(pairs)
    rows = []
    for q, graded in sorted(_labels_by_query(labels).items()):
        offers: dict[str, list[tuple[str, float, int]]] = {}
        for item, grade in graded.items():
            for other, sim in neighbours.get(item, ()):
                if other not in graded:
                    offers.setdefault(other, []).append((item, sim, grade))
        for target in sorted(offers):
            source, sim, grade = _best(offers[target])
            rows.append((q, target, grade, sim, source))
    out = pd.DataFrame(rows, columns=["query_id", "item_id", "grade", "similarity", "source_item_id"])
    return out.astype({"query_id": str, "item_id": str, "grade": "int64", "similarity": float,
                       "source_item_id": str})


def leave_one_out(labels: pd.DataFrame, pairs: pd.DataFrame) -> pd.DataFrame:
    """For each directly labelled ``(query, item)`` with a directly labelled near duplicate: the
    grade propagation would give it from the others. ``query_id, item_id, direct, propagated,
    similarity, source_item_id``."""
    neighbours = _neighbours(pairs)
    rows = []
    for q, graded in sorted(_labels_by_query(labels).items()):
        for item in sorted(graded):
            offers = [(other, sim, graded[other]) for other, sim in neighbours.get(item, ()) if other in graded]
            if offers:
                source, sim, grade = _best(offers)
                rows.append((q, item, graded[item], grade, sim, source))
    return pd.DataFrame(rows, columns=["query_id", "item_id", "direct", "propagated", "similarity",
                                       "source_item_id"]).astype(
        {"query_id": str, "item_id": str, "direct": "int64", "propagated": "int64", "similarity": float,
         "source_item_id": str})


def propagation_agreement(labels: pd.DataFrame, pairs: pd.DataFrame, *, threshold: int = 2) -> dict:
    """Agreement between propagated and direct grades (leave-one-out, see the module docstring):
    ``n``, ``exact`` (share equal), ``binary`` (share equal after grade >= ``threshold``),
    ``kappa`` (4-level Cohen's kappa, None when undefined), ``confusion`` (rows direct 0-3,
    columns propagated 0-3), ``mean_abs_diff``. ``n = 0`` gives None for the shares."""

    loo = leave_one_out(labels, pairs)
    n = len(loo)
    if n == 0:
        return {"n": 0, "exact": None, "binary": None, "kappa": None, "mean_abs_diff": None,
                "confusion": [[0] * 4 for _ in range(4)], "threshold": threshold}
    d, p = loo["direct"].to_numpy(), loo["propagated"].to_numpy()
    kappa = None
    if len(set(d) | set(p)) > 1:
        with np.errstate(all="ignore"):
            value = float(lazylibs.sklearn_metrics.cohen_kappa_score(d, p, labels=[0, 1, 2, 3]))
        kappa = None if np.isnan(value) else value
    return {
        "n": n,
        "exact": float(np.mean(d == p)),
        "binary": float(np.mean((d >= threshold) == (p >= threshold))),
        "kappa": kappa,
        "mean_abs_diff": float(np.mean(np.abs(d - p))),
        "confusion": lazylibs.sklearn_metrics.confusion_matrix(d, p, labels=[0, 1, 2, 3]).tolist(),
        "threshold": threshold,
    }


def judged_at_k(run: pd.DataFrame, judged: set[tuple[str, str]], k: int = 10) -> float:
    """Mean over the run's queries of (judged items in the top ``k``) / min(k, retrieved), the
    metric engine's judged@k convention. ``run`` has ``query_id, item_id, rank``; NaN for an
    empty run."""
    if run.empty:
        return float("nan")
    top = run.sort_values(["query_id", "rank"], kind="stable").groupby("query_id", sort=True).head(k)
    hit = [(q, i) in judged for q, i in zip(top["query_id"].astype(str), top["item_id"].astype(str))]
    top = top.assign(hit=hit)
    per_query = top.groupby("query_id")["hit"].mean()
    return float(per_query.mean())
