"""Judge: grade a pool's pairs with an LLM judge or the offline baseline, and follow the job.

The job never runs inside the page's script run: **Start** launches the job in its own process
(:mod:`workbench.services.judge.launch`, with the page's choices as its
:class:`~workbench.services.judge.request.JudgeRequest`, the request ``workbench judge`` and
``Project.judge`` build; the option controls' labels, help and bounds come from its
:data:`~workbench.services.judge.request.OPTIONS`), so the page stays responsive, the job survives
a page reload, and the project file is held only for the job's short batch writes. The page reads
the job's stored row (:func:`workbench.services.judge.jobs.list_jobs`) in a fragment that refreshes
every ``LIVE_SECONDS`` while the job is active; **Stop** asks the job to stop through the project
(:func:`workbench.services.judge.launch.stop`), which works whichever process started it.

Few-shot: with an LLM judge, "Examples from the tuning part of <sample>" (0 = none) puts SME-graded
pairs from a calibration sample's tuning part in the prompt; the choice goes through the launch
service (:func:`workbench.services.judge.launch.resolve`, the rules of
:mod:`workbench.services.judge.few_shot`), so the job is the one the CLI runs with ``few_shot`` K. The
preview is the service's :func:`workbench.services.judge.jobs.preview_prompt`, examples included.

The app's API key comes from its environment (``OPENAI_API_KEY``) or Streamlit secrets and is
handed to the job's process in its environment, but only for the configured server or a host in
``[judge] allowed_hosts`` (:func:`workbench.services.judge.launch.job_key`): a Server URL typed
here that is neither gets the key typed in "API key for this server" (a password field, never
shown or stored) or none, and the page says so.
Corpus text, prompts and model output are shown escaped (``context.escaped``) or in tables.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

import streamlit as st

from workbench.config import load_settings
from workbench.errors import WorkbenchError
from workbench.services import visibility
from workbench.services.access import PermissionDenied
from workbench.services.judge import jobs as service
from workbench.services.judge import launch
from workbench.services.judge.few_shot import few_shot_sources
from workbench.services.judge.jobs import (
    estimate,
    example_pair,
    list_failures,
    list_jobs,
    offline_preview,
    open_briefly,
    preview_prompt,
)
from workbench.services.judge.launch import JobRequest, latest_job, resolve, server_key_refused, stop
from workbench.services.judge.request import OPTION, OPTIONS, JudgeRequest
from workbench.services.pooling.pools import list_pools, pool_pairs
from workbench.ui import context
from workbench.ui.words import Field, command_page, page_message

LIVE_SECONDS = 1.5
OFFLINE = "offline-lexical"
JUDGE_CHOICES = ("Offline baseline (offline-lexical, not an LLM)", "LLM on an OpenAI-compatible server")
ACTIVE = ("running", "batch", "cancelling")
#: The page's controls for the judge options (declared once: :data:`workbench.services.judge.request.OPTIONS`).
FIELDS = {o.name: Field(o.label, o.control) for o in OPTIONS if o.label}
#: The judge options drawn in the "limits" row of number controls (the few-shot ones have their own).
NUMBERS = tuple(o for o in OPTIONS if o.label and o.control == "number" and not o.name.startswith("few_shot"))
_FEW_SHOT_LABEL = "_judge_few_shot_label"  # the examples field's label as drawn (it names the sample)


def command_words(words: str) -> str:
    """A CLI command in the page's words: a judge run with ``--retry-failed`` is this page's
    “Retry failed” button; other commands as :func:`workbench.ui.words.command_page` says them."""

    parts = words.split()
    if parts[:1] == ["judge"] and OPTION["retry_failed"].flag in parts:
        return FIELDS["retry_failed"].quoted
    return command_page(words)


def _say(exc) -> str:
    """A service or job message in the page's words (buttons and fields, not commands and flags):
    an error from its data, a job's stored status text from its placeholders."""

    text = exc if isinstance(exc, WorkbenchError) else str(exc)
    fields = dict(FIELDS)
    if st.session_state.get(_FEW_SHOT_LABEL):
        fields["few_shot"] = Field(st.session_state[_FEW_SHOT_LABEL], "number")
    text = page_message(text, fields, project=str(context.db_path()), command=command_words)
    return text.replace("run the same command again", "press Resume").replace("run again", "press Resume")


