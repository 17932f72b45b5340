"""Scoring in parts of whole queries (issue 36): a run file larger than ``block_rows`` is split
by a hash of the query id and each part scored alone; nested dicts are cut into blocks of run
queries. Every per-query value, every mean and every list of queries must be exactly those of
the run scored at once, whatever the file's order."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from workbench.core.metrics.evaluation import evaluate
from workbench.core.metrics.readers import read_trec_run_parts
from workbench.errors import InputError
from workbench.services.evaluation.evaluate import evaluate_files

MEASURES = ["ndcg@10", "ndcg", "recall@20", "map", "RR", "P@5", "rprec", "bpref", "err@10", "rbp",
            "rbp(graded=True)", "judged@10", "AP(rel=2)", "hit@3", "f1@10", "ndcg_exp@5"]
# reading order: every field the result carries
FIELDS = ("aggregate", "excluded_no_relevant", "missing_from_run", "only_in_run", "thresholds",
          "excluded_by_measure", "missing_by_measure", "no_judged_retrieved", "n_common")


def _data(seed: int = 7, n_queries: int = 60):
    """qrels and run dicts with ties (about 1 score in 4 repeats the one before it), queries
    of 0-40 docs, queries only in the qrels, only in the run, without relevant docs, and with
    nothing judged retrieved."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for i in range(n_queries):
        q = f"q{i}"
        n = int(rng.integers(0, 41))
        docs = [f"d{int(x)}" for x in rng.choice(500, size=n, replace=False)]
        scores = np.round(rng.gamma(2.0, 3.0, size=n), 1)
        for j in range(1, n):
            if rng.random() < 0.25:
                scores[j] = scores[j - 1]
        if i % 11 != 5:  # some queries only in the qrels
            run[q] = dict(zip(docs, scores.tolist()))
        if i % 13 != 3:  # some only in the run
            judged = docs[: n // 2] + [f"x{int(x)}" for x in rng.integers(0, 10**6, size=3)]
            top = 0 if i % 17 == 2 else 3  # some without a relevant doc
            qrels[q] = {d: int(rng.integers(-1, top + 1)) for d in judged}
        if i % 19 == 4 and q in run:  # nothing judged retrieved
            qrels[q] = {"zz": 2}
    return qrels, run


def _write(tmp_path: Path, qrels: dict, run: dict, seed: int = 3) -> tuple[Path, Path]:
    rows = [(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    order = np.random.default_rng(seed).permutation(len(rows))  # a query's rows scattered all over
    run_path = tmp_path / "run.txt"
    run_path.write_text("".join(f"{rows[k][0]} Q0 {rows[k][1]} 0 {rows[k][2]!r} tag\n" for k in order.tolist()))
    qrels_path = tmp_path / "qrels.txt"
    qrels_path.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()))
    return qrels_path, run_path


def _same(a, b) -> None:
    assert a.query_ids.tolist() == b.query_ids.tolist()
    assert list(a.scores) == list(b.scores)
    for label in a.scores:
        assert np.array_equal(a.scores[label], b.scores[label], equal_nan=True), label
    for name in FIELDS:
        assert getattr(a, name) == getattr(b, name), name


@pytest.mark.parametrize("options", [{}, {"condensed": True}, {"include_no_relevant": True},
                                     {"missing_as_zero": False}])
def test_a_run_file_in_parts_scores_as_at_once(tmp_path, options):
    qrels, run = _data()
    qrels_path, run_path = _write(tmp_path, qrels, run)
    n_rows = sum(map(len, run.values()))
    whole = evaluate(qrels_path, run_path, MEASURES, **options)
    # the split itself: several parts, each of whole queries, together every row once
    with read_trec_run_parts(run_path, block_rows=150, chunk_bytes=2000) as parts:
        assert parts.n_parts > 3 and len(parts) == n_rows
        seen: dict[str, int] = {}
        for i, part in enumerate(parts):
            for q in set(part.query_ids.to_pylist()):
                assert seen.setdefault(q, i) == i  # no query in two parts
            assert part.partial
    assert sorted(seen) == sorted(run)
    # 2000-byte chunks: the rows of most queries come from several chunks of the file
    split = evaluate(qrels_path, run_path, MEASURES, block_rows=150, **options)
    _same(whole, split)
    # the values are the dict path's, at once and in blocks
    _same(whole, evaluate(qrels, run, MEASURES, **options))
    _same(whole, evaluate(qrels, run, MEASURES, block_rows=100, **options))


def test_evaluate_files_in_parts_as_at_once_and_leaves_no_file(tmp_path, monkeypatch):
    qrels, run = _data(seed=11, n_queries=80)
    qrels_path, run_path = _write(tmp_path, qrels, run)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    whole = evaluate_files(qrels_path, [run_path], MEASURES)["run"]
    split = evaluate_files(qrels_path, [run_path], MEASURES, block_rows=200)["run"]
    _same(whole, split)
    assert list(scratch.iterdir()) == []
    # a failure half-way through leaves nothing either
    with run_path.open("a") as f:
        f.write("q1 Q0 d1 0 inf tag\n")
    with pytest.raises(InputError):
        evaluate_files(qrels_path, [run_path], MEASURES, block_rows=200)
    assert list(scratch.iterdir()) == []


def test_a_query_is_scored_alone(tmp_path):
    """ERR sums logarithms down each ranking: a query's value must be the same with other
    queries' rows before it (it once came from one cumulative sum over the whole run)."""
    qrels, run = _data(seed=5, n_queries=40)
    alone = {q: evaluate({q: qrels[q]}, {q: run[q]}, ["err@10", "err"]).scores for q in run if q in qrels}
    together = evaluate(qrels, run, ["err@10", "err"], include_no_relevant=True)
    ids = together.query_ids.tolist()
    for q, scores in alone.items():
        for label, values in scores.items():
            if len(values):
                assert together.scores[label][ids.index(q)] == values[0], (q, label)


def test_a_bad_line_in_a_later_chunk_names_its_line(tmp_path):
    lines = [f"q{i % 7} Q0 d{i} 0 {i / 10} tag\n" for i in range(300)]
    lines[250] = "q1 Q0 d250 0 nan tag\n"
    run_path = tmp_path / "run.txt"
    run_path.write_text("".join(lines))
    with pytest.raises(InputError) as err:
        read_trec_run_parts(run_path, block_rows=20, chunk_bytes=500)
    assert err.value.line == 251 and "finite" in str(err.value)


def test_a_duplicate_in_a_part_names_both_lines(tmp_path):
    lines = [f"q{i % 9} Q0 d{i} 0 {i / 10} tag\n" for i in range(300)]
    lines[200] = "q3 Q0 d12 0 0.5 tag\n"  # d12 is on line 13 for q3 already
    qrels_path = tmp_path / "qrels.txt"
    qrels_path.write_text("q3 0 d12 1\n")
    run_path = tmp_path / "run.txt"
    run_path.write_text("".join(lines))
    with pytest.raises(InputError) as err:
        evaluate(qrels_path, run_path, ["map"], block_rows=20)
    assert err.value.line == 201 and "(first at line 13)" in str(err.value)
    kept = evaluate(qrels_path, run_path, ["map"], block_rows=20, duplicates="first")
    assert kept.aggregate == evaluate(qrels_path, run_path, ["map"], duplicates="first").aggregate


def test_a_duplicate_in_split_qrels_names_both_lines(tmp_path):
    qrels_path = tmp_path / "qrels.txt"
    qrels_path.write_text("".join(f"q{i} 0 d{i} 1\n" for i in range(30)) + "q4 0 d4 2\n")
    run_path = tmp_path / "run.txt"
    run_path.write_text("".join(f"q{i % 30} Q0 d{i} 0 1.0 tag\n" for i in range(300)))
    with pytest.raises(InputError) as err:
        evaluate(qrels_path, run_path, ["map"], block_rows=20)
    assert err.value.line == 31 and "(first at line 5)" in str(err.value)


def test_tabs_comments_crlf_and_a_byte_order_mark_in_parts(tmp_path):
    """Chunks that need the reader's rewrite (tabs, CR, comments) or its careful parser (ragged
    junk columns) give the rows the whole-file reader gives."""
    qrels, run = _data(seed=13, n_queries=40)
    qrels_path, run_path = _write(tmp_path, qrels, run)
    lines = run_path.read_text().splitlines()
    odd = []
    for i, line in enumerate(lines):
        if i % 7 == 0:
            line = line.replace(" ", "\t")
        if i % 11 == 0:
            odd.append("# a comment line")
        if i % 13 == 0:
            line += " junk more"
        odd.append(line)
    path = tmp_path / "odd.txt"
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(odd).encode() + b"\r\n")
    whole = evaluate(qrels_path, run_path, MEASURES)
    _same(whole, evaluate(qrels_path, path, MEASURES))
    _same(whole, evaluate(qrels_path, path, MEASURES, block_rows=150))


