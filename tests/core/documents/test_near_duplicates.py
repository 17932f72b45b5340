"""Near-duplicate detection and label propagation (issue 14): hand-worked examples, MinHash LSH
against a brute-force Jaccard written here, and scikit-learn's kappa for the agreement."""

from __future__ import annotations

import itertools
import random

import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from workbench.core.documents import near_duplicates as nd
from workbench.errors import InputError


def test_shingles_and_jaccard_by_hand():
    assert nd.shingles("A b, c d!", 2) == {"a b", "b c", "c d"}
    assert nd.shingles("one two", 5) == {"one two"}  # shorter than the width: one shingle
    assert nd.shingles("  ...  ", 5) == frozenset()
    a, b = nd.shingles("a b c d", 2), nd.shingles("a b c e", 2)  # {ab, bc, cd} vs {ab, bc, ce}
    assert nd.jaccard(a, b) == pytest.approx(2 / 4)
    assert nd.jaccard(frozenset(), frozenset()) == 0.0


def _corpus(seed: int, n_base: int = 60):
    """Base texts of 60 random words, and copies with a few words changed (similarity ~0.5-1)."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(400)]
    ids, texts = [], []
    for b in range(n_base):
        words = [rng.choice(vocab) for _ in range(60)]
        ids.append(f"d{b:03d}")
        texts.append(" ".join(words))
        for c in range(rng.randint(0, 3)):
            copy = list(words)
            for _ in range(rng.randint(0, 4)):
                copy[rng.randrange(len(copy))] = rng.choice(vocab)
            ids.append(f"d{b:03d}-c{c}")
            texts.append(" ".join(copy))
    return ids, texts


def _reference(ids, texts, threshold, width):
    """Every pair's exact Jaccard, computed here from word windows (independent of the module)."""
    sets = []
    for t in texts:
        w = t.lower().split()
        sets.append({tuple(w[i:i + width]) for i in range(len(w) - width + 1)})
    out = {}
    for i, j in itertools.combinations(range(len(ids)), 2):
        sim = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
        if sim >= threshold:
            out[tuple(sorted((ids[i], ids[j])))] = sim
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_minhash_pairs_against_brute_force_jaccard(seed):
    ids, texts = _corpus(seed)
    ref = _reference(ids, texts, 0.7, 5)
    found = nd.near_duplicate_pairs(ids, texts, threshold=0.7, width=5, num_perm=128, seed=seed)
    got = {(a, b): s for a, b, s in found.itertuples(index=False)}
    # verified pairs: never a false positive, and the similarity is the exact one
    assert set(got) <= set(ref)
    for key, sim in got.items():
        assert sim == pytest.approx(ref[key], abs=1e-12)
    # LSH may miss a pair near the threshold, rarely
    assert len(ref) >= 20
    assert len(got) / len(ref) >= 0.95
    # brute_force_pairs (the module's reference) agrees with this test's computation
    brute = nd.brute_force_pairs(ids, texts, threshold=0.7, width=5)
    assert {(a, b) for a, b, _ in brute.itertuples(index=False)} == set(ref)
    print(f"seed {seed}: checked {len(ref)} reference pairs over {len(ids)} texts")


def test_exact_copies_are_pairs_with_similarity_one():
    pairs = nd.near_duplicate_pairs(["x", "y", "z", "e"], ["same words here now"] * 3 + [""], threshold=0.9)
    assert list(map(tuple, pairs[["item_a", "item_b"]].to_numpy())) == [("x", "y"), ("x", "z"), ("y", "z")]
    assert (pairs["similarity"] == 1.0).all()


def test_bad_parameters_are_refused():
    with pytest.raises(InputError, match="threshold"):
        nd.near_duplicate_pairs(["a"], ["t"], threshold=0)
    with pytest.raises(InputError, match="unique"):
        nd.near_duplicate_pairs(["a", "a"], ["t", "u"])


def _pairs(rows):
    return pd.DataFrame(rows, columns=["item_a", "item_b", "similarity"])


def _labels(rows):
    return pd.DataFrame(rows, columns=["query_id", "item_id", "grade"])


def test_clusters_are_connected_components():
    got = nd.clusters(_pairs([("b", "c", 0.9), ("c", "d", 0.9), ("x", "y", 0.8)]))
    assert got == {"b": "b", "c": "b", "d": "b", "x": "x", "y": "x"}