@contextmanager
def _project(wait: float = 15.0, *, migrate: bool = False):
    """The project for one read, waiting (bounded) while a judge job writes a batch. The page's
    first read of a script run (``migrate``: the pools) applies pending migrations; every other
    read is a visit (:func:`workbench.services.judge.jobs.open_briefly`: the file attached to the
    app's one DuckDB instance for the read and detached after it, with no schema check), and the
    services the page calls get that open project (:func:`_visit`) instead of a path to open
    again. The file is still held only for each read, so a job's batch writes get it between
    them (before and after: docs/performance.md)."""

    try:
        db = open_briefly(context.db_path(), wait, migrate=migrate)
    except WorkbenchError as exc:
        st.error(context.plain(_say(exc)))
        st.stop()
    try:
        yield db
    finally:
        db.close()


@contextmanager
def _visit(wait: float = 30.0):
    """The project for one service call (a visit, see :func:`_project`); a failure to open it is
    raised (a :class:`~workbench.errors.WorkbenchError`) for the caller to show, as the service
    would have raised it opening the path itself."""

    db = open_briefly(context.db_path(), wait, migrate=False)
    try:
        yield db
    finally:
        db.close()


def _api_key() -> str | None:
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        return key
    try:
        return st.secrets.get("OPENAI_API_KEY") or None
    except Exception:  # noqa: BLE001 - Streamlit raises several kinds when there is no secrets file
        return None


def _prompt_ids(configured: str) -> list[str]:

    listing = getattr(service, "available_prompts", None)
    ids = list(listing()) if callable(listing) else []
    return [configured, *(i for i in ids if i != configured)]  # the configured prompt is the default


# -- configuration -----------------------------------------------------------------------------

def _choices(pools: list[str]) -> dict:
    """The form: pool, judge, model, server, prompt, limits. Returns the chosen values."""
    judge_settings = load_settings().values["judge"]
    st.subheader("1. Choose the pool and the judge")
    cols = st.columns([2, 3])
    pool = cols[0].selectbox(FIELDS["pool"].label, pools, key="judge_pool")
    kind = cols[1].radio("Judge", JUDGE_CHOICES, key="judge_kind",
                         index=0 if judge_settings["model"] == OFFLINE or not _api_key() else 1)
    choices = {"pool": pool, "offline": kind == JUDGE_CHOICES[0], "limit": 0, "budget": None}
    if choices["offline"]:
        st.caption("The offline baseline compares the words of the query, its description and the passage. "
                   "It needs no server and no key, costs nothing, and is much less accurate than an LLM.")
    else:
        cols = st.columns(3)
        choices["model"] = cols[0].text_input(FIELDS["model"].label, value=judge_settings["model"] if
                                              judge_settings["model"] != OFFLINE else "gpt-4o-mini",
                                              key="judge_model")
        choices["base_url"] = cols[1].text_input(FIELDS["base_url"].label, value=judge_settings["base_url"], key="judge_url")
        prompts = _prompt_ids(str(judge_settings["prompt"]))
        choices["prompt"] = cols[2].selectbox(FIELDS["prompt"].label, prompts, key="judge_prompt")
        cols = st.columns(len(NUMBERS))
        for col, option in zip(cols, NUMBERS):
            choices[option.name] = _number(col, option, judge_settings)
        # One container holds the key's note (a caption, or a warning and a key field, depending on
        # the Server URL): the few-shot fields after it keep their place in the page when the note
        # changes, so a value being typed in them during that rerun is not dropped with a redrawn box.
        with st.container():
            choices["typed_key"] = _key_choice(pool, choices["base_url"])
        choices.update(_few_shot_choices())
    return choices


def _number(col, option, judge_settings) -> int | float:
    """A number control for a judge option: its label, help and bounds from the option, its
    default the configured ``[judge]`` value (else its lower bound, "0 = all / none / no cap")."""

    kind = option.kind
    default = judge_settings[option.setting] if option.setting else option.low
    if option.low is not None:  # a configured value out of bounds (refused when resolved) must not break the page
        default = max(default, option.low)
    if option.high is not None:
        default = min(default, option.high)
    bound = (lambda v: None if v is None else kind(v))
    value = col.number_input(option.label, bound(option.low), bound(option.high), kind(default),
                             step=kind(1), key=f"judge_{option.name}", help=page_message(option.help, FIELDS))
    return kind(value)


