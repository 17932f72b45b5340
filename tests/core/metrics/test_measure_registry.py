"""Every measure of the registry has a kernel and every kernel a measure; the measures table of
docs/metrics.md is the registry's (regenerate it with
``python -m workbench.cli.measures_reference --write``)."""

from __future__ import annotations

import difflib
import subprocess
import sys

import pytest

from tests.support.prerequisites import REPO
from workbench.cli import measures_reference
from workbench.core.metrics import kernels, measures
from workbench.core.metrics.measures import REGISTRY, Measure, MeasureInfo


def test_every_measure_has_a_kernel_and_every_kernel_a_measure():
    missing_kernel, missing_measure = kernels.registry_gaps()
    assert missing_kernel == (), f"measures without a kernel in core/metrics/kernels.py KERNELS: {missing_kernel}"
    assert missing_measure == (), f"kernels without a measure in core/metrics/measures.py REGISTRY: {missing_measure}"


def test_the_gap_check_sees_a_measure_without_kernel_and_a_kernel_without_measure():
    registry = {**REGISTRY, "dcg": MeasureInfo("dcg", "unnormalised DCG", "optional", frozenset({"rel"}), True)}
    assert kernels.registry_gaps(registry) == (("dcg",), ())
    orphan = {**kernels.KERNELS, "gap": kernels.KERNELS["hit"]}
    assert kernels.registry_gaps(None, orphan) == ((), ("gap",))


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_registered_measure_computes(name):
    """Through the engine: the kernel a name maps to runs on a hand-worked query. One query,
    run d1 (grade 2), d2 (unjudged), d3 (grade 0); qrels d1=2, d3=0, d4=1 (R = 2 at rel 1)."""
    from workbench.core.metrics.evaluation import evaluate

    info = REGISTRY[name]
    text = f"{name}@3" if info.cutoff == "required" else name
    result = evaluate({"q": {"d1": 2, "d3": 0, "d4": 1}}, {"q": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}, [text])
    value = result.aggregate[text]
    # Hand-worked at k = 3 (or the whole list): one relevant of two found, at rank 1.
    expected = {"hit": 1.0, "precision": 1 / 3, "recall": 0.5, "f1": 2 * 1 / (3 + 2), "mrr": 1.0, "map": 0.5,
                "rprec": 0.5, "bpref": 0.5, "judged": 2 / 3}
    if name in expected:
        assert value == pytest.approx(expected[name], abs=1e-12), name
    else:
        assert 0.0 < value <= 1.0, name
    assert Measure.parse(text).name == name


def test_committed_measures_table_matches_the_registry():
    committed = measures_reference.METRICS_PATH.read_text(encoding="utf-8")
    produced = measures_reference.with_table(committed)
    if committed != produced:
        diff = "".join(list(difflib.unified_diff(committed.splitlines(True), produced.splitlines(True),
                                                 "docs/metrics.md (committed)", "docs/metrics.md (registry)"))[:40])
        raise AssertionError(f"the measures table of docs/metrics.md is stale; regenerate it with "
                             f"`{measures_reference.REGENERATE}`\n{diff}")


def test_a_new_measure_makes_the_table_stale(monkeypatch):
    committed = measures_reference.METRICS_PATH.read_text(encoding="utf-8")
    monkeypatch.setitem(REGISTRY, "dcg", MeasureInfo("dcg", "unnormalised DCG", "optional", frozenset({"rel"}), True))
    table = measures.measures_table()
    assert "| `dcg`, `dcg@k` | - | `rel` = the evaluation's rel (1) | graded | unnormalised DCG |" in table
    assert measures_reference.with_table(committed) != committed


def test_every_measure_and_alias_is_in_the_committed_table():
    """Read against the registry, not against measures_table(): a row per measure naming its aliases."""
    page = measures_reference.METRICS_PATH.read_text(encoding="utf-8")
    rows = page[page.index(measures_reference.BEGIN):page.index(measures_reference.END)].splitlines()
    for name, info in REGISTRY.items():
        row = next((r for r in rows if r.startswith(f"| `{name}")), None)
        assert row is not None, name
        assert info.description in row
        for alias, target in measures.ALIASES.items():
            if target == name and alias != name:
                assert f"`{alias}`" in row, (name, alias)


def test_check_and_write_commands(tmp_path):
    page = tmp_path / "metrics.md"
    page.write_text(f"# M\n\n{measures_reference.BEGIN}\nold table\n{measures_reference.END}\n\nafter\n",
                    encoding="utf-8")
    run = [sys.executable, "-m", "workbench.cli.measures_reference", "--path", str(page)]
    stale = subprocess.run([*run, "--check"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert stale.returncode == 1 and "--write" in stale.stderr
    assert subprocess.run([*run, "--write"], capture_output=True, text=True, cwd=REPO, timeout=60).returncode == 0
    text = page.read_text(encoding="utf-8")
    assert "old table" not in text and "| `ndcg`, `ndcg@k` |" in text and text.endswith("\nafter\n")
    assert subprocess.run([*run, "--check"], capture_output=True, text=True, cwd=REPO, timeout=60).returncode == 0
    page.write_text("# no markers\n", encoding="utf-8")
    refused = subprocess.run([*run, "--write"], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert refused.returncode == 2 and "markers" in refused.stderr
    assert page.read_text(encoding="utf-8") == "# no markers\n"
