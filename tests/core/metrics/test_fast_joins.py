"""The fast joins: the 64-bit id hash (by hand against its formula), the hashed join of columns
(equal to the exact join, also when every doc id gets the same hash) and the dict join (tie
groups without a judged doc are not ranked by doc id: the same grades at the same ranks)."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from workbench.core.metrics import id_hash as ih
from workbench.core.metrics import ranking
from workbench.core.metrics.qrels_and_runs import Qrels, Run

M = (1 << 64) - 1


def formula(s: str) -> int:
    """The module docstring's formula, on Python integers."""
    def fmix(h: int) -> int:
        h ^= h >> 33
        h = (h * 0xFF51AFD7ED558CCD) & M
        h ^= h >> 33
        h = (h * 0xC4CEB9FE1A85EC53) & M
        return h ^ (h >> 33)

    b = s.encode()
    h = (len(b) * 0x9E3779B97F4A7C15) & M
    for k in range(0, len(b), 8):
        w = int.from_bytes(b[k:k + 8].ljust(8, b"\0"), "little")
        h = (fmix(h) if k else h) ^ w
    return fmix(h)


def strings(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice("ab\u00e9x0 ") for _ in range(rng.randint(0, 30))) for _ in range(n)]


def test_id_hash_follows_its_formula_for_every_length_and_layout():
    values = strings(2000, 0) + ["", "a", "abcdefgh", "abcdefghi", "x" * 64]
    expected = np.array([formula(s) for s in values], dtype=np.uint64)
    arr = pa.array(values, pa.string())
    assert np.array_equal(ih.id_hash(arr), expected)
    assert np.array_equal(ih.id_hash(arr.slice(7, 500)), expected[7:507])
    assert np.array_equal(ih.id_hash(pa.chunked_array([arr.slice(0, 10), arr.slice(10)])), expected)
    assert np.array_equal(ih.id_hash(pa.array(values, pa.large_string())), expected)
    # one string, one hash: the 2005 values collide nowhere
    assert len(set(expected.tolist())) == len(set(values))


@pytest.mark.parametrize("slice_rows", [1, 7, 64, 2048])
def test_id_hash_in_slices_equals_the_formula(monkeypatch, slice_rows):
    """Slices that cut inside a chunk, at its end and across chunks of several sizes."""
    values = strings(700, 3) + ["", "abcdefgh" * 3]
    expected = np.array([formula(s) for s in values], dtype=np.uint64)
    monkeypatch.setattr(ih, "BLOCK_ROWS", slice_rows)
    arr = pa.array(values, pa.string())
    assert np.array_equal(ih.id_hash(arr), expected)
    parts = pa.chunked_array([arr.slice(0, 5), arr.slice(5, 0), arr.slice(5, 300), arr.slice(305)])
    assert np.array_equal(ih.id_hash(parts), expected)
    assert np.array_equal(ih.id_hash(arr.slice(3, 600)), expected[3:603])


def test_grouped_id_hash_equals_id_hash_sorted_or_not():
    values = sorted(random.Random(1).choice(["q1", "q2", "abc", "x" * 20, ""]) for _ in range(1000))
    for arr in (pa.array(values), pa.array(values).slice(3), pa.array(values[::-1])):
        assert np.array_equal(ih.grouped_id_hash(arr), ih.id_hash(arr))
    shuffled = values[:]
    random.Random(2).shuffle(shuffled)
    assert np.array_equal(ih.grouped_id_hash(pa.array(shuffled)), ih.id_hash(pa.array(shuffled)))