def _key_choice(pool: str, url: str) -> str:
    """The key for the Server URL: the app's own (``OPENAI_API_KEY``) goes only to the configured
    server and ``[judge] allowed_hosts`` (:func:`workbench.services.judge.launch.job_key`); another
    URL gets the key typed here (a password field, kept for this session only: never shown,
    stored in the project, logged or put on the job's command line) or none."""

    server_key = _api_key()
    refused = server_key_refused(JobRequest(pool, base_url=url.strip()), api_key=server_key)
    if server_key and not refused:
        st.caption("The app's API key is sent to this server (it is never shown or stored).")
        return ""
    if refused:
        st.warning("The app's API key is sent only to the configured server and [judge] allowed_hosts, "
                   "not to this Server URL: type this server's own key below, or leave it empty for a "
                   "server that needs none.")
    else:
        st.warning("No API key is available to the app. A local server that needs none works; for "
                   "OpenAI, restart the app with OPENAI_API_KEY set in its environment, or type a key below.")
    return st.text_input("API key for this server", type="password", key="judge_typed_key",
                         help="Sent only to the Server URL above; never shown, stored or logged.")


def _few_shot_choices() -> dict:
    """Few-shot examples: SME-graded pairs from a calibration sample's tuning part in the prompt
    (:mod:`workbench.services.judge.few_shot`, the rules ``workbench judge --few-shot`` follows).
    Offered only when a sample has SME labels on its tuning part; 0 examples is the zero-shot judge."""

    st.session_state.pop(_FEW_SHOT_LABEL, None)
    if not visibility.can_read("others_labels"):  # the examples are other people's SME labels
        st.caption("Few-shot examples carry SME labels; they are shown to leads and viewers only.")
        return {"few_shot": 0}
    try:
        with _visit() as db:
            sources = few_shot_sources(db)
    except WorkbenchError as exc:
        st.error(context.plain(_say(exc)))
        return {"few_shot": 0}
    if not sources:
        st.caption("Few-shot examples: none available. The judge can learn from SME-graded examples taken "
                   "from the tuning part of a calibration sample (never from its held-out part, which the "
                   "gate uses). Draw a sample on the Calibration page and label some of its tuning pairs on "
                   "the Label page; this option then appears here.")
        return {"few_shot": 0}
    counts = {s.sample: s.labelled for s in sources}
    cols = st.columns([2, 2, 1])
    sample = cols[0].selectbox(FIELDS["few_shot_sample"].label, list(counts), key="judge_few_shot_sample",
                               format_func=lambda name: f"{name} ({counts[name]:,} labelled tuning pairs)")
    label = f"Examples from the tuning part of {sample} (0 = none)"
    st.session_state[_FEW_SHOT_LABEL] = label
    k = int(cols[1].number_input(label, 0, None, 0, key="judge_few_shot"))
    seed = int(cols[2].number_input(FIELDS["few_shot_seed"].label, 0, None, 0, key="judge_few_shot_seed"))
    if k:
        st.caption(f"{k} SME-graded example{'s' if k > 1 else ''} from the tuning part of {sample}, stratified "
                   f"by grade, go into every prompt. They are part of the prompt's version, so this judge "
                   f"is a configuration of its own, checked by the gate on the held-out part only.")
    return {"few_shot": k, "few_shot_sample": sample, "few_shot_seed": seed}


def _spec(choices: dict):
    """The judge configuration the job for these choices runs with
    (:func:`workbench.services.judge.launch.resolve`: the request's one check and resolution,
    few-shot examples included); its ``config_key`` finds the job, its key is the job's."""

    return resolve(context.db_path(), _request(choices), api_key=_api_key(), typed_key=choices.get("typed_key"))


