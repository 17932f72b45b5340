"""``workbench eval`` refuses a run none of whose retrieved ids is in the qrels (a chunk run
against document qrels, or the reverse) with one line naming the cause and the fix, instead of
printing 0.0000; when only some queries retrieve nothing judged, it scores and warns."""

from __future__ import annotations

import json

import pytest

from workbench.core.metrics.evaluation import evaluate

QRELS_DOCS = "q1 0 d1 2\nq1 0 d2 1\nq2 0 d3 3\n"
QRELS_CHUNKS = "q1 0 sections:d1:0 2\nq1 0 sections:d2:1 1\nq2 0 sections:d3:0 3\n"
RUN_CHUNKS = ("q1 Q0 sections:d1:0 1 9.0 r\nq1 Q0 sections:d2:1 2 8.0 r\n"
              "q2 Q0 sections:d3:0 1 9.0 r\nq2 Q0 sections:d4:0 2 8.0 r\n")
RUN_DOCS = "q1 Q0 d1 1 9.0 r\nq1 Q0 d2 2 8.0 r\nq2 Q0 d3 1 9.0 r\n"


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, text in (("qd.txt", QRELS_DOCS), ("qc.txt", QRELS_CHUNKS), ("rc.txt", RUN_CHUNKS),
                       ("rd.txt", RUN_DOCS)):
        (tmp_path / name).write_text(text)
        paths[name] = str(tmp_path / name)
    return paths


def _one_line_error(out) -> str:
    assert out.returncode == 3, out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_a_chunk_run_against_document_qrels_is_refused_with_the_fix(files, cli):
    line = _one_line_error(cli("eval", files["qd.txt"], files["rc.txt"], "-m", "ndcg@10"))
    assert "no retrieved id is in the qrels" in line and "2 queries they share" in line
    assert "ranks chunks of chunking 'sections'" in line
    assert "--level chunk --chunking sections" in line


def test_a_document_run_against_chunk_qrels_is_refused_with_the_fix(files, cli):
    line = _one_line_error(cli("eval", files["qc.txt"], files["rd.txt"], "-m", "ndcg@10"))
    assert "the qrels grade chunks of chunking 'sections'" in line and "export document qrels" in line


def test_ids_of_no_recognisable_kind_are_still_refused(files, tmp_path, cli):
    other = tmp_path / "other.txt"
    other.write_text("q1 Q0 x1 1 9.0 r\nq2 Q0 x2 1 9.0 r\n")
    line = _one_line_error(cli("eval", files["qd.txt"], str(other), "-m", "P@1"))
    assert "the run's ids (e.g. 'x1') are not the qrels' ids" in line


def test_some_queries_without_a_judged_id_are_scored_and_warned_about(files, tmp_path, cli):
    partial = tmp_path / "partial.txt"
    partial.write_text("q1 Q0 d1 1 9.0 r\nq2 Q0 zz 1 9.0 r\n")
    out = cli("eval", files["qd.txt"], str(partial), "-m", "P@1", "--format", "json")
    assert out.returncode == 0, out.stderr
    per_query = json.loads(out.stdout)["partial"]["per_query"]
    assert per_query == {"q1": {"P@1": 1.0}, "q2": {"P@1": 0.0}}  # hand-worked
    warning = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert warning == ["warning: run partial: 1 of the 2 queries it shares with the qrels retrieve no id the "
                       "qrels judge (e.g. q2); they score 0; check that the run and the qrels use the same ids"]
    # a run that matches everywhere warns about nothing
    clean = cli("eval", files["qd.txt"], files["rd.txt"], "-m", "P@1")
    assert clean.returncode == 0 and "warning" not in clean.stderr


def test_the_engine_lists_the_queries_without_a_judged_retrieved_id():
    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}}
    run = {"q1": {"d1": 1.0, "x": 0.5}, "q2": {"y": 1.0}, "q4": {"d1": 1.0}}
    result = evaluate(qrels, run, ["P@1"])
    assert result.no_judged_retrieved == ("q2",) and result.n_common == 2