def test_same_strings_compares_row_by_row():
    a = pa.array(["ab", "", "c\u00e9"])
    assert ih.same_strings(a, pa.array(["ab", "", "c\u00e9"]))
    assert not ih.same_strings(a, pa.array(["ab", "c", "\u00e9"]))
    assert not ih.same_strings(a, pa.array(["a", "b", "c\u00e9"]))
    assert ih.same_strings(a.slice(1), pa.array(["", "c\u00e9"]))


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("shape", ["random", "high bits only", "low integers", "one key", "none", "big"])
def test_key_table_finds_what_a_dict_finds(shape, ordered):
    """The open-addressing table against a Python dict, on keys that crowd one region of the
    table (only high bits set, small integers, 0 among the keys), on probes never inserted, and
    on a table too big for the roomy sizes (2^19 + 1 keys); ``ordered=False`` finds the same pairs."""
    rng = np.random.default_rng(3)
    n = {"one key": 1, "none": 0, "big": (1 << 19) + 1}.get(shape, 5000)
    if shape in ("random", "big"):
        table = np.unique(rng.integers(0, 2**64, n, dtype=np.uint64))
        rng.shuffle(table)
    elif shape == "high bits only":
        table = rng.permutation(np.arange(n, dtype=np.uint64) << np.uint64(50))
    else:
        table = rng.permutation(np.arange(n, dtype=np.uint64))
    probes = np.concatenate([table[rng.integers(0, n, min(3 * n, 30_000))] if n else np.zeros(0, dtype=np.uint64),
                             rng.integers(0, 2**64, 3000, dtype=np.uint64), np.arange(100, dtype=np.uint64),
                             np.arange(100, dtype=np.uint64) << np.uint64(50)])
    rng.shuffle(probes)
    where = {k: i for i, k in enumerate(table.tolist())}
    rows, at = ih.KeyTable(table).find(probes, ordered=ordered)
    expected = [(r, where[k]) for r, k in enumerate(probes.tolist()) if k in where]
    found = list(zip(rows.tolist(), at.tolist()))
    assert (found if ordered else sorted(found)) == expected


def test_key_table_never_finds_its_empty_mark():
    """A probe equal to the mark of empty slots (0, when 0 is no key) that passes the byte map
    must not match the first empty slot its search meets."""
    inverse = pow(0x9E3779B97F4A7C15, -1, 2**64)  # the table's multiplier, inverted mod 2^64
    # key * multiplier = 5: byte-map slot 0 and home slot 0, as 0's; three keys sharing a home
    # slot in the upper half make the searches go on for up to 3 slots (0's: into slot 1, empty)
    keys = [inverse * m % 2**64 for m in (5, 2**63 + 1, 2**63 + 2, 2**63 + 3)]
    rows, at = ih.KeyTable(np.array(keys, dtype=np.uint64)).find(np.array([0, *keys], dtype=np.uint64))
    assert (rows.tolist(), at.tolist()) == ([1, 2, 3, 4], [0, 1, 2, 3])


