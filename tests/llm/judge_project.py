"""Shared by the judge's tests: a demo project copied per test, and reads of what the judge stored."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tests.support import templates
from tests.support.openai_server import sha256_text
from workbench.config import load_settings
from workbench.store.database import Database

def demo_project(target: Path) -> Path:
    """A copy of the demo project (pool ``demo``: 880 chunk pairs): the worker's demo template
    (:func:`tests.support.templates.demo_project`, built once per test process under the
    repository's configuration, which ``tests/test_config.py`` holds equal to the built-in
    defaults), so the judge's tests build no demo project of their own."""
    return templates.demo_project(target)


def empty_config(folder: Path) -> Path:
    """An empty configuration file: commands under test use the built-in defaults, whatever the
    repository's config/workbench.toml says."""
    path = Path(folder) / "empty.toml"
    path.write_text("", encoding="utf-8")
    return path


def judge_settings(base_url: str | None = None, **judge):
    """Settings with [judge] overrides (fast retries for tests); no config file, no environment."""
    values = {"backoff_initial": 0.01, "backoff_max": 0.5, "flush_seconds": 0.2, "db_wait": 20.0, "timeout": 30.0}
    if base_url:
        values["base_url"] = base_url
    values.update(judge)
    return load_settings(None, {"judge": values}, env={})


def query(path: Path, sql: str, params=None) -> pd.DataFrame:
    """One read of a (migrated) project, as a visit (:class:`Database` ``visit=True``: attached
    to this process's DuckDB instance and detached after, ~8 ms of CPU instead of ~75 ms for a
    DuckDB instance and the schema check): tests poll with it while a job process waits for
    the file, and a poll must not cost the machine more than the job it waits for."""
    db = Database(path, visit=True, migrate=False)
    try:
        return db.query_df(sql, params)
    finally:
        db.close()


def pair_texts(path: Path, pool: str = "demo") -> pd.DataFrame:
    """query_id, doc_id, chunk_id, passage text of every pair of ``pool`` (read independently)."""
    return query(path, """SELECT p.query_id, p.doc_id, p.chunk_id,
                                 substr(d.text, k.start + 1, k."end" - k.start) AS passage
                          FROM pool_pairs p JOIN chunks k ON k.chunk_id = p.chunk_id
                          JOIN documents d ON d.doc_id = k.doc_id WHERE p.pool = ?""", [pool])


def probe_calls(server) -> int:
    """Chat requests of the judge's capability probe (its fixed prompts) the fault server received."""
    from workbench.llm.client import PROBE_MESSAGES, PROBE_SEED_MESSAGES, PROBE_TOKEN_MESSAGES

    attempts = server.control.attempts_by_prompt()
    return sum(attempts.get(sha256_text("\n".join(m["content"] for m in messages)), 0)
               for messages in (PROBE_MESSAGES, PROBE_TOKEN_MESSAGES, PROBE_SEED_MESSAGES))


def _probe_shas() -> set[str]:
    from workbench.llm.client import PROBE_MESSAGES, PROBE_SEED_MESSAGES, PROBE_TOKEN_MESSAGES

    return {sha256_text("\n".join(m["content"] for m in messages))
            for messages in (PROBE_MESSAGES, PROBE_TOKEN_MESSAGES, PROBE_SEED_MESSAGES)}


def judgment_prompts(server) -> int:
    """Distinct judgment prompts the fault server received (the probe's left out)."""
    return len(set(server.control.attempts_by_prompt()) - _probe_shas())


def judgment_calls(server) -> int:
    """Chat requests the fault server received for judgments (the capability probe's left out)."""
    return server.control.count("/v1/chat/completions") - probe_calls(server)