def _request(choices: dict, *, retry_failed: bool = False):
    """The page's choices as the judge request
    (:class:`workbench.services.judge.request.JudgeRequest`): the page's "0 = all" pairs and "0 =
    none" examples are None; a budget of 0 is kept (no cap, over ``[judge] budget_usd``)."""

    numbers = {o.name: choices.get(o.name) for o in NUMBERS}
    numbers["limit"] = numbers.get("limit") or None
    if choices["offline"]:
        return JudgeRequest(choices["pool"], offline=True, limit=numbers["limit"], budget=numbers.get("budget"),
                            retry_failed=retry_failed)
    few_shot = int(choices.get("few_shot") or 0) or None
    return JudgeRequest(choices["pool"], model=choices["model"].strip(), base_url=choices["base_url"].strip(),
                        prompt=choices["prompt"], retry_failed=retry_failed, few_shot=few_shot,
                        few_shot_sample=choices.get("few_shot_sample") if few_shot else None,
                        few_shot_seed=int(choices.get("few_shot_seed") or 0), **numbers)


def _launch(choices: dict, spec, *, retry_failed: bool = False) -> None:
    """Start the job's process (:func:`workbench.services.judge.launch.start`, which checks the
    session's role first) with the configuration ``spec`` resolved for these choices; remember the
    launch in the session."""

    try:
        started = launch.start(context.db_path(), _request(choices, retry_failed=retry_failed), spec)
    except PermissionDenied as exc:
        st.error(context.plain(str(exc)))
        st.stop()
    except WorkbenchError as exc:
        st.error(context.plain(_say(exc)))
        st.stop()
    st.session_state["judge_launch"] = started.as_dict()


def _reap() -> None:

    launch.collect()


def _launch_problem() -> WorkbenchError | str | None:
    """Why the launched process ended with an error (its error as data, else the last lines of its
    output; :func:`workbench.services.judge.launch.problem`), else None."""

    return launch.problem(st.session_state.get("judge_launch"))


def _job(pool: str, config_key: str) -> dict | None:

    try:
        with _visit() as db:
            return latest_job(db, pool, config_key)
    except WorkbenchError as exc:
        st.error(context.plain(_say(exc)))
        return None


# -- preview and estimate ----------------------------------------------------------------------

def _preview(choices: dict, spec) -> None:
    st.subheader("2. What the judge sees")
    # A fragment: choosing an example query reruns the preview alone, not the whole page.
    st.fragment(_example)(choices["pool"], spec)


def _example(pool: str, spec) -> None:
    """The example query's first pair as the judge sees it (the fragment of :func:`_preview`): the
    pair's text and the query's (:func:`workbench.services.judge.jobs.example_pair`; no grade is
    read: the pair is shown as the judge receives it)."""

    with _project() as db:
        pairs = pool_pairs(db, pool)
        queries = list(dict.fromkeys(pairs["query_id"].astype(str)))
        if not queries:
            st.info("This pool has no pairs.")
            return
        query_id = st.selectbox("Example query", queries, key="judge_preview_query")
        if not spec.offline:
            _prompt_preview(db, pool, spec, query_id)
            return
        pair = example_pair(db, pool, query_id)
    if pair is None:
        st.info("No pair to show for this query.")
        return
    item = pair["chunk_id"] or pair["doc_id"]
    context.escaped(f"First pair of {query_id}: {item}", css="color: rgba(49, 51, 63, 0.6); font-size: 0.875em;")
    if visibility.can_read("judge_output"):
        graded = offline_preview(pair["query"], pair["passage"], pair["description"])
        st.caption("The offline baseline uses no prompt. It would grade this pair:")
        context.escaped(f"Grade {graded.grade}: {graded.reason}", css="font-weight: 600;")
    else:  # an annotator labels blind: no judge grade or reason
        st.caption("The offline baseline uses no prompt. Its grades are shown to leads and viewers only.")
    context.escaped(f"Query: {pair['query']}\n\nPassage:\n{pair['passage']}",
                    tag="pre", css="white-space: pre-wrap; font-size: 0.85em;")


