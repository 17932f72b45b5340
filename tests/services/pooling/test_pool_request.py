"""One pooling request for the CLI, the Python API and the Retrieve & Pool page: its one check
words each rule once (naming the field), and each front end says it in its own words."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.api import API_WORDS
from workbench.cli.common import error_text
from workbench.config import DEFAULTS, load_settings
from workbench.errors import InputError, WorkbenchError
from workbench.services.pooling.pools import MAX_DEPTH
from workbench.services.pooling.request import PoolRequest
from workbench.ui.words import Field, page_message


def _refusal(request: PoolRequest) -> WorkbenchError:
    with pytest.raises(WorkbenchError) as caught:
        request.check()
    return caught.value


BAD = {
    "no runs": (PoolRequest("p", ()), "runs"),
    "a string for runs": (PoolRequest("p", "bm25"), "runs"),
    "an empty run name": (PoolRequest("p", ("bm25", " ")), "runs"),
    "a run twice": (PoolRequest("p", ("bm25", "bm25")), "runs"),
    "no name": (PoolRequest("", ("bm25",)), "name"),
    "a name of another type": (PoolRequest(3, ("bm25",)), "name"),
    "a name against the rule": (PoolRequest("a b", ("bm25",)), "name"),
    "depth 0": (PoolRequest("p", ("bm25",), 0), "depth"),
    "depth as text": (PoolRequest("p", ("bm25",), "5"), "depth"),
    "depth as a float": (PoolRequest("p", ("bm25",), 2.5), "depth"),
    "depth as a bool": (PoolRequest("p", ("bm25",), True), "depth"),
    "depth beyond 32 bits": (PoolRequest("p", ("bm25",), MAX_DEPTH + 1), "depth"),
    "depth with add": (PoolRequest("p", ("bm25",), 5, add=True), "depth"),
    "add not a bool": (PoolRequest("p", ("bm25",), add="yes"), "add"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_each_rule_refuses_with_one_line_naming_its_field(case):
    request, field = BAD[case]
    error = _refusal(request)
    assert isinstance(error, InputError)  # bad input: exit 3 on the command line, as before
    assert field in error.fields, (case, error.fields)
    for text in (error_text(error), error.render(**API_WORDS), page_message(error)):
        assert "\n" not in text and "{" not in text, (case, text)


def test_the_same_refusal_in_each_front_ends_words():
    error = _refusal(PoolRequest("demo", ("bm25",), 3, add=True))
    assert error_text(error) == "--add keeps the pool's own depth; leave --depth out"
    assert error.render(**API_WORDS) == "add=True keeps the pool's own depth; leave depth= out"
    runs = _refusal(PoolRequest("p", ()))
    assert error_text(runs) == "choose one or more --runs to pool"
    assert page_message(runs, {"runs": Field("Runs", "choice")}) == "choose one or more “Runs” to pool"
    assert runs.render(**API_WORDS) == "choose one or more runs= to pool"


def test_good_requests_pass_and_resolve_their_depth_once():
    assert PoolRequest("p", ["a", "b"]).runs == ("a", "b")  # a list becomes a tuple (frozen, hashable)
    assert PoolRequest("p", ("a",), np.int64(7)).check().depth == 7
    settings = load_settings(None, env={}).with_overrides({"pool": {"depth": 13}})
    assert PoolRequest("p", ("a",)).resolve().depth == DEFAULTS["pool"]["depth"]
    assert PoolRequest("p", ("a",)).resolve(settings).depth == 13
    with pytest.raises(InputError, match="pool depth must be a positive integer"):  # the setting: the same rule
        PoolRequest("p", ("a",)).resolve(load_settings(None, env={}).with_overrides({"pool": {"depth": 0}}))
    assert PoolRequest("p", ("a",), 4).resolve().depth == 4  # given: the setting does not apply
    assert PoolRequest("p", ("a",), add=True).resolve().depth is None  # the pool's own depth
