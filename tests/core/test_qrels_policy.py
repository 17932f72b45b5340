"""The one qrels rule (core/qrels_policy): hand-worked cases for each precedence step, SME
majority and ties, and a property test that document qrels do not depend on the chunking."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from workbench.core.qrels_policy import QrelsPolicy, combine_grades, merge_qrels
from workbench.errors import ConfigError

COLS = ["query_id", "doc_id", "start", "end", "grade", "tier", "assessor"]


def spans(rows):
    return pd.DataFrame(rows, columns=COLS)


def grades(table) -> dict:
    return {(q, i): (int(g), t) for q, i, g, t in zip(table["query_id"], table["item_id"], table["grade"], table["tier"])}


def test_each_precedence_step():
    rows = [
        # d1: every tier graded it -> adjudicated
        ("q", "d1", 0, 5, 3, "llm", "m|p"), ("q", "d1", 0, 5, 0, "imported", "nist"),
        ("q", "d1", 0, 5, 1, "sme", "ana"), ("q", "d1", 0, 5, 2, "adjudicated", "lead"),
        # d2: no adjudication -> SME beats imported and llm
        ("q", "d2", 0, 5, 3, "llm", "m|p"), ("q", "d2", 0, 5, 0, "imported", "nist"),
        ("q", "d2", 0, 5, 1, "sme", "ana"),
        # d3: imported beats llm
        ("q", "d3", 0, 5, 3, "llm", "m|p"), ("q", "d3", 0, 5, 1, "imported", "nist"),
        # d4: only the llm
        ("q", "d4", 0, 5, 2, "llm", "m|p"),
    ]
    got = grades(merge_qrels(spans(rows), QrelsPolicy()))
    assert got == {("q", "d1"): (2, "adjudicated"), ("q", "d2"): (1, "sme"),
                   ("q", "d3"): (1, "imported"), ("q", "d4"): (2, "llm")}
    # another order is honoured; a tier left out of the order is ignored
    got = grades(merge_qrels(spans(rows), QrelsPolicy(order=("llm", "sme"))))
    assert got == {("q", "d1"): (3, "llm"), ("q", "d2"): (3, "llm"), ("q", "d3"): (3, "llm"), ("q", "d4"): (2, "llm")}
    got = grades(merge_qrels(spans(rows), QrelsPolicy().for_source("human")))
    assert got == {("q", "d1"): (2, "adjudicated"), ("q", "d2"): (1, "sme"), ("q", "d3"): (1, "imported")}


def test_sme_majority_and_ties():
    rows = [
        # d1: grades 1, 1, 3 -> majority 1 (not the max)
        ("q", "d1", 0, 5, 1, "sme", "a"), ("q", "d1", 0, 5, 1, "sme", "b"), ("q", "d1", 0, 5, 3, "sme", "c"),
        # d2: grades 0, 2 -> a tie: the higher grade (2) by default
        ("q", "d2", 0, 5, 0, "sme", "a"), ("q", "d2", 0, 5, 2, "sme", "b"),
        # d3: one SME, two spans of the doc (grades 0 and 2) -> that SME's max (2); another SME 1
        # -> SME grades {2, 1}: tie -> 2
        ("q", "d3", 0, 5, 0, "sme", "a"), ("q", "d3", 6, 9, 2, "sme", "a"), ("q", "d3", 0, 5, 1, "sme", "b"),
    ]
    got = merge_qrels(spans(rows), QrelsPolicy())
    assert grades(got) == {("q", "d1"): (1, "sme"), ("q", "d2"): (2, "sme"), ("q", "d3"): (2, "sme")}
    assert got["assessors"].tolist() == [3, 2, 2]
    low = grades(merge_qrels(spans(rows), QrelsPolicy(ties="lower")))
    assert low == {("q", "d1"): (1, "sme"), ("q", "d2"): (0, "sme"), ("q", "d3"): (1, "sme")}
    assert grades(merge_qrels(spans(rows), QrelsPolicy(sme_rule="max")))[("q", "d1")] == (3, "sme")
    assert grades(merge_qrels(spans(rows), QrelsPolicy(sme_rule="min")))[("q", "d1")] == (1, "sme")
    assert grades(merge_qrels(spans(rows), QrelsPolicy(sme_rule="lower_median")))[("q", "d2")] == (0, "sme")


@pytest.mark.parametrize(("values", "rule", "ties", "want"), [
    ([1, 1, 3], "majority", "higher", 1), ([0, 2], "majority", "higher", 2), ([0, 2], "majority", "lower", 0),
    ([3, 0, 0, 3, 1], "majority", "higher", 3), ([3, 0, 0, 3, 1], "majority", "lower", 0),
    ([2], "majority", "higher", 2), ([0, 1, 2, 3], "lower_median", "higher", 1), ([0, 3], "max", "lower", 3),
])
def test_combine_grades_hand_worked(values, rule, ties, want):
    assert combine_grades(np.array(values), rule, ties) == want


def test_vectorised_combination_equals_the_scalar_rule():
    rng = np.random.default_rng(7)
    checked = 0
    for rule in ("majority", "max", "min", "lower_median"):
        for ties in ("higher", "lower"):
            rows = []
            for d in range(40):
                for a in range(int(rng.integers(1, 6))):
                    rows.append(("q", f"d{d}", 0, 5, int(rng.integers(0, 4)), "sme", f"a{a}"))
            frame = spans(rows)
            got = merge_qrels(frame, QrelsPolicy(sme_rule=rule, ties=ties))
            for d, g in zip(got["item_id"], got["grade"]):
                assert g == combine_grades(frame.loc[frame["doc_id"] == d, "grade"].to_numpy(), rule, ties)
                checked += 1
    assert checked == 8 * 40


def test_bad_policy_is_refused():
    with pytest.raises(ConfigError):
        QrelsPolicy(order=("sme", "nist"))
    with pytest.raises(ConfigError):
        QrelsPolicy(sme_rule="mean")
    with pytest.raises(ConfigError):
        QrelsPolicy(llm_labels="maybe")


def _random_chunking(rng, doc_len: dict) -> pd.DataFrame:
    rows = []
    for doc, n in doc_len.items():
        cuts = np.sort(rng.choice(np.arange(1, n), size=int(rng.integers(0, min(6, n - 1))), replace=False))
        bounds = [0, *cuts.tolist(), n]
        rows += [(f"{doc}#{i}", doc, s, e) for i, (s, e) in enumerate(zip(bounds[:-1], bounds[1:]))]
    return pd.DataFrame(rows, columns=["chunk_id", "doc_id", "start", "end"])


def test_document_qrels_are_the_same_under_every_chunking():
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(25):
        doc_len = {f"d{i}": int(rng.integers(20, 200)) for i in range(6)}
        rows = []
        for _ in range(int(rng.integers(5, 40))):
            d = f"d{int(rng.integers(0, 6))}"
            s = int(rng.integers(0, doc_len[d] - 1))
            e = int(rng.integers(s + 1, doc_len[d] + 1))
            rows.append((f"q{int(rng.integers(0, 3))}", d, s, e, int(rng.integers(0, 4)),
                         str(rng.choice(["adjudicated", "sme", "imported", "llm"])), f"a{int(rng.integers(0, 3))}"))
        frame = spans(rows)
        policy = QrelsPolicy(sme_rule=str(rng.choice(["majority", "max", "lower_median"])))
        first = merge_qrels(frame, policy, level="doc")
        for _ in range(4):
            chunks = _random_chunking(rng, doc_len)
            assert merge_qrels(frame, policy, level="doc", chunks=chunks).equals(first)
            chunk_level = merge_qrels(frame, policy, level="chunk", chunks=chunks)
            # every judged chunk belongs to a judged document for the same query
            docs = set(zip(first["query_id"], first["item_id"]))
            assert {(q, c.split("#")[0]) for q, c in zip(chunk_level["query_id"], chunk_level["item_id"])} <= docs
            checked += 1
    assert checked == 100
