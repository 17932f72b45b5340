from __future__ import annotations

import json
import re

from workbench.store.database import Database
from workbench.store.meta import table_counts


def test_init_creates_a_migrated_database(cli, db_path):
    result = cli("--db", str(db_path), "init")
    assert result.returncode == 0, result.stderr
    assert "project database ready" in result.stdout
    with Database(db_path) as db:
        assert table_counts(db)["documents"] == 0


def test_init_demo_loads_the_demo_once(cli, db_path):
    first = cli("--db", str(db_path), "init", "--demo")
    assert first.returncode == 0, first.stderr
    with Database(db_path) as db:
        counts = table_counts(db)
    assert 35 <= counts["documents"] <= 45 and 35 <= counts["queries"] <= 45
    assert counts["judgments.human.ok"] == counts["judgments"] > 0
    again = cli("--db", str(db_path), "init", "--demo")
    assert again.returncode == 0, again.stderr
    with Database(db_path) as db:
        assert table_counts(db) == counts


def test_status_reports_counts_and_next_step(cli, db_path):
    cli("--db", str(db_path), "init", "--demo")
    result = cli("--db", str(db_path), "status", "--format", "json")
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["counts"]["documents"] == 41
    steps = [s["step"] for s in status["pipeline"]]
    assert steps == ["corpus", "chunks", "runs", "pool", "judgments", "calibration", "qrels", "evaluation"]
    states = {s["step"]: s["state"] for s in status["pipeline"]}
    assert states["corpus"] == states["chunks"] == states["runs"] == states["pool"] == "done"
    # 209 SME labels do not make qrels done: most pool pairs carry no label.
    assert states["qrels"] == "partial"
    assert status["coverage"]["chunkings"] == [
        {"name": "sections", "chunks": 279, "documents": 41, "total_documents": 41}]
    # The next step is actionable and names a command this CLI has.
    assert states[status["next"]] in ("to do", "partial")
    command = re.search(r"`workbench ([a-z-]+)", status["next_hint"]).group(1)
    from workbench.cli import build_parser

    assert command in build_parser()._subparsers._group_actions[0].choices
    table = cli("--db", str(db_path), "status")
    assert "next:" in table.stdout and "documents" in table.stdout
    assert "Qrels" in table.stdout and "partial" in table.stdout


