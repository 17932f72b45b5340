"""``workbench rank-agreement``: exact JSON keys, τ equal to scipy's over the means ``eval
--runs --labels human|llm`` reports, and fewer than two runs refused."""

from __future__ import annotations

import json

import pytest
from scipy.stats import kendalltau

KEYS = ["measure", "n_runs", "tau", "tau_ap", "ranking_human", "ranking_judge"]


@pytest.fixture(scope="module")
def judged_demo(tmp_path_factory):
    from tests.conftest import run_cli
    from tests.support.templates import demo_project

    # what `init --demo` builds: a copy of the worker's template
    path = demo_project(tmp_path_factory.mktemp("rankagree") / "demo.duckdb")
    db = ("--db", str(path))
    for args in (("retrieve", "bm25", "--chunking", "sections", "--name", "flat", "--k1", "0.5", "--b", "0.3",
                  "--no-progress"),
                 ("retrieve", "bm25", "--chunking", "sections", "--name", "steep", "--k1", "3", "--b", "1",
                  "--no-progress"),
                 ("judge", "--pool", "demo", "--model", "offline-lexical", "--no-progress")):
        done = run_cli(*db, *args)
        assert done.returncode == 0, done.stderr
    return path


def test_json_keys_and_tau_equal_scipy_over_the_eval_means(cli, judged_demo):
    runs = ["bm25", "flat", "steep"]
    for measure in ("ndcg@10", "P@5"):
        done = cli("--db", str(judged_demo), "rank-agreement", "--runs", ",".join(runs), "-m", measure,
                   "--format", "json")
        assert done.returncode == 0, done.stderr
        body = json.loads(done.stdout)
        assert list(body) == KEYS and body["measure"] == measure and body["n_runs"] == 3
        means = {}
        for labels in ("human", "llm"):
            ev = cli("--db", str(judged_demo), "eval", "--runs", ",".join(runs), "--labels", labels, "-m", measure,
                     "--format", "json")
            assert ev.returncode == 0, ev.stderr
            means[labels] = {r: json.loads(ev.stdout)[r]["aggregate"][measure] for r in runs}
        assert body["ranking_human"] == sorted(runs, key=lambda r: (-means["human"][r], r))
        assert body["ranking_judge"] == sorted(runs, key=lambda r: (-means["llm"][r], r))
        oracle = kendalltau([means["human"][r] for r in runs], [means["llm"][r] for r in runs], variant="b").statistic
        assert body["tau"] == pytest.approx(oracle)
        assert -1.0 <= body["tau_ap"] <= 1.0


def test_fewer_than_two_runs_is_refused_in_one_line(cli, judged_demo):
    done = cli("--db", str(judged_demo), "rank-agreement", "--runs", "bm25", "-m", "ndcg@10", "--format", "json")
    assert done.returncode == 2 and done.stdout == ""
    assert "at least two runs" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    unknown = cli("--db", str(judged_demo), "rank-agreement", "--runs", "bm25,nope", "-m", "ndcg@10")
    assert unknown.returncode == 3 and "no run named 'nope'" in unknown.stderr


def test_the_config_file_policy_reaches_eval_and_export(cli, judged_demo, tmp_path):
    cfg = tmp_path / "optin.toml"
    cfg.write_text('[qrels]\nllm_labels = "all"\n')
    base = ("--db", str(judged_demo))
    gated = cli(*base, "eval", "--runs", "bm25", "-m", "P@5")
    opted = cli(*base, "--config", str(cfg), "eval", "--runs", "bm25", "-m", "P@5")
    assert gated.returncode == opted.returncode == 0, gated.stderr + opted.stderr
    assert "LLM only from a judge configuration that passed the gate" in gated.stderr
    assert "LLM from every judge configuration (opt-in)" in opted.stderr
    rows = {}
    for name, extra in (("gated", ()), ("opted", ("--config", str(cfg)))):
        out = tmp_path / f"{name}.txt"
        done = cli(*base, *extra, "export", "qrels", "--out", str(out))
        assert done.returncode == 0, done.stderr
        assert "qrels policy:" in done.stdout
        rows[name] = len(out.read_text().splitlines())
    assert rows["opted"] > rows["gated"]  # the offline judge's labels of unlabelled documents
