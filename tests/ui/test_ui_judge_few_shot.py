"""The Judge page's few-shot option: "Examples from the tuning part of <sample>" (0 = none), offered
only when a calibration sample has SME labels on its tuning part; the preview shows the examples
(the service's ``preview_prompt``); Start runs the job ``workbench judge --few-shot`` runs."""

from __future__ import annotations

import json
import shutil

import pytest
from streamlit.testing.v1 import AppTest

from tests.support.actors import acting_as
from tests.support.calibration_project import build_project
from tests.support.openai_server import running_server
from tests.support.polling import wait_until
from workbench.services.calibration import workflow as cal
from workbench.services.judge import launch
from workbench.services.judge.jobs import list_jobs
from workbench.store import calibration as store


def _page():
    from workbench.ui.views import judge

    judge.render()


def _build(path, *, label: bool) -> None:
    db, truth = build_project(path)
    cal.create_sample(db, "s", "p", seed=1)
    if label:
        items = store.read_sample_items(db, "s")
        for row in items[items["part"] == "tuning"].itertuples(index=False):
            cal.save_label(db, "s", "sme", int(row.position), truth[(row.query_id, row.doc_id)])
    db.close()


@pytest.fixture(scope="module")
def _built(tmp_path_factory):
    """The module's projects (with and without SME labels on the tuning part), each built once,
    closed, and copied per test: every test starts from a file no other test has touched."""
    folder, made = tmp_path_factory.mktemp("few-shot-projects"), {}

    def template(label: bool):
        if label not in made:
            made[label] = folder / f"labelled-{label}.duckdb"
            _build(made[label], label=label)
        return made[label]

    return template


@pytest.fixture
def _project(_built):
    def copy(path, *, label: bool = True):
        shutil.copyfile(_built(label), path)

    return copy


def _llm(at: AppTest, url: str = "http://127.0.0.1:9/v1") -> AppTest:
    at.radio[0].set_value("LLM on an OpenAI-compatible server").run()
    at.text_input(key="judge_model").set_value("m2")  # both fields in one script run
    at.text_input(key="judge_url").set_value(url).run()
    assert not at.exception, at.exception
    return at


def _texts(at: AppTest) -> str:
    return " ".join([m.value for kind in ("info", "warning", "error", "caption") for m in getattr(at, kind)]
                    + [h.proto.body for h in at.get("html")])


def test_without_a_labelled_tuning_part_the_page_explains_and_offers_nothing(tmp_path, monkeypatch, _project):
    path = tmp_path / "p.duckdb"
    _project(path, label=False)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    at = _llm(AppTest.from_function(_page, default_timeout=60).run())
    assert not [n for n in at.number_input if n.key == "judge_few_shot"]
    assert "Few-shot examples: none available" in _texts(at)
    assert "Examples graded by subject-matter experts" not in _texts(at)


def test_too_many_examples_are_refused_in_the_pages_words(tmp_path, monkeypatch, _project):
    path = tmp_path / "p.duckdb"
    _project(path)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    at = _llm(AppTest.from_function(_page, default_timeout=60).run())
    box = at.number_input(key="judge_few_shot")
    assert box.label == "Examples from the tuning part of s (0 = none)" and box.value == 0
    box.set_value(10_000).run()
    errors = [e.value for e in at.error]
    assert errors and "“Examples from the tuning part of s (0 = none)”" in errors[0], errors
    assert "--few-shot" not in errors[0]


def test_an_annotator_is_not_offered_other_peoples_labels_as_examples(tmp_path, monkeypatch, _project):
    from workbench.services import access

    path = tmp_path / "p.duckdb"
    _project(path)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with acting_as(access.Actor("anna", "annotator")):
        at = _llm(AppTest.from_function(_page, default_timeout=60).run())
    assert not [n for n in at.number_input if n.key == "judge_few_shot"]
    assert "shown to leads and viewers only" in _texts(at)


def _place(block, key: str, path: tuple = ()) -> tuple | None:
    """Where the widget ``key`` is in the page: its index in each block from the main one down."""
    for index, child in getattr(block, "children", {}).items():
        if getattr(child, "key", None) == key:
            return (*path, index)
        found = _place(child, key, (*path, index))
        if found:
            return found
    return None


