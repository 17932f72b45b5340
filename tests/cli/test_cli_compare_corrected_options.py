"""``compare --runs A,B --labels corrected`` and compare's resampling options: the PPI++ interval is
closed-form, so ``--test``, ``--seed`` and ``--resamples`` with anything but their defaults are
refused in one line (exit 2, a ConfigError) instead of being silently ignored; their defaults,
given or not, change nothing."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli
from tests.support.ppi_project import build_ppi_project, label_queries
from workbench.services.calibration import workflow as cal


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corrected")
    path = tmp / "p.duckdb"
    db, truth = build_ppi_project(path)
    cal.create_sample(db, "q", "p", design="queries", queries=6, seed=4)
    label_queries(db, "q", truth, 4)
    db.close()
    return path


def _compare(path, *extra):
    return run_cli("--db", str(path), "compare", "--runs", "ra,rb", "--labels", "corrected", "-m", "ndcg@10",
                   "--format", "json", *extra, cwd=path.parent)


@pytest.mark.parametrize("flag, value", [("--test", "bootstrap"), ("--test", "ttest"), ("--seed", "7"),
                                         ("--resamples", "500")])
def test_resampling_options_are_refused_with_corrected_labels(project, flag, value):
    proc = _compare(project, flag, value)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert flag in lines[0] and "--labels corrected" in lines[0]
    assert "normal" in lines[0] and "takes no resampling" in lines[0]


def test_defaults_given_or_not_give_the_same_intervals(project):
    plain = _compare(project)
    assert plain.returncode == 0, plain.stderr
    spelled = _compare(project, "--test", "randomization", "--seed", "0", "--resamples", "10000")
    assert spelled.returncode == 0, spelled.stderr
    assert json.loads(spelled.stdout) == json.loads(plain.stdout)
    body = json.loads(plain.stdout)
    ci = body["measures"]["ndcg@10"]["differences"]["rb"]["ci"]
    assert ci[0] < ci[1] and body["n_labelled"] == 4


def test_the_table_states_the_confidence_it_used(project):
    """eval/compare expose no --confidence: the corrected report is at 0.95 and says so."""
    proc = run_cli("--db", str(project), "compare", "--runs", "ra,rb", "--labels", "corrected", "-m", "ndcg@10",
                   cwd=project.parent)
    assert proc.returncode == 0, proc.stderr
    assert "confidence: 0.95" in proc.stdout and "95% CI" in proc.stdout
    refused = run_cli("--db", str(project), "compare", "--runs", "ra,rb", "--labels", "corrected", "-m", "ndcg@10",
                      "--confidence", "0.9", cwd=project.parent)
    assert refused.returncode == 2 and "unrecognized arguments: --confidence" in refused.stderr
