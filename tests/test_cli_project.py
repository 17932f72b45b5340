from __future__ import annotations

import json

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
    assert status["counts"]["documents"] > 0
    steps = [s["step"] for s in status["pipeline"]]
    assert steps == ["corpus", "chunks", "runs", "pool", "judgments", "calibration", "qrels", "evaluation"]
    assert status["pipeline"][0]["done"] is True
    assert status["next"] == next(s["step"] for s in status["pipeline"] if not s["done"])
    table = cli("--db", str(db_path), "status")
    assert "next:" in table.stdout and "documents" in table.stdout


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