@pytest.mark.parametrize("grouped", [False, True])
def test_a_plain_file_that_pyarrow_stops_reading_half_way_is_read_again(tmp_path, monkeypatch, grouped):
    """A plain file (single spaces) is split as pyarrow streams it (by hash, or in ranges when
    grouped by query); a later block it refuses (a junk column) sends the whole file to the
    careful reader, and no row of the abandoned pass stays in a part. A doubled blank sends it
    there before the pass."""
    qrels, run = _data(seed=17, n_queries=50)
    qrels_path, run_path = _write(tmp_path, qrels, run)
    if grouped:
        _write_grouped(run_path, run)
    whole = evaluate(qrels_path, run_path, MEASURES)
    lines = run_path.read_text().splitlines(keepends=True)
    from workbench.core.metrics import readers

    refused = []

    def streamed(*args, **kwargs):
        try:
            yield from streamed_runs(*args, **kwargs)
        except readers._SlowPath:
            refused.append(args[0])
            raise

    streamed_runs = readers._streamed_runs
    monkeypatch.setattr(readers, "_streamed_runs", streamed)
    # a doubled blank is found by the scan before the streamed pass (pyarrow would read an
    # empty field there); a junk column only by the streamed pass, which then gives up
    for i, change, streamed_first in ((len(lines) - 5, lambda s: s.replace(" ", "  ", 1), False),
                                      (len(lines) - 9, lambda s: s.rstrip("\n") + " junk\n", True)):
        odd = tmp_path / f"odd{i}.txt"
        odd.write_text("".join(lines[:i] + [change(lines[i])] + lines[i + 1:]))
        refused.clear()
        with read_trec_run_parts(odd, block_rows=150, chunk_bytes=2000) as parts:
            assert len(parts) == len(lines) and sum(len(p) for p in parts) == len(lines)
        _same(whole, evaluate(qrels_path, odd, MEASURES, block_rows=150))
        assert refused == ([odd, odd] if streamed_first else [])  # once for the parts, once for evaluate


