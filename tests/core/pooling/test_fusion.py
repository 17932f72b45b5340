"""Reciprocal rank fusion: hand-worked example, tie rule, weights, errors, ranx agreement."""

from __future__ import annotations

import sys
import warnings
from contextlib import contextmanager

import numpy as np
import pandas as pd
import pytest

from tests.support.prerequisites import require_module
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.core.pooling.fusion import FusionError, rrf, stack_runs
from workbench.errors import WorkbenchError


def run(query_id, ids, col="doc_id", **extra):
    return pd.DataFrame({"query_id": query_id, col: ids, **extra})


BM25 = run("q1", ["a", "b", "c"], rank=[1, 2, 3])
DENSE = run("q1", ["c", "a", "d"], score=[0.9, 0.5, 0.1])  # ranks c=1, a=2, d=3


def test_hand_worked_rrf():
    got = rrf({"bm25": BM25, "dense": DENSE}, k=60)
    # a: 1/(60+1) + 1/(60+2); c: 1/(60+3) + 1/(60+1); b: 1/(60+2); d: 1/(60+3)
    expected = {"a": 1 / 61 + 1 / 62, "c": 1 / 63 + 1 / 61, "b": 1 / 62, "d": 1 / 63}
    assert got["doc_id"].tolist() == ["a", "c", "b", "d"]
    assert got["rank"].tolist() == [1, 2, 3, 4]
    assert got["score"].tolist() == pytest.approx([expected[d] for d in got["doc_id"]])
    assert list(got.columns) == ["query_id", "doc_id", "score", "rank"]


def test_weights_and_k():
    got = rrf([BM25, DENSE], k=0, weights=[2.0, 1.0])
    expected = {"a": 2 / 1 + 1 / 2, "c": 2 / 3 + 1 / 1, "b": 2 / 2, "d": 1 / 3}
    assert dict(zip(got["doc_id"], got["score"])) == pytest.approx(expected)
    by_name = rrf({"bm25": BM25, "dense": DENSE}, k=0, weights={"bm25": 2.0, "dense": 1.0})
    pd.testing.assert_frame_equal(got, by_name)


def test_ties_break_by_item_id_and_do_not_depend_on_input_order():
    r1 = run("q1", ["x", "y"], rank=[1, 2])
    r2 = run("q1", ["y", "x"], rank=[1, 2])
    got = rrf([r1, r2])
    assert got["doc_id"].tolist() == ["x", "y"] and got["score"].iloc[0] == got["score"].iloc[1]
    swapped = rrf([r2, r1])
    pd.testing.assert_frame_equal(got, swapped)
    # Three-way sums in different orders (float rounding) still tie.
    a = run("q", ["p", "q", "r"], rank=[1, 2, 3])
    b = run("q", ["q", "r", "p"], rank=[1, 2, 3])
    c = run("q", ["r", "p", "q"], rank=[1, 2, 3])
    assert rrf([a, b, c])["doc_id"].tolist() == ["p", "q", "r"]


def test_score_ties_inside_a_run_rank_by_item_id():
    stacked, col = stack_runs({"r": run("q", ["b", "a", "c"], score=[1.0, 1.0, 0.5])})
    assert col == "doc_id"
    assert dict(zip(stacked["doc_id"], stacked["rank"])) == {"a": 1, "b": 2, "c": 3}


def test_depth_and_long_table_input_and_chunk_ids():
    long = pd.concat(
        [run("q1", ["c1", "c2", "c3"], col="chunk_id", rank=[1, 2, 3]).assign(run_id="r1"),
         run("q1", ["c3", "c4"], col="chunk_id", rank=[1, 2]).assign(run_id="r2")]
    )
    got = rrf(long, depth=1)
    assert set(got["chunk_id"]) == {"c1", "c3"}
    assert got["score"].tolist() == pytest.approx([1 / 61, 1 / 61])
    assert got["chunk_id"].tolist() == ["c1", "c3"]


