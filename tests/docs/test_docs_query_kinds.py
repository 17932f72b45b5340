"""The Query kinds figures of ``docs/query-kinds.md`` for the demo match what the services compute on it."""

from __future__ import annotations

import re

from tests.support.prerequisites import REPO
from workbench.services.evaluation import abstention
from workbench.services.evaluation import trajectories
from tests.support.templates import demo_project
from workbench.services.project.lifecycle import open_project
from workbench.services.evaluation.query_kinds import DEMO_TRAJECTORIES


def test_docs_query_kinds_demo_figures(tmp_path):
    text = (REPO / "docs" / "query-kinds.md").read_text(encoding="utf-8")
    m = re.search(r"BM25's best threshold abstains on (\d+) of (\d+) unanswerable queries and (\d+) of (\d+)\s+"
                  r"answerable\s+ones \(balanced accuracy ([\d.]+), area ([\d.]+)\); the sample agent completes "
                  r"(\d+) of (\d+) chains at k = (\d+)", " ".join(text.split()))
    assert m, "docs/query-kinds.md has no Query kinds demo figures"
    a_u, n_u, a_a, n_a, bal, area, done, chains, k = m.groups()
    path = tmp_path / "demo.duckdb"
    demo_project(path)  # what init --demo builds: a copy of the worker's template
    with open_project(path) as db:
        report = abstention.run_abstention(db, "bm25")
        traj = trajectories.evaluate(trajectories.stored_trajectories(db, DEMO_TRAJECTORIES),
                                     trajectories.stored_chains(db), k=int(k))
    r = report.rates
    assert (r.abstained_unanswerable, r.n_unanswerable, r.abstained_answerable, r.n_answerable) == (
        int(a_u), int(n_u), int(a_a), int(n_a))
    assert f"{r.balanced_accuracy:.2f}" == bal and f"{report.auc:.2f}" == area
    assert (traj.counts["complete"], traj.counts["with_chain"]) == (int(done), int(chains))
