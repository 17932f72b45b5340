"""``workbench app`` refuses to serve without sign-in on a reachable address (one line, exit 2),
and the hash helper runs as ``python -m workbench.services.access``."""

from __future__ import annotations

import subprocess
import sys

from tests.support.prerequisites import REPO
from workbench.services.project.lifecycle import init_project


def test_app_refuses_auth_none_on_a_public_host(cli, db_path):
    init_project(db_path)
    out = cli("--db", str(db_path), "app", env={"WORKBENCH_APP_HOST": "0.0.0.0"}, timeout=60)
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "auth" in lines[0] and "0.0.0.0" in lines[0], out.stderr
    assert "Traceback" not in out.stderr and "serving" not in out.stdout


def test_app_refuses_a_sign_in_that_lasts_no_time(cli, db_path):
    init_project(db_path)
    for hours in ("0", "-1"):
        out = cli("--db", str(db_path), "app", env={"WORKBENCH_APP_SESSION_HOURS": hours}, timeout=60)
        assert out.returncode == 2, out
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "[app] session_hours" in lines[0] and "e.g. 12" in lines[0], out.stderr
        assert "Traceback" not in out.stderr and "serving" not in out.stdout


def test_hash_helper_refuses_an_empty_password_without_a_traceback():
    # getpass falls back to stdin when there is no terminal; two empty lines = an empty password.
    out = subprocess.run([sys.executable, "-m", "workbench.services.access", "ann", "annotator"], input="\n\n",
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 2 and "empty password" in out.stderr and "Traceback" not in out.stderr, out
