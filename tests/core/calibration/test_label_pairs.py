"""core.label_pairs: TREC and JSONL label files, pairing, refusals with file:line."""

from __future__ import annotations

import pytest

from workbench.core.calibration.label_pairs import pair_files, parse_label_file
from workbench.errors import InputError


def test_trec_and_jsonl_pair_by_query_and_item():
    ref = parse_label_file("# comment\nq1 0 d1 3\nq1 0 d2 0\n\nq2 0 d1 2\n", "ref.txt")
    cand = parse_label_file(
        '{"query_id": "q1", "doc_id": "d1", "grade": 2}\n'
        '{"query_id": "q2", "doc_id": "d1", "grade": 1, "status": "ok"}\n'
        '{"query_id": "q2", "doc_id": "d9", "grade": null, "status": "failed"}\n'
        '{"query_id": "q3", "relevant": {"d4": 1, "d5": 0}}\n', "cand.jsonl")
    assert cand.not_labels == 1
    paired = pair_files(ref, cand)
    assert paired.reference.tolist() == [3, 2] and paired.candidate.tolist() == [2, 1]
    assert paired.query_ids == ["q1", "q2"]
    assert paired.only_reference == 1 and paired.only_candidate == 2


def test_span_rows_key_on_the_span():
    a = parse_label_file('{"query_id": "q", "doc_id": "d", "start": 0, "end": 10, "grade": 3}\n'
                         '{"query_id": "q", "doc_id": "d", "start": 10, "end": 20, "grade": 0}\n', "a.jsonl")
    b = parse_label_file('{"query_id": "q", "doc_id": "d", "start": 10, "end": 20, "grade": 1}\n', "b.jsonl")
    paired = pair_files(a, b)
    assert paired.keys == [("q", "d@10-20")] and paired.reference.tolist() == [0]


def test_out_of_scale_grades_refused_with_file_and_line():
    with pytest.raises(InputError, match=r"^run\.txt:3: grade 5 is outside the scale 0-3; use --scale 0-4"):
        parse_label_file("q 0 a 1\nq 0 b 2\nq 0 c 5\n", "run.txt")
    f = parse_label_file("q 0 a 1\nq 0 b 2\nq 0 c 5\nq 0 d 10\n", "run.txt", clip=True)
    assert f.grades.tolist() == [1, 2, 3, 3] and f.clipped == 2
    assert parse_label_file("q 0 a 4\n", "u.txt", scale_max=4).grades.tolist() == [4]
    with pytest.raises(InputError, match=r"u\.txt:1: grade -1 is negative"):
        parse_label_file("q 0 a -1\n", "u.txt", clip=True)


def test_malformed_lines_and_duplicates():
    with pytest.raises(InputError, match=r"x\.txt:2: expected 4 fields"):
        parse_label_file("q 0 a 1\nq a 1\n", "x.txt")
    with pytest.raises(InputError, match=r"x\.txt:1: grade must be an integer, got 'high'"):
        parse_label_file("q 0 a high\n", "x.txt")
    with pytest.raises(InputError, match=r"x\.txt:3: query 'q' item 'a' is labelled twice \(first at line 1\)"):
        parse_label_file("q 0 a 1\nq 0 b 1\nq 0 a 2\n", "x.txt")
    with pytest.raises(InputError, match=r"y\.jsonl:2: invalid JSON"):
        parse_label_file('{"query_id": "q", "doc_id": "a", "grade": 1}\n{oops\n', "y.jsonl")
    with pytest.raises(InputError, match=r"y\.jsonl:1: grade must be an integer, got 2.5"):
        parse_label_file('{"query_id": "q", "doc_id": "a", "grade": 2.5}\n', "y.jsonl")
    with pytest.raises(InputError, match="holds no labels"):
        parse_label_file("# nothing\n", "z.txt")
