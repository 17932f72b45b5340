"""``judge --few-shot K``: K SME-graded examples from a calibration sample's tuning part (stratified
by grade, never the held-out part) in the prompt, part of the prompt hash; the CLI as a real process
against a loopback OpenAI-compatible server (the real openai client)."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from tests.support import templates
from tests.support.calibration_project import build_project
from tests.support.cli_runner import run_in_process
from tests.support.openai_server import running_server
from tests.support.prerequisites import REPO
from workbench.errors import InputError
from workbench.llm.prompts import load_prompt
from workbench.services.calibration import workflow as cal
from workbench.store import calibration as store


def _build_labelled(path) -> None:
    db, truth = build_project(path)
    cal.create_sample(db, "s", "p", seed=1)
    items = store.read_sample_items(db, "s")
    for row in items.itertuples(index=False):  # every pair, tuning and held-out
        cal.save_label(db, "s", "sme", int(row.position), truth[(row.query_id, row.doc_id)])
    db.close()


def _labelled(tmp_path):
    """The calibration project with sample s drawn and every item SME-labelled: built once per
    test process (one label per item is one transaction each) and copied per test."""
    from workbench.store.database import Database

    path = tmp_path / "p.duckdb"
    templates.copy_of(("few-shot-labelled",), _build_labelled, path)
    db = Database(path)
    return path, db, store.read_sample_items(db, "s")


def test_examples_come_from_the_tuning_part_stratified_by_grade(tmp_path):
    _, db, items = _labelled(tmp_path)
    part = dict(zip(items["position"].astype(int), items["part"]))
    examples = cal.few_shot_examples(db, "s", total=8, seed=3)
    assert len(examples) == 8
    assert {part[e["position"]] for e in examples} == {"tuning"}
    by_grade = Counter(e["grade"] for e in examples)
    assert sorted(by_grade) == [0, 1, 2, 3] and max(by_grade.values()) - min(by_grade.values()) <= 1
    assert examples == cal.few_shot_examples(db, "s", total=8, seed=3)  # seeded
    assert examples != cal.few_shot_examples(db, "s", total=8, seed=4)
    tuning = int((items["part"] == "tuning").sum())
    with pytest.raises(InputError, match=f"has {tuning} SME labels on its tuning part"):
        cal.few_shot_examples(db, "s", total=tuning + 1)
    db.close()


def test_examples_enter_the_prompt_and_its_hash(tmp_path):
    _, db, items = _labelled(tmp_path)
    examples = cal.few_shot_examples(db, "s", total=4, seed=0)
    held_out = [store.read_item(db, "s", int(p)) for p in items.loc[items["part"] == "holdout", "position"]]
    db.close()
    zero = load_prompt("relevance_v1")
    few = zero.with_examples(examples)
    assert few.prompt_hash != zero.prompt_hash
    assert load_prompt("relevance_v1").prompt_hash == zero.prompt_hash  # zero-shot hash unchanged
    assert zero.with_examples(examples[:3]).prompt_hash != few.prompt_hash
    messages = few.render("the query to grade", "THE PASSAGE TO GRADE")
    assert messages[0] == zero.render("x", "y")[0]  # the system message carries no example
    user = messages[1]["content"]
    for e in examples:
        assert e["passage"] in user and f"grade {e['grade']}" in user
    assert user.rindex("THE PASSAGE TO GRADE") > max(user.index(e["passage"]) for e in examples)
    texts = {e["passage"] for e in examples}
    for item in held_out:
        passage = item["text"][item["start"]:item["end"]]
        assert passage in texts or passage not in user  # no held-out pair's text (unless it equals an example)
    assert "<<<EXAMPLE_PASSAGE " in user


def test_judge_few_shot_cli_stores_its_own_configuration(tmp_path):
    path, db, items = _labelled(tmp_path)
    tuning = set(items.loc[items["part"] == "tuning", "position"].astype(int))
    db.close()
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-few-shot"}
    env.pop("WORKBENCH_DB", None)

    def judge(server, *extra):  # the CLI in this process (tests.support.cli_runner)
        cmd = ("--db", str(path), "judge", "--pool", "p", "--model", "m2",
               "--base-url", server.base_url, "--limit", "12", "--no-progress", *extra)
        return run_in_process(cmd, cwd=REPO, env=env, timeout=300)

    with running_server() as server:
        done = judge(server, "--few-shot", "4", "--few-shot-seed", "2")
        assert done.returncode == 0, done.stderr
        prompts = [json.dumps(r.body) for r in server.control.chat_calls() if "Examples graded" in json.dumps(r.body)]
        assert len(prompts) >= 12
        zero = judge(server)
        assert zero.returncode == 0, zero.stderr
    refused = run_in_process(("--db", str(path), "judge", "--pool", "p", "--model", "offline-lexical",
                              "--few-shot", "2"), cwd=REPO,
                             env={k: v for k, v in env.items() if k != "OPENAI_API_KEY"}, timeout=120)
    assert refused.returncode == 2 and "needs an LLM judge" in refused.stderr
    from workbench.store.database import Database

    with Database(path) as d:
        hashes = d.query_all("SELECT prompt_hash, count(*) FROM judgments WHERE model = 'm2' AND status = 'ok' "
                             "GROUP BY prompt_hash ORDER BY prompt_hash")
        params = [json.loads(p) for (p,) in d.query_all("SELECT params::VARCHAR FROM judge_jobs WHERE model = 'm2'")]
        examples = cal.few_shot_examples(d, "s", total=4, seed=2)
    few_shot = [p["few_shot"] for p in params if "few_shot" in p]
    assert len(few_shot) == 1 and few_shot[0]["k"] == 4 and few_shot[0]["sample"] == "s"
    assert set(few_shot[0]["positions"]) <= tuning
    assert sorted(few_shot[0]["positions"]) == sorted(e["position"] for e in examples)
    expected = load_prompt("relevance_v1").with_examples(examples).prompt_hash
    assert sorted(h for h, _ in hashes) == sorted([expected, load_prompt("relevance_v1").prompt_hash])
    assert all(n == 12 for _, n in hashes)



def test_compare_judges_ranks_few_shot_without_its_examples(tmp_path):
    """Few-shot and zero-shot configurations side by side on the tuning part; the few-shot one is
    scored without the pairs in its prompt (counted by hand from the sample)."""
    import pandas as pd

    from workbench.store.judgments import write_judgments

    _, db, items = _labelled(tmp_path)
    examples = cal.few_shot_examples(db, "s", total=4, seed=0)
    shown = {e["position"] for e in examples}
    frame = pd.DataFrame({"query_id": items["query_id"], "doc_id": items["doc_id"], "start": items["start"],
                          "end": items["end"], "grade": items["judge_grade"].astype(int), "source": "llm",
                          "assessor": "judge", "model": "m2", "status": "ok"})
    with db.transaction() as tx:
        write_judgments(tx, frame.assign(prompt_hash="h-zero"))
        write_judgments(tx, frame.assign(prompt_hash="h-few"))
        tx.execute("""INSERT INTO judge_jobs (pool, judge, model, prompt_id, prompt_hash, params, config_key)
                      VALUES ('p', 'llm', 'm2', 'relevance_v1+4shot', 'h-few', ?, 'k')""",
                   [json.dumps({"few_shot": {"k": 4, "sample": "s", "seed": 0, "positions": sorted(shown)}})])
    rows = {(c["model"], c["prompt_hash"]): c for c in cal.compare_judges(db, "s", part="tuning")}
    db.close()
    tuning = int((items["part"] == "tuning").sum())
    few, zero = rows[("m2", "h-few")], rows[("m2", "h-zero")]
    assert (zero["few_shot"], zero["examples_left_out"], zero["n"]) == (0, 0, tuning)
    assert (few["few_shot"], few["examples_left_out"], few["n"]) == (4, 4, tuning - 4)
