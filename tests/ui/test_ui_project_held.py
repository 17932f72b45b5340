"""A page run that finds the project held by another process (a background job writing its
batch, a command): it waits a moment for it, and when the file stays held it says so and runs
again by itself, instead of leaving an error and nothing else (no jobs panel, so no Stop button)
on the page until the user clicks."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.support.holding import hold


def _page():
    from workbench.ui.views import retrieve

    retrieve.render()


def _texts(at: AppTest) -> str:
    return " ".join([m.value for m in at.markdown] + [c.value for c in at.caption] + [e.value for e in at.error]
                    + [i.value for i in at.info] + [t.value for t in at.title])


def test_a_page_waits_for_a_project_another_process_holds_briefly(demo_db, monkeypatch):
    from workbench.ui import context

    monkeypatch.setattr(context, "PAGE_WAIT", 60.0)  # past any delay of a loaded machine
    at = AppTest.from_function(_page, default_timeout=120)
    at.run()  # the page's modules imported: the run below starts at once, while the file is held
    holder = hold(demo_db, 5.0)  # a job's process writing its batch, say
    try:
        at.run()
    finally:
        holder.wait(timeout=60)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]  # the old page said "in use by process ..." at once
    assert "Retrieve & Pool" in _texts(at) and "1. Chunk" in " ".join(s.value for s in at.subheader)


def test_a_page_that_finds_the_project_held_says_so_and_runs_again_by_itself(demo_db, monkeypatch):
    from workbench.ui import context

    monkeypatch.setattr(context, "PAGE_WAIT", 0.2)
    holder = hold(demo_db)  # until released: past the page's wait
    try:
        at = AppTest.from_function(_page, default_timeout=120)
        at.run()
        assert not at.exception, at.exception
        texts = _texts(at)
        assert "is in use by" in texts and "This page tries again by itself in a moment." in texts, texts
        assert not at.subheader  # nothing of the page drawn from a project it could not read
    finally:
        holder.release()
    at.run()  # the timer's run (AppTest runs no timers): the file is free, the page is whole
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert "This page tries again by itself" not in _texts(at)
    assert "1. Chunk" in " ".join(s.value for s in at.subheader)
