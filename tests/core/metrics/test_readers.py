"""Readers: TREC qrels/runs, BEIR TSV, JSONL; error messages name file and line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from workbench import evaluate
from workbench.core.metrics.qrels_and_runs import qrels_from_dict, run_from_dict
from workbench.core.metrics import readers
from workbench.core.metrics.readers import (
    _BLANKS,
    _COMMENT,
    _EDGES,
    _block_columns,
    _no_empty_field,
    _normalise,
    _plain_text,
    read_beir_qrels,
    read_jsonl_qrels,
    read_qrels,
    read_trec_qrels,
    read_trec_run,
    read_trec_run_parts,
)
from workbench.errors import InputError


def write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def both_paths(path: Path):
    """The fast reader and the careful line-by-line reader must agree."""
    fast, careful = read_trec_run(path), read_trec_run(path, careful=True)
    assert fast.to_dict() == careful.to_dict()
    return fast


# --- TREC runs ---------------------------------------------------------------------------
def test_run_single_spaces(tmp_path):
    p = write(tmp_path, "bm25.run", "q1 Q0 d1 1 2.5 tag\nq1 Q0 d2 2 1.5 tag\nq2 0 d1 1 -3e-1 tag\n")
    run = both_paths(p)
    assert run.to_dict() == {"q1": {"d1": 2.5, "d2": 1.5}, "q2": {"d1": -0.3}}
    assert run.name == "bm25"
    assert run.scores.dtype == np.float64


def test_run_tabs_leading_spaces_crlf_comments_and_hash_ids(tmp_path):
    text = (
        "# produced by a system\r\n"
        "301\tQ0\tFR94-1#2\t1\t  2.129133\tSTANDARD\r\n"
        "\r\n"
        "  # an indented comment\n"
        "301  Q0   doc#3   2    1.5   STANDARD  \n"
    )
    run = both_paths(write(tmp_path, "r.txt", text))
    assert run.to_dict() == {"301": {"FR94-1#2": 2.129133, "doc#3": 1.5}}


def test_run_junk_columns_after_tag_are_tolerated(tmp_path):
    text = "301 Q0 a 1 2.0 STANDARD more junk at\n303 Q0 b 1 1.0 STANDARD end\n301 Q0 c 2 1.0 STANDARD\n"
    run = both_paths(write(tmp_path, "r.txt", text))
    assert run.to_dict() == {"301": {"a": 2.0, "c": 1.0}, "303": {"b": 1.0}}


def test_run_empty_file(tmp_path):
    assert len(read_trec_run(write(tmp_path, "r.txt", "\n# nothing\n"))) == 0


@pytest.mark.parametrize(
    "text,line,fragment",
    [
        ("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 1 2.0\n", 2, "expected 6 fields"),
        ("q1 Q0 d1 1 2.0 t\n\nq1 Q0 d2 1 high t\n", 3, "score (5th field) must be a number, got 'high'"),
        ("q1 Q0 d1 1 nan t\n", 1, "must be a finite number"),
        # issue 8: infinities and overflowing scores were accepted while nan was refused
        ("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 inf t\n", 2, "must be a finite number, got 'inf'"),
        ("q1 Q0 d1 1 -inf t\n", 1, "must be a finite number, got '-inf'"),
        ("q1 Q0 d1 1 2.0 t\n\tq1 Q0 d2 2 1e400 t\n", 3 - 1, "must be a finite number, got '1e400'"),
        # issue 8: three columns are a truncated run, never a BEIR file
        ("q1 Q0 d1\n", 1, "three fields"),
        ("q1 0 d1 1\n", 1, "query_id Q0 doc_id rank score run_tag"),
    ],
)
def test_run_errors_name_file_and_line(tmp_path, text, line, fragment):
    p = write(tmp_path, "bad.run", text)
    with pytest.raises(InputError) as err:
        read_trec_run(p)
    assert err.value.path == str(p) and err.value.line == line
    assert str(err.value).startswith(f"{p}:{line}: ")
    assert fragment in str(err.value)


def test_not_utf8_names_the_line(tmp_path):
    p = write(tmp_path, "bad.run", b"q1 Q0 d1 1 2.0 t\nq1 Q0 d\xff 2 1.0 t\n")
    with pytest.raises(InputError, match="UTF-8") as err:
        read_trec_run(p)
    assert err.value.line == 2


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_trec_run(tmp_path / "nope.run")


# --- duplicates (detected when the run is joined) ------------------------------------------
def test_duplicate_doc_in_run_names_query_doc_and_line(tmp_path):
    q = write(tmp_path, "q.txt", "q1 0 d1 1\n")
    r = write(tmp_path, "r.run", "# header\nq1 Q0 d1 1 3.0 t\nq1 Q0 d2 2 2.0 t\nq1 Q0 d1 3 1.0 t\n")
    with pytest.raises(InputError) as err:
        evaluate(q, r, ["P@1"])
    msg = str(err.value)
    assert err.value.line == 4 and "'d1'" in msg and "'q1'" in msg and "first at line 2" in msg
    assert msg.startswith(f"{r}:4: ")


def test_duplicate_keep_first(tmp_path):
    q = write(tmp_path, "q.txt", "q1 0 d1 1\n")
    r = write(tmp_path, "r.run", "q1 Q0 d2 1 2.0 t\nq1 Q0 d1 2 1.0 t\nq1 Q0 d1 3 9.0 t\n")
    res = evaluate(q, r, ["RR"], duplicates="first")
    assert res.aggregate["RR"] == 0.5  # the first d1 (score 1.0) ranks 2nd; 9.0 is ignored


def test_duplicate_in_qrels_is_an_error(tmp_path):
    q = write(tmp_path, "q.txt", "q1 0 d1 1\nq1 0 d1 0\n")
    with pytest.raises(InputError, match="appears twice") as err:
        evaluate(q, {"q1": {"d1": 1.0}}, ["P@1"])
    assert err.value.line == 2


# --- TREC qrels ---------------------------------------------------------------------------
def test_qrels_with_comments_and_negative_labels(tmp_path):
    p = write(tmp_path, "q.txt", "# judged by NIST\n301 0 a 1\n301 0 b -1\n302 Q0 c#1 3\n")
    qrels = read_trec_qrels(p)
    assert qrels.to_dict() == {"301": {"a": 1, "b": -1}, "302": {"c#1": 3}}
    assert read_trec_qrels(p, careful=True).to_dict() == qrels.to_dict()


@pytest.mark.parametrize(
    "text,line,fragment",
    [
        ("301 0 a 1\n301 0 b\n", 2, "expected 4 fields"),
        ("301 0 a 1\n301 0 b x\n", 2, "grade (4th field) must be an integer, got 'x'"),
        ("301 0 a 1.5\n", 1, "must be an integer"),
        ("301 Q0 a 1 2.0 run\n", 1, "looks like a run file"),
    ],
)
def test_qrels_errors(tmp_path, text, line, fragment):
    p = write(tmp_path, "q.txt", text)
    with pytest.raises(InputError) as err:
        read_trec_qrels(p)
    assert err.value.line == line and fragment in str(err.value)


def test_trec_eval_comment_qrels_agree_with_plain(tmp_path):
    from tests.support.prerequisites import shared_path

    plain = read_trec_qrels(shared_path("oracles", "trec_eval", "qrels.test")).to_dict()
    commented = read_trec_qrels(shared_path("oracles", "trec_eval", "qrels.test.with-comments")).to_dict()
    # the commented copy spells one docno with a '#' inside ("# comment in docno")
    plain["301"]["CR#93E-1860"] = plain["301"].pop("CR93E-1860")
    assert plain == commented


# --- BEIR and JSONL -----------------------------------------------------------------------
@pytest.mark.parametrize("header", [True, False])
def test_beir_qrels(tmp_path, header):
    text = ("query-id\tcorpus-id\tscore\n" if header else "") + "q1\tdoc1\t1\nq1\tdoc2\t0\nq2\tdoc1\t2\n"
    p = write(tmp_path, "test.tsv", text)
    expected = {"q1": {"doc1": 1, "doc2": 0}, "q2": {"doc1": 2}}
    assert read_beir_qrels(p).to_dict() == expected
    assert read_qrels(p).to_dict() == expected  # detected by its 3 columns


def test_beir_bad_score(tmp_path):
    p = write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\nq1\tdoc1\tyes\n")
    with pytest.raises(InputError, match="integer") as err:
        read_beir_qrels(p)
    assert err.value.line == 2


def test_jsonl_dataset(tmp_path):
    rows = [
        {"query_id": "q_017", "query": "laptop refresh?", "relevant": {"d1": 3, "d3": 2}, "tags": {"type": "policy"}},
        {"query_id": 18, "query": "vpn?", "relevant": {"d9": 1}},
    ]
    p = write(tmp_path, "data.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    expected = {"q_017": {"d1": 3, "d3": 2}, "18": {"d9": 1}}
    assert read_jsonl_qrels(p).to_dict() == expected
    assert read_qrels(p).to_dict() == expected


@pytest.mark.parametrize(
    "line2,fragment",
    [
        ("{not json", "invalid JSON"),
        ('{"query_id": "q2"}', '"relevant": {doc_id: grade}'),
        ('{"query_id": "q2", "relevant": {"d": "high"}}', "must be an integer"),
    ],
)
def test_jsonl_errors(tmp_path, line2, fragment):
    p = write(tmp_path, "data.jsonl", '{"query_id": "q1", "relevant": {"d": 1}}\n' + line2 + "\n")
    with pytest.raises(InputError) as err:
        read_jsonl_qrels(p)
    assert err.value.line == 2 and fragment in str(err.value)


# --- dicts ----------------------------------------------------------------------------------
def test_dict_round_trip_and_validation():
    qrels = {"q1": {"d1": 2, "d2": -1}}
    run = {"q1": {"d1": 0.5, "d3": 1.0}}
    assert qrels_from_dict(qrels).to_dict() == qrels
    assert run_from_dict(run).to_dict() == run
    with pytest.raises(InputError, match="integers"):
        qrels_from_dict({"q1": {"d1": 1.5}})
    with pytest.raises(InputError, match="numbers"):
        run_from_dict({"q1": {"d1": "high"}})
    with pytest.raises(InputError, match="doc_id -> value"):
        run_from_dict({"q1": ["d1"]})
    with pytest.raises(InputError, match="must be strings"):
        run_from_dict({"q1": {1: 1.0}})


def test_dict_inputs_errors_have_no_line():
    with pytest.raises(InputError) as err:
        evaluate({"q1": {"d1": 1.5}}, {"q1": {"d1": 1.0}}, ["P@1"])
    assert err.value.line is None and err.value.path is None


# --- bad input from issue 8: each of these misbehaved before -------------------------------
BOM = "\ufeff"


def test_bom_is_stripped_from_trec_qrels_and_runs(tmp_path):
    q = write(tmp_path, "q.txt", BOM + "q1 0 d1 1\nq2 0 d2 1\n")
    r = write(tmp_path, "r.run", BOM + "q1 Q0 d1 1 2.0 t\nq2 Q0 d2 1 1.0 t\n")
    assert read_trec_qrels(q).to_dict() == {"q1": {"d1": 1}, "q2": {"d2": 1}}
    assert read_qrels(q).to_dict() == {"q1": {"d1": 1}, "q2": {"d2": 1}}
    assert both_paths(r).to_dict() == {"q1": {"d1": 2.0}, "q2": {"d2": 1.0}}
    assert evaluate(q, r, ["P@1"]).aggregate["P@1"] == 1.0  # q1 matched, not "\ufeffq1"
    b = write(tmp_path, "q.tsv", BOM + "query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert read_qrels(b).to_dict() == {"q1": {"d1": 1}}


@pytest.mark.parametrize("reader", [read_trec_run, read_trec_qrels, read_qrels, read_beir_qrels, read_jsonl_qrels])
def test_a_device_is_refused_at_once(reader):
    with pytest.raises(InputError, match="is a device, expected a regular file"):
        reader("/dev/zero")


@pytest.mark.parametrize("reader", [read_trec_run, read_qrels])
def test_a_fifo_is_refused_without_blocking(tmp_path, reader):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # opening it for reading would block until a writer comes
    with pytest.raises(InputError, match="is a FIFO, expected a regular file"):
        reader(fifo)


def test_a_symlink_loop_is_named(tmp_path):
    loop = tmp_path / "loop.run"
    loop.symlink_to(loop)
    with pytest.raises(InputError, match="symlink loop"):
        read_trec_run(loop)


@pytest.mark.parametrize("careful", [False, True])
def test_a_huge_grade_is_one_clear_error(tmp_path, careful):
    p = write(tmp_path, "q.txt", "q1 0 d1 1\nq1 0 d2 99999999999999999999999\n")
    with pytest.raises(InputError, match="too large") as err:
        read_trec_qrels(p, careful=careful)
    assert err.value.line == 2
    j = write(tmp_path, "q.jsonl", json.dumps({"query_id": "q1", "relevant": {"d": 10**30}}) + "\n")
    with pytest.raises(InputError, match="too large"):
        read_jsonl_qrels(j)
    with pytest.raises(InputError, match="integers"):
        qrels_from_dict({"q1": {"d": 10**30}})


@pytest.mark.parametrize("text", ["q1 Q0 d1\nq1 Q0 d2\n", "q1 Q0 17\nq1 Q0 18\n", "q1 0 17\n"])
def test_three_space_separated_columns_are_not_beir(tmp_path, text):
    # read as BEIR, "q1 Q0 17" gave doc "Q0" the grade 17 and every score was 0.0
    p = write(tmp_path, "qrels.txt", text)
    with pytest.raises(InputError, match="3 tab-separated fields") as err:
        read_qrels(p)
    assert err.value.line == 1


def test_jsonl_query_id_null_is_refused(tmp_path):
    p = write(tmp_path, "q.jsonl", json.dumps({"query_id": None, "relevant": {"d": 1}}) + "\n")
    with pytest.raises(InputError, match='"query_id" must be a non-empty string, got null') as err:
        read_jsonl_qrels(p)
    assert err.value.line == 1


def test_long_values_are_cut_in_messages(tmp_path):
    long_id = "x" * 5_000_000
    p = write(tmp_path, "r.run", f"q1 Q0 {long_id} 1 2.0\n")  # five fields: the line is quoted
    with pytest.raises(InputError) as err:
        read_trec_run(p)
    assert len(str(err.value)) < 400 and "... (" in str(err.value)
    d = write(tmp_path, "d.run", f"q1 Q0 {long_id} 1 2.0 t\nq1 Q0 {long_id} 2 1.0 t\n")
    q = write(tmp_path, "q.txt", "q1 0 a 1\n")
    with pytest.raises(InputError, match="appears twice") as err:
        evaluate(q, d, ["P@1"])
    assert len(str(err.value)) < 400


def test_non_finite_scores_in_dicts_are_refused():
    for bad in (float("inf"), float("-inf"), float("nan")):
        with pytest.raises(InputError, match="finite"):
            evaluate({"q": {"a": 1}}, {"q": {"a": bad}}, ["P@1"])
        with pytest.raises(InputError, match="finite"):
            run_from_dict({"q": {"a": bad}})


@pytest.mark.parametrize("where", ["none", "first line", "past the first buffer"])
def test_ascii_and_other_utf8_files_read_as_the_same_strings(tmp_path, where):
    """An all-ASCII file is parsed with binary id columns (no UTF-8 check), any other with
    string columns; both give string columns equal to the careful reader's, on the whole-file
    path and on the block path. The scan for non-ASCII bytes reads 2^18 bytes at a time, so an
    'é' past the first buffer must still switch the file to the checked path."""
    lines = [f"q{i % 37} Q0 d{i} {i} {1000 - i % 100}.5 tag" for i in range(12_000)]
    if where == "first line":
        lines[0] = "qé Q0 dé 1 7.5 tag"
    elif where == "past the first buffer":
        lines[-1] = "q1 Q0 dcafé 1 7.25 tag"
    path = write(tmp_path, "r.run", "\n".join(lines) + "\n")
    assert path.stat().st_size > 1 << 18
    assert _plain_text(path) == (where == "none", b" ")
    fast, careful = read_trec_run(path), read_trec_run(path, careful=True)
    assert fast.query_ids.type == fast.doc_ids.type == pa.string()
    assert fast.to_dict() == careful.to_dict()
    with read_trec_run_parts(path, block_rows=3_000) as parts:
        blocks = list(parts)
    assert len(blocks) > 1 and all(b.query_ids.type == b.doc_ids.type == pa.string() for b in blocks)
    assert sum(len(b) for b in blocks) == len(careful)
    qrels_path = write(tmp_path, "q.txt", "".join(f"{line.split()[0]} 0 {line.split()[2]} 1\n" for line in lines[::50]))
    q = read_trec_qrels(qrels_path)
    assert q.doc_ids.type == pa.string()
    assert q.to_dict() == read_trec_qrels(qrels_path, careful=True).to_dict()
    whole = evaluate(qrels_path, path, ["map", "ndcg@10"]).aggregate
    assert evaluate(qrels_path, path, ["map", "ndcg@10"], block_rows=3_000).aggregate == pytest.approx(whole)
    assert evaluate(q, careful, ["map", "ndcg@10"]).aggregate == pytest.approx(whole)


def test_a_byte_that_is_not_utf8_past_the_first_scan_buffer_names_its_line(tmp_path):
    """Non-ASCII found late still sends the file to the checked path, which refuses it."""
    lines = [f"q{i % 37} Q0 d{i} {i} {i}.5 tag".encode() for i in range(12_000)]
    lines[-2] = b"q1 Q0 d\xff 1 7.25 tag"
    path = write(tmp_path, "r.run", b"\n".join(lines) + b"\n")
    assert path.stat().st_size > 1 << 18
    with pytest.raises(InputError, match="UTF-8") as err:
        read_trec_run(path)
    assert err.value.line == 11_999


RUN_TYPES = {0: pa.string(), 2: pa.string(), 4: pa.float64()}


def _varied_run_lines(n: int) -> list[str]:
    rng = np.random.default_rng(7)
    lines = []
    for i in range(n):
        doc = f"d{rng.integers(10**6)}" + ("é" if i % 97 == 5 else "") + "x" * int(rng.integers(0, 30))
        lines.append(f"q{i // 40}{'ü' if i % 501 == 3 else ''} Q0 {doc}-{i} {i % 40 + 1} {rng.normal():.6g} run")
    return lines


@pytest.mark.parametrize("block", [128, 257, 4096, 1 << 20])  # above the longest line
@pytest.mark.parametrize("ending", ["\n", "", "\n\n\n"])
def test_block_reader_equals_the_careful_reader_across_block_edges(tmp_path, block, ending):
    """Lines cut at every kind of place by small blocks (ASCII and non-ASCII blocks, blank
    lines, a last line without its newline) read as the careful line parser reads them."""
    lines = _varied_run_lines(3_000)
    lines[1500:1500] = ["", ""]  # blank lines are skipped by both
    path = write(tmp_path, "r.run", "\n".join(lines) + ending)
    columns = _block_columns(path, RUN_TYPES, 6, lambda fields: fields >= 6, block_bytes=block)
    careful = read_trec_run(path, careful=True)
    assert columns is not None
    assert columns[0].type == columns[2].type == pa.string()
    assert columns[0].to_pylist() == careful.query_ids.to_pylist()
    assert columns[2].to_pylist() == careful.doc_ids.to_pylist()
    assert np.array_equal(columns[4], careful.scores)


@pytest.mark.parametrize(("late", "why"), [
    ("q1 Q0 dlong" + "y" * 300 + " 1 2.5 run", "a line longer than the block"),
    ("q1 Q0  d2 1 2.5 run", "a doubled blank"),
    ("q1 Q0 d#2 1 2.5 run", "a '#'"),
    ("q1 Q0 d2 1 2.5\trun", "a tab"),
    ("q1 Q0 d2\x0bx 1 2.5 run", "a vertical tab"),  # the careful reader: doc "d2", score 1
    ("q1 Q0 d2\x0cx 1 2.5 run", "a form feed"),
    ("q1 Q0 d2 1 x2.5 run", "a score pyarrow cannot read"),
    ("q1 Q0 d2 1 2.5", "a short row"),
])
def test_block_reader_leaves_late_trouble_to_the_careful_reader(tmp_path, late, why):
    """Trouble in a late block (the first blocks read fine) gives None, never a partial read;
    the file then reads as the careful reader reads it, or fails as it fails."""
    lines = _varied_run_lines(2_000)
    lines[1_900] = late
    path = write(tmp_path, "r.run", "\n".join(lines) + "\n")
    assert _block_columns(path, RUN_TYPES, 6, lambda fields: fields >= 6, block_bytes=256) is None, why
    try:
        careful = read_trec_run(path, careful=True).to_dict()
    except InputError as exc:
        with pytest.raises(InputError) as err:
            read_trec_run(path)
        assert str(err.value) == str(exc), why
    else:
        assert read_trec_run(path).to_dict() == careful, why


@pytest.mark.parametrize("sep", [" ", "\t"])
@pytest.mark.parametrize("eol", ["\n", "\r\n"])
@pytest.mark.parametrize("block", [257, 1 << 20])
def test_tab_separated_and_crlf_files_take_the_block_path(tmp_path, sep, eol, block):
    """Single tabs (in a file without spaces) and CR LF line ends are read by the block path
    and by the streamed split as they are (no rewrite: a regex substitution of every tab took
    seconds at 10^6 rows), the same as the careful reader, runs and qrels."""
    lines = [line.replace(" ", sep) for line in _varied_run_lines(3_000)]
    lines[1500:1500] = ["", ""]
    path = write(tmp_path, "r.run", eol.join(lines) + eol)
    careful = read_trec_run(path, careful=True)
    columns = _block_columns(path, RUN_TYPES, 6, lambda fields: fields >= 6, block_bytes=block)
    assert columns is not None
    assert columns[0].to_pylist() == careful.query_ids.to_pylist()
    assert columns[2].to_pylist() == careful.doc_ids.to_pylist()
    assert np.array_equal(columns[4], careful.scores)
    assert _plain_text(path) == (False, sep.encode())  # 'é' and 'ü' in some ids
    with read_trec_run_parts(path, block_rows=700) as parts:
        assert len(parts) == 3_000
        assert {q: d for part in parts for q, d in part.to_dict().items()} == careful.to_dict()
    qrels_lines = [sep.join((line.split()[0], "0", line.split()[2], str(i % 4))) for i, line in enumerate(lines) if line]
    qrels_path = write(tmp_path, "q.txt", eol.join(qrels_lines) + eol)
    assert _block_columns(qrels_path, {0: pa.string(), 2: pa.string(), 3: pa.int64()}, 4, lambda f: f == 4,
                          block_bytes=block) is not None
    assert read_trec_qrels(qrels_path).to_dict() == read_trec_qrels(qrels_path, careful=True).to_dict()


@pytest.mark.parametrize(("late", "why"), [
    ("q1 Q0 d2 1 2.5 run \r\n", "a blank before CR LF"),
    ("q1 Q0 d2 1 2.5 run\r\r\n", "a CR before CR LF"),
    ("q1 Q0 d2 1  2.5 run\r\n", "a doubled blank"),
    ("q1 Q0 d2 1 2.5 run\rq1 Q0 d3 1 2.5 run\r\n", "a CR inside a line"),
])
def test_a_crlf_file_with_late_trouble_goes_to_the_careful_reader(tmp_path, late, why):
    """CR LF pairs are counted, not looked at one by one: anything else up to 0x20 beside
    another such byte in the same block must still be found."""
    lines = [line + "\r\n" for line in _varied_run_lines(2_000)]
    lines[1_000:1_000] = ["\r\n"]  # an empty line: looked at, and allowed
    lines[1_900] = late
    path = write(tmp_path, "r.run", "".join(lines))
    assert _block_columns(path, RUN_TYPES, 6, lambda fields: fields >= 6, block_bytes=1 << 20) is None, why
    assert _plain_text(path) is None, why
    assert read_trec_run(path).to_dict() == read_trec_run(path, careful=True).to_dict()


@pytest.mark.parametrize("inside", ["\x1f", "\xa0", "\u3000", "\x85"])
def test_other_unicode_whitespace_stays_inside_an_id_for_every_reader(tmp_path, inside):
    """Only ASCII blanks separate fields (as for trec_eval); str.split() would also split at
    these, so the careful reader must not use it on a text that holds one."""
    lines = [f"q{i // 10} Q0 d{i} {i % 10 + 1} {i % 7}.5 run" for i in range(2_000)]
    lines[1_000] = f"q100 Q0 d{inside}1 3 2.5 run"
    path = write(tmp_path, "r.run", "\n".join(lines) + "\n")
    careful = read_trec_run(path, careful=True)
    assert careful.to_dict()["q100"][f"d{inside}1"] == 2.5
    assert read_trec_run(path).to_dict() == careful.to_dict()
    qrels_path = write(tmp_path, "q.txt", f"q100 0 d{inside}1 2\nq100 0 d1000 1\n")
    assert read_trec_qrels(qrels_path, careful=True).to_dict() == {"q100": {f"d{inside}1": 2, "d1000": 1}}


def test_the_other_whitespace_is_all_that_str_split_adds_to_the_ascii_blanks():
    every = "".join(c for c in map(chr, range(0x110000)) if c.isspace() and c not in " \t\n\r\x0b\x0c")
    assert readers._OTHER_WHITESPACE == every


def test_a_file_tab_separated_in_one_part_and_space_separated_in_another_is_not_streamed(tmp_path):
    """pyarrow's stream reads the whole file with one separator: the scan refuses a file that
    uses both, even when each of its reads uses one only; it still reads as the careful one."""
    lines = [f"q{i // 10} Q0 d{i} {i % 10 + 1} {i % 7}.5 run" for i in range(40_000)]
    tabbed = "".join(line.replace(" ", "\t") + "\n" for line in lines[:8_000])
    assert len(tabbed) < 1 << 18
    tabbed = tabbed[:-1] + "x" * ((1 << 18) - len(tabbed)) + "\n"  # the last tag padded: 2^18 bytes
    text = tabbed + "".join(line + "\n" for line in lines[8_000:])
    path = write(tmp_path, "r.run", text)
    # the first read has tabs only, the next ones spaces only
    assert " " not in text[:1 << 18] and "\t" not in text[1 << 18:]
    assert _plain_text(path) is None
    with read_trec_run_parts(path, block_rows=10_000) as parts:
        got = {q: d for part in parts for q, d in part.to_dict().items()}
    assert got == read_trec_run(path, careful=True).to_dict()


def test_a_space_inside_a_tab_separated_line_is_a_blank_as_well(tmp_path):
    """The careful reader splits at any run of blanks, so a tab-separated file with a space in
    an id is not read with tabs alone as separators (the id would keep its space)."""
    lines = [f"q{i // 10}\tQ0\td{i}\t{i % 10 + 1}\t{i % 7}.5\trun" for i in range(2_000)]
    lines[1_000] = "q100\tQ0\td 1\t3\t2.5\trun"  # the careful reader: doc "d", score 3
    path = write(tmp_path, "r.run", "\n".join(lines) + "\n")
    careful = read_trec_run(path, careful=True)
    assert careful.to_dict()["q100"]["d"] == 3.0
    assert read_trec_run(path).to_dict() == careful.to_dict()
    assert _block_columns(path, RUN_TYPES, 6, lambda fields: fields >= 6, block_bytes=512) is None


@pytest.mark.parametrize("layout", ["q1  Q0 d1 1 2.5 run", "q1 Q0 d1 1 2.5 run ", " q1 Q0 d1 1 2.5 run",
                                    "q1\t\tQ0\td1\t1\t2.5\trun", "q1 Q0 d1 1 2.5  run"])
def test_a_blank_doubled_on_every_line_does_not_shift_the_columns(tmp_path, layout):
    """Aligned columns: every line with the same doubled (or edge) blank. pyarrow holds each
    row to the first row's field count, so it read such a file without an error, the fields
    after the doubled blank one column to the right: doc ids "Q0", scores the ranks. Every
    reader must read it as the careful one does (fields split at runs of blanks)."""
    rows = [(f"q{i // 3}", f"d{i}", i % 3 + 1, 10.0 - i % 3) for i in range(3_000)]
    text = "".join(layout.replace("q1", q).replace("d1", d).replace(" 1 ", f" {r} ").replace("\t1\t", f"\t{r}\t")
                   .replace("2.5", str(score)) + "\n" for q, d, r, score in rows)
    path = write(tmp_path, "r.run", text)
    expected = {}
    for q, d, _, score in rows:
        expected.setdefault(q, {})[d] = score
    assert read_trec_run(path).to_dict() == expected
    assert read_trec_run(path, careful=True).to_dict() == expected
    assert _block_columns(path, RUN_TYPES, 6, lambda fields: fields >= 6, block_bytes=512) is None
    with read_trec_run_parts(path, block_rows=500) as parts:
        assert {q: d for part in parts for q, d in part.to_dict().items()} == expected
    qrels_path = write(tmp_path, "q.txt", "".join(f"{q}  0 {d} {r % 2}\n" for q, d, r, _ in rows))
    assert read_trec_qrels(qrels_path).to_dict() == read_trec_qrels(qrels_path, careful=True).to_dict()
    # by hand: each query ranks its rank-1 doc (grade 1), rank-2 (grade 0), rank-3 (grade 1)
    assert evaluate(qrels_path, path, ["P@1", "map"]).aggregate == pytest.approx({"P@1": 1.0, "map": (1 + 2 / 3) / 2})


def test_a_cr_inside_a_line_is_a_blank_to_every_reader(tmp_path):
    """The careful reader reads a CR not followed by LF as a blank (one line); pyarrow would end
    a row there. Early or late, in a block or across the scan's read buffer, the file goes to
    the careful reader; a CR LF cut by that buffer does not."""
    lines = _varied_run_lines(12_000)
    lines[11_000] = "q1 Q0 dcr 1 2.5 run\rq1 Q0 dother 2 1.5 run"  # the careful reader: one row
    path = write(tmp_path, "r.run", "\n".join(lines) + "\n")
    assert _block_columns(path, RUN_TYPES, 6, lambda fields: fields >= 6, block_bytes=1 << 16) is None
    assert _plain_text(path) is None
    careful = read_trec_run(path, careful=True)
    assert "dother" not in careful.to_dict()["q1"] and careful.to_dict()["q1"]["dcr"] == 2.5
    assert read_trec_run(path).to_dict() == careful.to_dict()
    # the scan reads 2^18 bytes at a time after one byte carried over: put a CR last in a read
    pad = (1 << 18) - 1 - len("q1 Q0 d0 1 2.5 ")  # the CR lands on the last byte of the first read
    for after, plain in (("\n", True), ("q", False)):
        text = "q1 Q0 d0 1 2.5 " + "r" * pad + "\r" + after + "q1 Q0 d1 1 2.5 run\r\n"
        path = write(tmp_path, "cut.run", text)
        assert text.index("\r") == (1 << 18) - 1
        assert (_plain_text(path) is not None) is plain


def test_a_doubled_blank_across_the_scans_read_buffer_is_found(tmp_path):
    head = "q1 Q0 d0 1 2.5 " + "r" * ((1 << 18) - 16) + " "  # a trailing blank last in the first read
    assert len(head) == 1 << 18
    path = write(tmp_path, "cut.run", head + "\nq1 Q0 d1 1 2.5 run\n")
    assert _plain_text(path) is None
    path = write(tmp_path, "ok.run", head[:-1] + "x\nq1 Q0 d1 1 2.5 run\n")
    assert _plain_text(path) == (True, b" ")


def _empty_field_oracle(data: bytes, line_start: bool, line_end: bool) -> bool:
    low = [b <= 0x20 for b in data]
    if line_start and data and low[0] and data[0] not in (10, 13):
        return False
    if line_end and data and low[-1] and data[-1] not in (10, 13):
        return False
    return all(not (low[i] and low[i + 1]) or (data[i] in (10, 13) and data[i + 1] in (10, 13))
               for i in range(len(data) - 1))


@pytest.mark.parametrize("step", [1, 2, 7, 1 << 20])
def test_no_empty_field_against_a_plain_loop_and_split(monkeypatch, step):
    """2,000 random texts of fields, blanks and line ends, checked in steps that cut them
    anywhere: the vectorised check equals a plain loop over the neighbouring bytes, and where
    it says no field is empty, every line splits at each single separator as at runs of blanks
    (what pyarrow reads is what the careful reader reads)."""
    monkeypatch.setattr(readers, "_BLOCK_BYTES", step)
    rng = np.random.default_rng(11)
    alphabet = [b"a", b"bc", "é".encode(), b" ", b" ", b"\t", b"\n", b"\r\n", b"\r", b"\x0b", b"\x00"]
    weights = np.array([8, 8, 1, 5, 2, 1, 3, 1, 0.3, 0.2, 0.2])
    agreed = 0
    for _ in range(2_000):
        data = b"".join(alphabet[i] for i in rng.choice(len(alphabet), int(rng.integers(0, 40)), p=weights / weights.sum()))
        for line_start in (True, False):
            for line_end in (True, False):
                got = _no_empty_field(np.frombuffer(data, dtype=np.uint8), line_start=line_start, line_end=line_end)
                assert got == _empty_field_oracle(data, line_start, line_end), data
        # a vertical tab, like a tab or CR, is a blank to the careful reader: the callers refuse it
        lone_blank = any(c in data for c in (b"\t", b"\r", b"\x0b"))
        if _no_empty_field(np.frombuffer(data, dtype=np.uint8)) and not lone_blank:
            for line in data.split(b"\n"):  # the last one too: the text's end ends a line
                if line:
                    assert line.split(b" ") == line.split(), line
                    agreed += 1
    assert agreed > 150


def _normalise_by_substitution(data: bytes) -> bytes:
    """The rewrite as it was defined: comments out, every run of blanks one space, edge spaces
    out (a regular expression substitution each)."""
    import re
    if b"#" in data and (data.startswith(b"#") or b"\n#" in data or re.search(rb"\n[ \t]+#", data)):
        data = _COMMENT.sub(b"", data)
    return _EDGES.sub(b"", _BLANKS.sub(b" ", data))


def test_normalise_equals_the_substitutions():
    """3,000 random texts of fields, blanks of every kind, CR and LF, comments."""
    rng = np.random.default_rng(5)
    alphabet = [b"a", b"q1", b"#", b" ", b"  ", b"\t", b"\n", b"\r\n", b"\r", b"\x0c", b"\x0b", "é".encode()]
    for _ in range(3_000):
        data = b"".join(alphabet[i] for i in rng.integers(0, len(alphabet), int(rng.integers(0, 50))))
        assert _normalise(data) == _normalise_by_substitution(data), data


def test_block_reader_leaves_bytes_that_are_not_utf8_to_the_careful_reader(tmp_path):
    lines = [line.encode() for line in _varied_run_lines(2_000)]
    lines[1_900] = b"q1 Q0 d\xff 1 2.5 run"
    path = write(tmp_path, "r.run", b"\n".join(lines) + b"\n")
    assert _block_columns(path, RUN_TYPES, 6, lambda fields: fields >= 6, block_bytes=256) is None
    with pytest.raises(InputError, match="UTF-8"):
        read_trec_run(path)


def test_a_run_of_several_default_blocks_reads_as_the_careful_reader_does(tmp_path):
    lines = _varied_run_lines(60_000)
    path = write(tmp_path, "r.run", "\n".join(lines) + "\n")
    assert path.stat().st_size > 2 << 20  # three blocks or more
    fast = read_trec_run(path)
    careful = read_trec_run(path, careful=True)
    assert fast.query_ids.equals(careful.query_ids) and fast.doc_ids.equals(careful.doc_ids)
    assert np.array_equal(fast.scores, careful.scores)
    qrels_path = write(tmp_path, "q.txt", "".join(f"{line.split()[0]} 0 {line.split()[2]} {i % 4}\n"
                                                  for i, line in enumerate(lines)))
    q, q_careful = read_trec_qrels(qrels_path), read_trec_qrels(qrels_path, careful=True)
    assert q.query_ids.equals(q_careful.query_ids) and q.doc_ids.equals(q_careful.doc_ids)
    assert np.array_equal(q.grades, q_careful.grades)
