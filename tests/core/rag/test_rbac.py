"""RBAC leakage: allowed roles from metadata, a hand-worked report, and the property that a run
with no restricted document never leaks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from workbench.core.rag.rbac import allowed_roles, document_roles, leakage_json, role_leakage
from workbench.errors import InputError


def test_allowed_roles_from_metadata():
    assert allowed_roles(None) is None
    assert allowed_roles({"department": "HR"}) is None  # no field: public
    assert allowed_roles({"roles": None}) is None
    assert allowed_roles({"roles": ["hr", "manager"]}) == frozenset({"hr", "manager"})
    assert allowed_roles({"roles": "hr"}) == frozenset({"hr"})
    assert allowed_roles({"roles": []}) == frozenset()  # nobody may see it
    assert allowed_roles('{"groups": ["a"]}', "groups") == frozenset({"a"})
    with pytest.raises(InputError, match="doc7.*list of role names"):
        allowed_roles({"roles": 3}, doc_id="doc7")


def _rows(items):
    return pd.DataFrame(items, columns=["query_id", "doc_id", "chunk_id", "rank"])


# d1 allows hr only, d2 is public, d3 allows nobody
RESTRICTED = document_roles({"d1": {"roles": ["hr"]}, "d2": {"department": "IT"}, "d3": {"roles": []}})
RUN = _rows([("q1", "d1", "c1", 1), ("q1", "d2", "c2", 2), ("q1", "d3", "c3", 3), ("q2", "d2", "c4", 1)])


def test_leaks_by_hand():
    r = role_leakage("eng", "run-eng", RUN, RESTRICTED)
    # eng may see d2 only: q1's d1 (rank 1) and d3 (rank 3) leak; 2 of 4 rows
    assert r.n_leaks == 2 and r.retrieved == 4 and r.rate == pytest.approx(0.5)
    assert r.leaks[["query_id", "doc_id", "rank"]].values.tolist() == [["q1", "d1", 1], ["q1", "d3", 3]]
    per_query = r.per_query.set_index("query_id")
    assert per_query.loc["q1", "rate"] == pytest.approx(2 / 3) and per_query.loc["q2", "rate"] == 0.0
    hr = role_leakage("hr", "run-hr", RUN, RESTRICTED)
    assert hr.n_leaks == 1 and hr.rate == pytest.approx(1 / 4)  # d3 allows nobody
    top1 = role_leakage("eng", "run-eng", RUN, RESTRICTED, k=1)
    assert (top1.n_leaks, top1.retrieved) == (1, 2)


def test_json_shape_is_exact():
    out = leakage_json({"eng": role_leakage("eng", "run-eng", RUN, RESTRICTED),
                        "hr": role_leakage("hr", "run-hr", RUN, RESTRICTED)})
    assert out == {
        "leaks": 3,
        "roles": {
            "eng": {"leaks": 2, "rate": 0.5, "examples": [
                {"query_id": "q1", "doc_id": "d1", "chunk_id": "c1", "rank": 1},
                {"query_id": "q1", "doc_id": "d3", "chunk_id": "c3", "rank": 3}]},
            "hr": {"leaks": 1, "rate": 0.25, "examples": [
                {"query_id": "q1", "doc_id": "d3", "chunk_id": "c3", "rank": 3}]},
        },
    }


def test_an_empty_run_has_an_undefined_rate():
    r = role_leakage("eng", "empty", _rows([]), RESTRICTED)
    assert r.n_leaks == 0 and math.isnan(r.rate)


def test_a_run_without_restricted_documents_never_leaks():
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(100):
        n_docs = int(rng.integers(1, 30))
        docs = [f"doc{i}" for i in range(n_docs)]
        restricted_docs = set(rng.choice(docs, size=int(rng.integers(0, n_docs)), replace=False).tolist())
        metadata = {d: ({"roles": ["admin"]} if d in restricted_docs else {}) for d in docs}
        public = [d for d in docs if d not in restricted_docs]
        if not public:
            continue
        rows = _rows([(f"q{int(rng.integers(0, 5))}", str(rng.choice(public)), None, r + 1)
                      for r in range(int(rng.integers(1, 40)))])
        r = role_leakage(str(rng.choice(["eng", "hr", "guest"])), "run", rows, document_roles(metadata))
        assert r.n_leaks == 0 and r.rate == 0.0 and (r.per_query["leaks"] == 0).all()
        checked += 1
    assert checked >= 90