def test_status_works_in_the_folder_make_run_uses(cli, tmp_path):
    # `make run` creates var/demo.duckdb; `workbench status` there needs no --db.
    made = cli("--db", "var/demo.duckdb", "init", "--demo", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    result = cli("status", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "var/demo.duckdb (demo project)" in result.stdout


def test_missing_database_names_the_projects_nearby(cli, tmp_path):
    (tmp_path / "var").mkdir()
    cli("--db", str(tmp_path / "var" / "mine.duckdb"), "init")
    result = cli("--db", str(tmp_path / "var" / "other.duckdb"), "status")
    assert result.returncode == 4
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "mine.duckdb" in lines[0] and "other.duckdb" in lines[0]


def test_missing_database_is_one_line_and_nonzero(cli, tmp_path):
    result = cli("--db", str(tmp_path / "absent.duckdb"), "status")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "init" in lines[0] and "absent.duckdb" in lines[0]


def test_bad_config_is_one_line(cli, db_path, tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[pool]\ndepth = 'x'\n")
    result = cli("--db", str(db_path), "--config", str(cfg), "init")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "pool.depth" in result.stderr


def test_environment_selects_the_database(cli, db_path):
    result = cli("init", env={"WORKBENCH_DB": str(db_path)})
    assert result.returncode == 0, result.stderr
    assert db_path.is_file()


def test_version_and_help(cli):
    assert cli("--version").stdout.strip()
    helptext = cli("--help").stdout
    for command in ("init", "status", "app"):
        assert command in helptext


def test_init_demo_pools_at_the_depth_of_the_config_flag(cli, db_path, tmp_path):
    from workbench.store.pools import read_pool, read_pool_pairs

    cfg = tmp_path / "shallow.toml"
    cfg.write_text("[pool]\ndepth = 3\n")
    result = cli("--db", str(db_path), "--config", str(cfg), "init", "--demo")
    assert result.returncode == 0, result.stderr
    with Database(db_path) as db:
        pool = read_pool(db, "demo")
        sizes = read_pool_pairs(db, "demo").groupby("query_id").size()
    assert pool["depth"] == 3
    assert sizes.max() == 3


def test_init_demo_completes_a_preparation_that_failed(db_path, monkeypatch):
    import pytest

    from workbench.errors import StoreError
    from workbench.services.project import demo as demo_pipeline
    from workbench.services.project.lifecycle import init_project
    from workbench.store.meta import read_meta
    from workbench.store.pools import read_pool

    def broken_pool(*args, **kwargs):
        raise StoreError("simulated failure while pooling")

    with monkeypatch.context() as patch:
        patch.setattr(demo_pipeline, "build_pool", broken_pool)
        with pytest.raises(StoreError, match="simulated"):
            init_project(db_path, demo=True)
    with Database(db_path) as db:
        half = table_counts(db)
        assert read_meta(db)["demo"] != "true"
        assert read_pool(db, "demo") is None
    assert half["chunks"] > 0 and half["runs"] == 1

    added = init_project(db_path, demo=True)
    assert set(added) == {"pool_pairs"} and added["pool_pairs"] > 0
    with Database(db_path) as db:
        counts = table_counts(db)
        assert read_meta(db)["demo"] == "true"
        assert read_pool(db, "demo") is not None
    assert {k: counts[k] for k in ("documents", "queries", "judgments", "chunks", "runs", "run_rows")} == {
        k: half[k] for k in ("documents", "queries", "judgments", "chunks", "runs", "run_rows")}
    assert init_project(db_path, demo=True) == {}


def test_app_hands_the_config_flag_to_the_server(db_path, tmp_path, monkeypatch):
    import os

    from workbench.cli import main
    from workbench.services.project.lifecycle import init_project

    init_project(db_path)
    cfg = tmp_path / "app.toml"
    cfg.write_text("[pool]\ndepth = 7\n")
    started = {}

    def fake_execve(path, argv, env):  # stands in for the Streamlit server process
        started.update(argv=argv, env=env)

    monkeypatch.setattr(os, "execve", fake_execve)
    assert main(["--db", str(db_path), "--config", str(cfg), "app", "--port", "8765"]) == 0
    assert started["env"]["WORKBENCH_DB"] == str(db_path)
    assert started["env"]["WORKBENCH_CONFIG"] == str(cfg.resolve())
    assert "8765" in started["argv"]


def test_init_demo_repairs_a_demo_marked_ready_without_its_pipeline(db_path):
    # What an earlier version left behind when preparing failed: demo data and demo = "true".
    from workbench.services.project.lifecycle import init_project, load_demo
    from workbench.store.meta import set_meta
    from workbench.store.pools import read_pool

    init_project(db_path)
    with Database(db_path) as db:
        load_demo(db)
        with db.transaction() as tx:
            set_meta(tx, "demo", "true")
        assert table_counts(db)["chunks"] == 0
    added = init_project(db_path, demo=True)
    assert set(added) == {"chunks", "run_rows", "pool_pairs"}
    with Database(db_path) as db:
        assert table_counts(db)["chunks"] == added["chunks"] > 0
        assert read_pool(db, "demo")["runs"] == ["bm25"]


def test_demo_refused_over_a_corpus_names_another_database(cli, tmp_path):
    path = tmp_path / "demo.duckdb"
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"_id": "d1", "text": "mine"}\n')
    assert cli("--db", str(path), "init").returncode == 0
    assert cli("--db", str(path), "import", "corpus", str(corpus)).returncode == 0
    result = cli("--db", str(path), "init", "--demo")
    assert result.returncode == 4
    line = result.stderr.strip()
    assert "already holds a corpus" in line and str(tmp_path / "handbook-demo.duckdb") in line
    assert f"--db {path} " not in line  # never suggests the database it just refused
