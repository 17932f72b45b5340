"""Budgeted span coverage against a brute-force character-set computation and by hand."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from workbench.core.rag.context_budget import (
    budget_selection,
    budgeted_coverage,
    chunk_token_counts,
    mean_coverage,
    parse_budgets,
    token_start_table,
)
from workbench.core.metrics.pareto import pareto_frontier
from workbench.errors import InputError

TOKEN = re.compile(r"\w+|[^\w\s]")


def owned_starts(text: str) -> list[int]:
    starts = [m.start() for m in TOKEN.finditer(text)]
    if starts:
        starts[0] = 0
    elif text:
        starts = [0]  # a whitespace-only text is one unit for the chunker, so one token here
    return starts


def brute_force(docs: dict, ranked: list, gold: list, budget: int) -> dict:
    """Per query: walk chunks by rank, count tokens by regex, keep a set of characters."""
    queries = {g[0] for g in gold}
    out = {}
    for q in queries:
        gold_chars = {(d, i) for (qq, d, s, e) in gold if qq == q for i in range(s, e)}
        if not gold_chars:
            out[q] = float("nan")
            continue
        used = 0
        chars = set()
        for (_, _, d, s, e) in sorted((r for r in ranked if r[0] == q), key=lambda r: r[1]):
            starts = [p for p in owned_starts(docs[d]) if s <= p < e]
            if used + len(starts) <= budget:
                chars |= {(d, i) for i in range(s, e)}
                used += len(starts)
                continue
            left = budget - used
            if left > 0:
                chars |= {(d, i) for i in range(s, starts[left])}
            break
        out[q] = len(chars & gold_chars) / len(gold_chars)
    return out


WORDS = ["alpha", "be", "c", "RAG", "x1", ",", ".", "\n\n", "  ", "(", "ok"]


def random_case(rng: np.random.Generator):
    docs = {}
    for d in range(int(rng.integers(1, 4))):
        parts = rng.choice(WORDS, size=int(rng.integers(0, 30)))
        docs[f"d{d}"] = (" " if rng.random() < 0.3 else "") + " ".join(parts)
    ranked, gold = [], []
    for q in range(int(rng.integers(1, 4))):
        for rank in range(1, int(rng.integers(0, 7)) + 1):
            d = f"d{int(rng.integers(len(docs)))}"
            n = len(docs[d])
            if n == 0:
                continue
            s = int(rng.integers(0, n))
            e = int(rng.integers(s + 1, n + 1))
            ranked.append((f"q{q}", rank, d, s, e))
        for _ in range(int(rng.integers(1, 3))):
            d = f"d{int(rng.integers(len(docs)))}"
            n = len(docs[d])
            s = int(rng.integers(0, n + 1))
            e = int(rng.integers(s, n + 1))
            gold.append((f"q{q}", d, s, e))
    return docs, ranked, gold


def test_equals_brute_force_on_random_inputs():
    rng = np.random.default_rng(20261130)
    checked = 0
    for _ in range(300):
        docs, ranked, gold = random_case(rng)
        starts = token_start_table(list(docs.items()))
        ranked_df = pd.DataFrame(ranked, columns=["query_id", "rank", "doc_id", "start", "end"])
        gold_df = pd.DataFrame(gold, columns=["query_id", "doc_id", "start", "end"])
        budgets = [int(b) for b in rng.integers(1, 40, size=3)]
        got = budgeted_coverage(ranked_df, gold_df, starts, budgets)
        for b in budgets:
            want = brute_force(docs, ranked, gold, b)
            table = got[got["budget"] == b].set_index("query_id")["coverage"]
            assert set(table.index) == set(want)
            for q, value in want.items():
                if np.isnan(value):
                    assert np.isnan(table[q])
                else:
                    assert table[q] == pytest.approx(value)
                checked += 1
    assert checked >= 1000, checked


def test_hand_worked_example():
    # Tokens: "aa"(0) "bb"(3) "cc"(6) "."(8) "dd"(10); owned starts 0, 3, 6, 8, 10
    text = "aa bb cc. dd"
    starts = token_start_table([("d", text)])
    assert starts["start"].tolist() == [0, 3, 6, 8, 10]
    ranked = pd.DataFrame([("q", 1, "d", 6, 12), ("q", 2, "d", 0, 6)],
                          columns=["query_id", "rank", "doc_id", "start", "end"])
    assert chunk_token_counts(ranked, starts).tolist() == [3, 2]  # "cc. dd" = cc . dd ; "aa bb " = aa bb
    # gold "bb cc" = [3, 8): 5 characters.
    gold = pd.DataFrame([("q", "d", 3, 8)], columns=["query_id", "doc_id", "start", "end"])
    # B=2: rank 1 crosses (3 tokens), truncated to "cc. " = [6, 10) -> covers "cc" = 2 of 5.
    sel = budget_selection(ranked, starts, 2)
    assert sel[["start", "end", "tokens"]].values.tolist() == [[6, 10, 2]]
    # B=4: rank 1 whole [6,12) (3 tokens), rank 2 cut to 1 token [0, 3) -> covers "cc" only: 2/5.
    # B=5: both whole -> [0, 12) covers all 5: 1.0
    cov = budgeted_coverage(ranked, gold, starts, [2, 4, 5])
    assert cov.set_index("budget")["coverage"].to_dict() == pytest.approx({2: 0.4, 4: 0.4, 5: 1.0})
    assert mean_coverage(cov) == pytest.approx({2: 0.4, 4: 0.4, 5: 1.0})


def test_query_without_retrieval_scores_zero_and_budgets_parse():
    starts = token_start_table([("d", "one two")])
    ranked = pd.DataFrame(columns=["query_id", "rank", "doc_id", "start", "end"])
    gold = pd.DataFrame([("q", "d", 0, 3)], columns=["query_id", "doc_id", "start", "end"])
    cov = budgeted_coverage(ranked, gold, starts, [10])
    assert cov["coverage"].tolist() == [0.0]
    assert parse_budgets("4000, 1000,1000") == (1000, 4000)
    with pytest.raises(InputError):
        parse_budgets("1k")
    with pytest.raises(InputError):
        parse_budgets("0")


def brute_pareto(q, c):
    out = []
    for i in range(len(q)):
        if np.isnan(q[i]) or np.isnan(c[i]):
            out.append(False)
            continue
        dominated = any(q[j] >= q[i] and c[j] <= c[i] and (q[j] > q[i] or c[j] < c[i])
                        for j in range(len(q)) if not (np.isnan(q[j]) or np.isnan(c[j])))
        out.append(not dominated)
    return out


def test_pareto_equals_brute_force():
    rng = np.random.default_rng(7)
    cases = 0
    for _ in range(500):
        n = int(rng.integers(0, 9))
        q = rng.integers(0, 4, size=n).astype(float)
        c = rng.integers(0, 4, size=n).astype(float)
        if n and rng.random() < 0.2:
            q[int(rng.integers(n))] = np.nan
        assert pareto_frontier(q, c).tolist() == brute_pareto(q, c)
        cases += 1
    assert cases == 500
    # by hand: (0.5, 10ms) beats (0.4, 20ms); (0.6, 30ms) is on the frontier too
    assert pareto_frontier([0.5, 0.4, 0.6], [10, 20, 30]).tolist() == [True, False, True]


def test_token_start_table_equals_one_token_window_chunking():
    """The direct token-start table equals the spans of a fixed 1-token chunking (its definition)."""
    from workbench.core.documents.chunking import ChunkingSpec, chunk_documents
    from workbench.core.rag.context_budget import token_start_table

    rng = np.random.default_rng(3)
    alphabet = list("ab c.\n\t,é-_1 ") + ["  ", "\n\n", "Ω"]
    docs = [(f"d{i}", "".join(rng.choice(alphabet, size=int(rng.integers(0, 40))))) for i in range(300)]
    docs += [("blank", "   \n "), ("empty", ""), ("one", "x")]
    got = token_start_table(docs)
    spans = chunk_documents(ChunkingSpec("tok", "fixed", {"size": 1, "unit": "tokens"}), docs)
    want = pd.DataFrame({"doc_id": spans["doc_id"].astype(str), "start": spans["start"].astype(np.int64)})
    key = ["doc_id", "start"]
    got = got.sort_values(key).reset_index(drop=True)
    want = want.sort_values(key).reset_index(drop=True)
    assert len(want) > 1000
    assert got["doc_id"].tolist() == want["doc_id"].tolist()
    assert got["start"].tolist() == want["start"].tolist()
