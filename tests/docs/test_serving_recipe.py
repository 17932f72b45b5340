"""docs/serving.md's "Serve a team, step by step" does what it says: in an empty folder, its
``console`` blocks run in order and print what the page shows (compared as the README's are,
:mod:`tests.docs.test_readme_loop`), its ``toml title="PATH"`` blocks are written to PATH (appended
when the file exists), ``workbench app`` serves on a free port (``WORKBENCH_APP_PORT``, which
outranks the configuration file), and then the lead and both SMEs sign in through Chromium and see
their name and role.

The password commands read from standard input here (no terminal: ``getpass`` falls back to it);
only their standard output, appended to the secrets file, is compared (it is empty)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.test_readme_loop import _environment, normalise, parse_blocks
from tests.support.live_app import browser_page, free_port, wait_healthy, wait_idle
from tests.support.prerequisites import REPO

pytestmark = pytest.mark.browser

DOC = REPO / "docs" / "serving.md"
SECTION = re.compile(r"^## Serve a team, step by step\n(.*?)(?=^## )", re.S | re.M)
FENCE = re.compile(r'^```(console|toml title="([^"]+)")\n(.*?)^```\n', re.S | re.M)
PASSWORDS = {"lea": "lea-Lead-Secret-1", "sam": "sam-Sme-Secret-2", "sue": "sue-Sme-Secret-3"}
ROLES = {"lea": "lead", "sam": "annotator", "sue": "annotator"}
LONG = 120_000


def section() -> str:
    match = SECTION.search(DOC.read_text(encoding="utf-8"))
    assert match, "docs/serving.md has no '## Serve a team, step by step' section"
    return match.group(1)


def _shell(command: str) -> str:
    """The page's command for bash: ``workbench``/``python`` as this interpreter."""
    words = shlex.split(command)
    head = {"workbench": [sys.executable, "-m", "workbench"], "python": [sys.executable], "mkdir": ["mkdir"]}
    assert words[0] in head, f"the recipe runs workbench, python and mkdir only: {command}"
    return " ".join(shlex.quote(w) for w in head[words[0]]) + command[len(words[0]):]


def _serve(step, folder: Path, env: dict) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(shlex.split(_shell(step.command)), cwd=folder, env=dict(env, WORKBENCH_APP_PORT=str(port)),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    first = process.stdout.readline().rstrip("\n")
    url = f"http://127.0.0.1:{port}"
    assert normalise(first.replace(f":{port} ", ":8501 ")) == normalise(step.expected[0]), first
    wait_healthy(url, process)
    return process, url


def test_the_recipe_serves_a_lead_and_two_smes(tmp_path):
    folder = tmp_path / "team"
    folder.mkdir()
    env = _environment()
    server = url = None
    try:
        for fence in FENCE.finditer(section()):
            if fence.group(2):  # a file the page asks for
                target = folder / fence.group(2)
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "a", encoding="utf-8") as out:
                    out.write(("\n" if target.stat().st_size else "") + fence.group(3))
                continue
            for step in parse_blocks(f"```console\n{fence.group(3)}```\n")[0]:
                if step.command == "workbench app":
                    server, url = _serve(step, folder, env)
                    continue
                user = re.search(r"services\.access (\w+)", step.command)
                feed = f"{PASSWORDS[user.group(1)]}\n" * 2 if user else ""
                done = subprocess.run(["bash", "-c", _shell(step.command)], cwd=folder, env=env, input=feed,
                                      capture_output=True, text=True, timeout=300, start_new_session=True)
                shown = done.stdout if user else done.stdout + done.stderr
                assert done.returncode == step.exit_status, f"`{step.command}`: {done.stdout}{done.stderr}"
                assert [normalise(x) for x in shown.splitlines()] == [normalise(x) for x in step.expected], \
                    f"`{step.command}` printed:\n{shown}"
        assert server is not None, "the recipe never serves the app"
        secrets = (folder / ".streamlit" / "secrets.toml").read_text()
        assert all(f"[auth.users.{name}]" in secrets for name in PASSWORDS) and "session_secret" in secrets
        assert not any(pw in secrets for pw in PASSWORDS.values())
        for name, password in PASSWORDS.items():
            with browser_page() as page:
                page.goto(url)
                page.get_by_role("textbox", name="User name").fill(name)
                page.get_by_role("textbox", name="Password").fill(password)
                page.get_by_role("button", name="Sign in").click()
                page.get_by_text(f"{name} · {ROLES[name]}", exact=True).wait_for(timeout=LONG)
                wait_idle(page, LONG, start_within=0)
    finally:
        if server is not None:
            os.killpg(server.pid, 15)
            server.wait(timeout=30)