def test_integer_query_ids_become_strings_and_queries_are_separate():
    a = pd.DataFrame({"query_id": [1, 1, 2], "doc_id": ["a", "b", "a"], "rank": [1, 2, 1]})
    got = rrf([a])
    assert got["query_id"].tolist() == ["1", "1", "2"]
    assert got.groupby("query_id")["rank"].apply(list).to_dict() == {"1": [1, 2], "2": [1]}


@pytest.mark.parametrize(
    "runs,kwargs,message",
    [
        ([run("q", ["a", "a"], rank=[1, 2])], {}, "twice"),
        ([run("q", ["a"])], {}, "rank or a score"),
        ([pd.DataFrame({"doc_id": ["a"], "rank": [1]})], {}, "query_id"),
        ([run("q", ["a"], rank=[0])], {}, "integers >= 1"),
        ([run("q", ["a"], rank=[1.5])], {}, "integers >= 1"),
        ([run("q", ["a"], score=[np.nan])], {}, "missing"),
        ([run("q", ["a"], rank=[1]).assign(chunk_id="x")], {}, "id_col"),
        ([run("q", ["a"], rank=[1])], {"k": -1}, "k must"),
        ([run("q", ["a"], rank=[1])], {"weights": [1, 2]}, "weights"),
        ([run("q", ["a"], rank=[1])], {"weights": [-1]}, ">= 0"),
        ([run("q", ["a"], rank=[1])], {"depth": 0}, "depth"),
        ([], {}, "no runs"),
    ],
)
def test_errors_are_clear(runs, kwargs, message):
    with pytest.raises(FusionError, match=message) as err:
        rrf(runs, **kwargs)
    assert isinstance(err.value, ValueError) and isinstance(err.value, WorkbenchError)


#: whether this module imported ranx itself, with numba's JIT off (decided at the first use)
_INTERPRETED: list[bool] = []


@contextmanager
def _ranx_interpreted():
    """ranx, with its numba functions run by the interpreter while the block runs.

    ranx's source is the oracle; numba only compiles it. Its typed-dict and typed-list code is
    compiled again in every process (numba's on-disk cache does not hold it): about 10 s of CPU
    to fuse a few toy runs. With ``numba.config.DISABLE_JIT`` the same ranx functions run as
    Python (typed containers are plain ones, ``prange`` is ``range``) on the same float64
    arithmetic. Only when this module is the first to import ranx in the process: a ranx
    imported compiled elsewhere keeps its JIT."""
    numba = require_module("numba")
    if not _INTERPRETED:
        _INTERPRETED.append("ranx" not in sys.modules)
    previous = numba.config.DISABLE_JIT
    numba.config.DISABLE_JIT = previous or _INTERPRETED[0]
    try:
        # Inside the test: a module-level importorskip would skip every test of this file.
        yield require_module("ranx")
    finally:
        numba.config.DISABLE_JIT = previous


@given(st.data())
@settings(max_examples=15, deadline=None)
def test_matches_ranx_rrf(data):
    with _ranx_interpreted() as ranx:
        n_runs = data.draw(st.integers(2, 4))  # ranx refuses to fuse a single run
        k = data.draw(st.sampled_from([1, 10, 60]))
        frames, ranx_runs = [], []
        for r in range(n_runs):
            rows = []
            for q in ("q1", "q2"):
                docs = data.draw(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=6, unique=True))
                # distinct scores: ranx and we then agree on every rank
                rows += [(q, d, float(len(docs) - i)) for i, d in enumerate(docs)]
            df = pd.DataFrame(rows, columns=["query_id", "doc_id", "score"])
            frames.append(df)
            qd: dict = {}
            for q, d, s in rows:
                qd.setdefault(q, {})[d] = s
            ranx_runs.append(ranx.Run(qd, name=f"r{r}"))
        ours = rrf(frames, k=k)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = ranx.fuse(ranx_runs, method="rrf", params={"k": k}).to_dict()
        assert len(ours) == sum(len(v) for v in theirs.values())
        for row in ours.itertuples():
            assert row.score == pytest.approx(theirs[row.query_id][row.doc_id], rel=1e-9)
