"""PPI++ intervals cover on real data: a small run of ``benchmarks/ppi_coverage.py``.

Human = NIST's labels on random subsets of 15 of the 43 TREC DL19 queries (240 draws), judge =
the published Llama-3.3-70B labels for all of them, six runs; truth = each run's NIST mean over
the 43 queries (and each run's difference from BM25). The 95% intervals must cover at least 0.88
of the time for nDCG@10 and AP(rel=2)@100, for runs (1,440 intervals) and differences (1,200),
and the judge must make them narrower than the human-only intervals. Shared data: skipped when
absent on a developer machine, fails with CI=true.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.support.prerequisites import REPO, shared_path

pytestmark = pytest.mark.shared

DRAWS = 240
N_LABELLED = 15


def _benchmark():
    spec = importlib.util.spec_from_file_location("ppi_coverage", REPO / "benchmarks" / "ppi_coverage.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_dl19_coverage_is_plausible(tmp_path):
    folder = shared_path("datasets", "trec-dl-2019-passage")
    bench = _benchmark()
    values = bench.all_values("llama70b", tmp_path, measures=("ndcg@10", "AP(rel=2)@100"), folder=folder)
    assert len(values.query_ids) == 43 and len(values.runs) == 6
    cov = bench.coverage(values, N_LABELLED, DRAWS, seed=22)
    for measure, c in cov.items():
        assert c.n_run_intervals == DRAWS * 6 and c.n_diff_intervals == DRAWS * 5
        assert c.runs_ppi >= 0.88 and c.diffs_ppi >= 0.88, (measure, c)
        assert c.width_runs < 1 and c.width_diffs < 1, (measure, c)
