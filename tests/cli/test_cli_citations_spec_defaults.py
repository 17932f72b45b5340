"""Issue 32: ``workbench citations`` follows the specification by default and says so.

Oracle: the specification's worked example with bracket-number citations, ``[3] [7] [99]``
against context ``1 3 5 7 10``: faithfulness 2/3 and coverage 0.4 when [n] is compared with
the context ids (the spec's bracket_number), 1/3 and 0.2 when read by position. An answer
without citations scores 1.0 in the spec's harness mean.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.support.cli_runner import run_in_process

ANSWERS = [
    {"query_id": "q1", "answer": "Based on [3], hashing. See [7] for virtual nodes. However, [99] differs.",
     "context_ids": ["1", "3", "5", "7", "10"]},
    {"query_id": "q2", "answer": "No sources here.", "context_ids": ["a"]},
]  # fmt: skip


def _run(tmp_path, records, *extra):
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "WORKBENCH_"))}
    done = run_in_process(("citations", str(path), "--pattern", "numeric", *extra), cwd=tmp_path, env=env,
                          timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def test_numeric_by_id_gives_the_spec_example(tmp_path):
    payload = json.loads(_run(tmp_path, ANSWERS[:1], "--format", "json"))
    agg, answer = payload["aggregate"], payload["answers"][0]
    assert answer["faithfulness"] == pytest.approx(2 / 3) and answer["coverage"] == pytest.approx(0.4)
    assert (agg["mean_faithfulness"], agg["mean_coverage"]) == (pytest.approx(2 / 3), pytest.approx(0.4))
    assert (agg["resolve"], agg["uncited"]) == ("id", "one")
    table = _run(tmp_path, ANSWERS[:1])
    assert "0.6667" in table and "0.4000" in table and "resolve by id" in table


def test_resolve_position_keeps_the_old_reading(tmp_path):
    agg = json.loads(_run(tmp_path, ANSWERS[:1], "--resolve", "position", "--format", "json"))["aggregate"]
    assert agg["mean_faithfulness"] == pytest.approx(1 / 3) and agg["mean_coverage"] == pytest.approx(0.2)
    assert agg["resolve"] == "position"


def test_uncited_answer_counts_as_one_unless_skipped(tmp_path):
    payload = json.loads(_run(tmp_path, ANSWERS, "--format", "json"))
    assert payload["answers"][1]["faithfulness"] == 1.0
    assert payload["aggregate"]["mean_faithfulness"] == pytest.approx((2 / 3 + 1) / 2)
    assert payload["aggregate"]["uncited"] == "one"
    table = _run(tmp_path, ANSWERS)
    assert "uncited: one" in table and "0.8333" in table and "counts as 1.0" in table

    payload = json.loads(_run(tmp_path, ANSWERS, "--uncited", "skip", "--format", "json"))
    assert payload["answers"][1]["faithfulness"] is None
    assert payload["aggregate"]["mean_faithfulness"] == pytest.approx(2 / 3)
    assert payload["aggregate"]["uncited"] == "skip"
    table = _run(tmp_path, ANSWERS, "--uncited", "skip")
    assert "uncited: skip" in table and "answers with citations only" in table