def _prompt_preview(db, pool: str, spec, query_id: str) -> None:
    """The messages an LLM judge is sent for the query's first pair, few-shot examples included
    (:func:`workbench.services.judge.jobs.preview_prompt`), escaped."""

    preview = preview_prompt(db, pool, spec, query_id=query_id)
    if preview is None:
        st.info("No pair to show for this query.")
        return
    item = preview["chunk_id"] or preview["doc_id"]
    context.escaped(f"First pair of {query_id}: {item}", css="color: rgba(49, 51, 63, 0.6); font-size: 0.875em;")
    shots = preview["examples"]
    with_examples = f", with {shots} few-shot example{'s' if shots > 1 else ''} first" if shots else ""
    st.caption(f"The prompt sent for this pair ({spec.prompt_id}, version {spec.prompt_hash[:12]}{with_examples}):")
    for message in preview["messages"]:
        context.escaped(message["role"].upper(), css="font-weight: 600; margin-top: 0.5em;")
        context.escaped(message["content"], tag="pre", css="white-space: pre-wrap; font-size: 0.85em;")


def _estimate(choices: dict, spec) -> None:

    st.subheader("3. Estimate")
    try:
        if not spec.offline and spec.caps is None and not spec.server:
            from workbench.services.judge.probe import identify

            spec = identify(spec, probe=False)  # before the visit: no file held during a request
        with _visit() as db:
            est = estimate(db, choices["pool"], spec, limit=choices["limit"] or None)
    except WorkbenchError as exc:
        st.error(context.plain(_say(exc)))
        return
    cols = st.columns(5)
    cols[0].metric("Pairs", f"{est.pairs:,}")
    cols[1].metric("Already judged", f"{est.already_judged:,}")
    cols[2].metric("From the cache", f"{est.cached:,}")
    cols[3].metric("Requests to send", f"{est.to_send:,}")
    cols[4].metric("Estimated cost", "free" if spec.offline else
                   (f"${est.cost_usd:,.4f}" if est.cost_usd is not None else "unknown"))
    if not spec.offline:
        st.caption(f"About {est.prompt_tokens:,} prompt and {est.completion_tokens:,} completion tokens "
                   f"(estimated from text length).")
        if est.cost_usd is None:
            st.caption(f"No price is configured for {context.plain(spec.model)}, so no budget can be set.")


# -- the job -----------------------------------------------------------------------------------

def _job_line(job: dict) -> str:
    return (f"{job['judged']:,} of {job['total']:,} judged: {job['ok']:,} ok, {job['invalid']:,} invalid, "
            f"{job['failed']:,} failed; {job['cached']:,} from the cache")


def _progress(pool: str, config_key: str, active_at_render: bool, job_at_render: bool = True) -> None:
    _reap()
    job = _job(pool, config_key)
    if job is None:
        problem = _launch_problem()
        if problem:
            st.error(context.plain(_say(problem)))
        elif st.session_state.get("judge_launch", {}).get("config_key") == config_key:
            st.info("Starting the judge…")
        else:
            st.info("No job for this pool and judge yet. Press Start.")
        return
    state = job["state"]
    total = max(int(job["total"] or 0), 1)
    st.progress(min(1.0, int(job["judged"]) / total), text=f"Job {job['job_id']}: {state}")
    cols = st.columns(5)
    cols[0].metric("Judged", f"{job['judged']:,} of {job['total']:,}")
    cols[1].metric("OK", f"{job['ok']:,}")
    cols[2].metric("Invalid", f"{job['invalid']:,}")
    cols[3].metric("Failed", f"{job['failed']:,}")
    cols[4].metric("Cost", "free" if job["model"] == OFFLINE else f"${float(job['cost_usd'] or 0):,.4f}")
    launch = st.session_state.get("judge_launch")
    if state in ACTIVE and launch and launch.get("config_key") == config_key:
        elapsed = max(time.time() - launch["started"], 1e-3)
        st.caption(f"{_job_line(job)} · {job['judged'] / elapsed:,.1f} pairs/s since Start")
    else:
        st.caption(_job_line(job))
    if state == "interrupted":
        st.warning("The job's process ended before the job finished (the machine or the app stopped). "
                   "Press Resume to continue where it stopped; nothing judged is lost.")
    if job.get("message"):
        context.escaped(_say(job["message"]))
    problem = _launch_problem()
    if problem and state not in ACTIVE:
        st.error(context.plain(_say(problem)))
    if (state in ACTIVE) != active_at_render or not job_at_render:
        # The job started or ended (a fast job can go from launched to finished between two
        # ticks, never seen running): refresh the buttons and the failure table.
        st.rerun(scope="app")


