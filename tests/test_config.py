from __future__ import annotations

import tomllib

import pytest

from tests.support.prerequisites import REPO
from workbench.config import DEFAULTS, load_settings
from workbench.errors import ConfigError

TOML = REPO / "config" / "workbench.toml"


def test_documented_defaults_equal_builtin_defaults():
    """Every built-in default is in the shipped file with its value; judge.timeout is there
    commented out, since a timeout set anywhere is used as given (not grown with the probe)."""
    text = TOML.read_text()
    documented = tomllib.loads(text)
    assert "timeout" not in documented["judge"] and "\n# timeout = 60.0\n" in text
    documented["judge"]["timeout"] = DEFAULTS["judge"]["timeout"]
    assert documented == DEFAULTS


def test_precedence_defaults_file_env_flags(tmp_path):
    cfg = tmp_path / "wb.toml"
    cfg.write_text('[judge]\nmodel = "from-file"\nconcurrency = 9\n[pool]\ndepth = 7\n')
    env = {"WORKBENCH_JUDGE_MODEL": "from-env", "WORKBENCH_POOL_DEPTH": "11"}
    s = load_settings(cfg, {"pool": {"depth": 13}, "judge": {"model": None}}, env=env)
    assert s.get("judge", "concurrency") == 9          # file beats default
    assert s.get("judge", "model") == "from-env"        # env beats file; unset flag ignored
    assert s.get("pool", "depth") == 13                 # flag beats env
    assert s.get("app", "port") == 8501                 # untouched default
    assert s.sources["pool.depth"] == "command line"
    assert s.sources["judge.concurrency"] == str(cfg)


def test_db_shortcut_and_type_coercion(tmp_path):
    s = load_settings(tmp_path / "missing-is-not-used", env={}) if False else None
    s = load_settings(None, env={"WORKBENCH_DB": "x.duckdb", "WORKBENCH_CALIBRATION_MIN_KAPPA": "0.7"})
    assert str(s.db_path) == "x.duckdb"
    assert s.get("calibration", "min_kappa") == pytest.approx(0.7)


@pytest.mark.parametrize(
    "text,needle",
    [
        ("[judge]\nmodle = 'x'\n", "unknown setting judge.modle"),
        ("[jugde]\nmodel = 'x'\n", "unknown section [jugde]"),
        ("[pool]\ndepth = 'deep'\n", "pool.depth: expected a int"),
        ("[pool\n", "not valid TOML"),
    ],
)
def test_bad_config_names_file_and_setting(tmp_path, text, needle):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, env={})
    assert needle in str(err.value)
    assert str(cfg) in str(err.value)


def test_bad_env_value_is_reported():
    with pytest.raises(ConfigError, match="environment: pool.depth"):
        load_settings(None, env={"WORKBENCH_POOL_DEPTH": "many"})


def test_secrets_are_not_settings():
    flat = {k for section in DEFAULTS.values() for k in section}
    assert not any("key" in k.lower() or "secret" in k.lower() for k in flat)


def test_an_integer_over_4300_digits_in_toml_is_one_line_not_a_traceback(tmp_path, cli):
    """Python refuses to read such an integer (ValueError, not TOMLDecodeError): the configuration
    file and a prompt's front matter name the file instead of raising."""
    big = "9" * 5000
    config = tmp_path / "big.toml"
    config.write_text(f"[judge]\nconcurrency = {big}\n", encoding="utf-8")
    done = cli("--config", str(config), "--db", str(tmp_path / "p.duckdb"), "status")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"{config}: an integer has more than 4,300 digits" in done.stderr
    from workbench.errors import ConfigError
    from workbench.llm.prompts import _parse

    with pytest.raises(ConfigError, match="more than 4,300 digits"):
        _parse(f"+++\nid = 'x'\nversion = {big}\n+++\nbody", "p.md")
