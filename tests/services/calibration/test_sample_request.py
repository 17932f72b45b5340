"""One calibration-sample request for ``calibrate sample``, ``Project.calibration_sample`` and the
Calibration page: one check naming each field, and every default decided once by resolve()."""

from __future__ import annotations

import pytest

from workbench.api import API_WORDS
from workbench.cli.common import error_text
from workbench.config import DEFAULTS, load_settings
from workbench.errors import ConfigError
from workbench.services.calibration.request import MAX_SEED, SampleRequest
from workbench.ui.words import page_message

BAD = {
    "no pool": (SampleRequest(""), "pool"),
    "pool of another type": (SampleRequest(7), "pool"),
    "size 0": (SampleRequest("p", size=0), "size"),
    "size as text": (SampleRequest("p", size="200"), "size"),
    "size as a float": (SampleRequest("p", size=200.0), "size"),
    "negative seed": (SampleRequest("p", seed=-1), "seed"),
    "seed beyond 64 bits": (SampleRequest("p", seed=MAX_SEED + 1), "seed"),
    "seed as text": (SampleRequest("p", seed="x"), "seed"),
    "seed as a bool": (SampleRequest("p", seed=True), "seed"),
    "unknown design": (SampleRequest("p", design="documents"), "design"),
    "queries design without queries": (SampleRequest("p", design="queries"), "queries"),
    "queries with the pairs design": (SampleRequest("p", queries=5), "queries"),
    "one query": (SampleRequest("p", design="queries", queries=1), "queries"),
    "share 0": (SampleRequest("p", holdout_share=0), "holdout_share"),
    "share above 1": (SampleRequest("p", holdout_share=1.5), "holdout_share"),
    "share NaN": (SampleRequest("p", holdout_share=float("nan")), "holdout_share"),
    "judge of another type": (SampleRequest("p", judge=3), "judge"),
    "name of another type": (SampleRequest("p", name=["a"]), "name"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_each_rule_refuses_with_one_line_naming_its_field(case):
    request, field = BAD[case]
    with pytest.raises(ConfigError) as caught:  # a bad option: exit 2 on the command line, as argparse's
        request.check()
    error = caught.value
    assert field in error.fields, (case, error.fields)
    for text in (error_text(error), error.render(**API_WORDS), page_message(error)):
        assert "\n" not in text and "{" not in text, (case, text)
    assert "--" not in error.render(**API_WORDS)


def test_a_pairs_sample_below_the_core_floor_is_bad_input_naming_the_size():
    from workbench.core.calibration.sample import SampleSpec
    from workbench.errors import InputError

    floor = SampleSpec.floor_size
    with pytest.raises(InputError) as caught:  # exit 3, as when the draw said it
        SampleRequest("p", size=floor - 1).check()
    assert error_text(caught.value) == (f"a calibration sample of {floor - 1} pairs is too small; ask for at least "
                                        f"{floor} with --size")
    assert SampleRequest("p", size=floor).check().size == floor
    assert SampleRequest("p", size=5, design="queries", queries=3).check().size == 5  # ignored by that design


def test_the_design_rule_in_each_front_ends_words():
    with pytest.raises(ConfigError) as caught:
        SampleRequest("p", design="queries").check()
    assert error_text(caught.value) == ("--design queries needs --queries N, the number of queries to draw "
                                        "(e.g. --queries 30)")
    assert caught.value.render(**API_WORDS) == ("design='queries' needs queries=N, the number of queries to draw "
                                                "(e.g. queries=30)")


def test_resolve_decides_every_default_once():
    plain = SampleRequest("demo", seed=4).resolve()
    assert (plain.name, plain.size, plain.holdout_share, plain.threshold) == (
        "demo-seed4", DEFAULTS["calibration"]["sample_size"], DEFAULTS["calibration"]["holdout_share"],
        DEFAULTS["calibration"]["relevant_min_grade"])
    assert SampleRequest("demo", design="queries", queries=6).resolve().name == "demo-queries-seed0"
    assert SampleRequest("demo", name="  ").resolve().name == "demo-seed0"  # empty: the default
    settings = load_settings(None, env={}).with_overrides(
        {"calibration": {"sample_size": 150, "holdout_share": 0.5, "relevant_min_grade": 3}})
    configured = SampleRequest("demo", name="mine").resolve(settings)
    assert (configured.name, configured.size, configured.holdout_share, configured.threshold) == ("mine", 150, 0.5, 3)
    given = SampleRequest("demo", size=120, holdout_share=1.0).resolve(settings)
    assert (given.size, given.holdout_share) == (120, 1.0)  # given values win over the settings