def _failures(job: dict) -> None:


    st.subheader("5. Failures and invalid outputs")
    if not (job["failed"] or job["invalid"]):
        st.caption("None: every judged pair has a grade.")
        return
    if not visibility.can_read("judge_output"):  # the raw replies carry the judge's grades and reasons
        st.caption("The judge's raw replies are shown to leads and viewers only.")
        return
    try:
        with _visit() as db:
            frame = list_failures(db, job["job_id"], limit=1000)
    except WorkbenchError as exc:
        st.error(context.plain(_say(exc)))
        return
    shown = frame.reindex(columns=["query_id", "doc_id", "chunk_id", "status", "error", "raw_response",
                                   "http_calls"]).rename(columns={"raw_response": "raw reply", "http_calls": "calls"})
    st.dataframe(shown.fillna(""), hide_index=True, width="stretch")
    if len(frame) >= 1000:
        st.caption("The first 1,000 are shown.")


def render() -> None:
    st.title("Judge")
    _reap()

    with _project(migrate=True) as db:
        pools = list_pools(db)["name"].astype(str).tolist()
    if not pools:
        st.info("No pool yet. Build one on the Retrieve & Pool page, then come back to judge its pairs.")
        context.page_link("retrieve", "Go to Retrieve & Pool", ":material/manage_search:")
        return
    choices = _choices(pools)
    try:
        spec = _spec({**choices, "few_shot": 0})  # which judge the choices give, before the examples
        if spec.offline and not choices["offline"]:
            st.warning("Without an API key the OpenAI server cannot be used; the offline baseline will judge "
                       "instead" + (" (it reads no prompt, so it takes no examples)." if choices.get("few_shot")
                                    else "."))
            choices = {**choices, "offline": True, "few_shot": 0}
        elif choices.get("few_shot"):
            spec = _spec(choices)
    except WorkbenchError as exc:
        st.error(context.plain(_say(exc)))
        return
    _preview(choices, spec)
    _estimate(choices, spec)

    st.subheader("4. Run")
    job = _job(choices["pool"], spec.config_key)
    active = bool(job and job["state"] in ACTIVE)
    cols = st.columns(3)
    start_label = "Resume" if job and job["state"] not in ("finished",) and not active else "Start"
    if cols[0].button(start_label, type="primary", disabled=active or bool(job and job["state"] == "finished"),
                      key="judge_start"):
        _launch(choices, spec)
        st.rerun()
    if cols[1].button("Stop", disabled=not active, key="judge_stop"):
        try:
            stop(context.db_path(), job["job_id"])
        except WorkbenchError as exc:
            st.error(context.plain(_say(exc)))
        st.rerun()
    retryable = bool(job and (job["failed"] or job["invalid"]))
    if cols[2].button("Retry failed", disabled=active or not retryable, key="judge_retry"):
        _launch(choices, spec, retry_failed=True)
        st.rerun()
    if job and job["state"] == "finished" and not retryable:
        st.caption("This pool is fully judged with this judge; nothing is left to send.")
    launching = st.session_state.get("judge_launch", {}).get("config_key") == spec.config_key and job is None
    live = active or (launching and _launch_problem() is None)
    st.fragment(run_every=LIVE_SECONDS if live else None)(_progress)(choices["pool"], spec.config_key, active,
                                                                  job is not None)
    if job:
        _failures(job)
    _other_jobs(choices["pool"], spec.config_key)


def _other_jobs(pool: str, config_key: str) -> None:
    """Every judge job of the pool (other judges, prompts or settings), for the record."""

    try:
        with _visit() as db:
            jobs = [j for j in list_jobs(db, pool) if j["config_key"] != config_key]
    except WorkbenchError:
        return
    if not jobs:
        return
    with st.expander(f"Other judge jobs on this pool ({len(jobs)})"):
        rows = [{"job": j["job_id"], "model": j["model"], "prompt": j["prompt_id"], "state": j["state"],
                 "judged": f"{j['judged']:,} of {j['total']:,}", "ok": j["ok"], "invalid": j["invalid"],
                 "failed": j["failed"], "cost (USD)": round(float(j["cost_usd"] or 0), 4)} for j in jobs]
        st.dataframe(rows, hide_index=True, width="stretch")
