"""Ctrl-C at any moment of `workbench judge` (the offline judge on the demo pool, a real
process): the message never says "nothing was changed" once this run stored judgments, and the
job is never left 'running' with its batches stored (the closing bookkeeping holds Ctrl-C)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.llm.judge_project import demo_project, empty_config, query
from tests.support.prerequisites import REPO


def _as_at_a_terminal():
    # A background test runner may start with SIGINT ignored; a user's shell does not.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_ctrl_c_at_any_moment_tells_the_truth_about_what_was_stored(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("WORKBENCH_DB", "OPENAI_API_KEY")}

    def start(db):
        return subprocess.Popen([sys.executable, "-m", "workbench", "--config", str(empty_config(tmp_path)),
                                 "--db", str(db), "judge", "--pool", "demo", "--model", "offline-lexical"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env,
                                preexec_fn=_as_at_a_terminal)  # noqa: PLW1509 (no threads yet)

    full_db = demo_project(tmp_path / "full.duckdb")
    began = time.monotonic()
    full = start(full_db)
    full.communicate(timeout=600)
    assert full.returncode == 0
    work = time.monotonic() - began
    outcomes = []
    for i, fraction in enumerate((0.3, 0.6, 0.8, 0.9, 0.95, 1.0, 1.05, 1.2)):
        db = demo_project(tmp_path / f"p{i}.duckdb")
        proc = start(db)
        time.sleep(work * fraction)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=600)
        assert "Traceback" not in err, err
        jobs = query(db, "SELECT state, judged FROM judge_jobs")
        stored = int(query(db, "SELECT count(*) AS n FROM judgments WHERE source = 'llm'")["n"][0])
        if stored:
            # judgments are stored: never "nothing was changed", never a job left running
            assert "nothing was changed" not in err, (fraction, err)
            assert jobs["state"].tolist() != ["running"], (fraction, jobs, err)
        # -SIGINT: the process ended by the signal itself (Ctrl-C while the interpreter exits);
        # a shell reports that as 130, the same status the command returns for an interrupt.
        assert proc.returncode in (0, 6, 130, -signal.SIGINT), (proc.returncode, err)
        outcomes.append((fraction, proc.returncode, stored, jobs["state"].tolist()))
    assert len(outcomes) == 8
    print(*outcomes, sep="\n")