def random_inputs(seed: int):
    """A run with tied scores, unjudged and negative-grade docs, queries only in one side."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(30):
        docs = rng.choice(60, size=int(rng.integers(0, 25)), replace=False)
        scores = np.round(rng.random(len(docs)) * 3, 1)  # many ties
        rows += [(f"q{q}", f"d{d}\u00e9" if d % 7 == 0 else f"doc-{d}", s) for d, s in zip(docs, scores)]
    order = rng.permutation(len(rows))
    rows = [rows[i] for i in order]
    judged = [(f"q{q}", f"doc-{d}" if d % 7 else f"d{d}\u00e9", int(rng.integers(-1, 4)))
              for q in range(5, 35) for d in rng.choice(60, size=8, replace=False)]
    qrels = Qrels(pa.array([r[0] for r in judged]), pa.array([r[1] for r in judged]),
                  np.array([r[2] for r in judged], dtype=np.int64))
    run = Run(pa.array([r[0] for r in rows]), pa.array([r[1] for r in rows]),
              np.array([r[2] for r in rows], dtype=np.float64))
    return qrels, run


def exact(qrels, run, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(ranking, "_join_hashed", lambda q, r: None)
        return ranking.rank_run(qrels, run)


def same_ranked(a, b) -> None:
    for f in ("query_ids", "in_qrels", "in_run", "qidx", "rank", "grade", "judged_qidx", "judged_grade"):
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype, f
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f


@pytest.mark.parametrize("seed", range(5))
def test_hashed_join_ranks_as_the_exact_join(seed, monkeypatch):
    qrels, run = random_inputs(seed)
    assert ranking._join_hashed(qrels, run) is not None  # the hashed path is the one taken
    same_ranked(ranking.rank_run(qrels, run), exact(qrels, run, monkeypatch))


def test_colliding_hashes_fall_back_to_the_exact_join(monkeypatch):
    qrels, run = random_inputs(7)
    expected = exact(qrels, run, monkeypatch)
    # every doc id the same hash: the repeated keys hand the join to the exact path
    monkeypatch.setattr(ranking, "id_hash", lambda column: np.zeros(len(column), dtype=np.uint64))
    assert ranking._join_hashed(qrels, run) is None
    same_ranked(ranking.rank_run(qrels, run), expected)


def test_a_matched_pair_whose_strings_differ_falls_back(monkeypatch):
    # one doc per query on each side, different strings, equal hashes: keys match, strings do not
    qrels = Qrels(pa.array(["q1"]), pa.array(["a"]), np.array([2], dtype=np.int64))
    run = Run(pa.array(["q1"]), pa.array(["b"]), np.array([1.0]))
    monkeypatch.setattr(ranking, "id_hash", lambda column: np.zeros(len(column), dtype=np.uint64))
    ranked = ranking.rank_run(qrels, run)
    assert np.isnan(ranked.grade).all()  # "b" is not judged, whatever its hash


def test_repeated_run_pair_still_names_the_document(monkeypatch):
    qrels = Qrels(pa.array(["q1"]), pa.array(["a"]), np.array([1], dtype=np.int64))
    run = Run(pa.array(["q1", "q1"]), pa.array(["a", "a"]), np.array([1.0, 2.0]))
    with pytest.raises(Exception, match="appears twice"):
        ranking.rank_run(qrels, run)


def as_dicts(qrels: Qrels, run: Run) -> tuple[dict, dict]:
    q: dict = {}
    for a, b, g in zip(qrels.query_ids.to_pylist(), qrels.doc_ids.to_pylist(), qrels.grades.tolist()):
        q.setdefault(a, {})[b] = g
    r: dict = {}
    for a, b, s in zip(run.query_ids.to_pylist(), run.doc_ids.to_pylist(), run.scores.tolist()):
        r.setdefault(a, {})[b] = s
    return q, r


@pytest.mark.parametrize("step", [None, 1, 5])
@pytest.mark.parametrize("seed", range(5))
def test_dict_join_ranks_as_the_exact_join(seed, step, monkeypatch):
    # ties whose groups hold no judged doc are left in any order: grades and ranks are the same;
    # ``step``: the values read in steps of that many (None: the default, one step at this size)
    qrels, run = random_inputs(seed)
    qd, rd = as_dicts(qrels, run)
    if step is not None:
        monkeypatch.setattr(ranking, "_TOUCH_ROWS", step)
    got, want = ranking.rank_run(qd, rd), exact(qrels, run, monkeypatch)
    # the dict path numbers queries in the qrels' order then the run's; compare per query id
    for a, b in ((got, want),):
        key_a = {q: i for i, q in enumerate(a.query_ids)}
        key_b = {q: i for i, q in enumerate(b.query_ids)}
        assert set(key_a) == set(key_b)
        for q in key_a:
            ra, rb = a.qidx == key_a[q], b.qidx == key_b[q]
            assert np.array_equal(a.rank[ra], b.rank[rb])
            assert np.array_equal(a.grade[ra], b.grade[rb], equal_nan=True)


def test_large_string_doc_ids_are_hashed_like_strings(monkeypatch):
    qrels, run = random_inputs(3)
    large = Run(run.query_ids, run.doc_ids.cast(pa.large_string()), run.scores)
    assert ranking._join_hashed(qrels, large) is not None
    same_ranked(ranking.rank_run(qrels, large), exact(qrels, run, monkeypatch))
    with_null = Run(run.query_ids, pa.array([None] + run.doc_ids.to_pylist()[1:], pa.string()), run.scores)
    assert ranking._join_hashed(qrels, with_null) is None  # the exact join decides what a null means


@pytest.mark.parametrize("layout", ["both grouped", "first grouped", "second grouped", "neither", "first empty"])
def test_shared_codes_of_grouped_columns_are_those_of_one_encoding(layout):
    """Grouped columns encode only the first row of each run of equal ids: the codes and the
    dictionary must be those of encoding every row of both columns at once."""
    rng = random.Random(5)
    ids = [f"q{i}" for i in range(40)]
    grouped = [q for q in rng.sample(ids, 30) for _ in range(rng.randint(1, 9))]
    scattered = [rng.choice(ids) for _ in range(200)]
    first, second = {"both grouped": (grouped, grouped[::-1]), "first grouped": (grouped, scattered),
                     "second grouped": (scattered, grouped), "neither": (scattered, scattered[::-1]),
                     "first empty": ([], grouped)}[layout]
    a, b = pa.array(first, pa.string()), pa.array(second, pa.string())
    codes_a, codes_b, dictionary = ranking._shared_codes(a, b)
    expected = pa.concat_arrays([a, b]).dictionary_encode()
    assert dictionary.to_pylist() == expected.dictionary.to_pylist()
    assert np.concatenate([codes_a, codes_b]).tolist() == expected.indices.to_pylist()
    assert codes_a.dtype == codes_b.dtype == np.int32


@pytest.mark.parametrize("step", [1, 3, 7, 8192])
def test_float_values_lists_every_value_in_order_whatever_the_step(step, monkeypatch):
    """Mappings of 0 to 40 values (some longer than a step, empty ones between): the values in
    order, as plain iteration gives them, for steps that cut inside, between and around them."""
    from itertools import chain
    from types import MappingProxyType

    monkeypatch.setattr(ranking, "_TOUCH_ROWS", step)
    rng = random.Random(step)
    inners = [{f"d{j}": rng.choice([rng.random(), 1, True, -0.0, 2.5]) for j in range(rng.choice([0, 1, 3, 40]))}
              for _ in range(60)]
    counts = np.array([len(m) for m in inners], dtype=np.int64)
    want = [float(v) for v in chain.from_iterable(m.values() for m in inners)]
    got = ranking._float_values(inners, dict.values, counts)
    assert got.dtype == np.float64 and got.tolist() == want
    proxies = [MappingProxyType(m) for m in inners]
    assert ranking._float_values(proxies, ranking._values, counts).tolist() == want
    inners[-1]["bad"] = "x"  # not a number: numpy's own error, which the callers word
    with pytest.raises((TypeError, ValueError)):
        ranking._float_values(inners, dict.values, counts + np.r_[np.zeros(59, dtype=np.int64), 1])


def test_float_values_refuses_a_mapping_shorter_than_its_length(monkeypatch):
    class Liar(dict):
        def __len__(self):
            return super().__len__() + 1

    monkeypatch.setattr(ranking, "_TOUCH_ROWS", 2)
    inners = [{"a": 1.0, "b": 2.0}, Liar(c=3.0), {"d": 4.0}]
    counts = np.array([len(m) for m in inners], dtype=np.int64)
    with pytest.raises(ValueError):
        ranking._float_values(inners, dict.values, counts)


@pytest.mark.parametrize("seed", range(3))
def test_dict_join_of_plain_dicts_and_of_other_mappings_agree(seed):
    """Plain dicts find their judged pairs by one C loop over the qrels pairs, other mappings
    by a loop over queries: the same grades at the same ranks."""
    from types import MappingProxyType

    qd, rd = as_dicts(*random_inputs(seed))
    plain = ranking.rank_run(qd, rd)
    other = ranking.rank_run({q: MappingProxyType(v) for q, v in qd.items()},
                             {q: MappingProxyType(v) for q, v in rd.items()})
    same_ranked(plain, other)


@pytest.mark.parametrize("queries", [["q1", "q2", "q3"], ["q1", "q2", "q1"]])
def test_a_repeated_doc_is_found_in_runs_of_equal_depth(queries):
    """Each query's keys sorted alone (equal depths, rows grouped) or all at once (a query in
    two places): the doc given twice to one query is named either way."""
    docs = {0: ["a", "b", "c"], 1: ["a", "b", "c"], 2: ["d", "e", "a"]}  # q1 gets "a" twice in the second
    qids = [q for q in queries for _ in range(3)]
    dids = [d for i in range(3) for d in docs[i]]
    if queries[2] != "q1":
        dids[5] = "a"  # q2: a, b, a
    qrels = Qrels(pa.array(["q1"]), pa.array(["a"]), np.array([1], dtype=np.int64))
    run = Run(pa.array(qids), pa.array(dids), np.arange(9, 0, -1, dtype=np.float64))
    with pytest.raises(Exception, match="appears twice"):
        ranking.rank_run(qrels, run)


@pytest.mark.parametrize("slice_rows", [1, 5, 1 << 15])
@pytest.mark.parametrize("n_queries", [1, 2, 37, 70_000])
def test_pair_keys_in_place_equals_the_formula(monkeypatch, slice_rows, n_queries):
    """Written over the doc hashes a slice at a time: the same keys as the plain formula
    (query number in the high bits, the hash's top bits below), and the hashes' own array."""
    monkeypatch.setattr(ih, "BLOCK_ROWS", slice_rows)
    rng = np.random.default_rng(n_queries)
    codes = rng.integers(0, n_queries, size=1_003).astype(np.int32)
    hashes = rng.integers(0, 2**64 - 1, size=1_003, dtype=np.uint64)
    qbits = max(1, (n_queries - 1).bit_length())
    expected = [(int(c) << (64 - qbits)) | (int(h) >> qbits) for c, h in zip(codes, hashes)]
    assert ih.pair_keys(codes, hashes, n_queries).tolist() == expected
    out = ih.pair_keys(codes, hashes, n_queries, in_place=True)
    assert out is hashes and out.tolist() == expected