def test_the_examples_fields_keep_their_place_when_the_key_note_changes(tmp_path, monkeypatch, _project):
    """Streamlit's front end knows an element by its place in the page: a box drawn at another
    place is a new box, and a value being typed in the old one is dropped. A Server URL that
    may not have the app's key draws a warning and a key field (two elements) where the
    configured server's note is one caption; the examples fields below must not move with it
    (in a browser under load, "3" typed in the examples box during that rerun was lost)."""
    path = tmp_path / "p.duckdb"
    _project(path)
    monkeypatch.setenv("WORKBENCH_DB", str(path))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    at = AppTest.from_function(_page, default_timeout=60).run()
    at.radio[0].set_value("LLM on an OpenAI-compatible server").run()
    assert not at.text_input(key="judge_url").value.startswith("http://127.0.0.1")  # the configured server
    before = {key: _place(at.main, key) for key in ("judge_few_shot_sample", "judge_few_shot", "judge_few_shot_seed")}
    at.text_input(key="judge_url").set_value("http://127.0.0.1:9/v1").run()
    assert "not to this Server URL" in _texts(at)  # the key note is now a warning and a key field
    assert [t for t in at.text_input if t.key == "judge_typed_key"]
    after = {key: _place(at.main, key) for key in before}
    assert None not in before.values() and after == before


@pytest.mark.browser
def test_browser_few_shot_preview_and_job(tmp_path, _project):
    """A real app and chromium: the LLM judge on a loopback server, 3 examples from the tuning
    part of s; the preview shows them; Start runs the job with the CLI's configuration."""
    from tests.support.live_app import after_run, browser_page, enter_value, serve, wait_idle

    path = tmp_path / "p.duckdb"
    _project(path)
    with running_server() as server, serve(path, {"OPENAI_API_KEY": "sk-test"}) as url, browser_page() as page:
        # every change waits for the run it starts, then checks the box kept the value: typed
        # while the previous run redraws the page, a value can land in a box about to be replaced
        page.goto(f"{url}/judge")
        page.get_by_text("What the judge sees").wait_for(timeout=60_000)
        wait_idle(page, start_within=0)
        if not page.get_by_label("Model", exact=True).count():  # (the LLM is the default with a key)
            after_run(page, page.get_by_text("LLM on an OpenAI-compatible server").click, "choosing the LLM judge")
        enter_value(page, "Model", "m2")
        enter_value(page, "Server URL", server.base_url)
        label = "Examples from the tuning part of s (0 = none)"
        assert page.get_by_label(label, exact=True).first.input_value() == "0"
        assert "Examples graded by subject-matter experts" not in page.inner_text("body")  # 0 = none
        enter_value(page, label, "3")
        enter_value(page, "Pairs to judge (0 = all)", "5")
        page.get_by_text("with 3 few-shot examples first").wait_for(timeout=60_000)
        body = page.inner_text("body")
        assert "Examples graded by subject-matter experts" in body and "Example 3: grade" in body
        wait_idle(page, start_within=0)
        page.get_by_role("button", name="Start").click()
        page.get_by_text("5 of 5 judged").first.wait_for(timeout=120_000)
        assert "Traceback" not in page.inner_text("body")
        sent = [json.dumps(r.body) for r in server.control.chat_calls()]
        # the job the CLI runs with the same options: its configuration, so the page finds it
        request = launch.JobRequest("p", model="m2", base_url=server.base_url, limit=5, few_shot=3,
                                    few_shot_sample="s")
        spec = launch.resolve(path, request, api_key="sk-test")
    job = wait_until(lambda: launch.latest_job(path, "p", spec.config_key), timeout=30,
                     what=lambda: f"a job with the CLI's configuration among {list_jobs(path, 'p')}")
    params = json.loads(job["params"]) if isinstance(job["params"], str) else job["params"]
    assert job["state"] == "finished" and job["judged"] == 5
    assert params["few_shot"] == spec.few_shot and spec.few_shot["k"] == 3 and spec.few_shot["sample"] == "s"
    assert sum("Examples graded by subject-matter experts" in b for b in sent) == 5