def _write_grouped(path: Path, run: dict, seed: int = 4, again: str | None = None) -> None:
    """The run with each query's rows together (queries in a shuffled order, a query's rows in
    a shuffled order); ``again``: that query's second half moved to the end of the file."""
    rng = np.random.default_rng(seed)
    lines, tail = [], []
    for q in rng.permutation(list(run)).tolist():
        rows = [f"{q} Q0 {d} 0 {s!r} tag\n" for d, s in run[q].items()]
        rows = [rows[k] for k in rng.permutation(len(rows))]
        if q == again:
            rows, tail = rows[: len(rows) // 2], rows[len(rows) // 2:]
        lines += rows
    path.write_text("".join(lines + tail))


def test_a_run_grouped_by_query_is_cut_into_ranges_of_whole_queries(tmp_path):
    """Rows grouped by query: parts are runs of consecutive whole queries (no hash per row),
    the qrels follow the queries to their parts, and every value is the one at once; the
    2,000-byte blocks of the stream often end inside a query."""
    qrels, run = _data(seed=23, n_queries=80)
    qrels_path, _ = _write(tmp_path, qrels, run)
    run_path = tmp_path / "grouped.txt"
    _write_grouped(run_path, run)
    file_order = list(dict.fromkeys(line.split()[0] for line in run_path.read_text().splitlines()))
    with read_trec_run_parts(run_path, block_rows=150, chunk_bytes=2000) as parts:
        assert parts.n_parts > 3
        got = [list(dict.fromkeys(part.query_ids.to_pylist())) for part in parts]
    # whole queries, in file order (the hash split would interleave them)
    assert [q for part in got for q in part] == file_order
    whole = evaluate(qrels_path, run_path, MEASURES)
    for options in ({}, {"include_no_relevant": True}, {"missing_as_zero": False}):
        _same(evaluate(qrels_path, run_path, MEASURES, **options),
              evaluate(qrels_path, run_path, MEASURES, block_rows=150, **options))
    _same(whole, evaluate(qrels, run, MEASURES))
    # qrels rows in any order follow their queries too
    lines = qrels_path.read_text().splitlines(keepends=True)
    shuffled = tmp_path / "shuffled_qrels.txt"
    shuffled.write_text("".join(lines[k] for k in np.random.default_rng(2).permutation(len(lines))))
    _same(whole, evaluate(shuffled, run_path, MEASURES, block_rows=150))


def test_a_query_in_two_places_of_a_grouped_file_sends_it_to_the_hash_split(tmp_path):
    qrels, run = _data(seed=29, n_queries=80)
    qrels_path, _ = _write(tmp_path, qrels, run)
    again = max(run, key=lambda q: len(run[q]))
    run_path = tmp_path / "almost.txt"
    _write_grouped(run_path, run, again=again)
    with read_trec_run_parts(run_path, block_rows=150, chunk_bytes=2000) as parts:
        holders = [i for i, part in enumerate(parts) if again in part.query_ids.to_pylist()]
    assert len(holders) == 1  # ranges would have put its two places in two parts
    _same(evaluate(qrels_path, run_path, MEASURES), evaluate(qrels_path, run_path, MEASURES, block_rows=150))