def test_propagation_by_hand():
    # a-b 0.90, a-c 0.85, b-c 0.95, d-e 0.80 (e unlabelled everywhere)
    pairs = _pairs([("a", "b", 0.90), ("a", "c", 0.85), ("b", "c", 0.95), ("d", "e", 0.80)])
    labels = _labels([("q1", "a", 2), ("q1", "c", 0), ("q2", "a", 3), ("q2", "d", 1), ("q2", "d", 2)])
    got = nd.propagate(labels, pairs)
    rows = {(q, i): (g, s, src) for q, i, g, s, src in got.itertuples(index=False)}
    # q1: b is offered a (0.90, 2) and c (0.95, 0): the most similar source wins
    assert rows[("q1", "b")] == (0, 0.95, "c")
    # q2: b and c from a; e from d, whose two labels take the highest grade (2)
    assert rows[("q2", "b")] == (3, 0.90, "a")
    assert rows[("q2", "c")] == (3, 0.85, "a")
    assert rows[("q2", "e")] == (2, 0.80, "d")
    # direct labels are never overwritten, and there is no propagation through chains
    assert ("q1", "a") not in rows and ("q1", "c") not in rows
    assert len(got) == 4


def test_equal_similarity_goes_to_the_higher_grade():
    pairs = _pairs([("a", "t", 0.9), ("b", "t", 0.9)])
    got = nd.propagate(_labels([("q", "a", 1), ("q", "b", 3)]), pairs)
    assert got[["item_id", "grade", "source_item_id"]].values.tolist() == [["t", 3, "b"]]


def test_agreement_is_leave_one_out_and_matches_sklearn():
    pairs = _pairs([("a", "b", 0.9), ("c", "d", 0.9), ("e", "f", 0.9), ("g", "h", 0.95), ("g", "i", 0.85)])
    labels = _labels([("q", "a", 3), ("q", "b", 3), ("q", "c", 0), ("q", "d", 2), ("q", "e", 1), ("q", "f", 1),
                      ("q", "g", 2), ("q", "h", 0), ("q", "i", 2)])
    loo = nd.leave_one_out(labels, pairs)
    by_item = dict(zip(loo["item_id"], zip(loo["direct"], loo["propagated"])))
    # g's labelled neighbours: h (0.95, grade 0) beats i (0.85); h and i each see only g (2)
    assert by_item == {"a": (3, 3), "b": (3, 3), "c": (0, 2), "d": (2, 0), "e": (1, 1), "f": (1, 1),
                       "g": (2, 0), "h": (0, 2), "i": (2, 2)}
    got = nd.propagation_agreement(labels, pairs)
    direct = [v[0] for v in by_item.values()]
    prop = [v[1] for v in by_item.values()]
    assert got["n"] == 9
    assert got["exact"] == pytest.approx(5 / 9)
    assert got["binary"] == pytest.approx(5 / 9)
    assert got["kappa"] == pytest.approx(cohen_kappa_score(direct, prop, labels=[0, 1, 2, 3]))
    assert sum(map(sum, got["confusion"])) == 9
    assert got["confusion"][0][2] == 2 and got["confusion"][2][0] == 2


def test_agreement_without_cases():
    got = nd.propagation_agreement(_labels([("q", "a", 1)]), _pairs([("a", "b", 0.9)]))
    assert got["n"] == 0 and got["exact"] is None and got["kappa"] is None


def test_judged_at_k_by_hand():
    run = pd.DataFrame({"query_id": ["q1"] * 3 + ["q2"] * 2, "item_id": ["a", "b", "c", "a", "z"],
                        "rank": [1, 2, 3, 1, 2]})
    judged = {("q1", "a"), ("q1", "c"), ("q2", "z")}
    # q1 top 2: a judged, b not -> 0.5; q2 top 2: a not, z judged -> 0.5
    assert nd.judged_at_k(run, judged, k=2) == pytest.approx(0.5)
    # k=3: q1 2/3, q2 1/2 (divides by min(k, retrieved))
    assert nd.judged_at_k(run, judged, k=3) == pytest.approx((2 / 3 + 1 / 2) / 2)
